package cachetier

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// index.db's totals that no longer match its records (written by a binary
// without totals after one with them, a rollback) are repaired once the
// loader has met every record, not only corrected in memory: the next
// Open counts the right bytes before its load, and index.db's totals equal
// its records. Without the repair the drift comes back at every Open (used
// too high during every load, and CapacityFor sees it).
func TestStaleTotalsRepaired(t *testing.T) {
	cfg := testConfig(t.TempDir())
	_, ids := loadFixture(t, cfg, 4)
	// A record deleted the way a binary without totals would: the totals
	// still count it.
	db, err := bolt.Open(cfg.Dir+"/index.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := chunkName(idOf(ids[1], 0))
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketChunks).Delete(nm[:]) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	c := openCache(t, cfg)
	<-c.Loaded()
	if s := c.Stats(); s.Used != 3*testChunk || s.Chunks != 3 {
		t.Fatalf("after the load: %+v", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, counted := dbTotals(t, cfg.Dir); fmt.Sprint(kept) != fmt.Sprint(counted) {
		t.Fatalf("index.db totals %v, its records add up to %v", kept, counted)
	}
	heldLoad(t)
	c2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if s := c2.Stats(); s.Used != 3*testChunk || s.Chunks != 3 {
		t.Fatalf("next Open, before its load: %+v", s)
	}
}

// holdVerify keeps verifyLoop (and so the orphan sweep) from starting
// until the returned function is called (or the test ends).
func holdVerify(t *testing.T) (release func()) {
	gate, release := testGate(t, func() { testVerifyStart = nil })
	testVerifyStart = func() { <-gate }
	return release
}

// The file of a record the loader drops (its key was invalidated during the
// load) goes with the record. Left to the orphan sweep, it stayed whenever
// the sweep read index.db before the record's delete was written (the
// sweep then saw a record and kept the file, uncounted, until the next
// restart); here the sweep is held, so without the unlink the file is
// still there after the load.
func TestDroppedRecordFileRemoved(t *testing.T) {
	cfg := testConfig(t.TempDir())
	_, ids := loadFixture(t, cfg, 4)
	releaseVerify := holdVerify(t)
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		releaseVerify() // Close waits for verifyLoop
		c.Close()
	})
	if n := c.Invalidate(ids[1].Store, ids[1].Key); n != 0 {
		t.Fatalf("Invalidate dropped %d chunks in memory, want 0", n)
	}
	path := c.chunkPath(chunkName(idOf(ids[1], 0)))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("before the load: %v", err)
	}
	release()
	<-c.Loaded()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the invalidated chunk's file is still there after the loader dropped its record (%v)", err)
	}
	releaseVerify()
	<-c.Verified()
	if s := c.Stats(); s.Chunks != 3 || s.Used != 3*testChunk {
		t.Fatalf("after the load: %+v", s)
	}
	if got := len(files(t, cfg.Dir, "chunks")); got != 3 {
		t.Fatalf("%d chunk files, want 3", got)
	}
}

// A key invalidated during the load, whose records the loader had not
// reached when the cache closed, does not come back at the next Open: the
// invalidation is kept in index.db until a load has dropped the key's
// records. Without it the old version's chunks come back, and a pin on the
// key keeps them for good (pinned chunks are never evicted, and no reader
// asks for the old validator to refresh them).
func TestInvalidateDuringLoadSurvivesRestart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 3)
	release := heldLoad(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Invalidate(ids[0].Store, ids[0].Key)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	release()

	c2 := openCache(t, cfg)
	c2.SetPins(func(group, st, key string) bool { return true })
	<-c2.Loaded()
	if cached(c2, ids[0], 0) {
		t.Fatal("the chunk of the key invalidated during the last load came back")
	}
	if s := c2.Stats(); s.Chunks != 2 || s.Used != 2*testChunk || s.PinnedBytes != 2*testChunk {
		t.Fatalf("after the load: %+v", s)
	}
	// The invalidation is spent: the key is cached again and kept.
	sameBytes(t, "obj 0", readRange(t, c2, origins[0], ids[0], 0, -1, ReadOptions{}), origins[0].data)
	settle(t, c2)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	c3 := openCache(t, cfg)
	<-c3.Loaded()
	if !cached(c3, ids[0], 0) {
		t.Fatal("the key cached after the load was dropped again at the next Open")
	}
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, counted := dbTotals(t, cfg.Dir); fmt.Sprint(kept) != fmt.Sprint(counted) {
		t.Fatalf("index.db totals %v, its records add up to %v", kept, counted)
	}
}

// A record under a key that is not 32 bytes long is dropped without
// touching the record (or the file) of the chunk its first 32 bytes name.
// Without the check of its length, the loader queued the delete of the
// chunk named by the key's first 32 bytes: that chunk lost its record,
// and with it its file at the next Open.
func TestLongKeyRecordDropped(t *testing.T) {
	cfg := testConfig(t.TempDir())
	origins, ids := loadFixture(t, cfg, 2)
	db, err := bolt.Open(cfg.Dir+"/index.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := chunkName(idOf(ids[0], 0))
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChunks)
		return b.Put(append(nm[:], 0), bytes.Clone(b.Get(nm[:])))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(t, cfg)
	<-c.Loaded()
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, cfg)
	<-c2.Loaded()
	calls, _, _ := origins[0].stats()
	sameBytes(t, "obj 0", readRange(t, c2, origins[0], ids[0], 0, -1, ReadOptions{}), origins[0].data)
	if got, _, _ := origins[0].stats(); got != calls {
		t.Fatal("the chunk whose name begins the long key was fetched again: its record was deleted")
	}
}
