package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
)

func newEgressCmd() *cobra.Command {
	var base adminClient
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Report what crossing clouds cost and what the cache saved; advise where copies pay off; simulate strategies on a trace",
		Long: `Report and advise read the egress ledger of one or more regions (each region's admin API at
--endpoint; repeat --endpoint to merge several regions into one report) and price it with the
built-in per-GB table and the policy's egress.prices overrides.

Simulate reads no region: it replays an access trace (from files) against a policy file and
compares what strategies for keeping copies would cost; trace-from-log makes such a trace from
gateway access logs. See docs/egress.md.`,
	}
	var endpoints []string
	cmd.PersistentFlags().StringArrayVar(&endpoints, "endpoint", nil, "a region's server URL; repeat to merge regions (default $FEDGATE_ENDPOINT, else http://127.0.0.1:9000)")
	fl := cmd.PersistentFlags()
	fl.StringVar(&base.accessKey, "root-access-key", "", "root access key (default $FEDGATE_ACCESS_KEY, else DATA-DIR/root-credentials.json)")
	fl.StringVar(&base.secretKey, "root-secret-key", "", "root secret key (default $FEDGATE_SECRET_KEY, else DATA-DIR/root-credentials.json)")
	fl.StringVar(&base.region, "s3-region", "us-east-1", "the servers' signing region")
	fl.StringVar(&base.dataDir, "data-dir", "", "the server's --data-dir, where it keeps root-credentials.json (default $FEDGATE_DATA_DIR, else ./var)")
	bindCAFile(fl, &base.caFile)
	var since, until, by, format string
	var measure bool
	window := func(c *cobra.Command) {
		c.Flags().StringVar(&since, "since", "", "start: RFC 3339 time, a date (2026-12-01) or a duration back from now (7d, 36h); default: the start of this month")
		c.Flags().StringVar(&until, "until", "", "end (exclusive): RFC 3339 time, a date or a duration back from now; default: now")
	}

	report := &cobra.Command{
		Use:   "report",
		Short: "Bytes moved between clouds and regions, their cost, the cache hit ratio and egress avoided",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := egress.CheckBy(by); err != nil {
				return err
			}
			s, u, err := egressWindow(since, until, time.Now().UTC())
			if err != nil {
				return err
			}
			priced, pol, err := pricedLedger(cmd.Context(), base, endpoints, s, u)
			if err != nil {
				return err
			}
			r := egress.Build(priced, s, u, by)
			if pol != nil && len(pol.Egress.Budgets) > 0 {
				if r.Totals.Budgets, err = egress.EvaluateBudgets(pol.Egress.Budgets, priced, u); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			switch format {
			case "table":
				return egress.WriteTable(w, r)
			case "csv":
				return egress.WriteCSV(w, r)
			case "json":
				return egress.WriteJSON(w, r)
			case "html":
				return egress.WriteHTML(w, r)
			}
			return fmt.Errorf("--format %q: want table, csv, json or html", format)
		},
	}
	window(report)
	report.Flags().StringVar(&by, "by", "", "group rows by bucket, store, region-pair or day (default: every location pair, bucket, store and direction)")
	report.Flags().StringVar(&format, "format", "table", "table, csv, json or html (one self-contained file: fedgate egress report --format html > egress.html)")
	jsonShorthand(report, &format)

	var storagePrices []string
	advise := &cobra.Command{
		Use:   "advise",
		Short: "Recommend copies of hot prefixes into the reading region's cloud where egress saved beats storage cost",
		Long: `Advise weighs, for every key prefix (the first two path segments of the keys read) of every
bucket whose cache misses paid egress, a copy in the reading region's cloud: the egress it would
save each month against the copy's storage and one-time transfer (a ski-rental break-even), and
shows the numbers. Each advised prefix is listed through the first --endpoint to size its copy
(--measure=false skips that and assumes a copy holds a month of reads).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, u, err := egressWindow(since, until, time.Now().UTC())
			if err != nil {
				return err
			}
			priced, _, err := pricedLedger(cmd.Context(), base, endpoints, s, u)
			if err != nil {
				return err
			}
			var inWindow []egress.Priced
			for _, p := range priced {
				if t := p.HourStart(); !t.Before(s) && t.Before(u) {
					inWindow = append(inWindow, p)
				}
			}
			opts := egress.AdviseOptions{Since: s, Until: u}
			var prices []egress.StoragePrice
			for _, v := range storagePrices {
				p, err := egress.ParseStoragePrice(v)
				if err != nil {
					return fmt.Errorf("--storage-price: %w", err)
				}
				prices = append(prices, p)
			}
			opts.Storage = egress.NewStorageTable(prices...)
			if measure {
				first := base
				if len(endpoints) > 0 {
					first.endpoint = endpoints[0]
				}
				if err := first.resolve(); err != nil {
					return err
				}
				sizes, err := measureAdvice(cmd.Context(), first, egress.Advise(inWindow, opts), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				opts.Size = func(bucket, prefix, _ string) (int64, bool) {
					n, ok := sizes[[2]string{bucket, prefix}]
					return n, ok
				}
			}
			advice := egress.Advise(inWindow, opts)
			if format == "json" {
				return egress.WriteAdviceJSON(cmd.OutOrStdout(), advice)
			}
			return egress.WriteAdvice(cmd.OutOrStdout(), advice)
		},
	}
	window(advise)
	advise.Flags().StringVar(&format, "format", "table", "table or json")
	jsonShorthand(advise, &format)
	advise.Flags().StringArrayVar(&storagePrices, "storage-price", nil, "price a copy's storage: CLOUD[:REGION]=USD per GB-month, like onprem=0.004 (repeatable; on-prem is 0 unless set)")
	advise.Flags().BoolVar(&measure, "measure", true, "list each advised prefix through the first --endpoint to size its copy (false: assume a copy holds a month of reads)")
	cmd.AddCommand(report, advise, newSimulateCmd(), newTraceFromLogCmd())
	return cmd
}

// jsonShorthand gives c --json, the same as --format json (as every list
// and status command has --json).
func jsonShorthand(c *cobra.Command, format *string) {
	var asJSON bool
	c.Flags().BoolVar(&asJSON, "json", false, "the same as --format json")
	c.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if !asJSON {
			return nil
		}
		if cmd.Flags().Changed("format") && *format != "json" {
			return fmt.Errorf("--json and --format %s disagree: give one", *format)
		}
		*format = "json"
		return nil
	}
}

// pricedLedger fetches the ledgers of every endpoint from the start of
// since's month (tiers and free tiers count from there), merges and prices
// them with the first region's policy overrides.
func pricedLedger(ctx context.Context, base adminClient, endpoints []string, since, until time.Time) ([]egress.Priced, *policies.Policy, error) {
	if len(endpoints) == 0 {
		endpoints = []string{""} // $FEDGATE_ENDPOINT or the default
	}
	seen := map[string]bool{}
	var ledgers [][]egress.Row
	var pol *policies.Policy
	for _, ep := range endpoints {
		c := base
		c.endpoint = ep
		if err := c.resolve(); err != nil {
			return nil, nil, err
		}
		if seen[c.endpoint] {
			return nil, nil, fmt.Errorf("--endpoint %s given twice: its region would be counted twice", c.endpoint)
		}
		seen[c.endpoint] = true
		q := url.Values{}
		q.Set("since", egress.MonthStart(since).Format(time.RFC3339))
		q.Set("until", until.Format(time.RFC3339))
		var out adminapi.Egress
		if err := c.do(ctx, http.MethodGet, "/egress?"+q.Encode(), nil, &out); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.endpoint, err)
		}
		ledgers = append(ledgers, out.Rows)
		if pol == nil && out.PolicyYAML != "" {
			p, err := policies.Parse("policy of "+c.endpoint, []byte(out.PolicyYAML), policies.AllFeatures())
			if err != nil {
				return nil, nil, err
			}
			pol = p
		}
	}
	var prices []policies.Price
	if pol != nil {
		prices = pol.Egress.Prices
	}
	table, err := egress.NewTable(prices)
	if err != nil {
		return nil, nil, err
	}
	priced, err := egress.Price(egress.Merge(ledgers...), table, egress.Options{})
	return priced, pol, err
}

// egressWindow parses --since and --until.
func egressWindow(since, until string, now time.Time) (time.Time, time.Time, error) {
	s, u := egress.MonthStart(now), now
	var err error
	if since != "" {
		if s, err = parseWhen(since, now); err != nil {
			return s, u, fmt.Errorf("--since: %w", err)
		}
	}
	if until != "" {
		if u, err = parseWhen(until, now); err != nil {
			return s, u, fmt.Errorf("--until: %w", err)
		}
	}
	if !s.Before(u) {
		return s, u, errors.New("--since must be before --until")
	}
	return s, u, nil
}

// parseWhen reads an RFC 3339 time, a date, or a duration back from now
// (policy durations: 90m, 36h, 7d).
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t.UTC(), nil
	}
	if d, err := policies.ParseDuration(v); err == nil && !strings.HasPrefix(v, "-") {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-12-01T00:00:00Z), a date (2026-12-01) or a duration back from now (7d)", v)
}

// measureTimeout bounds the listing of one advised prefix.
const measureTimeout = 15 * time.Minute

// measureAdvice lists, through the region at c, every (bucket, prefix) the
// advice is about and returns their sizes (a one-segment prefix "a/" only
// its direct objects, as keys under "a/b/" count under that prefix);
// prefix "" (the rest of a bucket) is the bucket's size less its advised
// prefixes'. A bar on w
// shows the progress.
func measureAdvice(ctx context.Context, c adminClient, advice []egress.Advice, w io.Writer) (map[[2]string]int64, error) {
	type target struct{ bucket, prefix string }
	var todo []target
	seen := map[target]bool{}
	for _, a := range advice {
		t := target{a.Bucket, a.Prefix}
		if !seen[t] {
			seen[t] = true
			todo = append(todo, t)
		}
	}
	sizes := map[[2]string]int64{}
	if len(todo) == 0 {
		return sizes, nil
	}
	bar := progressbar.NewOptions(len(todo), progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("measuring prefixes"),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	defer bar.Finish()
	prefixed := map[string]int64{} // bytes under a bucket's advised prefixes
	for _, t := range todo {
		q := url.Values{}
		q.Set("bucket", t.bucket)
		q.Set("prefix", t.prefix)
		if strings.Count(t.prefix, "/") == 1 {
			// Reads of keys one level deep ("a/x") count under "a/";
			// deeper keys count under "a/b/": measure only the former.
			q.Set("direct", "true")
		}
		var u adminapi.Usage
		// A listing of a large prefix takes a while: no 30 s bound, but
		// not for ever either.
		c.timeout = -1
		lctx, cancel := context.WithTimeout(ctx, measureTimeout)
		err := c.do(lctx, http.MethodGet, "/usage?"+q.Encode(), nil, &u)
		cancel()
		if err != nil {
			if strings.HasSuffix(err.Error(), "(NoSuchBucket)") {
				bar.Add(1)
				continue // gone since: no size, the advice estimates it
			}
			return nil, fmt.Errorf("measuring bucket %q prefix %q: %w", t.bucket, t.prefix, err)
		}
		sizes[[2]string{t.bucket, t.prefix}] = u.Bytes
		if t.prefix != "" {
			prefixed[t.bucket] += u.Bytes
		}
		bar.Add(1)
	}
	for k, n := range sizes {
		if k[1] == "" {
			sizes[k] = max(n-prefixed[k[0]], 0)
		}
	}
	return sizes, nil
}
