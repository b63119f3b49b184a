package federation

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/store"
)

// Reuse distances (docs/egress.md): for each object a client reads through
// this node from a store in another location than the region's, how long
// before this node had last read the same object version. The recorder
// counts the read's bytes under that distance's bucket (egress.ReuseBucket)
// on the ledger row of the read, so `fedgate egress advise` learns how long
// copies should be kept (egress.LearnKeep).
//
// The tracker remembers last-read times in a fixed number of entries: a
// set-associative table (reuseWays entries per set) of 64-bit hashes of
// (bucket, key, validator), the least recently read entry of a full set
// giving way. An object whose entry was evicted, or that another node read
// last, counts as a first read: the tracker never invents a re-read.

// DefaultReuseObjects is the default capacity of the reuse tracker, in
// objects (16 bytes each: 16 MiB).
const DefaultReuseObjects = 1 << 20

const (
	reuseWays      = 8  // entries per set
	reuseMaxShards = 64 // locks (and lazily allocated parts) of the table
)

// reuseEntry is one object version's last read: h its hash (0: empty), at
// the read's time in Unix nanoseconds.
type reuseEntry struct {
	h  uint64
	at int64
}

type reuseSet [reuseWays]reuseEntry

type reuseShard struct {
	mu   sync.Mutex
	sets []reuseSet // allocated on first use
	n    int        // entries in use
}

// reuseTracker remembers when this node last read each object version, in
// a bounded table. Safe for concurrent use.
type reuseTracker struct {
	seed   maphash.Seed
	shards []reuseShard
	sets   uint64 // per shard

	evictions prometheus.Counter
	horizon   prometheus.Gauge
	objects   prometheus.GaugeFunc
}

// newReuseTracker returns a tracker of at least capacity entries (rounded
// up to whole sets), or nil when capacity <= 0.
func newReuseTracker(capacity int) *reuseTracker {
	if capacity <= 0 {
		return nil
	}
	sets := (capacity + reuseWays - 1) / reuseWays
	shards := min(sets, reuseMaxShards)
	t := &reuseTracker{seed: maphash.MakeSeed(), shards: make([]reuseShard, shards), sets: uint64((sets + shards - 1) / shards),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "fedgate_egress_reuse_evictions_total",
			Help: "Objects the reuse-distance tracker forgot to make room (their next read counts as a first read)."}),
		horizon: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fedgate_egress_reuse_horizon_seconds",
			Help: "How long before its eviction the reuse-distance tracker's last evicted object had been read: re-reads further apart than about this count as first reads."}),
	}
	t.objects = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedgate_egress_reuse_objects",
		Help: "Objects whose last read the reuse-distance tracker remembers (at most --egress-reuse-objects)."},
		func() float64 { return float64(t.len()) })
	return t
}

// capacity is the number of entries the tracker holds at most.
func (t *reuseTracker) capacity() int { return len(t.shards) * int(t.sets) * reuseWays }

// len is the number of entries in use.
func (t *reuseTracker) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

func (t *reuseTracker) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.evictions, t.horizon, t.objects}
}

// hash names an object version: bucket, key and the store's validator
// (a new version of a key is a new object: a copy of the old one would not
// serve it).
func (t *reuseTracker) hash(bucket, key string, v store.Validator) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(bucket)
	h.WriteByte(0)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(string(v))
	return h.Sum64()
}

// read records a read of the object version at now and returns its
// bucket of egress.Counts.Reuse: 0 when the tracker does not remember a
// previous read, else by the time since it.
func (t *reuseTracker) read(bucket, key string, v store.Validator, now time.Time) int {
	return t.readHash(t.hash(bucket, key, v), now.UnixNano())
}

func (t *reuseTracker) readHash(h uint64, now int64) int {
	if h == 0 {
		h = 1 // 0 marks an empty entry
	}
	n := uint64(len(t.shards))
	s := &t.shards[h%n]
	idx := (h / n) % t.sets
	s.mu.Lock()
	if s.sets == nil {
		s.sets = make([]reuseSet, t.sets)
	}
	set := &s.sets[idx]
	victim := -1
	for i := range set {
		e := &set[i]
		if e.h == h {
			d := max(now-e.at, 0)
			e.at = max(e.at, now)
			s.mu.Unlock()
			return egress.ReuseBucket(time.Duration(d), false)
		}
		switch {
		case e.h == 0:
			if victim < 0 || set[victim].h != 0 {
				victim = i
			}
		case victim < 0 || set[victim].h != 0 && e.at < set[victim].at:
			victim = i
		}
	}
	e := &set[victim]
	evicted, age := e.h != 0, now-e.at
	if !evicted {
		s.n++
	}
	*e = reuseEntry{h: h, at: now}
	s.mu.Unlock()
	if evicted {
		t.evictions.Inc()
		t.horizon.Set(time.Duration(max(age, 0)).Seconds())
	}
	return 0
}
