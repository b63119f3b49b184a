package cachetier

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// (7) A fetch that fails mid-chunk fails the read (never a short success),
// leaves no partial chunk, and a retry succeeds.
func TestFetchFailsMidChunk(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(3*testChunk, 50)
	id := o.id("v")
	chunkOK(t, c, o, id, 0, ReadOptions{})

	o.failAfter = 1000 // the next fetch (chunk 1) dies after 1000 bytes
	r, err := c.NewReader(context.Background(), id, o.fetch, 0, -1, ReadOptions{ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, errBoom) {
		t.Fatalf("read: %v, want errBoom", err)
	}
	if len(got) != testChunk+1000 || !equalBytes(got, o.data[:len(got)]) {
		t.Fatalf("read %d bytes before the error, want the first %d", len(got), testChunk+1000)
	}
	if _, err := os.Stat(c.chunkPath(chunkName(idOf(id, 1)))); !os.IsNotExist(err) {
		t.Fatalf("failed chunk has a file: %v", err)
	}
	if left := files(t, c.cfg.Dir, "tmp"); len(left) != 0 {
		t.Fatalf("fill files left: %v", left)
	}
	if s := c.Stats(); s.Chunks != 1 || s.Used != testChunk || s.FetchErrors != 1 {
		t.Fatalf("stats %+v", s)
	}

	sameBytes(t, "retry", readRange(t, c, o, id, 0, -1, ReadOptions{}), o.data)
	settle(t, c)
	if s := c.Stats(); s.Chunks != 3 {
		t.Fatalf("after retry: %+v", s)
	}
}

// A fetch that ends early is io.ErrUnexpectedEOF, for readers and ChunkRefs.
func TestShortFetchIsAnError(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(2*testChunk, 51)
	id := o.id("v")
	o.shortBy = 10
	_, err := c.Chunk(context.Background(), id, 0, o.fetch, ReadOptions{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Chunk: %v, want io.ErrUnexpectedEOF", err)
	}
	o.shortBy = 10
	r, err := c.NewReader(context.Background(), id, o.fetch, 0, -1, ReadOptions{ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != testChunk-10 {
		t.Fatalf("read %d bytes, %v; want %d, io.ErrUnexpectedEOF", len(got), err, testChunk-10)
	}
	if s := c.Stats(); s.Chunks != 0 || s.Used != 0 {
		t.Fatalf("stats %+v", s)
	}
	chunkOK(t, c, o, id, 0, ReadOptions{})
}

// The origin's answer to the first chunk (the object changed, say) comes
// from NewReader itself, before the caller has sent a byte.
func TestOpenErrorFromNewReader(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(2*testChunk, 52)
	o.openErr = store.ErrPreconditionFailed
	if _, err := c.NewReader(context.Background(), o.id("v"), o.fetch, 0, -1, ReadOptions{}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("NewReader: %v, want store.ErrPreconditionFailed", err)
	}
	if _, err := c.Chunk(context.Background(), o.id("v"), 1, o.fetch, ReadOptions{}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Chunk: %v, want store.ErrPreconditionFailed", err)
	}
	o.mu.Lock()
	o.openErr = nil
	o.mu.Unlock()
	settle(t, c)
	if s := c.Stats(); s.Chunks != 0 || s.Used != 0 {
		t.Fatalf("stats %+v", s)
	}
	sameBytes(t, "after the error", readRange(t, c, o, o.id("v"), 0, -1, ReadOptions{}), o.data)
}

// A reader whose context ends gets the context's error.
func TestReaderContextCancelled(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(2*testChunk, 53)
	o.hold = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	ctx, cancel := context.WithCancel(context.Background())
	r, err := c.NewReader(ctx, o.id("v"), o.fetch, 0, -1, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cancel()
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read: %v, want context.Canceled", err)
	}
	r.Close()
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
}
