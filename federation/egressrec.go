package federation

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Egress accounting: every byte read from or written to a store is counted
// by (hour, store location -> region location, bucket, store, direction),
// and every byte served to a client through the cache by the same key
// (served - read = egress the cache avoided). The bytes of each client read
// of an object from another location than the region's are also counted by
// reuse distance (reuse.go) on the row of the key's prefix. Counts are kept
// in memory and added to the Raft ledger every egressFlush, so they survive
// restarts and sum over the region's nodes.

const egressFlush = 15 * time.Second

type egressKey struct {
	hour      int64
	store     string
	storeLoc  string
	region    string // the region's location when counted
	bucket    string
	direction string
	prefix    string
}

type egressCounts struct {
	bytes, served, logical int64
	// preloaded: the bytes of bytes or logical read into the cache with
	// no client waiting (a preload); served later as cache hits, they are
	// avoided egress like any other hit.
	preloaded int64
	// reuse splits the bytes of clients' reads by reuse distance
	// (egress.Counts.Reuse); all zero when none were counted.
	reuse [egress.ReuseBuckets]int64
}

// noReuse: the bytes are not a client's read of an object from another
// location (a cache fill, a member's share of a composite read, a write).
const noReuse = -1

type egressRecorder struct {
	region string // this region's location, "cloud:region"
	now    func() time.Time
	mu     sync.Mutex
	m      map[egressKey]*egressCounts
	// prefixes tracked in prefixHour, per bucket
	prefixHour int64
	prefixes   map[string]map[string]bool

	bytesTotal  *prometheus.CounterVec // src, dst, direction
	servedTotal *prometheus.CounterVec // src, dst
}

// egressTag says which bucket and object (the key in the bucket) a store
// call is for: it travels in the context into composite placements, whose
// member stores count their own bytes (see meteredStore).
type egressTag struct {
	bucket, key string
	blocked     *blockedRead // reads only: a member's budget refusal, if any
	// preload: the reads fill the cache for no client (a preload job):
	// the bytes moved are counted as preloaded too, so the hits that
	// serve them later count as avoided.
	preload bool
}

type egressTagKey struct{}

func withEgressTag(ctx context.Context, t egressTag) context.Context {
	return context.WithValue(ctx, egressTagKey{}, t)
}

func egressTagOf(ctx context.Context) egressTag {
	t, _ := ctx.Value(egressTagKey{}).(egressTag)
	return t
}

// trackLocked returns prefix when it is (or can now be) tracked for bucket
// this hour, else "".
func (r *egressRecorder) trackLocked(hour int64, bucket, prefix string) string {
	if prefix == "" {
		return ""
	}
	if hour != r.prefixHour || r.prefixes == nil {
		r.prefixHour, r.prefixes = hour, map[string]map[string]bool{}
	}
	set := r.prefixes[bucket]
	if set == nil {
		set = map[string]bool{}
		r.prefixes[bucket] = set
	}
	if !set[prefix] {
		if len(set) >= egress.MaxPrefixes {
			return ""
		}
		set[prefix] = true
	}
	return prefix
}

// Kinds of counted bytes.
const (
	countBytes   = iota // moved between the store and the region (egress)
	countServed         // served to a client through the cache
	countLogical        // read through a composite placement (its members count the egress)
)

func (r *egressRecorder) add(t egressTag, st store.Store, dir string, kind int, n int64) {
	r.count(t, st, dir, kind, n, noReuse)
}

// count adds n bytes of kind; reuse is the bucket of egress.Counts.Reuse
// the bytes also count under when they are a client's read (noReuse:
// not), on the row of the key's prefix, when the store is in another
// location than the region.
func (r *egressRecorder) count(t egressTag, st store.Store, dir string, kind int, n int64, reuse int) {
	if r == nil || st == nil || n == 0 {
		return
	}
	hour := r.now().Unix() / 3600
	k := egressKey{hour: hour, store: st.Name(), storeLoc: st.Location().String(), bucket: t.bucket, direction: dir}
	var c egressCounts
	switch kind {
	case countBytes:
		c.bytes = n
	case countServed:
		c.served = n
	case countLogical:
		c.logical = n
	}
	if t.preload && kind != countServed {
		c.preloaded = n
	}
	r.mu.Lock()
	k.region = r.region
	crossing := dir == "read" && k.storeLoc != r.region
	if crossing && kind == countBytes {
		// Only bytes that crossed a location boundary are split by prefix:
		// advice weighs nothing else, and the ledger stays small (served
		// and logical bytes are summed over prefixes anyway).
		k.prefix = r.trackLocked(hour, t.bucket, egress.AdvisePrefix(t.key))
	}
	if crossing && reuse >= 0 && reuse < egress.ReuseBuckets {
		if kind == countBytes {
			c.reuse[reuse] = n
		} else {
			// Served and logical bytes stay on the "" row; the read's
			// reuse goes with its prefix, as the bytes it moved do.
			pk := k
			pk.prefix = r.trackLocked(hour, t.bucket, egress.AdvisePrefix(t.key))
			var rc egressCounts
			rc.reuse[reuse] = n
			r.bumpLocked(pk, rc)
		}
	}
	r.bumpLocked(k, c)
	r.mu.Unlock()
	src, dst := k.storeLoc, k.region
	if dir == "write" {
		src, dst = dst, src
	}
	switch kind {
	case countBytes:
		r.bytesTotal.WithLabelValues(src, dst, dir).Add(float64(n))
	case countServed:
		r.servedTotal.WithLabelValues(src, dst).Add(float64(n))
	}
}

func newEgressRecorder(region string, now func() time.Time) *egressRecorder {
	return &egressRecorder{region: region, now: now, m: map[egressKey]*egressCounts{},
		bytesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedgate_egress_bytes_total",
			Help: "Bytes this node read from (direction read) or wrote to (write) stores, by source and destination location."},
			[]string{"src", "dst", "direction"}),
		servedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedgate_egress_served_bytes_total",
			Help: "Bytes of stores' objects this node served to clients through the cache, by the store's and the region's location."},
			[]string{"src", "dst"}),
	}
}

// take returns the counts since the last take as ledger rows.
func (r *egressRecorder) take() []regionstate.EgressRow {
	r.mu.Lock()
	m := r.m
	r.m = map[egressKey]*egressCounts{}
	r.mu.Unlock()
	rows := make([]regionstate.EgressRow, 0, len(m))
	for k, c := range m {
		row := regionstate.EgressRow{Hour: k.hour, Bucket: k.bucket, Store: k.store, Direction: k.direction, Prefix: k.prefix,
			Bytes: c.bytes, Served: c.served, Logical: c.logical, Preloaded: c.preloaded}
		if c.reuse != ([egress.ReuseBuckets]int64{}) {
			row.Reuse = slices.Clone(c.reuse[:])
		}
		if k.direction == "read" {
			row.Src, row.Dst = k.storeLoc, k.region
		} else {
			row.Src, row.Dst = k.region, k.storeLoc
		}
		rows = append(rows, row)
	}
	return rows
}

// countingReader counts the bytes read through it into the recorder.
type countingReader struct {
	io.ReadCloser
	rec  *egressRecorder
	tag  egressTag
	st   store.Store
	dir  string
	kind int
	// reuse is 1 + the bucket of egress.Counts.Reuse of a client's read
	// (the reader the client reads); 0: the bytes are no client's read.
	reuse         int
	pending, done int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.pending += int64(n)
	if c.pending >= 1<<20 || err != nil {
		c.flush()
	}
	return n, err
}

func (c *countingReader) flush() {
	if c.pending == 0 {
		return
	}
	c.rec.count(c.tag, c.st, c.dir, c.kind, c.pending, c.reuse-1)
	c.done += c.pending
	c.pending = 0
}

func (c *countingReader) Close() error {
	c.flush()
	return c.ReadCloser.Close()
}

// countRead wraps a reader of bytes coming from st for t's object. A
// composite placement's bytes are counted by its members (meteredStore):
// here they count only as read through it. reuse is the read's bucket of
// egress.Counts.Reuse when the reader is what a client reads (readReuse),
// else noReuse (a cache fill).
func (n *Namespace) countRead(rc io.ReadCloser, t egressTag, st store.Store, reuse int) io.ReadCloser {
	if n.egress == nil {
		return rc
	}
	kind := countBytes
	if isComposite(st) {
		kind = countLogical
	}
	return &countingReader{ReadCloser: rc, rec: n.egress, tag: t, st: st, dir: "read", kind: kind, reuse: reuse + 1}
}

// countServed wraps a reader of bytes served to a client through the
// cache; reuse is the read's bucket of egress.Counts.Reuse (readReuse).
func (n *Namespace) countServed(rc io.ReadCloser, t egressTag, st store.Store, reuse int) io.ReadCloser {
	if n.egress == nil {
		return rc
	}
	return &countingReader{ReadCloser: rc, rec: n.egress, tag: t, st: st, dir: "read", kind: countServed, reuse: reuse + 1}
}

// readReuse records a client's read (one open) of the object version info
// names in bucket, from st, in the reuse tracker and returns its bucket of
// egress.Counts.Reuse; noReuse when nothing is tracked: accounting or the
// tracker is off, or st is in the region's own location (such reads cost
// nothing to repeat, and advice ignores them).
func (n *Namespace) readReuse(bucket string, info store.ObjectInfo, st store.Store) int {
	if n.egress == nil || n.reuse == nil || sameLocation(st.Location(), n.egress.location()) {
		return noReuse
	}
	return n.reuse.read(bucket, info.Key, info.Validator, n.now())
}

// sameLocation reports whether l is written s ("cloud:region"), without
// building l's string.
func sameLocation(l policies.Location, s string) bool {
	if l.Region == "" {
		return s == l.Cloud
	}
	return len(s) == len(l.Cloud)+1+len(l.Region) && strings.HasPrefix(s, l.Cloud) && s[len(l.Cloud)] == ':' && strings.HasSuffix(s, l.Region)
}

// countWrite records bytes written to st for bucket (a composite
// placement's members count their own).
func (n *Namespace) countWrite(bucket string, st store.Store, bytes int64) {
	if !isComposite(st) {
		n.egress.add(egressTag{bucket: bucket}, st, "write", countBytes, bytes)
	}
}

// RunEgress adds this node's counts to the Raft ledger every egressFlush
// until ctx ends, then once more.
func (n *Namespace) RunEgress(ctx context.Context) {
	if n.egress == nil {
		return
	}
	t := time.NewTicker(egressFlush)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n.flushEgress(fctx)
			cancel()
			return
		case <-t.C:
			n.flushEgress(ctx)
			n.budgetStatuses(ctx) // logs and meters budgets spent (action alert too)
			if n.retention > 0 && n.now().Sub(pruned) >= time.Hour {
				if err := n.PruneEgress(ctx); err != nil {
					n.log.Warn("egress ledger not pruned yet; retrying", "error", err)
				} else {
					pruned = n.now()
				}
			}
		}
	}
}

// PruneEgress removes the ledger's hours older than the retention
// (EgressRetention; nothing without one). Every node does it about once an
// hour; it is idempotent.
func (n *Namespace) PruneEgress(ctx context.Context) error {
	if n.egress == nil || n.retention <= 0 {
		return nil
	}
	before := n.now().Add(-n.retention).Unix() / 3600
	if before <= 0 {
		return nil
	}
	return n.rs.Apply(ctx, regionstate.PruneEgress{BeforeHour: before})
}

// FlushEgress adds the counts gathered so far to the ledger now.
func (n *Namespace) FlushEgress(ctx context.Context) error { return n.flushEgress(ctx) }

func (n *Namespace) flushEgress(ctx context.Context) error {
	if n.egress == nil {
		return nil
	}
	rows := n.egress.take()
	if len(rows) == 0 {
		return nil
	}
	if err := n.rs.Apply(ctx, regionstate.AddEgress{Rows: rows}); err != nil {
		if errors.Is(err, regionstate.ErrInvalid) {
			// Refused as malformed: retrying would refuse them (and every
			// count added to them) forever.
			n.log.Error("egress counts refused by the ledger; dropped", "rows", len(rows), "error", err)
			return err
		}
		// Put them back (not counted in the metrics again): they are added
		// to the next flush.
		for _, r := range rows {
			loc, region := r.Src, r.Dst
			if r.Direction == "write" {
				loc, region = r.Dst, r.Src
			}
			c := egressCounts{bytes: r.Bytes, served: r.Served, logical: r.Logical, preloaded: r.Preloaded}
			copy(c.reuse[:], r.Reuse)
			// The region's location the bytes were counted at goes back
			// too: without it the next flush sent rows with an empty
			// location, which the ledger refuses, every flush after.
			n.egress.bump(egressKey{hour: r.Hour, store: r.Store, storeLoc: loc, region: region, bucket: r.Bucket, direction: r.Direction, prefix: r.Prefix}, c)
		}
		n.log.Warn("egress counts not recorded yet; retrying", "error", err)
		return err
	}
	return nil
}

// bump adds counts to one key of the pending counts.
func (r *egressRecorder) bump(k egressKey, add egressCounts) {
	r.mu.Lock()
	r.bumpLocked(k, add)
	r.mu.Unlock()
}

func (r *egressRecorder) bumpLocked(k egressKey, add egressCounts) {
	c := r.m[k]
	if c == nil {
		c = &egressCounts{}
		r.m[k] = c
	}
	c.bytes += add.bytes
	c.served += add.served
	c.logical += add.logical
	c.preloaded += add.preloaded
	for i, v := range add.reuse {
		c.reuse[i] += v
	}
}

// EgressLedger returns the region's ledger for [since, until) after adding
// this node's latest counts (other nodes add theirs every egressFlush).
// Read rows carry the bytes the cache served beyond what was read from the
// store as AvoidedBytes, and the reuse distances of clients' reads of
// objects from other locations (on their prefix's row) as Reuse.
func (n *Namespace) EgressLedger(ctx context.Context, since, until time.Time) ([]egress.Row, error) {
	_ = n.flushEgress(ctx)
	if err := n.readBarrier(ctx); err != nil {
		return nil, err
	}
	from, to := since.Unix()/3600, (until.Unix()+3599)/3600
	// The bytes avoided are worked out over all prefixes of a key: the
	// node serving a client and the node filling the cache may count one
	// read under different prefixes (each tracks its own), so a prefix's
	// served and read bytes need not meet in one row. They are reported on
	// the key's "" row.
	type sums struct{ bytes, served, logical, preloaded int64 }
	all := map[egress.Key]*sums{}
	var out []egress.Row
	for _, r := range n.rs.State().Egress(from, to) {
		k := egress.Key{Hour: r.Hour, Src: r.Src, Dst: r.Dst, Bucket: r.Bucket, Store: r.Store, Direction: egress.Direction(r.Direction)}
		if r.Direction == "read" {
			t := all[k]
			if t == nil {
				t = &sums{}
				all[k] = t
			}
			t.bytes, t.served, t.logical = t.bytes+r.Bytes, t.served+r.Served, t.logical+r.Logical
			t.preloaded += r.Preloaded
		}
		if r.Bytes > 0 || len(r.Reuse) > 0 {
			k.Prefix = r.Prefix
			c := egress.Counts{Bytes: r.Bytes}
			if len(r.Reuse) > 0 {
				c.Reuse = make([]int64, egress.ReuseBuckets)
				for i, n := range r.Reuse {
					// Buckets beyond this version's (a newer node's) are
					// longer distances: they count in the last.
					c.Reuse[min(i, egress.ReuseBuckets-1)] += n
				}
			}
			out = append(out, egress.Row{Key: k, Counts: c})
		}
	}
	for k, t := range all {
		// Bytes a preload moved were served to no one when they moved:
		// the hits serving them later are avoided egress, whoever filled
		// the cache, and the preload's own fetch stays moved bytes.
		if avoided := t.served - (t.bytes + t.logical - t.preloaded); avoided > 0 {
			out = append(out, egress.Row{Key: k, Counts: egress.Counts{AvoidedBytes: avoided}})
		}
	}
	// One row per key: the avoided bytes join the key's "" row.
	return egress.Merge(out), nil
}

// RegionLocation is this region's location for egress accounting.
func (n *Namespace) RegionLocation() string {
	if n.egress == nil {
		return ""
	}
	return n.egress.location()
}

// location is the region's location now.
func (r *egressRecorder) location() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.region
}

// SetRegionLocation changes the region's location ("cloud:region") for
// what is counted from now on (a policy applied with a new location):
// bytes counted before keep the location they were counted at. It reports
// false when egress accounting is off on this node (it started without a
// location), which only a restart turns on.
func (n *Namespace) SetRegionLocation(loc string) bool {
	if n.egress == nil {
		return loc == ""
	}
	n.egress.mu.Lock()
	defer n.egress.mu.Unlock()
	n.egress.region = loc
	return true
}
