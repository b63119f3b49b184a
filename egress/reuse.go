package egress

import (
	"fmt"
	"math"
	"time"
)

// Reuse distances: for every byte a region reads, how long ago the region
// last read the same object. A read row of the ledger may carry them
// (Counts.Reuse): bytes by distance bucket. The simulator records them
// (it sees every object); a gateway records them per node, from a bounded
// table of the objects each node read last (federation/reuse.go,
// docs/egress.md). With them, Advise learns how long a copy of each
// prefix's objects should be kept after a read (LearnKeep); without them it
// weighs whole-prefix copies by monthly averages only.

// ReuseBuckets is the length of Counts.Reuse. Bucket 0 holds first reads
// (the region had not read the object before); bucket 1 re-reads less
// than an hour after the previous read; bucket i (2..14) re-reads
// 2^(i-2) to 2^(i-1) hours after it; bucket 15 re-reads 8192 hours
// (almost a year) or more after it.
const ReuseBuckets = 16

// ReuseBucket returns the bucket of Counts.Reuse for a read that follows
// the region's previous read of the object by d (first: there was none).
func ReuseBucket(d time.Duration, first bool) int {
	if first {
		return 0
	}
	h := d.Hours()
	if h < 1 {
		return 1
	}
	i := 2 + int(math.Floor(math.Log2(h)))
	if i > ReuseBuckets-1 {
		return ReuseBuckets - 1
	}
	// Guard against Log2 rounding at exact powers of two.
	for i > 2 && h < reuseLo(i) {
		i--
	}
	for i < ReuseBuckets-1 && h >= reuseLo(i+1) {
		i++
	}
	return i
}

// reuseLo and reuseHi bound bucket i (1..15) in hours; reuseHi of the last
// is +Inf. reuseTab holds them, and reuseMid, for the loops.
// reuseBucket is one reuse-distance bucket's bounds and middle, in hours.
type reuseBucket struct{ lo, hi, mid float64 }

var reuseTab = func() (t [ReuseBuckets]reuseBucket) {
	for i := range t {
		t[i].lo, t[i].hi, t[i].mid = reuseLo(i), reuseHi(i), reuseMid(i)
	}
	return t
}()

func reuseLo(i int) float64 {
	if i <= 1 {
		return 0
	}
	return math.Ldexp(1, i-2)
}

func reuseHi(i int) float64 {
	if i >= ReuseBuckets-1 {
		return math.Inf(1)
	}
	return math.Ldexp(1, i-1)
}

// reuseMid is the distance a re-read of bucket i is taken to have come
// after, for the cost of holding a copy through it.
func reuseMid(i int) float64 {
	if i >= ReuseBuckets-1 {
		return reuseLo(i) * 1.5
	}
	return (reuseLo(i) + reuseHi(i)) / 2
}

// MinKeepHistory is the least evidence age, in hours, LearnKeep uses
// (when the break-even time is shorter than that; see keepEvidence).
const MinKeepHistory = 24

// KeepEvidenceHours is how long LearnKeep watches a read before it counts
// "not read again" as evidence: a keep shorter than the break-even time
// (T_even) is judged only on reads at least min(T_even, KeepEvidenceHours)
// old, against T_even on the same reads, and adopted only when it cost no
// more than T_even there. Until the history is that long, copies are kept
// for T_even. Eight days: a weekly job's re-reads are seen before its
// copies could be dropped.
const KeepEvidenceHours = 192

// keepEvidence is the age a read must have before LearnKeep judges
// shorter keeps on it.
func keepEvidence(tEven float64) float64 {
	return max(min(tEven, KeepEvidenceHours), MinKeepHistory)
}

// Keep is how long a copy of an object in the reading region should be
// kept after each read of it.
type Keep struct {
	// Hours: 0 means do not keep a copy; +Inf for ever.
	Hours float64
	// Learned: from the ledger's reuse distances. Otherwise Hours is the
	// break-even time, the default until there is history enough.
	Learned bool
	// Scope: "prefix" (the prefix's own reads), "bucket" (the reads of
	// every prefix of the bucket into the region: a prefix with too little
	// history of its own) or "default".
	Scope string
	// BreakEvenHours is SkyStore's T_even for the path: what fetching a
	// byte again costs over what keeping it costs per hour. Keeping a copy
	// longer than this between two reads never pays.
	BreakEvenHours float64
	// Basis says what the choice rests on, in words.
	Basis string
}

// reuseSeries is a group's reuse distances by hour.
type reuseSeries map[int64]*[ReuseBuckets]int64

func (s reuseSeries) add(hour int64, reuse []int64) {
	h := s[hour]
	if h == nil {
		h = new([ReuseBuckets]int64)
		s[hour] = h
	}
	for i, n := range reuse {
		if i < ReuseBuckets {
			h[i] += n
		}
	}
}

// LearnKeep chooses how long to keep copies, from reuse distances by hour
// (hours before now; now is the end of the window, exclusive) with rate
// the USD per byte of a fetch and storage the USD per byte-hour of a copy.
//
// It keeps copies for the break-even time T_even (ski rental: at most twice
// the offline optimum) unless the history shows a shorter keep costs no
// more. Evidence first: with less than E+1 hours of history, E =
// keepEvidence(T_even) (min(T_even, KeepEvidenceHours), at least
// MinKeepHistory), it returns ok false and the caller keeps T_even. Else,
// on the reads at least E old, it prices per byte read what keeping copies
// K hours after every read would have cost, for K = 0 and each bucket bound
// up to E: re-reads within K cost holding the copy until them, reads not
// re-read within K cost holding it K hours, re-reads after more than K cost
// a fetch; T_even is priced on the same reads (a read not re-read within E
// held its copy E hours at least). The cheapest K (the shorter on a tie)
// is adopted only if it cost no more than T_even; when it is the longest K
// judged, keeping longer kept paying and T_even is kept. Re-reads between
// E and T_even after the read before also keep T_even.
func LearnKeep(series map[int64]*[ReuseBuckets]int64, now int64, rate, storage float64) (keep Keep, ok bool) {
	oldest, any := int64(math.MaxInt64), false
	for h := range series {
		if h < now {
			oldest, any = min(oldest, h), true
		}
	}
	if !any {
		return Keep{}, false
	}
	tEven := breakEvenHours(rate, storage)
	keep = Keep{BreakEvenHours: tEven}
	ev := keepEvidence(tEven)
	span := float64(now - oldest)
	if span < ev+1 {
		return keep, false
	}
	keep.Learned = true
	if tEven == 0 {
		keep.Basis = "fetching again is free"
		return keep, true
	}
	t := newKeepTally(now, oldest, tEven, ev)
	for h, hist := range series {
		if h < now {
			t.addHour(h, hist)
		}
	}
	return t.decide(keep, span, rate, storage)
}

// breakEvenHours is T_even: how long holding a copy costs what fetching it
// again does (0 when fetching is free, +Inf when holding is).
func breakEvenHours(rate, storage float64) float64 {
	if rate <= 0 {
		return 0
	}
	if storage <= 0 {
		return math.Inf(1)
	}
	return rate / storage
}

// keepCand is one keep time LearnKeep judges, with what the reads weighed
// would have cost under it.
type keepCand struct {
	k              float64
	old            float64 // bytes read at least k hours before now
	within, holdBH float64 // re-read within k: bytes, byte-hours held
	refetch        float64 // bytes re-read after more than k
}

// cost is the candidate's cost per byte read: storage of what was held
// (a re-read copy for its gap, any other for k hours) plus fetching again
// what was re-read later.
func (c *keepCand) cost(rate, storage float64) float64 {
	if c.old <= 0 {
		return math.Inf(1)
	}
	return (storage*(c.holdBH+max(c.old-c.within, 0)*c.k) + rate*c.refetch) / c.old
}

// keepTally weighs a reuse series for LearnKeep: the candidate keeps up
// to min(T_even, the evidence window ev), and T_even itself on the same
// reads.
type keepTally struct {
	now, oldest    int64
	tEven, ev      float64
	cands          []*keepCand
	te             *keepCand
	total, rereads float64
	long           float64 // re-read later than the evidence reaches
}

func newKeepTally(now, oldest int64, tEven, ev float64) *keepTally {
	t := &keepTally{now: now, oldest: oldest, tEven: tEven, ev: ev, cands: []*keepCand{{k: 0}},
		// T_even itself, judged on the same reads: a read not re-read
		// within ev held a copy ev hours at least.
		te: &keepCand{k: ev}}
	for i := 1; i < ReuseBuckets-1; i++ {
		if k := reuseHi(i); k <= tEven && k <= ev {
			t.cands = append(t.cands, &keepCand{k: k})
		}
	}
	return t
}

// addHour weighs the reads of hour h (before now) and their reuse
// distances.
func (t *keepTally) addHour(h int64, hist *[ReuseBuckets]int64) {
	var demand float64
	for _, n := range hist {
		demand += float64(n)
	}
	t.total += demand
	age := float64(t.now - h - 1) // full hours since the end of hour h
	if age >= t.ev {
		for _, c := range t.cands {
			c.old += demand
		}
		t.te.old += demand
	}
	for i := 1; i < ReuseBuckets; i++ {
		if n := float64(hist[i]); n != 0 {
			t.addReread(h, &reuseTab[i], n)
		}
	}
}

// addReread weighs n bytes read in hour h whose previous read was a
// distance of bucket b before.
func (t *keepTally) addReread(h int64, b *reuseBucket, n float64) {
	t.rereads += n
	if b.lo >= t.ev && b.lo < t.tEven {
		t.long += n // re-read later than the evidence reaches
	}
	// When the previous read was: the middle of the bucket, or the
	// window's start when the bucket reaches into the window only in part.
	prev := float64(h) + 0.5 - b.mid
	if float64(h)-b.lo >= float64(t.oldest) {
		prev = max(prev, float64(t.oldest))
	}
	// Weighed with the reads at least ev old when the previous read may
	// have been one of them (the bucket is wide).
	if prev < float64(t.oldest) || float64(t.now)-(float64(h)+1-b.hi) < t.ev {
		return // not among the reads weighed
	}
	for _, c := range t.cands {
		c.addReread(b, n, c.k)
	}
	t.te.addReread(b, n, t.tEven)
}

// addReread counts n bytes re-read at a distance in bucket b as held by a
// keep of k hours, or fetched again.
func (c *keepCand) addReread(b *reuseBucket, n, k float64) {
	switch {
	case b.hi <= k:
		c.within += n
		c.holdBH += n * b.mid
	case b.lo >= k:
		c.refetch += n
	}
}

// decide picks the keep: the cheapest candidate on the reads weighed,
// unless T_even cost no more on the same reads or some re-reads came later
// than the evidence reaches (then T_even).
func (t *keepTally) decide(keep Keep, span, rate, storage float64) (Keep, bool) {
	best, bestCost := -1, math.Inf(1)
	for i, c := range t.cands {
		if c.old <= 0 {
			continue
		}
		if cost := c.cost(rate, storage); cost < bestCost*(1-1e-9) {
			best, bestCost = i, cost
		}
	}
	if best < 0 {
		keep.Learned = false
		return keep, false
	}
	c := t.cands[best]
	reuse := fmt.Sprintf("%.0f%% of %s read in %.0f h were re-reads", 100*t.rereads/max(t.total, 1), HumanBytes(int64(t.total)), span)
	switch {
	case t.long > 0:
		keep.Hours = t.tEven
		keep.Basis = fmt.Sprintf("%s, some %.0f h or more after the read before: keep copies for the break-even time", reuse, t.ev)
	case bestCost > t.te.cost(rate, storage)*(1+1e-9):
		keep.Hours = t.tEven
		keep.Basis = fmt.Sprintf("%s; on the reads %.0f h old or more no shorter keep cost less than the break-even time", reuse, t.ev)
	case c.k == 0:
		keep.Basis = reuse + "; keeping copies would have cost more than fetching again"
	case best == len(t.cands)-1 && c.k < t.tEven:
		keep.Hours = t.tEven
		keep.Basis = fmt.Sprintf("%s; keeping copies longer kept paying as far as the history reaches (%.0f h): keep them for the break-even time", reuse, c.k)
	default:
		keep.Hours = c.k
		keep.Basis = fmt.Sprintf("%s; keeping copies %.0f h after a read was the cheapest choice", reuse, c.k)
	}
	return keep, true
}
