package cachetier

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pinPrefix pins the keys under prefix, in any group, while on is set.
func pinPrefix(prefix string, on *atomic.Bool) PinFunc {
	return func(_, _, key string) bool { return on.Load() && strings.HasPrefix(key, prefix) }
}

// A pinned object's chunks survive pressure that evicts unpinned ones;
// unpinned (Repin with the predicate false) they are evictable again.
func TestPinnedChunksSurvivePressure(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 4 * testChunk
	c := openCache(t, cfg)
	var on atomic.Bool
	on.Store(true)
	c.SetPins(pinPrefix("pinned/", &on))
	p, u := newOrigin(2*testChunk, 100), newOrigin(8*testChunk, 101)
	pid, uid := p.id("p"), u.id("u")
	pid.Key, uid.Key = "pinned/model.safetensors", "scratch/shard.tar"

	sameBytes(t, "pinned object", readRange(t, c, p, pid, 0, -1, ReadOptions{}), p.data)
	settle(t, c)
	if s := c.Stats(); s.PinnedBytes != 2*testChunk || s.Groups[""].Pinned != 2*testChunk {
		t.Fatalf("stats %+v", s)
	}
	// Twice through an object four times the room the pins leave.
	for range 2 {
		sameBytes(t, "unpinned object", readRange(t, c, u, uid, 0, -1, ReadOptions{}), u.data)
		settle(t, c)
		checkLimits(t, c)
	}
	s := c.Stats()
	if s.Evictions == 0 || s.Used != 4*testChunk || s.Chunks != 4 || s.PinnedBytes != 2*testChunk {
		t.Fatalf("under pressure: %+v", s)
	}
	for idx := range int64(2) {
		expectFetch(t, c, p, pid, idx, ReadOptions{}, false)
	}
	// Two chunks of u fit beside the pins. (Which two depends on the order
	// the reader's fills finish in: under load the last pass's chunk 0
	// has outlived chunk 6; asserting "6 and 7" failed about one run in
	// ten.)
	var kept []int64
	for idx := range int64(8) {
		if cached(c, uid, idx) {
			kept = append(kept, idx)
		}
	}
	if len(kept) != 2 {
		t.Fatalf("chunks %v of the unpinned object cached beside the pins; want 2", kept)
	}

	// Unpinned, the pinned object's chunks are evictable in LRU order.
	on.Store(false)
	c.Repin()
	if s := c.Stats(); s.PinnedBytes != 0 || s.Chunks != 4 {
		t.Fatalf("after unpinning: %+v", s)
	}
	// Four chunks of u not cached: they evict the four least recently
	// used, the formerly pinned ones among them.
	for idx, n := int64(0), 0; n < 4; idx++ {
		if !slices.Contains(kept, idx) {
			expectFetch(t, c, u, uid, idx, ReadOptions{}, true)
			n++
		}
	}
	for idx := range int64(2) {
		if cached(c, pid, idx) {
			t.Fatalf("unpinned chunk %d survived", idx)
		}
	}
	expectFetch(t, c, p, pid, 0, ReadOptions{}, true)
}

// Unpinned chunks go back into the LRU order where their last access puts
// them, not at either end.
func TestUnpinKeepsRecency(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 4 * testChunk
	clock := time.Unix(1_700_000_000, 0)
	cfg.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	c := openCache(t, cfg)
	var on atomic.Bool
	on.Store(true)
	c.SetPins(pinPrefix("pinned/", &on))
	p, u := newOrigin(testChunk, 102), newOrigin(8*testChunk, 103)
	pid, uid := p.id("p"), u.id("u")
	pid.Key = "pinned/x"
	expectFetch(t, c, u, uid, 0, ReadOptions{}, true)
	expectFetch(t, c, u, uid, 1, ReadOptions{}, true)
	expectFetch(t, c, p, pid, 0, ReadOptions{}, true)
	expectFetch(t, c, u, uid, 2, ReadOptions{}, true) // LRU: u0, u1, p0, u2
	on.Store(false)
	c.Repin()
	expectFetch(t, c, u, uid, 3, ReadOptions{}, true) // evicts u0
	expectFetch(t, c, u, uid, 4, ReadOptions{}, true) // evicts u1
	if !cached(c, pid, 0) || cached(c, uid, 0) || cached(c, uid, 1) {
		t.Fatal("eviction did not follow the LRU order")
	}
	expectFetch(t, c, u, uid, 5, ReadOptions{}, true) // evicts p0
	if cached(c, pid, 0) || !cached(c, uid, 2) {
		t.Fatal("the unpinned chunk was not next")
	}
}

// Pinned chunks count against their group's quota; when they fill it, the
// group's reads still succeed, uncached, and the pins stay.
func TestPinsFillGroupQuota(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	c.SetPins(func(group, _, _ string) bool { return group == "models" })
	o := newOrigin(4*testChunk, 104)
	id := o.id("v")
	models := ReadOptions{Group: "models", GroupQuota: 2 * testChunk}
	expectFetch(t, c, o, id, 0, models, true)
	expectFetch(t, c, o, id, 1, models, true)
	if g := c.Stats().Groups["models"]; g.Used != 2*testChunk || g.Pinned != 2*testChunk {
		t.Fatalf("group %+v", g)
	}
	expectFetch(t, c, o, id, 2, models, true)
	expectFetch(t, c, o, id, 2, models, true) // not kept: no room beside the pins
	sameBytes(t, "read over a full quota", readRange(t, c, o, id, 0, -1, models), o.data)
	settle(t, c)
	if err := c.Warm(context.Background(), id, 3, o.fetch, models); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("Warm: %v, want ErrNoRoom", err)
	}
	expectFetch(t, c, o, id, 0, models, false)
	expectFetch(t, c, o, id, 1, models, false)
	if s := c.Stats(); s.Chunks != 2 || s.PinnedBytes != 2*testChunk || s.Groups["models"].Used != 2*testChunk {
		t.Fatalf("stats %+v", s)
	}
	// Another group is not held back by them.
	expectFetch(t, c, o, id, 2, ReadOptions{Group: "other"}, true)
	expectFetch(t, c, o, id, 2, ReadOptions{Group: "other"}, false)
	// Invalidate drops pinned chunks too: their object changed.
	if n := c.Invalidate(id.Store, id.Key); n != 3 {
		t.Fatalf("Invalidate dropped %d chunks", n)
	}
	if s := c.Stats(); s.PinnedBytes != 0 || s.Used != 0 {
		t.Fatalf("after Invalidate: %+v", s)
	}
}

// A node pins only the chunks it owns: a pinned object is pinned across
// the region, each owner its part; a new ring moves the pins.
func TestPinsFollowOwnership(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	a := r.nodes["a"]
	o := newOrigin(8*testChunk, 105)
	id := r.object(o, "v")
	mine := ownedBy(a, id, "a")
	for _, n := range r.nodes {
		n.SetPins(func(string, string, string) bool { return true })
	}
	for idx := range int64(8) {
		chunkOK(t, a, o, id, idx, ReadOptions{Local: true}) // everything cached on a
	}
	if s := a.Stats(); s.Chunks != 8 || s.PinnedBytes != int64(len(mine))*testChunk {
		t.Fatalf("a: %+v; owns %d chunks", s, len(mine))
	}
	a.SetMembers([]string{"a"})
	if s := a.Stats(); s.PinnedBytes != 8*testChunk {
		t.Fatalf("a alone: %+v", s)
	}
	a.SetMembers([]string{"a", "b"})
	if s := a.Stats(); s.PinnedBytes != int64(len(mine))*testChunk {
		t.Fatalf("a, b again: %+v", s)
	}
	a.SetPins(nil)
	if s := a.Stats(); s.PinnedBytes != 0 || s.Chunks != 8 {
		t.Fatalf("no pins: %+v", s)
	}
}

// Pins are not persisted: after a restart nothing is pinned until SetPins.
func TestPinsAfterRestart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	c.SetPins(func(string, string, string) bool { return true })
	o := newOrigin(2*testChunk, 106)
	readRange(t, c, o, o.id("v"), 0, -1, ReadOptions{})
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, cfg)
	if s := c2.Stats(); s.PinnedBytes != 0 || s.Chunks != 2 {
		t.Fatalf("after restart: %+v", s)
	}
	c2.SetPins(func(string, string, string) bool { return true })
	if s := c2.Stats(); s.PinnedBytes != 2*testChunk {
		t.Fatalf("after SetPins: %+v", s)
	}
	if err := c2.Close(); err != nil { // last-access times of pinned chunks are written too
		t.Fatal(err)
	}
}
