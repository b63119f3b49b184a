package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/internal/backoff"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// The drainer: every node uploads the journal entries it holds a staged
// copy of. A node claims an entry through Raft before it uploads (so one
// node drains a key at a time, and an older version's upload always ends
// before a newer one's starts), then finishes the claim, which clears the
// entry unless a newer write replaced it meanwhile. The first holder of an
// entry drains it at once; the others (and nodes without a copy, reading
// from a holder) wait takeoverAfter, so a dead node's entries are drained
// by a survivor.

// Drain timing.
const (
	drainTick     = 500 * time.Millisecond
	takeoverAfter = 5 * time.Second
	drainWorkers  = 4
	// A drain claim is a lease of drainLease, renewed every drainRenew
	// while the upload runs. An upload whose lease could not be renewed is
	// cancelled drainSafety before the lease ends (by this node's clock),
	// so it never completes after another node may have taken over. Node
	// clocks must agree to well within drainSafety (NTP).
	drainLease  = 20 * time.Second
	drainRenew  = 5 * time.Second
	drainSafety = 5 * time.Second
	// sweepGrace is how long a staged file nobody refers to is kept (reads
	// that looked it up just before its entry was drained still read it).
	sweepGrace = 2 * time.Minute
)

// drainMetrics are the write-back counters.
type drainMetrics struct {
	stagedBytes  prometheus.Counter
	stagingWaits prometheus.Counter
	drained      prometheus.Counter
	drainedBytes prometheus.Counter
	drainErrors  prometheus.Counter
	superseded   prometheus.Counter
}

func newDrainMetrics() *drainMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &drainMetrics{
		stagedBytes:  c("fedgate_writeback_staged_bytes_total", "Bytes of write-back writes this node staged (its own copy)."),
		stagingWaits: c("fedgate_writeback_staging_full_total", "Write-back writes refused because staging had no room within the wait."),
		drained:      c("fedgate_writeback_drained_total", "Journal entries (objects and deletes) this node drained to their store."),
		drainedBytes: c("fedgate_writeback_drained_bytes_total", "Bytes this node drained to stores."),
		drainErrors:  c("fedgate_writeback_drain_errors_total", "Drain attempts that failed (retried later)."),
		superseded:   c("fedgate_writeback_superseded_total", "Drains skipped because a newer write or delete replaced the entry."),
	}
}

// RegisterMetrics registers the namespace's write-back metrics: the
// counters above and the region's drain backlog (from Raft state, the same
// on every node) and this node's staging use.
func (n *Namespace) RegisterMetrics(reg prometheus.Registerer) error {
	m := n.metrics
	cs := []prometheus.Collector{m.stagedBytes, m.stagingWaits, m.drained, m.drainedBytes, m.drainErrors, m.superseded}
	cs = append(cs, n.degraded.collectors()...)
	cs = append(cs, n.lcMetrics.collectors()...)
	cs = append(cs, n.lifecycleGauges()...)
	if n.egress != nil {
		cs = append(cs, n.egress.bytesTotal, n.egress.servedTotal, n.budget.used)
	}
	if n.reuse != nil {
		cs = append(cs, n.reuse.collectors()...)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	g := func(name, help string, f func() float64) error {
		return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	return errors.Join(
		g("fedgate_writeback_backlog_objects", "Journal entries not yet drained, region-wide.", func() float64 {
			return float64(n.Backlog().Entries)
		}),
		g("fedgate_writeback_backlog_bytes", "Bytes not yet drained, region-wide.", func() float64 {
			return float64(n.Backlog().Bytes)
		}),
		g("fedgate_writeback_backlog_oldest_seconds", "Age of the oldest entry not yet drained (0: none).", func() float64 {
			return n.Backlog().OldestAge.Seconds()
		}),
		g("fedgate_writeback_staging_used_bytes", "Bytes staged on this node, reservations included.", func() float64 {
			if n.wb.Staging == nil {
				return 0
			}
			s := n.wb.Staging.Stats()
			return float64(s.Used + s.Reserved)
		}),
		g("fedgate_writeback_staging_reclaimable_bytes", "Bytes of staged files that new writes may take: drained, or of versions overwritten before they drained (kept for readers).", func() float64 {
			if n.wb.Staging == nil {
				return 0
			}
			return float64(n.wb.Staging.Stats().Reclaimable)
		}),
		g("fedgate_writeback_staging_capacity_bytes", "Capacity of this node's staging area.", func() float64 {
			if n.wb.Staging == nil {
				return 0
			}
			return float64(n.wb.Staging.Stats().Capacity)
		}),
	)
}

// Backlog is the write-back journal's size.
type Backlog struct {
	Entries   int
	Bytes     int64
	OldestAge time.Duration
}

// Backlog returns the region's drain backlog as this node's state shows it.
func (n *Namespace) Backlog() Backlog {
	entries, bytes, oldest := n.rs.State().JournalStats()
	b := Backlog{Entries: entries, Bytes: bytes}
	if !oldest.IsZero() {
		b.OldestAge = max(0, n.now().Sub(oldest))
	}
	return b
}

func (n *Namespace) wakeDrainer() {
	select {
	case n.drainWake <- struct{}{}:
	default:
	}
}

// RunDrainer drains the journal until ctx ends. Call it once per node.
func (n *Namespace) RunDrainer(ctx context.Context) {
	var (
		mu     sync.Mutex
		active = map[string]bool{}    // bucket NUL key being drained here
		retry  = map[string]retryAt{} // failed drains wait before the next try
		sem    = make(chan struct{}, drainWorkers)
		wg     sync.WaitGroup
	)
	defer wg.Wait()
	t := time.NewTicker(drainTick)
	defer t.Stop()
	lastSweep := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.drainWake:
		}
		if time.Since(lastSweep) > sweepGrace/4 {
			lastSweep = time.Now()
			n.sweepStaging()
		}
		for _, e := range n.rs.State().Journal("", "") {
			if !n.shouldDrain(e) {
				continue
			}
			k := e.Bucket + "\x00" + e.Key
			mu.Lock()
			busy := active[k] || time.Now().Before(retry[k].next)
			if !busy {
				active[k] = true
			}
			mu.Unlock()
			if busy {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				ok := false
				defer func() {
					<-sem
					mu.Lock()
					delete(active, k)
					if ok {
						delete(retry, k)
					} else {
						retry[k] = retry[k].after()
					}
					mu.Unlock()
				}()
				ok = n.drainOne(ctx, e)
			})
		}
	}
}

// drainBackoff spaces out the retries of a drain that keeps failing: 1 s,
// 2 s, 4 s ... up to 30 s.
var drainBackoff = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}

// retryAt is when a drain that failed fails times may be tried again.
type retryAt struct {
	fails int
	next  time.Time
}

func (b retryAt) after() retryAt {
	b.fails++
	b.next = time.Now().Add(drainBackoff.Wait(b.fails))
	return b
}

// shouldDrain decides whether this node tries e now.
func (n *Namespace) shouldDrain(e regionstate.JournalEntry) bool {
	now := n.now()
	if e.Claim != nil && now.Before(e.Claim.Expires) {
		return false
	}
	self := n.region.Self()
	first := ""
	if len(e.Segments) > 0 && len(e.Segments[0].Nodes) > 0 {
		first = e.Segments[0].Nodes[0]
	}
	if e.Tombstone || first == self {
		return true
	}
	// Not the first holder: take over once the entry (or its expired claim)
	// has waited long enough.
	since := e.Created
	if e.Claim != nil {
		since = e.Claim.Expires
	}
	if !slices.Contains(n.region.Members(), first) {
		return true // its first holder left the region
	}
	return now.Sub(since) >= takeoverAfter
}

// drainOne claims, uploads (or deletes) and finishes one entry; false
// when it should be retried later.
func (n *Namespace) drainOne(ctx context.Context, e regionstate.JournalEntry) bool {
	self := n.region.Self()
	claim := regionstate.ClaimDrain{Bucket: e.Bucket, Key: e.Key, Version: e.Version, Node: self, Lease: drainLease}
	start := time.Now()
	err := n.rs.Apply(ctx, claim)
	switch {
	case errors.Is(err, regionstate.ErrSuperseded):
		n.metrics.superseded.Inc()
		return true
	case errors.Is(err, regionstate.ErrDrainClaimed):
		return true
	case err != nil:
		n.metrics.drainErrors.Inc()
		n.log.Warn("write-back: claim failed", "bucket", e.Bucket, "key", e.Key, "error", err)
		return false
	}
	uctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		deadline := start.Add(drainLease - drainSafety)
		tick := time.NewTicker(drainRenew)
		defer tick.Stop()
		for {
			select {
			case <-uctx.Done():
				return
			case <-time.After(time.Until(deadline)):
				n.log.Warn("write-back: drain lease not renewed in time; upload cancelled", "bucket", e.Bucket, "key", e.Key)
				cancel()
				return
			case <-tick.C:
				at := time.Now()
				rctx, rcancel := context.WithTimeout(uctx, time.Until(deadline))
				if n.rs.Apply(rctx, claim) == nil {
					deadline = at.Add(drainLease - drainSafety)
				}
				rcancel()
			}
		}
	}()
	object := e.Key
	if e.Object != "" {
		object = e.Object // the bytes of one of its versions
	}
	stored, err := n.upload(withEgressTag(uctx, egressTag{bucket: e.Bucket, key: object}), e)
	cancel()
	<-renewed
	if err != nil {
		n.metrics.drainErrors.Inc()
		n.log.Warn("write-back: drain failed; will retry", "bucket", e.Bucket, "key", e.Key, "version", e.Version, "error", err)
		// Give the claim back at once (same as finishing a superseded one:
		// the entry stays), so the retry need not wait for the lease.
		fctx, fcancel := finishCtx(ctx)
		_ = n.rs.Apply(fctx, regionstate.FinishDrain{Bucket: e.Bucket, Key: e.Key, Version: e.Version, Node: self, Failed: true})
		fcancel()
		return false
	}
	var drained []string
	for _, s := range e.Segments {
		drained = append(drained, s.ID)
	}
	fctx, fcancel := finishCtx(ctx)
	err = n.rs.Apply(fctx, regionstate.FinishDrain{Bucket: e.Bucket, Key: e.Key, Version: e.Version, Node: self, Drained: drained, Validator: string(stored.Validator)})
	fcancel()
	if err != nil {
		n.log.Warn("write-back: drained, but the journal entry was not cleared (it will be drained again)", "bucket", e.Bucket, "key", e.Key, "error", err)
		return false
	}
	n.metrics.drained.Inc()
	n.metrics.drainedBytes.Add(float64(e.Size))
	if st, ok := n.v().stores[e.Store]; ok {
		n.countWrite(e.Bucket, st, e.Size)
	}
	n.forgetStoreKey(e.Store, e.StoreKey)
	n.log.Debug("write-back: drained", "bucket", e.Bucket, "key", e.Key, "version", e.Version, "bytes", e.Size)
	return true
}

// upload writes (or deletes) e in its store, and returns what the store
// says of what it wrote.
func (n *Namespace) upload(ctx context.Context, e regionstate.JournalEntry) (store.ObjectInfo, error) {
	st, ok := n.v().stores[e.Store]
	if !ok {
		return store.ObjectInfo{}, fmt.Errorf("store %q is not configured on this node", e.Store)
	}
	if e.Tombstone {
		err := st.Delete(ctx, e.StoreKey)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return store.ObjectInfo{}, err
	}
	meta := fromRaftMeta(e.Meta)
	meta.Checksums = e.Checksums
	if len(e.Segments) == 1 {
		r := &segmentReader{ctx: ctx, ns: n, segs: e.Segments, left: e.Size}
		defer r.Close()
		return st.Put(ctx, e.StoreKey, r, e.Size, store.PutOptions{Metadata: meta})
	}
	// A completed multipart upload drains as a multipart upload, so the
	// store's ETag is the same "<md5-of-md5s>-N" the client was given.
	mp, ok := st.(store.Multiparter)
	if !ok {
		r := &segmentReader{ctx: ctx, ns: n, segs: e.Segments, left: e.Size}
		defer r.Close()
		return st.Put(ctx, e.StoreKey, r, e.Size, store.PutOptions{Metadata: meta})
	}
	uid, err := mp.CreateMultipart(ctx, e.StoreKey, store.PutOptions{Metadata: meta})
	if err != nil {
		return store.ObjectInfo{}, err
	}
	parts := make([]store.PartInfo, 0, len(e.Segments))
	for i, s := range e.Segments {
		r := &segmentReader{ctx: ctx, ns: n, segs: []regionstate.Segment{s}, left: s.Size}
		pi, err := mp.UploadPart(ctx, e.StoreKey, uid, i+1, r, s.Size)
		r.Close()
		if err != nil {
			_ = mp.AbortMultipart(context.WithoutCancel(ctx), e.StoreKey, uid)
			return store.ObjectInfo{}, err
		}
		parts = append(parts, pi)
	}
	info, err := mp.CompleteMultipart(ctx, e.StoreKey, uid, parts, store.PutOptions{Metadata: meta})
	if err != nil {
		_ = mp.AbortMultipart(context.WithoutCancel(ctx), e.StoreKey, uid)
		return store.ObjectInfo{}, err
	}
	return info, nil
}

// referenced returns the staged ids the journal and the write-back
// multipart sessions still need.
func (n *Namespace) referenced() map[string]bool {
	st := n.rs.State()
	refs := map[string]bool{}
	for _, e := range st.Journal("", "") {
		for _, s := range e.Segments {
			refs[s.ID] = true
		}
	}
	for _, u := range st.Uploads("", "") {
		if !u.WriteBack {
			continue
		}
		full, _ := st.Upload(u.ID)
		for _, p := range full.Parts {
			if p.Staged != nil {
				refs[p.Staged.ID] = true
			}
		}
	}
	return refs
}

// sweepStaging removes staged files nothing refers to any more, once they
// are older than sweepGrace (a write being staged now is not referenced
// yet; a read may still be using a just-drained copy).
func (n *Namespace) sweepStaging() {
	if n.wb.Staging == nil {
		return
	}
	files, err := n.wb.Staging.List()
	if err != nil {
		n.log.Warn("write-back: listing staging failed", "error", err)
		return
	}
	if len(files) == 0 {
		return
	}
	refs := n.referenced()
	now := time.Now()
	for _, f := range files {
		if !refs[f.ID] && now.Sub(f.ModTime) > sweepGrace && !n.wb.Staging.DrainedWithin(f.ID, sweepGrace) && !n.wb.Staging.Held(f.ID) {
			if err := n.wb.Staging.Remove(f.ID); err != nil {
				n.log.Warn("write-back: removing a drained staged file failed", "id", f.ID, "error", err)
			}
		}
	}
}

// forgetStoreKey drops this node's cached views of a store key.
func (n *Namespace) forgetStoreKey(storeName, key string) {
	n.stats.drop(statKey{storeName, key})
	if n.cache != nil {
		n.cache.Invalidate(storeName, key)
	}
}

// supersede lets the staged copies of a version that was overwritten
// before it drained give way to new writes (they would otherwise hold
// staging for the sweep's grace: a key overwritten every second fills it).
func (n *Namespace) supersede(ids []string) {
	if n.wb.Staging == nil {
		return
	}
	for _, id := range ids {
		n.wb.Staging.MarkSuperseded(id)
	}
}

// OnApply is the Raft apply hook (subscribed with regionstate.Node.Subscribe): it keeps this
// node's caches consistent with writes acknowledged by other nodes and
// wakes the drainer.
func (n *Namespace) OnApply(cmd regionstate.Command) {
	switch c := cmd.(type) {
	case nil:
		n.stats.dropAll()
		n.wakeDrainer()
	case *regionstate.StageObject:
		n.forgetStoreKey(c.Entry.Store, c.Entry.StoreKey)
		n.supersede(c.Superseded)
		n.wakeDrainer()
	case *regionstate.CompleteUpload:
		if c.Stage != nil {
			n.forgetStoreKey(c.Stage.Store, c.Stage.StoreKey)
			n.supersede(c.Superseded)
			n.wakeDrainer()
		}
	case *regionstate.FinishDrain:
		// The store now holds what the journal held; a cached Stat from
		// before the drain must not outlive the entry.
		if b, err := n.Bucket(c.Bucket); err == nil {
			b.invalidate(c.Key)
		}
		if !c.Failed && n.wb.Staging != nil {
			// Keep the staged copies for readers still reading them
			// (sweepGrace), unless a new write needs their room first; a
			// reader that finds one gone continues from the store's copy.
			for _, id := range c.Drained {
				n.wb.Staging.MarkDrained(id)
			}
		}
		n.wakeDrainer()
	case *regionstate.ClaimDrain:
		n.wakeDrainer()
	case *regionstate.SetPin:
		n.repin(c)
	case *regionstate.Touch:
		n.forgetStoreKey(c.Store, c.Key)
	}
}

var _ io.Reader = (*segmentReader)(nil)

// finishTimeout bounds the Raft apply that records a drain's outcome. It
// outlives the drainer's context (a drain that uploaded should say so even
// as the node stops), but not for ever: a follower that forwarded the
// apply waits to apply it itself, and when the leader stops at that moment
// (a region shutting down) the commit may never reach it. The entry is then
// drained again later, which is harmless.
const finishTimeout = 15 * time.Second

func finishCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
}
