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
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
//   - load-s: from Open's start until every record is in memory (Loaded);
//     load-cpu-s: the process's CPU time (user and system) meanwhile;
//   - anon-B/chunk, file-B/chunk: the process's resident set after the
//     load, less before Open, divided by the chunks: anonymous memory
//     (RssAnon: the heap and the runtime's), and file pages (RssFile: the
//     pages of index.db, mapped by bbolt, that the load touched; clean page
//     cache the kernel may drop).
//
// Run: go test -run '^$' -bench IndexScale -benchtime 1x ./cachetier/
func BenchmarkIndexScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			for b.Loop() {
				m := indexScale(b, n)
				b.ReportMetric(m.heapPer, "heap-B/chunk")
				b.ReportMetric(m.openPer, "open-B/chunk")
				b.ReportMetric(m.anonPer, "anon-B/chunk")
				b.ReportMetric(m.filePer, "file-B/chunk")
				b.ReportMetric(m.ready.Seconds(), "ready-s")
				b.ReportMetric(m.load.Seconds(), "load-s")
				b.ReportMetric(m.loadCPU.Seconds(), "load-cpu-s")
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

type scaleResult struct {
	heapPer, openPer     float64
	anonPer, filePer     float64
	ready, load, loadCPU time.Duration
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss returns the process's RssAnon and RssFile in bytes.
func rss(b *testing.B) (anon, file int64) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "RssAnon" && name != "RssFile" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		if name == "RssAnon" {
			anon = kb << 10
		} else {
			file = kb << 10
		}
	}
	return anon, file
}

func indexScale(b *testing.B, n int) (m scaleResult) {
	var heapPer, openPer float64
	var ready, load time.Duration
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
	debug.FreeOSMemory()
	anon0, file0 := rss(b)
	cpu0 := cpuTime()
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
	m.loadCPU = cpuTime() - cpu0
	openPer = float64(liveHeap()-h0) / float64(n)
	debug.FreeOSMemory() // what the GC freed, returned: RSS is then what is live or mapped
	anon, file := rss(b)
	m.anonPer, m.filePer = float64(anon-anon0)/float64(n), float64(file-file0)/float64(n)
	if got := c.Stats().Chunks; got != n {
		b.Errorf("%d chunks after the load, want %d", got, n)
	}
	close(release)
	c.Close()
	m.heapPer, m.openPer, m.ready, m.load = heapPer, openPer, ready, load
	return m
}
