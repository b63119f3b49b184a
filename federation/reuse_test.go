package federation

import (
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fedgate/fedgate/store"
)

var reuseT0 = time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)

func metricValue(t *testing.T, m interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatal("not a counter or gauge")
	return 0
}

// The tracker returns the bucket of the time since the previous read of the
// same object version by this tracker; a first read, another version, or
// the same key in another bucket is bucket 0.
func TestReuseTrackerDistances(t *testing.T) {
	tr := newReuseTracker(1024)
	at := func(d time.Duration) time.Time { return reuseT0.Add(d) }
	steps := []struct {
		bucket, key string
		v           store.Validator
		when        time.Duration
		want        int
	}{
		{"b", "train/a/1", "v1", 0, 0},                                             // first read
		{"b", "train/a/1", "v1", 30 * time.Minute, 1},                              // 30 min later: < 1 h
		{"b", "train/a/1", "v1", 30*time.Minute + 3*time.Hour, 3},                  // 3 h after that: 2-4 h
		{"b", "train/a/1", "v2", 4 * time.Hour, 0},                                 // a new version: first read
		{"b", "train/a/1", "v2", 4*time.Hour + 8192*time.Hour, 15},                 // 8192 h after: the last bucket
		{"other", "train/a/1", "v1", 5 * time.Hour, 0},                             // another bucket
		{"b", "train/a/1", "v1", 30*time.Minute + 3*time.Hour + 90*time.Minute, 2}, // v1 is still remembered: 1-2 h
		{"b", "train/a/1", "v1", 3 * time.Hour, 1},                                 // a clock that went back: distance 0
	}
	for i, s := range steps {
		if got := tr.read(s.bucket, s.key, s.v, at(s.when)); got != s.want {
			t.Errorf("step %d (%s/%s %s at +%v): bucket %d, want %d", i, s.bucket, s.key, s.v, s.when, got, s.want)
		}
	}
	if tr.len() != 3 {
		t.Errorf("%d entries, want 3 (b/v1, b/v2, other/v1)", tr.len())
	}
	if newReuseTracker(0) != nil || newReuseTracker(-1) != nil {
		t.Error("a tracker of no capacity is not nil")
	}
}

// A tracker holds at most its capacity; a full set gives up its least
// recently read entry, which then counts as a first read, and the
// evictions and the horizon (the evicted entry's age) are metered.
func TestReuseTrackerBounded(t *testing.T) {
	tr := newReuseTracker(8) // one set of 8
	if tr.capacity() != 8 {
		t.Fatalf("capacity %d, want 8", tr.capacity())
	}
	key := func(i int) string { return fmt.Sprintf("obj-%d", i) }
	for i := range 8 {
		if got := tr.read("b", key(i), "v", reuseT0.Add(time.Duration(i)*time.Hour)); got != 0 {
			t.Fatalf("first read of %s: bucket %d", key(i), got)
		}
	}
	// obj-0 is read again at +8 h: now obj-1 is the least recently read.
	if got := tr.read("b", key(0), "v", reuseT0.Add(8*time.Hour)); got != 5 {
		t.Fatalf("obj-0 re-read after 8 h: bucket %d, want 5 (8-16 h)", got)
	}
	if metricValue(t, tr.evictions) != 0 || tr.len() != 8 {
		t.Fatalf("before overflowing: %v evictions, %d entries", metricValue(t, tr.evictions), tr.len())
	}
	tr.read("b", key(8), "v", reuseT0.Add(10*time.Hour)) // evicts obj-1 (read at +1 h)
	if ev, h := metricValue(t, tr.evictions), metricValue(t, tr.horizon); ev != 1 || h != (9*time.Hour).Seconds() {
		t.Fatalf("after one eviction: %v evictions, horizon %v s; want 1 and %v", ev, h, (9 * time.Hour).Seconds())
	}
	if tr.len() != 8 {
		t.Fatalf("%d entries, want 8", tr.len())
	}
	// obj-1 is forgotten: a first read (which evicts obj-2); obj-0 and
	// obj-3 are remembered.
	if got := tr.read("b", key(1), "v", reuseT0.Add(11*time.Hour)); got != 0 {
		t.Errorf("evicted obj-1: bucket %d, want 0 (a first read)", got)
	}
	if got := tr.read("b", key(0), "v", reuseT0.Add(12*time.Hour)); got != 4 {
		t.Errorf("obj-0 after 4 h: bucket %d, want 4 (4-8 h)", got)
	}
	if got := tr.read("b", key(3), "v", reuseT0.Add(12*time.Hour)); got != 5 {
		t.Errorf("obj-3 after 9 h: bucket %d, want 5 (8-16 h)", got)
	}
	if got := tr.read("b", key(2), "v", reuseT0.Add(12*time.Hour)); got != 0 {
		t.Errorf("obj-2 (evicted by obj-1's read): bucket %d, want 0", got)
	}

	// A larger tracker: rounded up to whole sets over its shards, and
	// never more entries than that however many objects are read.
	big := newReuseTracker(1000)
	if c := big.capacity(); c < 1000 || c >= 1000+reuseMaxShards*reuseWays {
		t.Fatalf("capacity %d for 1000", c)
	}
	for i := range 20 * big.capacity() {
		big.read("b", key(i), "v", reuseT0.Add(time.Duration(i)*time.Second))
	}
	if n := big.len(); n != big.capacity() {
		t.Errorf("%d entries after reading 20x the capacity, want %d", n, big.capacity())
	}
	if ev := metricValue(t, big.evictions); ev != float64(19*big.capacity()) {
		t.Errorf("%v evictions, want %d", ev, 19*big.capacity())
	}
	// The most recent read of a set is never its victim: the object read
	// last is remembered.
	last := 20*big.capacity() - 1
	if got := big.read("b", key(last), "v", reuseT0.Add(time.Duration(last)*time.Second+2*time.Hour)); got != 3 {
		t.Errorf("the last object read, 2 h later: bucket %d, want 3", got)
	}
}

// Concurrent reads through one tracker (run with -race).
func TestReuseTrackerConcurrent(t *testing.T) {
	tr := newReuseTracker(256)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tr.read("b", fmt.Sprintf("obj-%d", (g*7+i)%512), "v", reuseT0.Add(time.Duration(i)*time.Minute))
			}
		})
	}
	wg.Wait()
	if n := tr.len(); n > tr.capacity() || n == 0 {
		t.Fatalf("%d entries, capacity %d", n, tr.capacity())
	}
}

// BenchmarkReuseTracker is the cost of one read's lookup (hash, lock,
// probe of one set), over more objects than the tracker holds and fewer.
func BenchmarkReuseTracker(b *testing.B) {
	for _, objects := range []int{1 << 10, 1 << 22} {
		b.Run(fmt.Sprintf("objects=%d", objects), func(b *testing.B) {
			tr := newReuseTracker(DefaultReuseObjects)
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = fmt.Sprintf("train/part-%d/shard-%06d.tar", i%8, i)
			}
			b.ReportAllocs()
			now := reuseT0
			for i := 0; b.Loop(); i++ {
				j := i % objects
				tr.read("imagenet", keys[j%len(keys)], store.Validator(keys[(j/len(keys))%len(keys)]), now)
				now = now.Add(time.Millisecond)
			}
		})
	}
}
