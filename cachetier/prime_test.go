package cachetier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// Prime fills a chunk from bytes the caller has; a reader that comes for
// it reads them without a fetch of its own; a second Prime of the same
// chunk is refused without calling its fetch.
func TestPrime(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(3000, 81)
	id := o.id("v")
	var calls atomic.Int32
	primed := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		calls.Add(1)
		if off != 0 || n != int64(len(o.data)) {
			t.Errorf("primed fetch of %d bytes at %d", n, off)
		}
		return io.NopCloser(bytes.NewReader(o.data)), nil
	}
	if !c.Prime(id, 0, primed, ReadOptions{}) {
		t.Fatal("Prime of an uncached chunk: false")
	}
	sameBytes(t, "primed object", readRange(t, c, o, id, 0, -1, ReadOptions{}), o.data)
	if n, _, _ := o.stats(); n != 0 {
		t.Fatalf("the reader of a primed chunk fetched %d times", n)
	}
	if calls.Load() != 1 {
		t.Fatalf("the primed fetch was called %d times, want 1", calls.Load())
	}
	if c.Prime(id, 0, primed, ReadOptions{}) {
		t.Fatal("Prime of a cached chunk: true")
	}
	if calls.Load() != 1 {
		t.Fatal("a refused Prime called its fetch")
	}
	if c.Prime(id, 1, primed, ReadOptions{}) {
		t.Fatal("Prime of a chunk past the object's end: true")
	}
}

// A primed fill that fails (the bytes it was given break) is not kept: the
// next reader fetches the chunk itself.
func TestPrimeFailureNotKept(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(3000, 82)
	id := o.id("v")
	broken := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(o.data[:100]), &failingReader{})), nil
	}
	if !c.Prime(id, 0, broken, ReadOptions{}) {
		t.Fatal("Prime: false")
	}
	if err := wait.Until(t.Context(), 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.inflight) == 0
	}); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "object", readRange(t, c, o, id, 0, -1, ReadOptions{}), o.data)
	if n, _, _ := o.stats(); n != 1 {
		t.Fatalf("after a failed primed fill the reader fetched %d times, want 1", n)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errBoom }

// In a region, Prime takes only the chunks this node owns (or any with
// ReadOptions.Local), and Alone says whether it owns them all.
func TestPrimeOwnedOnly(t *testing.T) {
	r := newRegion(t, time.Second, "a", "b", "c")
	a := r.nodes["a"]
	if a.Alone() {
		t.Fatal("a node of a 3-node ring is Alone")
	}
	if !openCache(t, testConfig(t.TempDir())).Alone() {
		t.Fatal("a cache outside a ring is not Alone")
	}
	var own, peer int
	for i := range 30 {
		o := newOrigin(1000, uint64(200+i))
		id := r.object(o, fmt.Sprintf("v%d", i))
		owner, _ := a.Owner(ChunkKey{id, 0})
		primed := a.Prime(id, 0, func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(o.data)), nil
		}, ReadOptions{})
		switch {
		case owner == "a" && !primed:
			t.Errorf("object %d: owned by a, not primed", i)
		case owner != "a" && primed:
			t.Errorf("object %d: owned by %s, primed on a", i, owner)
		case owner == "a":
			own++
		default:
			peer++
			if !a.Prime(id, 0, func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(o.data)), nil
			}, ReadOptions{Local: true}) {
				t.Errorf("object %d: a Local prime of a peer's chunk was refused", i)
			}
		}
	}
	if own == 0 || peer == 0 {
		t.Fatalf("owned %d, peer-owned %d: the ring spread nothing", own, peer)
	}
	r.settle()
}
