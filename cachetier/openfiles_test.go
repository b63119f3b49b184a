package cachetier

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openChunkFDs counts this process's descriptors of files under dir.
func openChunkFDs(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(os.PathSeparator)) {
			n++
		}
	}
	return n
}

// A hit keeps its chunk's file open for the next hits, at most OpenFiles
// of them (least recently read let go first); an evicted or invalidated
// chunk's descriptor is let go, and Close lets go of all of them.
func TestOpenFilesKeptBoundedAndLetGo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.OpenFiles = 3
	c := openCache(t, cfg)
	o := newOrigin(6*testChunk, 71)
	id := o.id("v")
	chunks := filepath.Join(dir, "chunks")
	noAhead := ReadOptions{ReadAhead: -1}
	for idx := range int64(6) {
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead) // miss: the fill's own descriptor
	}
	settle(t, c) // fills commit after their readers have the bytes
	if n := openChunkFDs(t, chunks); n != 0 {
		t.Fatalf("after fills alone %d chunk files are open, want 0 (only hits keep them)", n)
	}
	for idx := range int64(6) {
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead)
	}
	settle(t, c)
	if n := openChunkFDs(t, chunks); n != 3 {
		t.Fatalf("after 6 hits %d chunk files are open, want OpenFiles=3", n)
	}
	calls, _, _ := o.stats()

	// The kept ones (chunks 3-5) are read through their descriptors: a
	// chunk file removed behind the cache's back still reads (the same
	// bytes: files are never rewritten in place), without a fetch.
	if err := os.Remove(c.chunkPath(c.entryFor(id, 5).name())); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "kept chunk", readRange(t, c, o, id, 5*testChunk, testChunk, noAhead), o.data[5*testChunk:6*testChunk])
	if after, _, _ := o.stats(); after != calls {
		t.Fatalf("a kept chunk's hit fetched (%d fetches, want %d)", after, calls)
	}
	// One not kept (chunk 0) whose file is gone is fetched again.
	if err := os.Remove(c.chunkPath(c.entryFor(id, 0).name())); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "refetched chunk", readRange(t, c, o, id, 0, testChunk, noAhead), o.data[:testChunk])
	settle(t, c)
	if after, _, _ := o.stats(); after != calls+1 {
		t.Fatalf("a missing chunk file was not fetched again (%d fetches, want %d)", after, calls+1)
	}

	if got := c.Invalidate(id.Store, id.Key); got != 6 {
		t.Fatalf("Invalidate dropped %d chunks, want 6", got)
	}
	if n := openChunkFDs(t, chunks); n != 0 {
		t.Fatalf("after Invalidate %d chunk files are still open, want 0", n)
	}
	for idx := range int64(2) {
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead)
		settle(t, c)
		readRange(t, c, o, id, idx*testChunk, testChunk, noAhead)
	}
	if n := openChunkFDs(t, chunks); n != 2 {
		t.Fatalf("%d chunk files open, want 2", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openChunkFDs(t, chunks); n != 0 {
		t.Fatalf("after Close %d chunk files are still open, want 0", n)
	}
}

// A reader holding a kept descriptor finishes its read when the chunk is
// evicted under it; the eviction lets go of the cache's reference only.
func TestOpenFileOutlivesEviction(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Capacity = 2 * testChunk
	c := openCache(t, cfg)
	o := newOrigin(4*testChunk, 72)
	id := o.id("v")
	readRange(t, c, o, id, 0, testChunk, ReadOptions{})
	settle(t, c)
	readRange(t, c, o, id, 0, testChunk, ReadOptions{}) // kept now
	r, err := c.NewReader(context.Background(), id, o.fetch, 0, testChunk, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	half := make([]byte, testChunk/2)
	if _, err := io.ReadFull(r, half); err != nil {
		t.Fatal(err)
	}
	for idx := int64(1); idx < 4; idx++ { // evicts chunk 0
		readRange(t, c, o, id, idx*testChunk, testChunk, ReadOptions{})
	}
	settle(t, c)
	if c.entryFor(id, 0) != nil {
		t.Fatal("chunk 0 was not evicted")
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading on after the eviction: %v", err)
	}
	sameBytes(t, "chunk 0", append(half, rest...), o.data[:testChunk])
}

// Chunk hands out a descriptor of its own, even on a hit through a kept
// one: moving its offset does not disturb other readers.
func TestChunkRefIsPrivateOnKeptFile(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(testChunk, 73)
	id := o.id("v")
	readRange(t, c, o, id, 0, testChunk, ReadOptions{})
	settle(t, c)                                        // the fill committed: the next read is a hit
	readRange(t, c, o, id, 0, testChunk, ReadOptions{}) // kept now
	ref, err := c.Chunk(context.Background(), id, 0, o.fetch, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	kept := c.open.files[c.lookupLocked(idOf(id, 0))]
	c.mu.Unlock()
	if kept == nil || kept.f.Fd() == ref.File.Fd() {
		t.Fatalf("Chunk's descriptor is the kept one (kept %v)", kept)
	}
	if _, err := ref.File.Seek(100, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	ref.Release()
	sameBytes(t, "chunk 0", readRange(t, c, o, id, 0, testChunk, ReadOptions{}), o.data)
	if n := openChunkFDs(t, filepath.Join(c.cfg.Dir, "chunks")); n != 1 {
		t.Fatalf("%d chunk files open after Release, want the kept 1", n)
	}
}

// entryFor returns the index entry of chunk idx of id, or nil.
func (c *Cache) entryFor(id ObjectID, idx int64) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(idOf(id, idx))
}
