package cachetier

import "testing"

// A leased chunk is not evicted until its lease is released, whether the
// lease came before its fill committed or after.
func TestLeasePinsChunk(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Capacity = 2 * testChunk
	c := openCache(t, cfg)
	o := newOrigin(6*testChunk, 74)
	id := o.id("v")
	noAhead := ReadOptions{ReadAhead: -1}

	readRange(t, c, o, id, 0, testChunk, noAhead)
	settle(t, c)
	release0 := c.Lease(id, 0)  // after the commit
	release5 := c.Lease(id, 5)  // before any fill of chunk 5
	release0b := c.Lease(id, 0) // a second lease of chunk 0
	readRange(t, c, o, id, 5*testChunk, testChunk, noAhead)
	settle(t, c)
	if c.Stats().PinnedBytes != 2*testChunk {
		t.Fatalf("pinned bytes %d, want both leased chunks", c.Stats().PinnedBytes)
	}
	for idx := int64(1); idx < 5; idx++ { // more than the capacity
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead)
	}
	settle(t, c)
	if c.entryFor(id, 0) == nil || c.entryFor(id, 5) == nil {
		t.Fatal("a leased chunk was evicted")
	}
	release0()
	release0() // idempotent
	if c.Stats().PinnedBytes != 2*testChunk {
		t.Fatal("chunk 0 unpinned while a second lease holds it")
	}
	release0b()
	release5()
	if got := c.Stats().PinnedBytes; got != 0 {
		t.Fatalf("pinned bytes %d after every lease was released", got)
	}
	for idx := int64(1); idx < 5; idx++ {
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead)
	}
	settle(t, c)
	if c.entryFor(id, 0) != nil && c.entryFor(id, 5) != nil {
		t.Fatal("released chunks are never evicted")
	}
}
