package cachetier

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// testGate is a gate a test hook waits on: closed by release (once, also
// at the test's end, after undo).
func testGate(t *testing.T, undo func()) (gate chan struct{}, release func()) {
	gate = make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(func() {
		release()
		undo()
	})
	return gate, release
}

// heldLoad makes the next Open's loader read all of index.db in one batch
// and wait before bringing it into memory until the returned function is
// called (or the cache closes).
func heldLoad(t *testing.T) (release func()) {
	saved := loadBatch
	gate, release := testGate(t, func() {
		testLoadBatch = nil
		loadBatch = saved
	})
	loadBatch = 1 << 20
	testLoadBatch = func(ctx context.Context) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	return release
}

// loadFixture caches n one-chunk objects under their own keys and closes
// the cache; it returns the objects' origins and ids.
func loadFixture(t *testing.T, cfg Config, n int) ([]*origin, []ObjectID) {
	c := openCache(t, cfg)
	origins, ids := make([]*origin, n), make([]ObjectID, n)
	for i := range n {
		origins[i] = newOrigin(testChunk, uint64(200+i))
		ids[i] = origins[i].id("v")
		ids[i].Key = fmt.Sprintf("obj-%03d", i)
		readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{ReadAhead: -1})
	}
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return origins, ids
}

// inMemory counts the entries the index holds in memory.
func inMemory(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idx.chunks.n
}

// A chunk whose record the loader has not brought in yet is served as a
// hit, with its bytes, while the load is held back: the lookup finds its
// record in index.db. Used and the chunk count come from index.db's totals
// from the start. Without the look into index.db every read is a miss.
func TestHitDuringLoad(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 5)
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if s := c.Stats(); s.Chunks != 5 || s.Used != 5*testChunk || s.Groups[""].Chunks != 5 {
		t.Fatalf("before the load: %+v", s)
	}
	if n := inMemory(c); n != 0 {
		t.Fatalf("%d entries in memory before the load", n)
	}
	for _, i := range []int{3, 0} {
		sameBytes(t, ids[i].Key, readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{}), origins[i].data)
		if calls, _, _ := origins[i].stats(); calls != 1 { // the fixture's fill only
			t.Fatalf("%s: %d origin fetches, want none after the restart", ids[i].Key, calls-1)
		}
	}
	if s := c.Stats(); s.Hits != 2 || s.Misses != 0 || s.Chunks != 5 || s.Used != 5*testChunk {
		t.Fatalf("after two reads during the load: %+v", s)
	}
	release()
	<-c.Loaded()
	<-c.Verified()
	if s := c.Stats(); s.Chunks != 5 || s.Used != 5*testChunk || inMemory(c) != 5 {
		t.Fatalf("after the load: %+v, %d in memory", s, inMemory(c))
	}
}

// dbTotals returns index.db's persisted totals and those its records add
// up to.
func dbTotals(t *testing.T, dir string) (kept, counted map[string]total) {
	db, err := bolt.Open(dir+"/index.db", 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		kept = readTotals(tx)
		counted = make(map[string]total)
		return tx.Bucket(bucketChunks).ForEach(func(_, v []byte) error {
			if r, err := decodeRecord(v); err == nil {
				counted[r.group] = total{counted[r.group].bytes + r.length, counted[r.group].chunks + 1}
			}
			return nil
		})
	})
	return kept, counted
}

// A restart in the middle of the load (Close before the loader brought
// anything in, after a chunk was brought in by a read, one was evicted, a
// key invalidated and a new chunk filled) loses nothing and counts nothing
// twice: the next start has every chunk that stayed, index.db's totals
// equal its records, and every chunk is a hit. Without the loader's check
// that a record is in memory already, the chunk read during the load is
// loaded a second time and counted twice.
func TestRestartDuringLoad(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 6)
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "obj 1", readRange(t, c, origins[1], ids[1], 0, -1, ReadOptions{}), origins[1].data)
	c.mu.Lock()
	c.evictLocked(c.lookupLocked(idOf(ids[2], 0)))
	c.mu.Unlock()
	c.Invalidate(ids[4].Store, ids[4].Key)
	extra := newOrigin(2*testChunk, 300)
	xid := extra.id("x")
	xid.Key = "extra"
	readRange(t, c, extra, xid, 0, -1, ReadOptions{ReadAhead: -1})
	settle(t, c)
	// 6 - evicted + 2 new; the invalidated key's record is counted until
	// the loader meets it
	if s := c.Stats(); s.Chunks != 7 || s.Used != 7*testChunk {
		t.Fatalf("during the load: %+v", s)
	}
	release() // the loader applies its batch: nothing may come back or count twice
	<-c.Loaded()
	if s := c.Stats(); s.Chunks != 6 || s.Used != 6*testChunk || inMemory(c) != 6 {
		t.Fatalf("after the load: %+v, %d in memory", s, inMemory(c))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, counted := dbTotals(t, cfg.Dir); fmt.Sprint(kept) != fmt.Sprint(counted) {
		t.Fatalf("index.db totals %v, its records add up to %v", kept, counted)
	}

	// Now a restart cut short: Close while the load is held.
	release2 := heldLoad(t)
	c2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "obj 5", readRange(t, c2, origins[5], ids[5], 0, -1, ReadOptions{}), origins[5].data)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	release2()
	if kept, counted := dbTotals(t, cfg.Dir); fmt.Sprint(kept) != fmt.Sprint(counted) {
		t.Fatalf("after a restart cut short: index.db totals %v, its records add up to %v", kept, counted)
	}
	c3 := openCache(t, cfg)
	<-c3.Loaded()
	if s := c3.Stats(); s.Chunks != 6 || s.Used != 6*testChunk || inMemory(c3) != 6 {
		t.Fatalf("after the second restart: %+v", s)
	}
	for _, i := range []int{0, 1, 3, 5} {
		calls, _, _ := origins[i].stats()
		sameBytes(t, ids[i].Key, readRange(t, c3, origins[i], ids[i], 0, -1, ReadOptions{}), origins[i].data)
		if got, _, _ := origins[i].stats(); got != calls {
			t.Errorf("%s: fetched again after the restarts", ids[i].Key)
		}
	}
	if got := len(files(t, cfg.Dir, "chunks")); got != 6 {
		t.Errorf("%d chunk files, want 6", got)
	}
}

// A chunk whose file went bad while the node was down, read during the
// load (its record not loaded yet), is checked before it is served:
// dropped, fetched again from the origin, the right bytes served, and it
// does not come back when the loader reaches its record. Without the check
// of chunks brought in by a read, the bad bytes are served.
func TestBadChunkFoundDuringLoad(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 3)
	p := cfgChunkPath(cfg, idOf(ids[1], 0))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[10] ^= 0xff
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sameBytes(t, "bad chunk", readRange(t, c, origins[1], ids[1], 0, -1, ReadOptions{}), origins[1].data)
	if calls, _, _ := origins[1].stats(); calls != 2 {
		t.Fatalf("%d origin fetches, want 2 (the fixture's and the refetch)", calls)
	}
	settle(t, c)
	if s := c.Stats(); s.BadChunks != 1 || s.Chunks != 3 || s.Used != 3*testChunk {
		t.Fatalf("during the load: %+v", s)
	}
	release()
	<-c.Verified()
	if s := c.Stats(); s.BadChunks != 1 || s.Chunks != 3 || s.Used != 3*testChunk || inMemory(c) != 3 {
		t.Fatalf("after the load: %+v", s)
	}
	got, err := os.ReadFile(p)
	if err != nil || !equalBytes(got, origins[1].data) {
		t.Fatalf("chunk file after the refetch: %v", err)
	}
}

func cfgChunkPath(cfg Config, ck chunkID) string {
	c := &Cache{chunkDir: cfg.Dir + "/chunks"}
	return c.chunkPath(chunkName(ck))
}

// Every chunk name and every key hash collides (the table hashes are
// replaced): lookups still tell chunks apart by their whole name, so each
// object reads back its own bytes, before and after a restart, and
// evicting or invalidating one leaves the others. Without the comparison
// of whole names, objects are served each other's bytes.
func TestHashCollisions(t *testing.T) {
	savedName, savedKey := nameHash, keyHashOf
	nameHash = func(*[32]byte) uint64 { return 42 }
	keyHashOf = func(string, string) uint64 { return 7 }
	t.Cleanup(func() { nameHash, keyHashOf = savedName, savedKey })

	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	const n = 6
	origins, ids := make([]*origin, n), make([]ObjectID, n)
	for i := range n {
		origins[i] = newOrigin(2*testChunk, uint64(400+i))
		ids[i] = origins[i].id(fmt.Sprintf("v%d", i%2)) // two versions of three keys
		ids[i].Key = fmt.Sprintf("key-%d", i/2)
		readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{ReadAhead: -1})
	}
	settle(t, c)
	check := func(c *Cache, what string, skip map[int]bool) {
		t.Helper()
		for i := range n {
			if skip[i] {
				continue
			}
			calls, _, _ := origins[i].stats()
			sameBytes(t, fmt.Sprintf("%s: object %d", what, i), readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{}), origins[i].data)
			if got, _, _ := origins[i].stats(); got != calls {
				t.Errorf("%s: object %d was fetched again", what, i)
			}
		}
	}
	check(c, "after the fills", nil)
	c.mu.Lock()
	c.evictLocked(c.lookupLocked(idOf(ids[5], 1)))
	c.mu.Unlock()
	if s := c.Stats(); s.Chunks != 2*n-1 {
		t.Fatalf("after evicting one chunk: %+v", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, cfg)
	<-c2.Loaded()
	if s := c2.Stats(); s.Chunks != 2*n-1 {
		t.Fatalf("after the restart: %+v", s)
	}
	check(c2, "after the restart", map[int]bool{5: true})
	// Every key hash collides: Invalidate drops all keys' chunks (more
	// than asked, never fewer), and reads fetch them again, correctly.
	if got := c2.Invalidate(ids[0].Store, ids[0].Key); got != 2*n-1 {
		t.Fatalf("Invalidate dropped %d chunks, want all %d (every key hash collides)", got, 2*n-1)
	}
	for i := range n {
		sameBytes(t, fmt.Sprintf("refetched object %d", i), readRange(t, c2, origins[i], ids[i], 0, -1, ReadOptions{}), origins[i].data)
	}
}

// Fills during the load make room by evicting chunks already in memory,
// and keep used within the capacity throughout: the chunks not loaded yet
// are counted (index.db's totals) before they are in memory. A chunk
// evicted during the load does not come back when the loader reaches its
// record. Without the totals the cache overfills during the load; without
// the record of chunks removed during the load, the evicted chunk comes
// back (counted twice, its file gone).
func TestEvictionDuringLoad(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 8 * testChunk
	origins, ids := loadFixture(t, cfg, 8) // full
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Two chunks brought in by reads: the only ones eviction can take.
	for _, i := range []int{6, 2} {
		sameBytes(t, ids[i].Key, readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{}), origins[i].data)
	}
	extra := newOrigin(testChunk, 500)
	xid := extra.id("x")
	xid.Key = "extra"
	sameBytes(t, "extra", readRange(t, c, extra, xid, 0, -1, ReadOptions{}), extra.data)
	settle(t, c)
	checkLimits(t, c)
	if s := c.Stats(); s.Used != 8*testChunk || s.Chunks != 8 || s.Evictions != 1 {
		t.Fatalf("during the load: %+v", s)
	}
	if cached(c, ids[6], 0) || !cached(c, ids[2], 0) || !cached(c, xid, 0) {
		t.Fatal("the fill did not evict the least recently used chunk in memory")
	}
	release()
	<-c.Verified()
	checkLimits(t, c)
	if s := c.Stats(); s.Used != 8*testChunk || s.Chunks != 8 || inMemory(c) != 8 {
		t.Fatalf("after the load: %+v, %d in memory", s, inMemory(c))
	}
	if cached(c, ids[6], 0) {
		t.Fatal("the chunk evicted during the load came back")
	}
}

// Pins installed during the load (a node calls SetPins right after Open)
// reach the chunks already in memory, read from index.db only as far as
// the load has come, and the chunks loaded later as they come in.
// Without the look at the chunks brought in beyond the loader's cursor,
// the chunk read before SetPins stays unpinned.
func TestPinsDuringLoad(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 4)
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	readRange(t, c, origins[2], ids[2], 0, -1, ReadOptions{})
	c.SetPins(func(group, st, key string) bool { return key != ids[0].Key })
	if s := c.Stats(); s.PinnedBytes != testChunk {
		t.Fatalf("during the load: %d bytes pinned, want the chunk in memory (%d)", s.PinnedBytes, testChunk)
	}
	release()
	<-c.Loaded()
	if s := c.Stats(); s.PinnedBytes != 3*testChunk {
		t.Fatalf("after the load: %d bytes pinned, want %d", s.PinnedBytes, 3*testChunk)
	}
}
