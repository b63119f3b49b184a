package cachetier

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// (1) The second read of an object comes entirely from the cache.
func TestSecondReadFromCache(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(5*testChunk+777, 1)
	id := o.id("v1")

	sameBytes(t, "cold read", readRange(t, c, o, id, 0, -1, ReadOptions{}), o.data)
	settle(t, c)
	calls, originBytes, _ := o.stats()
	if calls != 6 || originBytes != id.Size {
		t.Fatalf("cold read: %d fetches, %d bytes; want 6, %d", calls, originBytes, id.Size)
	}
	sameBytes(t, "warm read", readRange(t, c, o, id, 0, -1, ReadOptions{}), o.data)
	if calls2, bytes2, _ := o.stats(); calls2 != calls || bytes2 != originBytes {
		t.Fatalf("warm read went to the origin: %d fetches, %d bytes", calls2-calls, bytes2-originBytes)
	}
	s := c.Stats()
	if s.Hits != 6 || s.Misses != 6 || s.Fetches != 6 || s.BytesFromCache != id.Size || s.BytesFromOrigin != id.Size {
		t.Fatalf("stats %+v", s)
	}
	if s.Chunks != 6 || s.Used != id.Size || s.Groups[""].Used != id.Size {
		t.Fatalf("stats %+v", s)
	}
}

// (3) A changed Validator is a different object: it misses and never sees
// the old bytes.
func TestChangedValidatorMisses(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	v1 := newOrigin(3*testChunk, 1)
	v2 := newOrigin(3*testChunk, 2) // same key and size, new bytes
	sameBytes(t, "v1", readRange(t, c, v1, v1.id("etag-1"), 0, -1, ReadOptions{}), v1.data)
	sameBytes(t, "v2", readRange(t, c, v2, v2.id("etag-2"), 0, -1, ReadOptions{}), v2.data)
	if calls, _, _ := v2.stats(); calls != 3 {
		t.Fatalf("v2: %d fetches, want 3", calls)
	}
	// Both versions are cached side by side until evicted or invalidated.
	sameBytes(t, "v1 again", readRange(t, c, v1, v1.id("etag-1"), 0, -1, ReadOptions{}), v1.data)
	if calls, _, _ := v1.stats(); calls != 3 {
		t.Fatalf("v1: %d fetches, want 3", calls)
	}
	settle(t, c)
	if n := c.Invalidate("s3-east", "datasets/shard-0001.tar"); n != 6 {
		t.Fatalf("Invalidate dropped %d chunks, want 6", n)
	}
	if s := c.Stats(); s.Chunks != 0 || s.Used != 0 {
		t.Fatalf("after Invalidate: %+v", s)
	}
	if got := files(t, c.cfg.Dir, "chunks"); len(got) != 0 {
		t.Fatalf("chunk files left after Invalidate: %v", got)
	}
	sameBytes(t, "v2 after invalidate", readRange(t, c, v2, v2.id("etag-2"), 0, -1, ReadOptions{}), v2.data)
	if calls, _, _ := v2.stats(); calls != 6 {
		t.Fatalf("v2 after Invalidate: %d fetches, want 6", calls)
	}
}

// (4) Ranges at and around chunk boundaries return the exact bytes, from a
// cold cache and from a warm one.
func TestRangesAroundChunkBoundaries(t *testing.T) {
	const cs = testChunk
	o := newOrigin(4*cs+123, 3)
	size := int64(len(o.data))
	ranges := [][2]int64{
		{0, 1}, {0, cs}, {0, cs + 1}, {cs - 1, 1}, {cs - 1, 2}, {cs, 1}, {cs, cs},
		{cs - 1, cs + 2}, {cs + 1, 2*cs - 2}, {1, size - 2}, {0, size}, {size - 1, 1},
		{4 * cs, 123}, {4*cs - 1, 124}, {size, 0}, {0, 0}, {2*cs + 17, -1}, {3 * cs, -1},
	}
	warm := openCache(t, testConfig(t.TempDir()))
	for _, rg := range ranges {
		off, n := rg[0], rg[1]
		want := o.data[off:]
		if n >= 0 {
			want = o.data[off : off+n]
		}
		cold := openCache(t, testConfig(t.TempDir()))
		sameBytes(t, "cold", readRange(t, cold, o, o.id("v"), off, n, ReadOptions{}), want)
		sameBytes(t, "warm", readRange(t, warm, o, o.id("v"), off, n, ReadOptions{}), want)
		// Small reads, to cross boundaries inside one Read call's reach.
		r, err := warm.NewReader(context.Background(), o.id("v"), o.fetch, off, n, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(&smallReader{r, 7}, size+1))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "small reads", got, want)
	}
	for _, bad := range [][2]int64{{-1, 1}, {0, size + 1}, {size + 1, 0}, {size, 1}} {
		if _, err := warm.NewReader(context.Background(), o.id("v"), o.fetch, bad[0], bad[1], ReadOptions{}); !errors.Is(err, ErrInvalidRange) {
			t.Errorf("NewReader(%d, %d): %v, want ErrInvalidRange", bad[0], bad[1], err)
		}
	}
	if _, err := warm.NewReader(context.Background(), o.id(""), o.fetch, 0, 1, ReadOptions{}); !errors.Is(err, ErrNoValidator) {
		t.Errorf("no validator: %v, want ErrNoValidator", err)
	}
}

type smallReader struct {
	r io.Reader
	n int
}

func (s *smallReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// (9) A ChunkRef's file holds the chunk's exact bytes at Offset/Length, on
// a miss and on a hit, and stays readable after the chunk is dropped.
func TestChunkRefExactBytes(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(3*testChunk+10, 4)
	id := o.id("v")
	var refs []ChunkRef
	for pass := range 2 {
		for idx := range c.NumChunks(id.Size) {
			ref, err := c.Chunk(context.Background(), id, idx, o.fetch, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := o.data[idx*testChunk : min(id.Size, (idx+1)*testChunk)]
			if ref.Length != int64(len(want)) {
				t.Fatalf("pass %d chunk %d: length %d, want %d", pass, idx, ref.Length, len(want))
			}
			if _, err := ref.File.Seek(ref.Offset, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, ref.Length)
			if _, err := io.ReadFull(ref.File, got); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "chunk ref", got, want)
			refs = append(refs, ref)
		}
	}
	if calls, _, _ := o.stats(); calls != 4 {
		t.Fatalf("%d fetches, want 4", calls)
	}
	c.Invalidate(id.Store, id.Key)
	for i, ref := range refs {
		idx := int64(i % 4)
		want := o.data[idx*testChunk : min(id.Size, (idx+1)*testChunk)]
		got := make([]byte, ref.Length)
		if _, err := ref.File.ReadAt(got, ref.Offset); err != nil {
			t.Fatalf("ref %d after Invalidate: %v", i, err)
		}
		sameBytes(t, "ref after invalidate", got, want)
		ref.Release()
		ref.Release()
	}
	if _, err := c.Chunk(context.Background(), id, 4, o.fetch, ReadOptions{}); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("chunk past the end: %v", err)
	}
}

func TestZeroLengthObject(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(0, 5)
	if got := readRange(t, c, o, o.id("v"), 0, -1, ReadOptions{}); len(got) != 0 {
		t.Fatalf("got %d bytes", len(got))
	}
	if _, err := c.Chunk(context.Background(), o.id("v"), 0, o.fetch, ReadOptions{}); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("Chunk: %v, want ErrInvalidRange", err)
	}
	if calls, _, _ := o.stats(); calls != 0 {
		t.Fatalf("%d fetches for an empty object", calls)
	}
}

func TestClosedCache(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(testChunk, 6)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.NewReader(context.Background(), o.id("v"), o.fetch, 0, -1, ReadOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewReader after Close: %v", err)
	}
}

func TestOpenValidatesConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Capacity: 1},
		{Dir: t.TempDir()},
		{Dir: t.TempDir(), Capacity: 1, ChunkSize: 100},
	} {
		if _, err := Open(cfg); err == nil {
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestMetrics(t *testing.T) {
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(2*testChunk, 7)
	opts := ReadOptions{Group: "imagenet", GroupQuota: 1 << 20}
	readRange(t, c, o, o.id("v"), 0, -1, opts)
	settle(t, c)
	readRange(t, c, o, o.id("v"), 0, -1, opts)
	reg := prometheus.NewPedanticRegistry()
	if err := c.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP fedgate_cache_hits_total Chunk lookups served by a cached chunk.
# TYPE fedgate_cache_hits_total counter
fedgate_cache_hits_total 2
# HELP fedgate_cache_group_used_bytes Bytes of a group's cached chunks and fills.
# TYPE fedgate_cache_group_used_bytes gauge
fedgate_cache_group_used_bytes{group="imagenet"} 8192
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fedgate_cache_hits_total", "fedgate_cache_group_used_bytes"); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterMetrics(reg); err == nil {
		t.Fatal("second RegisterMetrics succeeded")
	}
}
