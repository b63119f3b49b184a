package cachetier

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fedgate/fedgate/internal/wait"
)

// (6) Close + Open on the same Dir keeps the index and serves hits; what a
// crash leaves (partial fills, chunk files the index never recorded,
// records whose file is gone) is cleaned up.
func TestRestartKeepsIndex(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NoSync = false // the real thing: fsync chunk files and the index
	c := openCache(t, cfg)
	a, b := newOrigin(3*testChunk+5, 40), newOrigin(2*testChunk, 41)
	ida, idb := a.id("a"), b.id("b")
	idb.Key = "other"
	readRange(t, c, a, ida, 0, -1, ReadOptions{Group: "g"})
	readRange(t, c, b, idb, 0, -1, ReadOptions{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// What a crash leaves behind.
	partial := filepath.Join(cfg.Dir, "tmp", "fill-12345")
	orphan := filepath.Join(cfg.Dir, "chunks", "ab", "ab"+strings.Repeat("0", 62))
	junk := filepath.Join(cfg.Dir, "chunks", "00", "not-a-chunk")
	for _, p := range []string{partial, orphan, junk} {
		if err := os.WriteFile(p, []byte("half a chunk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lost := c.chunkPath(chunkName(idOf(idb, 1)))
	if err := os.Remove(lost); err != nil {
		t.Fatal(err)
	}

	c2 := openCache(t, cfg)
	<-c2.Verified()
	for _, p := range []string{partial, orphan, junk} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived Open: %v", p, err)
		}
	}
	s := c2.Stats()
	if s.Chunks != 5 || s.Used != ida.Size+testChunk || s.Groups["g"].Used != ida.Size {
		t.Fatalf("after restart: %+v", s)
	}
	callsA, _, _ := a.stats()
	sameBytes(t, "a after restart", readRange(t, c2, a, ida, 0, -1, ReadOptions{Group: "g"}), a.data)
	if calls, _, _ := a.stats(); calls != callsA {
		t.Fatalf("a after restart: %d fetches", calls-callsA)
	}
	callsB, _, _ := b.stats()
	sameBytes(t, "b after restart", readRange(t, c2, b, idb, 0, -1, ReadOptions{}), b.data)
	if calls, _, _ := b.stats(); calls != callsB+1 {
		t.Fatalf("b after restart: %d fetches, want 1 (the lost chunk)", calls-callsB)
	}
	if s := c2.Stats(); s.Hits != 5 || s.Misses != 1 {
		t.Fatalf("after restart reads: %+v", s)
	}
}

// The LRU order survives a restart (last-access times are persisted).
func TestRestartKeepsLRUOrder(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 3 * testChunk
	clock := time.Unix(1_700_000_000, 0)
	cfg.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	c := openCache(t, cfg)
	o := newOrigin(4*testChunk, 42)
	id := o.id("v")
	for idx := range int64(3) {
		expectFetch(t, c, o, id, idx, ReadOptions{}, true)
	}
	expectFetch(t, c, o, id, 0, ReadOptions{}, false) // LRU: 1, 2, 0
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, cfg)
	expectFetch(t, c2, o, id, 3, ReadOptions{}, true) // evicts 1
	expectFetch(t, c2, o, id, 0, ReadOptions{}, false)
	expectFetch(t, c2, o, id, 2, ReadOptions{}, false)
	expectFetch(t, c2, o, id, 1, ReadOptions{}, true)
}

// Opening with a smaller capacity evicts down to it; another chunk size
// empties the cache (the chunk boundaries moved).
func TestReopenWithOtherLimits(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	o := newOrigin(6*testChunk, 43)
	readRange(t, c, o, o.id("v"), 0, -1, ReadOptions{})
	c.Close()

	cfg.Capacity = 2 * testChunk
	c2 := openCache(t, cfg)
	if s := c2.Stats(); s.Chunks != 2 || s.Used != 2*testChunk {
		t.Fatalf("smaller capacity: %+v", s)
	}
	c2.Close()
	if n := len(files(t, cfg.Dir, "chunks")); n != 2 {
		t.Fatalf("%d chunk files, want 2", n)
	}

	cfg.ChunkSize = 2 * testChunk
	c3 := openCache(t, cfg)
	if s := c3.Stats(); s.Chunks != 0 || s.Used != 0 {
		t.Fatalf("other chunk size: %+v", s)
	}
	if n := len(files(t, cfg.Dir, "chunks")); n != 0 {
		t.Fatalf("%d chunk files left, want 0", n)
	}
	sameBytes(t, "new chunk size", readRange(t, c3, o, o.id("v"), 0, -1, ReadOptions{}), o.data)
}

// A second Open of a Dir in use fails (after the index lock's one-second
// timeout) and leaves the first cache's fills alone.
func TestOpenLockedDir(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	o := newOrigin(testChunk, 44)
	o.hold = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	r, err := c.NewReader(context.Background(), o.id("v"), o.fetch, 0, -1, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Open(cfg); err == nil {
		t.Fatal("second Open of the same Dir succeeded")
	}
	if n := len(files(t, cfg.Dir, "tmp")); n != 1 {
		t.Fatalf("%d fill files, want the first cache's 1", n)
	}
}

// A chunk's index record is written only after a sync of the filesystem
// that began once the chunk's file had its name: the fills themselves do not
// fsync, so the record is what must wait.
func TestRecordsWaitForTheFilesystemSync(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NoSync = false
	c := openCache(t, cfg)
	var mu sync.Mutex
	synced := map[string]bool{} // chunk files that existed when a sync began
	syncs := 0
	c.syncFS = func() error {
		mu.Lock()
		defer mu.Unlock()
		syncs++
		filepath.WalkDir(filepath.Join(cfg.Dir, "chunks"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				synced[filepath.Base(p)] = true
			}
			return nil
		})
		return syncfs(c.dir)
	}
	o := newOrigin(5*testChunk+7, 50)
	id := o.id("v1")
	readRange(t, c, o, id, 0, -1, ReadOptions{})
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	names := recordNames(t, cfg.Dir)
	if len(names) != 6 {
		t.Fatalf("%d records written, want 6 (%d syncs)", len(names), syncs)
	}
	for _, n := range names {
		if !synced[n] {
			t.Errorf("record %s written, but no sync began after its file was named (%d syncs)", n, syncs)
		}
	}
	c2 := openCache(t, cfg)
	calls, _, _ := o.stats()
	sameBytes(t, "after restart", readRange(t, c2, o, id, 0, -1, ReadOptions{}), o.data)
	if got, _, _ := o.stats(); got != calls {
		t.Fatalf("after restart: %d fetches, want 0", got-calls)
	}
}

// A failed sync stops all later records of new chunks (a later sync that
// succeeds does not prove the earlier bytes reached the disk); the chunks
// are still served from this process, and the next Open drops them.
func TestFailedSyncWritesNoRecords(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NoSync = false
	c := openCache(t, cfg)
	var mu sync.Mutex
	fail := true
	c.syncFS = func() error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("EIO")
		}
		return nil
	}
	a, b := newOrigin(2*testChunk, 51), newOrigin(testChunk, 52)
	ida, idb := a.id("a"), b.id("b")
	idb.Key = "other"
	readRange(t, c, a, ida, 0, -1, ReadOptions{})
	settle(t, c)
	if err := wait.Until(context.Background(), 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return !fail }); err != nil {
		t.Fatal(err)
	}
	readRange(t, c, b, idb, 0, -1, ReadOptions{}) // after the failure: the sync now succeeds
	settle(t, c)
	calls, _, _ := a.stats()
	readRange(t, c, a, ida, 0, -1, ReadOptions{})
	if got, _, _ := a.stats(); got != calls {
		t.Fatalf("before restart: %d fetches, want 0 (served from this process)", got-calls)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if names := recordNames(t, cfg.Dir); len(names) != 0 {
		t.Fatalf("records written after a failed sync: %v", names)
	}
	c2 := openCache(t, cfg)
	<-c2.Verified()
	if s := c2.Stats(); s.Chunks != 0 {
		t.Fatalf("after restart: %d chunks kept, want 0", s.Chunks)
	}
	if left := files(t, cfg.Dir, "chunks"); len(left) != 0 {
		t.Fatalf("chunk files without records survived Open: %v", left)
	}
}

// recordNames lists the chunk names index.db in dir records.
func recordNames(t *testing.T, dir string) []string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "index.db"), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names []string
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChunks).ForEach(func(k, _ []byte) error {
			names = append(names, hex.EncodeToString(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Batches that sync the file system are at least persistEvery apart,
// however often fills commit: other programs on the same file system
// would pay for every sync.
func TestSyncsAreSpacedOut(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NoSync = false
	c := openCache(t, cfg)
	var mu sync.Mutex
	var at []time.Time
	c.syncFS = func() error {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return syncfs(c.dir)
	}
	const objects = 30
	start := time.Now()
	for i := range objects {
		o := newOrigin(testChunk, uint64(60+i))
		id := o.id("v")
		id.Key = fmt.Sprintf("k%d", i)
		readRange(t, c, o, id, 0, -1, ReadOptions{})
		// pacing: spread the fills over more than two persist intervals.
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * 3 * persistEvery / objects)))
	}
	settle(t, c)
	closing := time.Now() // Close writes what is left at once
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	before := 0
	for before < len(at) && at[before].Before(closing) {
		before++
	}
	if before < 2 {
		t.Fatalf("%d syncs before Close for %d fills over %v", before, objects, closing.Sub(start))
	}
	for i := 1; i < before; i++ {
		if d := at[i].Sub(at[i-1]); d < persistEvery {
			t.Errorf("sync %d came %v after the one before, want at least %v", i, d, persistEvery)
		}
	}
	if n := len(recordNames(t, cfg.Dir)); n != objects {
		t.Fatalf("%d records after Close, want %d", n, objects)
	}
}

// CapacityFor chooses the capacity once the index is loaded, from the
// bytes the cache holds then; the cache evicts down to its answer, and its
// error fails Open as it is.
func TestCapacityForSeesHeldBytes(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	o := newOrigin(4*testChunk, 43)
	readRange(t, c, o, o.id("a"), 0, -1, ReadOptions{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	var seen []int64
	cfg.Capacity = 0
	cfg.CapacityFor = func(held int64) (int64, error) { seen = append(seen, held); return 3 * testChunk, nil }
	c2 := openCache(t, cfg)
	if len(seen) != 1 || seen[0] != 4*testChunk {
		t.Fatalf("CapacityFor called with %v; want once with the %d bytes held", seen, 4*testChunk)
	}
	if s := c2.Stats(); s.Capacity != 3*testChunk || s.Used != 3*testChunk || s.Chunks != 3 {
		t.Fatalf("after Open with CapacityFor: %+v; want capacity and use of 3 chunks", s)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}

	refuse := errors.New("only 1 B free")
	cfg.CapacityFor = func(int64) (int64, error) { return 0, refuse }
	if c3, err := Open(cfg); !errors.Is(err, refuse) || err.Error() != refuse.Error() {
		if c3 != nil {
			c3.Close()
		}
		t.Fatalf("Open with a failing CapacityFor: %v; want its error as it is", err)
	}
	cfg.CapacityFor = func(int64) (int64, error) { return 0, nil }
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "CapacityFor") {
		t.Fatalf("Open with CapacityFor choosing 0 bytes: %v", err)
	}
	cfg.CapacityFor = nil
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "Capacity") {
		t.Fatalf("Open without Capacity or CapacityFor: %v", err)
	}
}
