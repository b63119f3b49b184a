package cachetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fedgate/fedgate/store"
)

// BenchmarkIndexScale measures the chunk index at 10k, 100k and 1M chunks
// (docs/benchmarks.md, "Cache index at scale"). The chunks are synthetic:
// records written straight into index.db in the cache's own persistence
// format (appendRecord), one chunk per object (small objects: the most
// index per byte cached), keys like "datasets/train/shard-00001234.tar",
// quoted 32-hex-digit ETags as validators. No chunk files are written:
// Open does not look at them (verify.go), and the background verification
// is held back while memory is measured.
//
// Reported per size:
//   - heap-B/chunk: live heap after a GC with the index built by addLocked
//     (what the fill path builds), divided by the chunks;
//   - open-B/chunk: live heap after a GC once the background load has
//     brought every record of index.db into memory (verification held
//     back, so its queue is counted);
//   - ready-s: from Open's start to the first hit served: Open, then
//     Chunk of the chunk whose record comes last in index.db (not loaded
//     yet: found in index.db, its file checked, served);
//   - load-s: from Open's start until every record is in memory (Loaded).
//
// Run: go test -run '^$' -bench IndexScale -benchtime 1x ./cachetier/
func BenchmarkIndexScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			for b.Loop() {
				heap, open, ready, load := indexScale(b, n)
				b.ReportMetric(heap, "heap-B/chunk")
				b.ReportMetric(open, "open-B/chunk")
				b.ReportMetric(ready.Seconds(), "ready-s")
				b.ReportMetric(load.Seconds(), "load-s")
			}
		})
	}
}

func scaleRecord(i int) record {
	return record{
		ck: chunkID{objKey{"s3-main", fmt.Sprintf("datasets/train/shard-%08d.tar", i),
			store.Validator(fmt.Sprintf("\"%032x\"", uint64(i)*0x9e3779b97f4a7c15))}, 0},
		group: "train", objSize: 64 << 10, length: 64 << 10,
		lastAccess: int64(i), sum: uint32(i), hasSum: true,
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func indexScale(b *testing.B, n int) (heapPer, openPer float64, ready, load time.Duration) {
	cfg := Config{Dir: b.TempDir(), Capacity: 1 << 50, NoSync: true}

	// The index as the fill path builds it, in memory only.
	c, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	<-c.Verified()
	h0 := liveHeap()
	c.mu.Lock()
	g := c.groupLocked("train", -1)
	for i := range n {
		r := scaleRecord(i)
		c.addLocked(r.ck, r.length, g, r.lastAccess)
	}
	c.mu.Unlock()
	heapPer = float64(liveHeap()-h0) / float64(n)
	c.mu.Lock()
	c.idx = newIndex()
	c.pending = nil
	c.mu.Unlock()

	// The same chunks as records in index.db, put in key order (bbolt
	// appends fastest so; the order does not matter to Open).
	names := make([][32]byte, n)
	for i := range n {
		names[i] = chunkName(scaleRecord(i).ck)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(names[a][:], names[b][:]) })
	// The probe: the chunk whose record the loader meets last, with a
	// real file and checksum.
	probe := order[n-1]
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(c.chunkPath(names[probe]), data, 0o600); err != nil {
		b.Fatal(err)
	}
	probeSum := crc32.Checksum(data, castagnoli)
	for lo := 0; lo < n; lo += 100_000 {
		err = c.db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketChunks)
			bk.FillPercent = 0.9
			for _, i := range order[lo:min(lo+100_000, n)] {
				r := scaleRecord(i)
				if i == probe {
					r.sum = probeSum
				}
				if err := bk.Put(names[i][:], appendRecord(nil, &r)); err != nil {
					return err
				}
			}
			if lo+100_000 >= n {
				return recountTotals(tx) // as the cache's own writes keep them
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}

	release := make(chan struct{})
	testVerifyStart = func() { <-release }
	defer func() { testVerifyStart = nil }()
	h0 = liveHeap()
	start := time.Now()
	c, err = Open(cfg)
	if err != nil {
		close(release)
		b.Fatal(err)
	}
	pr := scaleRecord(probe)
	id := ObjectID{pr.ck.obj.store, pr.ck.obj.key, pr.ck.obj.validator, pr.objSize}
	ref, err := c.Chunk(context.Background(), id, 0, func(context.Context, int64, int64) (io.ReadCloser, error) {
		return nil, errors.New("the probe chunk must be a hit")
	}, ReadOptions{Group: "train"})
	ready = time.Since(start)
	if err != nil {
		close(release)
		b.Fatal(err)
	}
	ref.Release()
	if got := c.Stats().Chunks; got != n {
		b.Errorf("%d chunks after Open, want %d", got, n)
	}
	<-c.Loaded()
	load = time.Since(start)
	openPer = float64(liveHeap()-h0) / float64(n)
	if got := c.Stats().Chunks; got != n {
		b.Errorf("%d chunks after the load, want %d", got, n)
	}
	close(release)
	c.Close()
	return heapPer, openPer, ready, load
}
