package cachetier

import (
	"testing"
)

// Eviction takes the lowest priority first, whatever its recency, and a
// fill evicts only chunks of its own priority or lower: a scan of a
// low-priority bucket never pushes a high-priority one out.
func TestPriorityEvictsLowestFirst(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 4 * testChunk
	c := openCache(t, cfg)
	h, l, n := newOrigin(2*testChunk, 41), newOrigin(8*testChunk, 42), newOrigin(2*testChunk, 43)
	idh, idl, idn := h.id("h"), l.id("l"), n.id("n")
	idh.Key, idl.Key, idn.Key = "high", "low", "normal"
	high := ReadOptions{Group: "train", GroupPriority: PriorityHigh, ReadAhead: -1}
	low := ReadOptions{Group: "notebooks", GroupPriority: PriorityLow, ReadAhead: -1}
	normal := ReadOptions{Group: "other", ReadAhead: -1}

	expectFetch(t, c, h, idh, 0, high, true)
	expectFetch(t, c, h, idh, 1, high, true)
	expectFetch(t, c, l, idl, 0, low, true)
	expectFetch(t, c, l, idl, 1, low, true) // full: h0 h1 l0 l1, h0 least recent
	expectFetch(t, c, n, idn, 0, normal, true)
	if cached(c, idl, 0) || !cached(c, idl, 1) || !cached(c, idh, 0) {
		t.Fatalf("a normal fill should evict the low group's LRU chunk (l0), not the older high one")
	}
	// A scan of the low bucket recycles its own chunks only.
	for idx := int64(2); idx < 8; idx++ {
		expectFetch(t, c, l, idl, idx, low, true)
	}
	if !cached(c, idh, 0) || !cached(c, idh, 1) || !cached(c, idn, 0) {
		t.Fatal("a low-priority scan evicted a higher-priority chunk")
	}
	// Low chunks gone, the rest full of higher classes: a normal fill may
	// evict only normal and low, so after its own group's one chunk...
	expectFetch(t, c, n, idn, 1, normal, true) // evicts the last low chunk
	if !cached(c, idn, 1) || !cached(c, idh, 0) {
		t.Fatal("normal fill: want it cached and the high chunks kept")
	}
	// ...a low fill now finds only higher classes: it runs uncached.
	expectFetch(t, c, l, idl, 0, low, true)
	expectFetch(t, c, l, idl, 0, low, true)
	if cached(c, idl, 0) {
		t.Fatal("a low fill evicted a higher class to cache itself")
	}
	// A high fill evicts normal chunks (lower class) but keeps its own.
	h2 := newOrigin(testChunk, 44)
	idh2 := h2.id("h2")
	idh2.Key = "high2"
	expectFetch(t, c, h2, idh2, 0, high, true)
	if !cached(c, idh2, 0) || !cached(c, idh, 0) || !cached(c, idh, 1) {
		t.Fatal("high fill: want it cached and the older high chunks kept")
	}
	if s := c.Stats(); s.Groups["train"].Priority != PriorityHigh || s.Groups["notebooks"].Priority != PriorityLow || s.Groups["other"].Priority != PriorityNormal {
		t.Fatalf("group priorities in stats: %+v", s.Groups)
	}
	checkLimits(t, c)
}

// SetPriority moves a group's cached chunks to the new class at once, and
// a read without a priority leaves the group's alone.
func TestSetPriorityMovesCachedChunks(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 4 * testChunk
	c := openCache(t, cfg)
	a, b := newOrigin(2*testChunk, 51), newOrigin(4*testChunk, 52)
	ida, idb := a.id("a"), b.id("b")
	ida.Key, idb.Key = "a", "b"
	ga := ReadOptions{Group: "a", ReadAhead: -1}
	gb := ReadOptions{Group: "b", ReadAhead: -1}
	expectFetch(t, c, a, ida, 0, ga, true)
	expectFetch(t, c, a, ida, 1, ga, true)
	expectFetch(t, c, b, idb, 0, gb, true)
	expectFetch(t, c, b, idb, 1, gb, true)
	c.SetPriority("b", PriorityLow) // b is newer, but now goes first
	expectFetch(t, c, b, idb, 1, ReadOptions{Group: "b", ReadAhead: -1}, false)
	if c.Stats().Groups["b"].Priority != PriorityLow {
		t.Fatal("a read without a priority reset the group's")
	}
	expectFetch(t, c, a, ida, 0, ga, false)
	c.SetPriority("a", PriorityHigh)
	c.SetPriority("b", PriorityNormal)
	// Three normal-class fills: b's chunks go, a's (high) stay.
	n := newOrigin(2*testChunk, 53)
	idn := n.id("n")
	idn.Key = "n"
	expectFetch(t, c, n, idn, 0, ReadOptions{Group: "n", ReadAhead: -1}, true)
	expectFetch(t, c, n, idn, 1, ReadOptions{Group: "n", ReadAhead: -1}, true)
	if cached(c, idb, 0) || cached(c, idb, 1) || !cached(c, ida, 0) || !cached(c, ida, 1) {
		t.Fatal("after SetPriority(a, high): want b's chunks evicted before a's")
	}
	checkLimits(t, c)
}

// Pinned chunks leave their class while pinned and return to their
// group's (current) class when unpinned.
func TestPriorityAndPins(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 3 * testChunk
	c := openCache(t, cfg)
	a := newOrigin(2*testChunk, 61)
	ida := a.id("a")
	ga := ReadOptions{Group: "a", ReadAhead: -1}
	expectFetch(t, c, a, ida, 0, ga, true)
	expectFetch(t, c, a, ida, 1, ga, true)
	pin := true
	c.SetPins(func(group, st, key string) bool { return pin && group == "a" })
	c.SetPriority("a", PriorityLow)
	pin = false
	c.Repin()
	// a is low now: a normal fill that needs room takes a's chunks first.
	n := newOrigin(2*testChunk, 62)
	idn := n.id("n")
	idn.Key = "n"
	expectFetch(t, c, n, idn, 0, ReadOptions{Group: "n", ReadAhead: -1}, true)
	expectFetch(t, c, n, idn, 1, ReadOptions{Group: "n", ReadAhead: -1}, true)
	if cached(c, ida, 0) || !cached(c, idn, 0) || !cached(c, idn, 1) {
		t.Fatal("unpinned chunks did not return to their group's low class")
	}
	checkLimits(t, c)
}
