package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// How `fedgate cache preload` watches its job.
const (
	watchPoll = 500 * time.Millisecond
	// watchOutage is how long the server may fail to answer (a restart)
	// before watching gives up.
	watchOutage = 60 * time.Second
	// watchLine is how often progress is printed as a line when stderr is
	// not a terminal.
	watchLine = 5 * time.Second
)

func newCacheCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Preload buckets into the region's cache and pin them there",
		Long: `Preload a bucket (or a prefix of it) into the region's NVMe cache before training
starts, and pin prefixes so their chunks are never evicted. A preload is a job
held in the region's Raft state: every node warms the chunks the hash ring gives
it, and a restarted node resumes where it stopped. Pinned chunks count against
the bucket's cache quota. Like 'fedgate user', these commands use the admin API
with the root credentials.`,
	}
	c.bind(cmd)

	var pin, detach bool
	preload := &cobra.Command{
		Use:   "preload BUCKET[/PREFIX]",
		Short: "Start a preload job and show its progress until it is done",
		Long: `Start a job that reads every object of BUCKET under PREFIX into the region's cache,
then show a progress bar (objects, bytes, rate, ETA) until the whole region is
done. Ctrl-C stops watching; the job keeps running ('fedgate cache jobs' shows
it, 'fedgate cache cancel JOB' stops it). It exits 1 when the job ends with
chunks that could not be cached (for example the bucket's quota is full).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, prefix, err := splitBucketArg(args[0])
			if err != nil {
				return err
			}
			var job adminapi.Job
			if err := c.do(cmd.Context(), http.MethodPost, "/cache/jobs", adminapi.Preload{Bucket: bucket, Prefix: prefix, Pin: pin}, &job); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if pin {
				fmt.Fprintf(out, "Pinned %s: its cached chunks will not be evicted.\n", where(bucket, prefix))
			}
			if job.Note != "" {
				fmt.Fprintf(out, "Preload job %s: nothing to do: %s.\n", job.ID, job.Note)
				return nil
			}
			fmt.Fprintf(out, "Preload job %s started for %s.\n", job.ID, where(bucket, prefix))
			if detach {
				fmt.Fprintf(out, "Watch it with 'fedgate cache jobs'; stop it with 'fedgate cache cancel %s'.\n", job.ID)
				return nil
			}
			return watchJob(cmd.Context(), &c, job, out, cmd.ErrOrStderr())
		},
	}
	preload.Flags().BoolVar(&pin, "pin", false, "pin BUCKET/PREFIX first, so what the job caches is never evicted")
	preload.Flags().BoolVar(&detach, "detach", false, "start the job and return at once")

	var jobsJSON bool
	jobs := &cobra.Command{
		Use:   "jobs",
		Short: "List preload jobs and their progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []adminapi.Job
			if err := c.do(cmd.Context(), http.MethodGet, "/cache/jobs", nil, &list); err != nil {
				return err
			}
			if jobsJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tBUCKET/PREFIX\tSTATE\tOBJECTS\tBYTES\tERRORS\tSTARTED")
			for _, j := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, where(j.Bucket, j.Prefix), j.State,
					ofTotal(j.Objects, j.TotalObjects, itoa), ofTotal(j.Bytes, j.TotalBytes, humanBytes), j.Errors, j.Created)
			}
			return tw.Flush()
		},
	}
	jobs.Flags().BoolVar(&jobsJSON, "json", false, `print [{"id", "bucket", "prefix", "state", "done", "objects", "total_objects", "bytes", "total_bytes", ...}]`)

	cancel := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Stop a running preload job, or forget a finished one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res adminapi.Cancel
			if err := c.do(cmd.Context(), http.MethodDelete, "/cache/jobs/"+url.PathEscape(args[0]), nil, &res); err != nil {
				return err
			}
			if res.Removed {
				fmt.Fprintf(cmd.OutOrStdout(), "Preload job %s had ended; it is removed from the list.\n", args[0])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Preload job %s canceled (what it cached stays cached; a pin it made stays until 'fedgate cache unpin').\n", args[0])
			}
			return nil
		},
	}

	pinCmd := &cobra.Command{
		Use:   "pin BUCKET[/PREFIX]",
		Short: "Keep the cached chunks of BUCKET under PREFIX from ever being evicted",
		Long: `Pin BUCKET/PREFIX: its chunks in the region's cache are never evicted (they still
count against the bucket's cache quota). Pinning fetches nothing by itself; use
'fedgate cache preload --pin' to fetch and pin.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, prefix, err := splitBucketArg(args[0])
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodPost, "/cache/pins", adminapi.Pin{Bucket: bucket, Prefix: prefix}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pinned %s.\n", where(bucket, prefix))
			return nil
		},
	}

	unpin := &cobra.Command{
		Use:   "unpin BUCKET[/PREFIX]",
		Short: "Remove a pin; its chunks become evictable again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, prefix, err := splitBucketArg(args[0])
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/cache/pins", adminapi.Pin{Bucket: bucket, Prefix: prefix}, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Unpinned %s.\n", where(bucket, prefix))
			return nil
		},
	}

	var pinsJSON bool
	pins := &cobra.Command{
		Use:   "pins",
		Short: "List the region's pins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []adminapi.Pin
			if err := c.do(cmd.Context(), http.MethodGet, "/cache/pins", nil, &list); err != nil {
				return err
			}
			if pinsJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BUCKET/PREFIX\tPINNED")
			for _, p := range list {
				fmt.Fprintf(tw, "%s\t%s\n", where(p.Bucket, p.Prefix), p.Created)
			}
			return tw.Flush()
		},
	}
	pins.Flags().BoolVar(&pinsJSON, "json", false, `print [{"bucket", "prefix", "created"}]`)

	cmd.AddCommand(preload, jobs, cancel, pinCmd, unpin, pins)
	return cmd
}

// splitBucketArg splits BUCKET[/PREFIX] (an s3:// prefix is allowed).
func splitBucketArg(arg string) (bucket, prefix string, err error) {
	arg = strings.TrimPrefix(arg, "s3://")
	bucket, prefix, _ = strings.Cut(arg, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q: want BUCKET or BUCKET/PREFIX", arg)
	}
	return bucket, prefix, nil
}

func where(bucket, prefix string) string {
	if prefix == "" {
		return bucket
	}
	return bucket + "/" + prefix
}

func ofTotal(n, total int64, f func(int64) string) string {
	if total <= 0 {
		return f(n)
	}
	return f(n) + "/" + f(total)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// watchJob polls the job until the region is done with it, drawing a
// progress bar on stderr (or, when stderr is not a terminal, a line every
// few seconds). Ctrl-C stops watching, not the job.
func watchJob(ctx context.Context, c *adminClient, job adminapi.Job, out, errw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	var show progress = &lineProgress{w: errw, every: watchLine}
	if isTerminal(errw) {
		show = newBarProgress(errw)
	}
	t := time.NewTicker(watchPoll)
	defer t.Stop()
	lastOK := time.Now()
	for {
		var st adminapi.Job
		pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.do(pollCtx, http.MethodGet, "/cache/jobs/"+url.PathEscape(job.ID), nil, &st)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil && strings.Contains(err.Error(), "(NoSuchJob)"):
			show.stop()
			return fmt.Errorf("preload job %s was removed (someone ran 'fedgate cache cancel %s')", job.ID, job.ID)
		case err != nil:
			if time.Since(lastOK) > watchOutage {
				show.stop()
				return fmt.Errorf("lost the server while watching preload job %s (it keeps running there): %w", job.ID, err)
			}
		default:
			lastOK = time.Now()
			show.update(st)
			if st.Canceled {
				show.stop()
				return fmt.Errorf("preload job %s was canceled after %d of %d objects", job.ID, st.Objects, st.TotalObjects)
			}
			if st.Done {
				show.stop()
				fmt.Fprintf(out, "Preload job %s done: %d objects, %s cached in %s.\n", job.ID, st.Objects, humanBytes(st.Bytes),
					time.Since(started).Round(100*time.Millisecond))
				if st.Errors > 0 {
					return fmt.Errorf("%d chunks of %s could not be cached (the bucket's cache quota or the cache may be full of pinned data; the server log says more)",
						st.Errors, where(st.Bucket, st.Prefix))
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			show.stop()
			fmt.Fprintf(out, "\nStopped watching; preload job %s keeps running.\nWatch it with 'fedgate cache jobs'; stop it with 'fedgate cache cancel %s'.\n", job.ID, job.ID)
			return nil
		case <-t.C:
		}
	}
}

// progress shows a job's progress as it is polled.
type progress interface {
	update(adminapi.Job)
	stop()
}

// barProgress is a progress bar of the bytes cached, with the objects in
// its description: a spinner until the job's totals are known.
type barProgress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	total int64
}

func newBarProgress(w io.Writer) *barProgress {
	return &barProgress{w: w, total: -1, bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("counting objects"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetRenderBlankState(true),
	)}
}

func (b *barProgress) update(st adminapi.Job) {
	if st.TotalBytes <= 0 && b.total < 0 {
		// Totals unknown: a spinner, the bytes in its description. (A
		// spinner's own count stays 0 and adds up every Set64 in its
		// byte count, which showed 0 B, then rates like 5.7 TiB/s.)
		desc := fmt.Sprintf("counting objects; %d done, %s cached", st.Objects, humanBytes(st.Bytes))
		if st.Errors > 0 {
			desc += fmt.Sprintf(", %d errors", st.Errors)
		}
		b.bar.Describe(desc)
		_ = b.bar.Add64(0)
		return
	}
	if st.TotalBytes > 0 && st.TotalBytes != b.total {
		// The bar's count is still 0 and its clock runs from the start,
		// so its rate is the job's.
		b.total = st.TotalBytes
		b.bar.ChangeMax64(st.TotalBytes)
	}
	objects := fmt.Sprintf("%d objects", st.Objects)
	if st.TotalObjects > 0 {
		objects = fmt.Sprintf("%d/%d objects", st.Objects, st.TotalObjects)
	}
	if st.Errors > 0 {
		objects += fmt.Sprintf(", %d errors", st.Errors)
	}
	b.bar.Describe(objects)
	n := st.Bytes
	if b.total > 0 {
		n = min(n, b.total) // objects grew since they were counted
	}
	_ = b.bar.Set64(n)
}

func (b *barProgress) stop() {
	_ = b.bar.Exit()
	fmt.Fprintln(b.w)
}

// lineProgress prints a line of progress every so often (for logs): at
// most every `every` while it changes, every 6 × `every` while it does not.
type lineProgress struct {
	w              io.Writer
	every          time.Duration
	last, started  time.Time
	objects, bytes int64 // as last printed
}

func (l *lineProgress) update(st adminapi.Job) {
	now := time.Now()
	if l.started.IsZero() {
		l.started = now
	}
	changed := st.Objects != l.objects || st.Bytes != l.bytes
	if !st.Done && !st.Canceled && (now.Sub(l.last) < l.every || !changed && now.Sub(l.last) < 6*l.every) {
		return
	}
	l.last, l.objects, l.bytes = now, st.Objects, st.Bytes
	line := fmt.Sprintf("%s objects, %s", ofTotal(st.Objects, st.TotalObjects, itoa), ofTotal(st.Bytes, st.TotalBytes, humanBytes))
	if secs := now.Sub(l.started).Seconds(); secs >= 1 && st.Bytes > 0 {
		rate := float64(st.Bytes) / secs
		line += fmt.Sprintf(", %s/s", humanBytes(int64(rate)))
		if st.TotalBytes > st.Bytes && !st.Done {
			line += fmt.Sprintf(", ETA %s", time.Duration(float64(st.TotalBytes-st.Bytes)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	if st.Errors > 0 {
		line += fmt.Sprintf(", %d errors", st.Errors)
	}
	fmt.Fprintln(l.w, line)
}

func (l *lineProgress) stop() {}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
