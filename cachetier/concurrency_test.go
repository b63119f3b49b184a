package cachetier

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// (2) 16 concurrent readers of one cold chunk (streaming readers and
// ChunkRefs) cause exactly one fetch. The fetch is held until all 16 have
// missed, so they really are concurrent.
func TestConcurrentMissesShareOneFetch(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(testChunk, 10)
	o.hold = func(ctx context.Context) error {
		return wait.Until(ctx, 10*time.Second, func() bool { return c.st.misses.Load() >= 16 })
	}
	id := o.id("v")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			if i%2 == 0 {
				r, err := c.NewReader(context.Background(), id, o.fetch, 0, -1, ReadOptions{})
				if err != nil {
					errs <- err
					return
				}
				defer r.Close()
				got, err := io.ReadAll(r)
				if err == nil && !equalBytes(got, o.data) {
					err = fmt.Errorf("reader %d: wrong bytes", i)
				}
				errs <- err
				return
			}
			ref, err := c.Chunk(context.Background(), id, 0, o.fetch, ReadOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer ref.Release()
			got := make([]byte, ref.Length)
			if _, err := ref.File.ReadAt(got, ref.Offset); err != nil {
				errs <- err
				return
			}
			if !equalBytes(got, o.data) {
				err = fmt.Errorf("chunk ref %d: wrong bytes", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls, n, _ := o.stats(); calls != 1 || n != testChunk {
		t.Fatalf("%d fetches of %d bytes, want 1 of %d", calls, n, testChunk)
	}
	if s := c.Stats(); s.Misses != 16 || s.Fetches != 1 || s.Chunks != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// (8) A sequential reader fetches ahead in parallel, never more than
// Concurrency at once. Each fetch is held until two have run at once (or
// it is the last), so a reader that fetched one chunk at a time would stall
// on its first, and the guard in waitUntil would fail the test.
func TestReadAheadFetchesInParallel(t *testing.T) {
	const chunks, conc = 16, 3
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(chunks*testChunk, 11)
	o.hold = func(ctx context.Context) error {
		return o.waitUntil(ctx, func() bool { return o.maxActive >= 2 || o.calls == chunks })
	}
	got := readRange(t, c, o, o.id("v"), 0, -1, ReadOptions{ReadAhead: 8, Concurrency: conc})
	sameBytes(t, "sequential read", got, o.data)
	calls, _, maxActive := o.stats()
	if calls != chunks {
		t.Fatalf("%d fetches, want %d", calls, chunks)
	}
	if maxActive < 2 || maxActive > conc {
		t.Fatalf("max concurrent fetches %d, want 2..%d", maxActive, conc)
	}
}

// Closing a reader cancels the read-ahead fetches nobody else wants; they
// leave no chunk, no fill file and no reserved space behind.
func TestReaderCloseCancelsReadAhead(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(8*testChunk, 12)
	o.hold = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	r, err := c.NewReader(context.Background(), o.id("v"), o.fetch, 0, -1, ReadOptions{ReadAhead: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.waitUntil(context.Background(), func() bool { return o.calls == 5 }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := o.waitUntil(context.Background(), func() bool { return o.active == 0 }); err != nil {
		t.Fatal(err)
	}
	dir := c.cfg.Dir
	if err := c.Close(); err != nil { // waits for the fills to finish
		t.Fatal(err)
	}
	if s := c.Stats(); s.Chunks != 0 || s.Used != 0 || s.FetchErrors != 5 {
		t.Fatalf("stats %+v", s)
	}
	if left := files(t, dir, "tmp"); len(left) != 0 {
		t.Fatalf("fill files left: %v", left)
	}
}

// Many readers over several objects and groups in a small cache: every
// byte is right and the limits hold (run with -race).
func TestConcurrentReadersUnderPressure(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 10 * testChunk
	c := openCache(t, cfg)
	objs := make([]*origin, 4)
	for i := range objs {
		objs[i] = newOrigin(6*testChunk+i*100, uint64(20+i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			o := objs[i%len(objs)]
			id := o.id(fmt.Sprint("v", i%len(objs)))
			id.Key = fmt.Sprint("key-", i%len(objs))
			off := int64(i*997) % id.Size
			opts := ReadOptions{Group: fmt.Sprint("g", i%2), GroupQuota: 6 * testChunk, Concurrency: 2}
			r, err := c.NewReader(context.Background(), id, o.fetch, off, -1, opts)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err == nil && !equalBytes(got, o.data[off:]) {
				err = fmt.Errorf("reader %d: wrong bytes", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkLimits(t, c)
	settle(t, c)
	if s := c.Stats(); s.Used != int64(s.Chunks)*testChunk-sumShort(c) {
		t.Fatalf("used %d does not match %d chunks", s.Used, s.Chunks)
	}
}

// sumShort returns how many bytes the cached short (last) chunks lack.
func sumShort(c *Cache) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for i := range c.idx.lru {
		l := &c.idx.lru[i]
		for e := l.Front(); e != nil; e = l.Next(e) {
			n += testChunk - e.length
		}
	}
	return n
}

// A client reading an object with consecutive ranged GETs gets the chunks
// after its current range fetched ahead, so its next request hits.
func TestSequentialRangesPrefetch(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(10*testChunk, 13)
	id := o.id("v")
	opts := ReadOptions{ReadAhead: 2}
	// The first request sets no pattern: only its own chunk is fetched.
	sameBytes(t, "request 1", readRange(t, c, o, id, 0, testChunk, opts), o.data[:testChunk])
	if calls, _, _ := o.stats(); calls != 1 {
		t.Fatalf("after request 1: %d fetches, want 1", calls)
	}
	// The second starts where the first ended: chunks 2 and 3 are prefetched.
	sameBytes(t, "request 2", readRange(t, c, o, id, testChunk, testChunk, opts), o.data[testChunk:2*testChunk])
	settle(t, c)
	if s := c.Stats(); s.Chunks != 4 {
		t.Fatalf("after request 2: %d chunks, want 4", s.Chunks)
	}
	before, _, _ := o.stats()
	sameBytes(t, "request 3", readRange(t, c, o, id, 2*testChunk, 2*testChunk, opts), o.data[2*testChunk:4*testChunk])
	settle(t, c)
	if calls, _, _ := o.stats(); calls != before+2 { // chunks 4 and 5, prefetched for request 4
		t.Fatalf("request 3: %d fetches, want 2 (the next prefetch only)", calls-before)
	}
	if s := c.Stats(); s.Hits != 2 {
		t.Fatalf("request 3 was not served from the prefetched chunks: %+v", s)
	}
}
