package cachetier

import (
	"context"
	"testing"
)

func chunkOK(t *testing.T, c *Cache, o *origin, id ObjectID, idx int64, opts ReadOptions) {
	t.Helper()
	ref, err := c.Chunk(context.Background(), id, idx, o.fetch, opts)
	if err != nil {
		t.Fatalf("chunk %d: %v", idx, err)
	}
	defer ref.Release()
	got := make([]byte, ref.Length)
	if _, err := ref.File.ReadAt(got, ref.Offset); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "chunk", got, o.data[idx*testChunk:min(id.Size, (idx+1)*testChunk)])
	checkLimits(t, c)
}

// expectFetch reads chunk idx and checks whether it went to the origin.
func expectFetch(t *testing.T, c *Cache, o *origin, id ObjectID, idx int64, opts ReadOptions, fetched bool) {
	t.Helper()
	before, _, _ := o.stats()
	chunkOK(t, c, o, id, idx, opts)
	if after, _, _ := o.stats(); (after > before) != fetched {
		t.Fatalf("chunk %d: fetched %v, want %v", idx, after > before, fetched)
	}
}

// (5a) At capacity the least recently used chunk goes first.
func TestCapacityEvictsLRU(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 4 * testChunk
	c := openCache(t, cfg)
	o := newOrigin(8*testChunk, 30)
	id := o.id("v")
	for idx := range int64(4) {
		expectFetch(t, c, o, id, idx, ReadOptions{}, true)
	}
	expectFetch(t, c, o, id, 0, ReadOptions{}, false) // LRU now 1, 2, 3, 0
	expectFetch(t, c, o, id, 4, ReadOptions{}, true)  // evicts 1
	expectFetch(t, c, o, id, 0, ReadOptions{}, false)
	expectFetch(t, c, o, id, 1, ReadOptions{}, true) // evicts 2
	expectFetch(t, c, o, id, 3, ReadOptions{}, false)
	expectFetch(t, c, o, id, 4, ReadOptions{}, false)
	if s := c.Stats(); s.Evictions != 2 || s.Used != 4*testChunk || s.Chunks != 4 {
		t.Fatalf("stats %+v", s)
	}
	if n := len(files(t, cfg.Dir, "chunks")); n != 4 {
		t.Fatalf("%d chunk files, want 4", n)
	}
	// A streaming read of the whole object through the small cache: right
	// bytes, limits kept, read-ahead and all.
	sameBytes(t, "through a small cache", readRange(t, c, o, id, 0, -1, ReadOptions{ReadAhead: 6}), o.data)
	checkLimits(t, c)
}

// (5b) A group's quota evicts that group's own LRU chunks, not others'.
func TestGroupQuotaEvictsOwnGroup(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	a, b := newOrigin(4*testChunk, 31), newOrigin(4*testChunk, 32)
	ida, idb := a.id("a"), b.id("b")
	idb.Key = "other"
	g1 := ReadOptions{Group: "g1", GroupQuota: 2 * testChunk}
	g2 := ReadOptions{Group: "g2"}
	expectFetch(t, c, b, idb, 0, g2, true)
	expectFetch(t, c, b, idb, 1, g2, true)
	expectFetch(t, c, a, ida, 0, g1, true)
	expectFetch(t, c, a, ida, 1, g1, true)
	expectFetch(t, c, a, ida, 0, g1, false)
	expectFetch(t, c, a, ida, 2, g1, true) // evicts a/1, g1's LRU
	expectFetch(t, c, a, ida, 0, g1, false)
	expectFetch(t, c, a, ida, 1, g1, true)
	expectFetch(t, c, b, idb, 0, g2, false)
	expectFetch(t, c, b, idb, 1, g2, false)
	s := c.Stats()
	if s.Groups["g1"].Used != 2*testChunk || s.Groups["g1"].Chunks != 2 || s.Groups["g2"].Used != 2*testChunk {
		t.Fatalf("groups %+v", s.Groups)
	}
	// Lowering the quota takes effect at the group's next fill.
	expectFetch(t, c, a, ida, 3, ReadOptions{Group: "g1", GroupQuota: testChunk}, true)
	if g := c.Stats().Groups["g1"]; g.Used != testChunk || g.Chunks != 1 {
		t.Fatalf("g1 after lowering its quota: %+v", g)
	}
}

// A chunk larger than its group's quota (or the capacity) is served but not
// kept.
func TestOversizedChunkServedUncached(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(2*testChunk, 33)
	tiny := ReadOptions{Group: "tiny", GroupQuota: 100}
	expectFetch(t, c, o, o.id("v"), 0, tiny, true)
	expectFetch(t, c, o, o.id("v"), 0, tiny, true)
	sameBytes(t, "uncached read", readRange(t, c, o, o.id("v"), 0, -1, tiny), o.data)
	settle(t, c)
	if s := c.Stats(); s.Chunks != 0 || s.Used != 0 {
		t.Fatalf("stats %+v", s)
	}
	if left := files(t, c.cfg.Dir, "tmp"); len(left) != 0 {
		t.Fatalf("fill files left: %v", left)
	}
}
