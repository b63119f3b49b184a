package cachetier

import (
	"context"
	"io"
	"testing"
)

func benchCache(b *testing.B, chunk int64, size int) (*Cache, *origin, ObjectID) {
	cfg := testConfig(b.TempDir())
	cfg.ChunkSize, cfg.Capacity = chunk, 1<<30
	c := openCache(b, cfg)
	o := newOrigin(size, 60)
	id := o.id("v")
	r, err := c.NewReader(context.Background(), id, o.fetch, 0, -1, ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		b.Fatal(err)
	}
	r.Close()
	return c, o, id
}

// BenchmarkReadHit streams a cached 4 MiB object (1 MiB chunks).
func BenchmarkReadHit(b *testing.B) {
	c, o, id := benchCache(b, 1<<20, 4<<20)
	buf := make([]byte, 256<<10)
	b.SetBytes(id.Size)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.NewReader(context.Background(), id, o.fetch, 0, -1, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(io.Discard, r, buf); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	if calls, _, _ := o.stats(); calls != 4 {
		b.Fatalf("%d fetches", calls)
	}
}

// BenchmarkChunkHit measures the cost of handing out one cached chunk as a
// file region (the sendfile path), without reading it.
func BenchmarkChunkHit(b *testing.B) {
	c, o, id := benchCache(b, 1<<20, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		ref, err := c.Chunk(context.Background(), id, 0, o.fetch, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ref.Release()
	}
}
