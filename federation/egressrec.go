package federation

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/federation/egress"
	"github.com/fedgate/fedgate/federation/store"
	"github.com/fedgate/fedgate/raft"
)

// Egress accounting: every byte read from or written to a store is counted
// by (hour, store location -> region location, bucket, store, direction),
// and every byte served to a client through the cache by the same key
// (served - read = egress the cache avoided). Counts are kept in memory and
// added to the Raft ledger every egressFlush, so they survive restarts and
// sum over the region's nodes.

const egressFlush = 15 * time.Second

type egressKey struct {
	hour      int64
	store     string
	storeLoc  string
	bucket    string
	direction string
}

type egressCounts struct{ bytes, served int64 }

type egressRecorder struct {
	region string // this region's location, "cloud:region"
	now    func() time.Time
	mu     sync.Mutex
	m      map[egressKey]*egressCounts

	bytesTotal  *prometheus.CounterVec // src, dst, direction
	servedTotal *prometheus.CounterVec // src, dst
}

func (r *egressRecorder) add(bucket string, st store.Store, dir string, bytes, served int64) {
	if r == nil || st == nil || bytes == 0 && served == 0 {
		return
	}
	k := egressKey{hour: r.now().Unix() / 3600, store: st.Name(), storeLoc: st.Location().String(), bucket: bucket, direction: dir}
	r.bump(k, bytes, served)
	src, dst := k.storeLoc, r.region
	if dir == "write" {
		src, dst = dst, src
	}
	if bytes > 0 {
		r.bytesTotal.WithLabelValues(src, dst, dir).Add(float64(bytes))
	}
	if served > 0 {
		r.servedTotal.WithLabelValues(src, dst).Add(float64(served))
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
func (r *egressRecorder) take() []raft.EgressRow {
	r.mu.Lock()
	m := r.m
	r.m = map[egressKey]*egressCounts{}
	r.mu.Unlock()
	rows := make([]raft.EgressRow, 0, len(m))
	for k, c := range m {
		row := raft.EgressRow{Hour: k.hour, Bucket: k.bucket, Store: k.store, Direction: k.direction, Bytes: c.bytes, Served: c.served}
		if k.direction == "read" {
			row.Src, row.Dst = k.storeLoc, r.region
		} else {
			row.Src, row.Dst = r.region, k.storeLoc
		}
		rows = append(rows, row)
	}
	return rows
}

// countingReader counts the bytes read through it into the recorder.
type countingReader struct {
	io.ReadCloser
	rec           *egressRecorder
	bucket        string
	st            store.Store
	dir           string
	served        bool
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
	if c.served {
		c.rec.add(c.bucket, c.st, "read", 0, c.pending)
	} else {
		c.rec.add(c.bucket, c.st, c.dir, c.pending, 0)
	}
	c.done += c.pending
	c.pending = 0
}

func (c *countingReader) Close() error {
	c.flush()
	return c.ReadCloser.Close()
}

// countRead wraps a reader of bytes coming from st for bucket.
func (n *Namespace) countRead(rc io.ReadCloser, bucket string, st store.Store) io.ReadCloser {
	if n.egress == nil {
		return rc
	}
	return &countingReader{ReadCloser: rc, rec: n.egress, bucket: bucket, st: st, dir: "read"}
}

// countServed wraps a reader of bytes served to a client through the cache.
func (n *Namespace) countServed(rc io.ReadCloser, bucket string, st store.Store) io.ReadCloser {
	if n.egress == nil {
		return rc
	}
	return &countingReader{ReadCloser: rc, rec: n.egress, bucket: bucket, st: st, served: true}
}

// countWrite records bytes written to st for bucket.
func (n *Namespace) countWrite(bucket string, st store.Store, bytes int64) {
	n.egress.add(bucket, st, "write", bytes, 0)
}

// RunEgress adds this node's counts to the Raft ledger every egressFlush
// until ctx ends, then once more.
func (n *Namespace) RunEgress(ctx context.Context) {
	if n.egress == nil {
		return
	}
	t := time.NewTicker(egressFlush)
	defer t.Stop()
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
		}
	}
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
	if err := n.j.Apply(ctx, raft.AddEgress{Rows: rows}); err != nil {
		// Put them back (not counted in the metrics again): they are added
		// to the next flush.
		for _, r := range rows {
			loc := r.Src
			if r.Direction == "write" {
				loc = r.Dst
			}
			n.egress.bump(egressKey{hour: r.Hour, store: r.Store, storeLoc: loc, bucket: r.Bucket, direction: r.Direction}, r.Bytes, r.Served)
		}
		n.log.Warn("egress counts not recorded yet; retrying", "error", err)
		return err
	}
	return nil
}

// bump adds counts to one key of the pending counts.
func (r *egressRecorder) bump(k egressKey, bytes, served int64) {
	r.mu.Lock()
	c := r.m[k]
	if c == nil {
		c = &egressCounts{}
		r.m[k] = c
	}
	c.bytes += bytes
	c.served += served
	r.mu.Unlock()
}

// EgressLedger returns the region's ledger for [since, until) after adding
// this node's latest counts (other nodes add theirs every egressFlush).
// Read rows carry the bytes the cache served beyond what was read from the
// store as AvoidedBytes.
func (n *Namespace) EgressLedger(ctx context.Context, since, until time.Time) ([]egress.Row, error) {
	_ = n.flushEgress(ctx)
	if err := n.region.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	from, to := since.Unix()/3600, (until.Unix()+3599)/3600
	var out []egress.Row
	for _, r := range n.j.State().Egress(from, to) {
		row := egress.Row{Key: egress.Key{Hour: r.Hour, Src: r.Src, Dst: r.Dst, Bucket: r.Bucket, Store: r.Store,
			Direction: egress.Direction(r.Direction)}, Counts: egress.Counts{Bytes: r.Bytes}}
		if r.Direction == "read" && r.Served > r.Bytes {
			row.AvoidedBytes = r.Served - r.Bytes
		}
		out = append(out, row)
	}
	return out, nil
}

// RegionLocation is this region's location for egress accounting.
func (n *Namespace) RegionLocation() string {
	if n.egress == nil {
		return ""
	}
	return n.egress.region
}
