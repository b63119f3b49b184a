package egress

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// Priced is a ledger row with its cost.
type Priced struct {
	Row
	// Schedule is the rate the row was priced at (Schedule.Class is the
	// row's class). Shared: read-only.
	Schedule *Schedule
	// Account is the cloud account that pays for the row's bytes (see
	// Options.Account).
	Account string
	// Cost is the exact price of Bytes.
	Cost USD
	// AvoidedCost is what AvoidedBytes would have cost had they been read
	// from the store: the money the cache saved.
	AvoidedCost USD
}

// PoolMonth names one volume-tier counter: an account's bytes of one pool
// (Schedule.Pool) in one calendar month (UTC, "2006-01").
type PoolMonth struct {
	Account string
	Pool    string
	Month   string
}

// Options adjust Price.
type Options struct {
	// Account names the cloud account billed for a row's bytes (the
	// account of its Src); rows of one account share volume tiers and free
	// tiers. nil: one account per cloud, named after the cloud ("aws").
	Account func(r Row) string
	// Prior holds bytes each account already used in a pool and month
	// outside the rows given (other services, traffic fedgate does not
	// carry), when the caller knows them: the tiers start after them.
	Prior map[PoolMonth]int64
}

// MonthStart returns the first instant of t's calendar month, UTC. Tiers
// count from there: to price a window [since, until), pass Price every row
// from MonthStart(since) to until, then Build the window.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func monthOf(hour int64) string { return time.Unix(hour*3600, 0).UTC().Format("2006-01") }

// Price prices ledger rows, returning them in time order (hour, then Src,
// Dst, Bucket, Store, Direction); rows is not modified.
//
// A row's bytes are priced at its source (egress; ingress is free) with
// table.Schedule(Src, Dst) (table nil: the built-in rates). Tiered
// schedules (internet egress, with the AWS and Azure free 100 GB) step
// along one running total per (account, pool, calendar month), in time
// order: the first bytes of a month take the first tier. Within one hour
// rows take their turn in key order. The running totals see only the rows
// given: a cloud counts every service of the account, so the real bill
// may put these bytes in another tier (see docs/egress.md).
//
// AvoidedBytes are priced on a second running total that counts both read
// and avoided bytes, as if every cache hit had been read from the store: a
// row's avoided bytes come after its read bytes on that total. So avoided
// cost is never negative, and with no tier boundary crossed it is
// AvoidedBytes × rate.
//
// Price fails on a location that does not parse, or on negative counts.
func Price(rows []Row, table *Table, opts Options) ([]Priced, error) {
	if table == nil {
		table = DefaultTable()
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Row) int { return compareKey(a.Key, b.Key) })

	type pair struct{ src, dst string }
	scheds := map[pair]*Schedule{}
	used := map[PoolMonth]int64{}   // bytes read or written
	shadow := map[PoolMonth]int64{} // bytes read or written, plus avoided
	out := make([]Priced, 0, len(sorted))
	for _, r := range sorted {
		if r.Bytes < 0 || r.AvoidedBytes < 0 {
			return nil, fmt.Errorf("egress: row %s -> %s bucket %q hour %d: negative byte count", r.Src, r.Dst, r.Bucket, r.Hour)
		}
		s, ok := scheds[pair{r.Src, r.Dst}]
		if !ok {
			src, err := policies.ParseLocationOrCloud(r.Src)
			if err != nil {
				return nil, fmt.Errorf("egress: row source: %w", err)
			}
			dst, err := policies.ParseLocationOrCloud(r.Dst)
			if err != nil {
				return nil, fmt.Errorf("egress: row destination: %w", err)
			}
			s = table.Schedule(src, dst)
			scheds[pair{r.Src, r.Dst}] = s
		}
		p := Priced{Row: r, Schedule: s, Account: accountOf(r, opts)}
		if s.Flat() {
			p.Cost = s.Cost(0, r.Bytes)
			p.AvoidedCost = s.Cost(0, r.AvoidedBytes)
		} else {
			k := PoolMonth{Account: p.Account, Pool: s.Pool, Month: monthOf(r.Hour)}
			if _, ok := used[k]; !ok {
				used[k], shadow[k] = opts.Prior[k], opts.Prior[k]
			}
			p.Cost = s.Cost(used[k], r.Bytes)
			used[k] += r.Bytes
			p.AvoidedCost = s.Cost(shadow[k]+r.Bytes, r.AvoidedBytes)
			shadow[k] += r.Bytes + r.AvoidedBytes
		}
		out = append(out, p)
	}
	return out, nil
}

func accountOf(r Row, opts Options) string {
	if opts.Account != nil {
		return opts.Account(r)
	}
	cloud, _, _ := strings.Cut(r.Src, ":")
	return cloud
}

func compareKey(a, b Key) int {
	return cmp.Or(
		cmp.Compare(a.Hour, b.Hour),
		cmp.Compare(a.Src, b.Src),
		cmp.Compare(a.Dst, b.Dst),
		cmp.Compare(a.Bucket, b.Bucket),
		cmp.Compare(a.Store, b.Store),
		cmp.Compare(a.Direction, b.Direction),
		cmp.Compare(a.Prefix, b.Prefix),
	)
}

// Merge sums the counts of rows with the same Key (ledgers fetched from
// several regions, or one region's rows in pieces) and returns them in key
// order. Asking the same region twice counts its bytes twice: merge each
// region once.
func Merge(ledgers ...[]Row) []Row {
	sum := map[Key]Counts{}
	for _, l := range ledgers {
		for _, r := range l {
			c := sum[r.Key]
			c.Bytes += r.Bytes
			c.AvoidedBytes += r.AvoidedBytes
			if len(r.Reuse) > 0 {
				if c.Reuse == nil {
					c.Reuse = make([]int64, ReuseBuckets)
				}
				for i, n := range r.Reuse[:min(len(r.Reuse), ReuseBuckets)] {
					c.Reuse[i] += n
				}
			}
			sum[r.Key] = c
		}
	}
	out := make([]Row, 0, len(sum))
	for k, c := range sum {
		out = append(out, Row{Key: k, Counts: c})
	}
	slices.SortFunc(out, func(a, b Row) int { return compareKey(a.Key, b.Key) })
	return out
}
