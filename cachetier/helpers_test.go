package cachetier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/store"
)

const testChunk = 4096

var errBoom = errors.New("origin: boom")

// origin is a store-like object with one version's bytes. Its fetcher
// counts calls, bytes and concurrent fetches, and takes hooks for failures
// and for holding a fetch until a condition holds.
type origin struct {
	data []byte

	mu        sync.Mutex
	calls     int
	active    int // fetches whose body is not closed yet
	maxActive int
	bytes     int64
	ranges    [][2]int64    // every fetch's (off, n), in order
	changed   chan struct{} // closed at every change of the counters
	openErr   error         // returned by the next fetches
	failAfter int64         // > 0: the next fetch fails with errBoom after this many bytes
	shortBy   int64         // > 0: the next fetch ends this many bytes early
	// hold, when set, runs at a body's first Read; its error fails the read.
	hold func(ctx context.Context) error
}

func newOrigin(size int, seed uint64) *origin {
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return &origin{data: data, changed: make(chan struct{})}
}

func (o *origin) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *origin) stats() (calls int, bytes int64, maxActive int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls, o.bytes, o.maxActive
}

// waitUntil blocks until cond (called under o.mu) holds, ctx ends, or ten
// seconds pass (a deadlock guard, not a timing assumption).
func (o *origin) waitUntil(ctx context.Context, cond func() bool) error {
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	for {
		o.mu.Lock()
		ok, ch := cond(), o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-guard.C:
			return errors.New("origin: condition not met in 10s")
		}
	}
}

func (o *origin) fetch(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	o.ranges = append(o.ranges, [2]int64{off, n})
	if o.openErr != nil {
		o.notifyLocked()
		return nil, o.openErr
	}
	if off < 0 || n < 0 || off+n > int64(len(o.data)) {
		return nil, fmt.Errorf("origin: bad range %d+%d", off, n)
	}
	b := &body{o: o, ctx: ctx, data: o.data[off : off+n], failAfter: -1, hold: o.hold}
	if o.failAfter > 0 {
		b.failAfter, o.failAfter = o.failAfter, 0
	}
	if o.shortBy > 0 {
		b.data, o.shortBy = b.data[:n-o.shortBy], 0
	}
	o.active++
	o.maxActive = max(o.maxActive, o.active)
	o.notifyLocked()
	return b, nil
}

type body struct {
	o         *origin
	ctx       context.Context
	data      []byte
	sent      int64
	failAfter int64
	hold      func(context.Context) error
	held      bool
	closed    bool
}

func (b *body) Read(p []byte) (int, error) {
	if !b.held {
		b.held = true
		if b.hold != nil {
			if err := b.hold(b.ctx); err != nil {
				return 0, err
			}
		}
	}
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	if b.failAfter >= 0 {
		if b.sent >= b.failAfter {
			return 0, errBoom
		}
		p = p[:min(int64(len(p)), b.failAfter-b.sent)]
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	b.sent += int64(n)
	b.o.mu.Lock()
	b.o.bytes += int64(n)
	b.o.mu.Unlock()
	return n, nil
}

func (b *body) Close() error {
	b.o.mu.Lock()
	defer b.o.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.o.active--
		b.o.notifyLocked()
	}
	return nil
}

func (o *origin) id(v string) ObjectID {
	return ObjectID{Store: "s3-east", Key: "datasets/shard-0001.tar", Validator: store.Validator(v), Size: int64(len(o.data))}
}

func testConfig(dir string) Config {
	return Config{Dir: dir, ChunkSize: testChunk, Capacity: 1 << 20, NoSync: true}
}

func openCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// As Open did before verification moved to the background: tests
	// that count files or descriptors must not see the sweep's.
	<-c.Verified()
	return c
}

func readRange(t testing.TB, c *Cache, o *origin, id ObjectID, off, n int64, opts ReadOptions) []byte {
	t.Helper()
	r, err := c.NewReader(context.Background(), id, o.fetch, off, n, opts)
	if err != nil {
		t.Fatalf("NewReader(%d, %d): %v", off, n, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read [%d, +%d): %v", off, n, err)
	}
	return got
}

func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if sha256.Sum256(got) != sha256.Sum256(want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: got %d bytes, want %d; first difference at %d", what, len(got), len(want), i)
	}
}

// files lists the regular files under dir/sub.
func files(t testing.TB, dir, sub string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLimits asserts the space invariants of the cache.
func checkLimits(t testing.TB, c *Cache) {
	t.Helper()
	s := c.Stats()
	if s.Used > s.Capacity || s.Used < 0 {
		t.Fatalf("used %d, capacity %d", s.Used, s.Capacity)
	}
	for name, g := range s.Groups {
		if g.Quota > 0 && g.Used > g.Quota || g.Used < 0 {
			t.Fatalf("group %q: used %d, quota %d", name, g.Used, g.Quota)
		}
	}
}

// settle waits until no fill is in progress: a reader may have read a
// chunk's last byte before its fill committed the chunk, and an abandoned
// fill holds its room until its fetch has stopped.
func settle(t testing.TB, c *Cache) {
	t.Helper()
	if err := wait.Until(context.Background(), 10*time.Second, func() bool { return c.st.filling.Load() == 0 }); err != nil {
		t.Fatal(err)
	}
}

func equalBytes(a, b []byte) bool { return bytes.Equal(a, b) }
