package cachetier

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A restart serves before the chunk files are checked, and a chunk whose
// file was deleted, truncated or overwritten with other bytes of the same
// size while the cache was down is never served: the read that finds it
// checks it first, drops it and fetches it again from the origin. The
// background check (held back here until the reads are done) then finds
// the other chunks good. Without the checksum check the overwritten chunk's
// bad bytes are served; without the check on read the deleted and
// truncated ones fail the read.
func TestRestartVerifiesChunksInBackground(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	names := []string{"deleted", "truncated", "corrupted", "good"}
	origins := make([]*origin, len(names))
	ids := make([]ObjectID, len(names))
	for i, name := range names {
		origins[i] = newOrigin(2*testChunk, uint64(90+i))
		ids[i] = origins[i].id("v")
		ids[i].Key = name
		readRange(t, c, origins[i], ids[i], 0, -1, ReadOptions{ReadAhead: -1})
	}
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	path := func(i int) string { return c.chunkPath(chunkName(idOf(ids[i], 1))) }
	if err := os.Remove(path(0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path(1), testChunk/2); err != nil {
		t.Fatal(err)
	}
	bad := make([]byte, testChunk)
	for i := range bad {
		bad[i] = 0xa5
	}
	if err := os.WriteFile(path(2), bad, 0o600); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	testVerifyStart = func() { <-release }
	t.Cleanup(func() { testVerifyStart = nil })
	c2, err := Open(cfg)
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	if s := c2.Stats(); s.Chunks != 8 || s.BadChunks != 0 {
		t.Fatalf("after Open, before verification: %+v", s)
	}
	select {
	case <-c2.Verified():
		t.Fatal("verified before the verifier was let start")
	default:
	}
	for i, o := range origins {
		calls, _, _ := o.stats()
		sameBytes(t, names[i], readRange(t, c2, o, ids[i], 0, -1, ReadOptions{ReadAhead: -1}), o.data)
		want := 1 // the bad chunk, fetched again
		if names[i] == "good" {
			want = 0
		}
		if got, _, _ := o.stats(); got-calls != want {
			t.Errorf("%s: %d origin fetches, want %d", names[i], got-calls, want)
		}
	}
	if s := c2.Stats(); s.BadChunks != 3 || s.Hits != 5 || s.Misses != 3 {
		t.Errorf("after the reads: %+v", s)
	}
	close(release)
	<-c2.Verified()
	settle(t, c2)
	if s := c2.Stats(); s.Chunks != 8 || s.BadChunks != 3 {
		t.Errorf("after verification: %+v", s)
	}
	// The refetched chunks are good and recorded: another restart keeps all.
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	c3 := openCache(t, cfg)
	if s := c3.Stats(); s.Chunks != 8 || s.BadChunks != 0 {
		t.Errorf("after a second restart: %+v", s)
	}
}

// The background check drops bad chunks by itself, before any read.
func TestBackgroundVerificationDropsBadChunks(t *testing.T) {
	cfg := testConfig(t.TempDir())
	c := openCache(t, cfg)
	o := newOrigin(3*testChunk, 97)
	id := o.id("v")
	readRange(t, c, o, id, 0, -1, ReadOptions{})
	settle(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p := c.chunkPath(chunkName(idOf(id, 2)))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, cfg) // waits for Verified
	if s := c2.Stats(); s.Chunks != 2 || s.BadChunks != 1 {
		t.Fatalf("after verification: %+v", s)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("bad chunk file kept: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := c2.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP fedgate_cache_bad_chunks_total Chunks loaded at start and dropped: file missing, wrong size or checksum.
# TYPE fedgate_cache_bad_chunks_total counter
fedgate_cache_bad_chunks_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fedgate_cache_bad_chunks_total"); err != nil {
		t.Fatal(err)
	}
}
