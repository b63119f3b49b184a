package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/internal/suggest"
	"github.com/fedgate/fedgate/policies"
)

// simMemoryLimit is the soft memory limit `egress simulate` runs under
// unless GOMEMLIMIT is set.
const simMemoryLimit = 800 << 20

// newSimulateCmd is `fedgate egress simulate`: replay an access trace
// against strategies for keeping copies (egress.Simulate).
func newSimulateCmd() *cobra.Command {
	var (
		traceFile, policyFile, format string
		strategies                    []string
		storagePrices, requestPrices  []string
		adviseEvery, adviseWindow     string
		maxObjects                    int
		progress, asJSON, asHTML      bool
	)
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE --policy FILE [--strategy NAME,...]",
		Short: "Replay an access trace against strategies for keeping copies and compare what each would cost",
		Long: `Simulate replays an access trace (one row per object read, write or delete, in time order:
CSV with the header time,region,bucket,key,size,op, or JSON lines with the same names; make one
from gateway access logs with 'fedgate egress trace-from-log') against a policy file's regions,
buckets and stores, and prices each strategy for keeping copies of objects in the regions that
read them: transfer with the built-in table and the policy's egress.prices, storage and requests
with built-in list prices (approximate; override with --storage-price, --request-price).

Strategies (--strategy, comma-separated or repeated; default: all but advisor-monthly):
  advisor          fedgate egress advise, re-run every --advise-every on the ledger the replay
                   writes, keeping copies as long as the reuse it has seen says they pay
  advisor-monthly  the same without reuse distances in the ledger (a gateway's before it
                   recorded them): a prefix is copied while its monthly egress beats a copy's
                   storage
  t-even           SkyStore's T_even: keep a copy fetch-cost / storage-cost-per-hour after a read
  always-store     keep a copy of everything read
  always-evict     never keep a copy
  ttl-DURATION     keep a copy DURATION after each read (default ttl-12h and ttl-24h)
  single-region    each bucket in its home store alone, every read from there
  policy           the policy's placements as written, no copies (= always-evict: the region
                   cache is not modelled)

Output: each strategy's total cost split into egress (all transfer), storage and requests, the
bytes moved and the hit ratio, as a table, JSON (--json) or one self-contained HTML page with a
chart (--html). Nothing is written until the whole trace has been replayed; a bad row stops the
run with its file, line, column and field. Memory grows with the distinct objects of the trace
(about 330 bytes of heap each with the default strategies and two regions), not with its rows.
docs/egress.md has the model, the format and results on synthetic traces.`,
		Example: `  fedgate egress simulate --trace trace.csv --policy policy.yaml
  fedgate egress simulate --trace trace.jsonl --policy policy.yaml --strategy advisor,t-even,ttl-6h --json
  fedgate egress simulate --trace trace.csv --policy policy.yaml --html > simulation.html`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if format, err = outputFormat(format, cmd.Flags().Changed("format"), asJSON, asHTML); err != nil {
				return err
			}
			if traceFile == "" || policyFile == "" {
				return errors.New("--trace and --policy are required: the access trace to replay and the policy file whose regions, buckets and stores it runs against")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A soft memory limit unless the user set one: the collector
			// runs more often as the heap nears it, so the replay's
			// per-object state, not garbage, fills the process
			// (docs/egress.md, "Memory and speed").
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(simMemoryLimit)
			}
			opts := egress.SimOptions{MaxObjects: maxObjects, Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
			pol, err := policies.Load(policyFile, policies.AllFeatures())
			if err != nil {
				return err
			}
			opts.Policy = pol
			if opts.Transfer, err = egress.NewTable(pol.Egress.Prices); err != nil {
				return fmt.Errorf("%s: %w", policyFile, err)
			}
			if err := simFlags(&opts, storagePrices, requestPrices, strategies, adviseEvery, adviseWindow); err != nil {
				return err
			}

			in, size, closeIn, err := openTrace(traceFile)
			if err != nil {
				return err
			}
			defer closeIn()
			var r io.Reader = in
			var bar *progressbar.ProgressBar
			if progress && (cmd.Flags().Changed("progress") || isTerminal(cmd.ErrOrStderr())) {
				bar = progressbar.NewOptions64(size, progressbar.OptionSetWriter(cmd.ErrOrStderr()), progressbar.OptionSetDescription("replaying"),
					progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200*time.Millisecond),
					progressbar.OptionClearOnFinish())
				r = io.TeeReader(in, bar)
				opts.Progress = func(rows int64) { bar.Describe(fmt.Sprintf("replaying: %d rows", rows)) }
			}
			res, err := egress.Simulate(cmd.Context(), egress.NewTraceReader(traceFile, r), opts)
			if bar != nil {
				_ = bar.Clear() // before the results or the error
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				return egress.WriteSimJSON(w, res)
			case "html":
				return egress.WriteSimHTML(w, res)
			}
			return egress.WriteSimTable(w, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&traceFile, "trace", "", "the access trace: CSV or JSON lines, in time order (- for standard input)")
	fl.StringVar(&policyFile, "policy", "", "the policy file: its regions, buckets, stores and egress.prices")
	fl.StringArrayVar(&strategies, "strategy", nil, "strategies to compare, comma-separated or repeated (default: advisor, t-even, always-store, always-evict, ttl-12h, ttl-24h, single-region, policy)")
	fl.StringVar(&format, "format", "table", "table, json or html")
	fl.BoolVar(&asJSON, "json", false, "the same as --format json")
	fl.BoolVar(&asHTML, "html", false, "the same as --format html (one self-contained page: --html > simulation.html)")
	fl.StringArrayVar(&storagePrices, "storage-price", nil, "price storage: CLOUD[:REGION]=USD per GB-month, like onprem=0.004 (repeatable)")
	fl.StringArrayVar(&requestPrices, "request-price", nil, "price requests: CLOUD[:REGION]=GET/PUT in USD per 1,000, like aws=0.0004/0.005 (repeatable)")
	fl.StringVar(&adviseEvery, "advise-every", "6h", "how often the advisor re-advises, in trace time")
	fl.StringVar(&adviseWindow, "advise-window", "14d", "how much of the replay's ledger the advisor reads")
	fl.IntVar(&maxObjects, "max-objects", 10_000_000, "refuse a trace with more distinct objects than this (memory grows with them)")
	fl.BoolVar(&progress, "progress", true, "show a progress bar on standard error when it is a terminal (--progress=true: always)")
	hideInherited(cmd)
	return cmd
}

// openTrace opens a trace file ("-": standard input) and returns its size
// (-1 when unknown).
func openTrace(name string) (io.Reader, int64, func(), error) {
	if name == "-" {
		return bufio.NewReaderSize(os.Stdin, 1<<20), -1, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("--trace: %w", err)
	}
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return f, size, func() { f.Close() }, nil
}

// hideInherited keeps the egress group's flags for talking to a region
// (--endpoint, root keys, ...) out of the help of a command that reads
// only files.
func hideInherited(cmd *cobra.Command) {
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
		c.Parent().HelpFunc()(c, args)
	})
}

// newTraceFromLogCmd is `fedgate egress trace-from-log`: a trace from
// gateway access logs (egress.AccessLogReader).
func newTraceFromLogCmd() *cobra.Command {
	var out string
	var reorder time.Duration
	cmd := &cobra.Command{
		Use:   "trace-from-log [--out FILE] REGION=LOGFILE...",
		Short: "Make an access trace for 'fedgate egress simulate' from gateway access logs",
		Long: `Trace-from-log reads the access logs of fedgate servers (--log-format json, the default when
the server's standard error is not a terminal) and writes the trace 'fedgate egress simulate'
replays, as CSV. Name the region each log's node serves: the log does not say. Give each node's
log as its own argument; they are merged in time order.

GetObject is a get of the bytes sent (a ranged read, of its range), PutObject a put of the bytes
received, a multipart upload one put of its parts when it completes, DeleteObject a delete.
Failed requests, listings, HEAD, CopyObject and UploadPartCopy (the log does not say how many
bytes were copied) and DeleteObjects (the log does not name the keys) are left out and counted
on standard error. The egress ledger cannot give a trace: it keeps bytes per hour and prefix,
not per object.`,
		Example: `  fedgate egress trace-from-log gpu-gcp=node1.log gpu-gcp=node2.log gpu-aws=node3.log > trace.csv
  journalctl -u fedgate -o cat > node1.log && fedgate egress trace-from-log --out trace.csv gpu-gcp=node1.log`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var readers []*egress.AccessLogReader
			var sources []interface {
				Next() (egress.TraceEvent, error)
			}
			for _, a := range args {
				region, file, ok := strings.Cut(a, "=")
				if !ok || region == "" || file == "" {
					return fmt.Errorf("%q: want REGION=LOGFILE, like gpu-gcp=node1.log", a)
				}
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				r := egress.NewAccessLogReader(file, region, f)
				r.Reorder = reorder
				readers = append(readers, r)
				sources = append(sources, r)
			}
			w, commit, abort, err := createOutput(cmd.OutOrStdout(), out)
			if err != nil {
				return err
			}
			defer abort()
			bw := bufio.NewWriterSize(w, 1<<20)
			tw := egress.NewTraceWriter(bw)
			next := egress.MergeTraces(sources...)
			rows := 0
			for {
				ev, err := next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				if err := tw.Write(ev); err != nil {
					return err
				}
				rows++
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			if err := commit(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d trace rows\n", rows)
			for _, r := range readers {
				if s := r.Skipped(); len(s) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "left out of the trace: %s\n", strings.Join(s, "; "))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the trace to FILE (complete or not at all) instead of standard output")
	cmd.Flags().DurationVar(&reorder, "reorder", time.Minute, "how far back in time a log record may come after a later one (concurrent requests finish out of order)")
	hideInherited(cmd)
	return cmd
}

// createOutput returns where to write: stdout, or a temporary file beside
// out that commit renames to out (abort removes it).
func createOutput(stdout io.Writer, out string) (io.Writer, func() error, func(), error) {
	if out == "" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--out: %w", err)
	}
	done := false
	commit := func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := os.Rename(f.Name(), out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		done = true
		return nil
	}
	abort := func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}
	return f, commit, abort, nil
}

// outputFormat is simulate's output format from --format, --json and --html.
func outputFormat(format string, formatSet, asJSON, asHTML bool) (string, error) {
	switch {
	case asJSON && asHTML:
		return "", errors.New("--json and --html: give one")
	case (asJSON || asHTML) && formatSet:
		return "", errors.New("--format and --json/--html: give one")
	case asJSON:
		format = "json"
	case asHTML:
		format = "html"
	}
	switch format {
	case "table", "json", "html":
		return format, nil
	}
	return "", fmt.Errorf("--format %q: want table, json or html", format)
}

// simFlags puts simulate's price, strategy and advice flags into opts.
func simFlags(opts *egress.SimOptions, storagePrices, requestPrices, strategies []string, adviseEvery, adviseWindow string) error {
	var sp []egress.StoragePrice
	for _, v := range storagePrices {
		p, err := egress.ParseStoragePrice(v)
		if err != nil {
			return fmt.Errorf("--storage-price: %w", err)
		}
		sp = append(sp, p)
	}
	opts.Storage = egress.NewStorageTable(sp...)
	var rp []egress.RequestPrice
	for _, v := range requestPrices {
		p, err := egress.ParseRequestPrice(v)
		if err != nil {
			return fmt.Errorf("--request-price: %w", err)
		}
		rp = append(rp, p)
	}
	opts.Requests = egress.NewRequestTable(rp...)
	for _, list := range strategies {
		for _, name := range strings.Split(list, ",") {
			if strings.TrimSpace(name) == "" {
				continue
			}
			s, err := egress.ParseStrategy(name)
			if err != nil {
				if best := suggest.Closest(strings.TrimSpace(name), []string{"advisor", "t-even", "always-store", "always-evict", "single-region", "policy"}); best != "" {
					return fmt.Errorf("--strategy: %w; did you mean %s?", err, best)
				}
				return fmt.Errorf("--strategy: %w", err)
			}
			opts.Strategy = append(opts.Strategy, s)
		}
	}
	for _, d := range []struct {
		flag, v string
		dst     *time.Duration
	}{{"--advise-every", adviseEvery, &opts.AdviseEvery}, {"--advise-window", adviseWindow, &opts.AdviseWindow}} {
		v, err := policies.ParseDuration(d.v)
		if err != nil || v < time.Hour || v%time.Hour != 0 {
			return fmt.Errorf("%s %q: want whole hours, at least one (6h, 14d): the ledger the advisor reads is hourly", d.flag, d.v)
		}
		*d.dst = v
	}
	return nil
}
