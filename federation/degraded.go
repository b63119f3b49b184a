package federation

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/store"
)

// Degraded data made visible (issue: a wiped store under an erasure or
// replicate bucket was invisible until someone ran repair). The placements
// report each read that had to reconstruct or fall back because a member
// lacked its copy or shards; the namespace counts them per bucket and
// store (fedgate_degraded_reads_total), logs a rate-limited WARN, and keeps
// the objects read degraded lately for `cluster status`, the console and
// `repair --dry-run` to list. A periodic health check of every store says
// which are reachable (fedgate_store_up).

const (
	// degradedKeep is how many objects read degraded the node remembers.
	degradedKeep = 256
	// degradedWarnEvery rate-limits the WARN per bucket and store.
	degradedWarnEvery = time.Minute
	// StoreCheckInterval is how often each store's health is checked.
	StoreCheckInterval = 30 * time.Second
	// storeCheckTimeout bounds one check.
	storeCheckTimeout = 10 * time.Second
	// healthProbeKey is the key a health check asks for; it need not exist
	// (an answer of "not found" is a healthy store). '_' cannot start a
	// bucket name, so it is outside every bucket's keys; it is not under
	// ".fedgate/", which the GCS and Azure stores keep for themselves.
	healthProbeKey = "_fedgate/health-probe"
	// storeMarkerKey is a small object the health check keeps in each
	// member store of a replicate or erasure placement (outside every
	// bucket's keys, as healthProbeKey): when it vanishes, the store was
	// wiped or replaced, even if no read has touched its missing copies
	// or shards yet.
	storeMarkerKey = "_fedgate/store-marker"
)

type degradedTracker struct {
	reads   *prometheus.CounterVec
	up      *prometheus.GaugeVec
	latency *prometheus.GaugeVec
	swept   *prometheus.GaugeVec

	mu       sync.Mutex
	buckets  map[[2]string]*backend.DegradedBucket
	objects  []backend.DegradedObject // newest last
	lastWarn map[[2]string]time.Time
	health   map[string]backend.StoreHealth
	// marked: stores whose marker this node has seen; wiped: when a
	// marked store lost it (until a repair of a bucket on it succeeds).
	marked map[string]bool
	wiped  map[string]time.Time
}

func newDegradedTracker() *degradedTracker {
	return &degradedTracker{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedgate_degraded_reads_total",
			Help: "Reads served by erasure reconstruction or from a fallback copy because the named member store lacked its copy or shards, or failed (repair rebuilds them)."},
			[]string{"bucket", "store"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fedgate_store_up",
			Help: "1 when the store answered its last periodic health check, 0 when not."}, []string{"store", "location"}),
		latency: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fedgate_store_check_seconds",
			Help: "Round trip of the store's last health check."}, []string{"store"}),
		swept: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fedgate_store_staging_swept_files",
			Help: "Abandoned staging files (of writes whose process died) a posix store removed since this node opened it."}, []string{"store"}),
		buckets:  map[[2]string]*backend.DegradedBucket{},
		lastWarn: map[[2]string]time.Time{},
		health:   map[string]backend.StoreHealth{},
		marked:   map[string]bool{},
		wiped:    map[string]time.Time{},
	}
}

// degradedRead is the placements' hook: a read of key had to do without
// the named member stores. The bucket comes from the read's egress tag.
func (n *Namespace) degradedRead(ctx context.Context, key string, missing []string) {
	t := egressTagOf(ctx)
	bucket, okey := t.bucket, t.key
	if bucket == "" {
		bucket = "(unknown)"
	}
	if okey == "" {
		okey = key
	}
	now := n.now()
	d := n.degraded
	var warn []string
	d.mu.Lock()
	for _, s := range missing {
		d.reads.WithLabelValues(bucket, s).Inc()
		k := [2]string{bucket, s}
		b := d.buckets[k]
		if b == nil {
			b = &backend.DegradedBucket{Bucket: bucket, Store: s}
			d.buckets[k] = b
		}
		b.Reads++
		b.Last = now
		if now.Sub(d.lastWarn[k]) >= degradedWarnEvery {
			d.lastWarn[k] = now
			warn = append(warn, s)
		}
	}
	d.objects = slices.DeleteFunc(d.objects, func(o backend.DegradedObject) bool { return o.Bucket == bucket && o.Key == okey })
	d.objects = append(d.objects, backend.DegradedObject{Bucket: bucket, Key: okey, Stores: slices.Clone(missing), Seen: now})
	if len(d.objects) > degradedKeep {
		d.objects = slices.Delete(d.objects, 0, len(d.objects)-degradedKeep)
	}
	d.mu.Unlock()
	for _, s := range warn {
		n.log.Warn("degraded read: a member store lacks this object's copy or shards; the read was served from the others (run `fedgate repair` to rebuild them)",
			"bucket", bucket, "key", okey, "store", s, "next_warning_in", degradedWarnEvery.String())
	}
}

// Degraded reports the store checks and the degraded reads this node saw.
func (n *Namespace) Degraded(context.Context) (backend.Degraded, error) {
	d := n.degraded
	d.mu.Lock()
	defer d.mu.Unlock()
	var out backend.Degraded
	for _, h := range d.health {
		out.Stores = append(out.Stores, h)
	}
	slices.SortFunc(out.Stores, func(a, b backend.StoreHealth) int { return cmp.Compare(a.Store, b.Store) })
	for _, b := range d.buckets {
		out.Buckets = append(out.Buckets, *b)
	}
	slices.SortFunc(out.Buckets, func(a, b backend.DegradedBucket) int {
		return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Store, b.Store))
	})
	for i := len(d.objects) - 1; i >= 0; i-- {
		o := d.objects[i]
		o.Stores = slices.Clone(o.Stores)
		out.Objects = append(out.Objects, o)
	}
	return out, nil
}

// baseStores are the view's stores that are not composite placements,
// by name.
func (v *nsView) baseStores() map[string]store.Store {
	out := map[string]store.Store{}
	for name, st := range v.stores {
		if _, composite := st.(Repairer); !composite {
			out[name] = st
		}
	}
	return out
}

// CheckStores checks every store of the policy in force once: its own
// check (store.Checker) where it has one, else a Stat of a probe key that
// need not exist, answered (found or not) within storeCheckTimeout.
func (n *Namespace) CheckStores(ctx context.Context) {
	v := n.v()
	stores := v.baseStores()
	members := v.placementMembers()
	names := slices.Sorted(maps.Keys(stores))
	res := make([]backend.StoreHealth, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			st := stores[name]
			cctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
			defer cancel()
			start := time.Now()
			var err error
			if c, ok := st.(store.Checker); ok {
				err = c.Check(cctx)
			} else if _, err = st.Stat(cctx, healthProbeKey); errors.Is(err, store.ErrNotFound) {
				err = nil
			}
			h := backend.StoreHealth{Store: name, Kind: st.Location().Cloud, Checked: n.now(), Latency: time.Since(start), Healthy: true}
			if err == nil && members[name] {
				err = n.checkMarker(cctx, name, st)
			}
			if err != nil {
				h.Healthy, h.Error = false, err.Error()
			}
			res[i] = h
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	d := n.degraded
	d.mu.Lock()
	prev := d.health
	d.health = map[string]backend.StoreHealth{}
	for i, h := range res {
		d.health[h.Store] = h
		loc := stores[names[i]].Location().String()
		up := 0.0
		if h.Healthy {
			up = 1
		}
		d.up.WithLabelValues(h.Store, loc).Set(up)
		d.latency.WithLabelValues(h.Store).Set(h.Latency.Seconds())
		if sw, ok := stores[names[i]].(interface{ Swept() (int64, int64) }); ok {
			files, _ := sw.Swept()
			d.swept.WithLabelValues(h.Store).Set(float64(files))
		}
	}
	for name := range prev {
		if _, ok := d.health[name]; !ok { // gone with a policy change
			d.up.DeletePartialMatch(prometheus.Labels{"store": name})
			d.latency.DeleteLabelValues(name)
			d.swept.DeleteLabelValues(name)
		}
	}
	d.mu.Unlock()
	for _, h := range res {
		p, seen := prev[h.Store]
		switch {
		case !h.Healthy && (!seen || p.Healthy):
			n.log.Warn("store health check failed", "store", h.Store, "error", h.Error)
		case h.Healthy && seen && !p.Healthy:
			n.log.Info("store healthy again", "store", h.Store)
		}
	}
}

// CheckStoresEvery runs CheckStores now and then every interval until ctx
// ends.
func (n *Namespace) CheckStoresEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n.CheckStores(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// placementMembers names the stores that are members of a replicate or
// erasure placement in the view.
func (v *nsView) placementMembers() map[string]bool {
	out := map[string]bool{}
	for _, st := range v.stores {
		if c, ok := st.(interface{ Stores() []store.Store }); ok {
			for _, m := range c.Stores() {
				out[m.Name()] = true
			}
		}
	}
	return out
}

// checkMarker keeps the store's marker: written when missing, and a store
// that loses the marker this node saw is reported wiped until a repair of
// a bucket on it succeeds (clearWiped). A store the marker cannot be
// written to (read-only credentials) is checked without it.
func (n *Namespace) checkMarker(ctx context.Context, name string, st store.Store) error {
	d := n.degraded
	_, err := st.Stat(ctx, storeMarkerKey)
	switch {
	case errors.Is(err, store.ErrInvalidKey) || errors.Is(err, store.ErrAccessDenied):
		return nil // the store cannot keep the marker: checked without it
	case err == nil:
		d.mu.Lock()
		d.marked[name] = true
		d.mu.Unlock()
	case errors.Is(err, store.ErrNotFound):
		d.mu.Lock()
		lost := d.marked[name]
		if lost {
			if _, ok := d.wiped[name]; !ok {
				d.wiped[name] = n.now()
			}
		}
		d.mu.Unlock()
		if lost {
			n.log.Warn("store wiped or replaced: its fedgate marker is gone; the replicated and erasure-coded objects on it lack their copies or shards until `fedgate repair` rebuilds them",
				"store", name)
		}
		body := []byte(`{"store":"` + name + `","written":"` + n.now().UTC().Format(time.RFC3339) + `"}`)
		_, perr := st.Put(ctx, storeMarkerKey, bytes.NewReader(body), int64(len(body)), store.PutOptions{IfNoneMatch: true,
			Metadata: store.Metadata{ContentType: "application/json"}})
		if perr == nil || errors.Is(perr, store.ErrPreconditionFailed) {
			d.mu.Lock()
			d.marked[name] = true
			d.mu.Unlock()
		}
	default:
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if at, ok := d.wiped[name]; ok {
		return fmt.Errorf("the store was wiped or replaced (its fedgate marker vanished by %s): its replicated and erasure-coded objects lack their copies or shards; run `fedgate repair BUCKET` for each bucket on it",
			at.UTC().Format(time.RFC3339))
	}
	return nil
}

// clearWiped forgets that the stores were wiped (a repair rebuilt them).
func (n *Namespace) clearWiped(stores []store.Store) {
	d := n.degraded
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range stores {
		delete(d.wiped, st.Name())
		if h, ok := d.health[st.Name()]; ok && !h.Healthy && strings.Contains(h.Error, "wiped") {
			h.Healthy, h.Error = true, ""
			d.health[st.Name()] = h
			d.up.WithLabelValues(st.Name(), st.Location().String()).Set(1)
		}
	}
}

func (d *degradedTracker) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.reads, d.up, d.latency, d.swept}
}
