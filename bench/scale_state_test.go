package bench

// Region state at scale (issue 40): bucket and user creations/s, ListBuckets
// and ListMultipartUploads at 1k, 10k and 100k entries. Synthetic: commands
// go through a real one-node regionstate.Node (Raft log, FSM, bbolt file)
// in this process, not through S3, which would take too long to fill 100k
// entries; ListBuckets and ListMultipartUploads are timed on the node's
// State (what the gateway's handlers read), without HTTP and XML.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/regionstate"
)

var stateSizes = []int{1000, 10000, 100000}

// scaleRound is how many creations one timed round makes, by scaleWorkers
// concurrent appliers (the 16 clients).
const (
	scaleRound   = 2000
	scaleWorkers = 16
)

func openScaleNode(b *testing.B) *regionstate.Node {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := regionstate.Open(ctx, regionstate.Config{NodeID: "n1", Dir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 20 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// applyAll applies cmd(i) for i in [from, to) with scaleWorkers appliers.
func applyAll(b *testing.B, n *regionstate.Node, from, to int, cmd func(i int) regionstate.Command) {
	b.Helper()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var failed atomic.Value
	for range scaleWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := n.Apply(context.Background(), cmd(i)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// creationRate fills a node with size entries, then times rounds of
// scaleRound more, deleting each round's entries untimed so the size stays.
func creationRate(b *testing.B, size int, create, remove func(i int) regionstate.Command) {
	n := openScaleNode(b)
	applyAll(b, n, 0, size, create)
	var spent time.Duration
	rounds := 0
	for b.Loop() {
		start := time.Now()
		applyAll(b, n, size, size+scaleRound, create)
		spent += time.Since(start)
		rounds++
		b.StopTimer()
		applyAll(b, n, size, size+scaleRound, remove)
		b.StartTimer()
	}
	b.ReportMetric(float64(rounds*scaleRound)/spent.Seconds(), "creates/s")
}

func BenchmarkScaleBucketCreate(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("buckets=%d", size), func(b *testing.B) {
			creationRate(b, size,
				func(i int) regionstate.Command {
					return regionstate.CreateBucket{Bucket: regionstate.Bucket{Name: fmt.Sprintf("bucket-%08d", i), Owner: "root"}}
				},
				func(i int) regionstate.Command { return regionstate.DeleteBucket{Name: fmt.Sprintf("bucket-%08d", i)} })
		})
	}
}

func BenchmarkScaleUserCreate(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("users=%d", size), func(b *testing.B) {
			creationRate(b, size,
				func(i int) regionstate.Command {
					return regionstate.PutUser{User: regionstate.User{Name: fmt.Sprintf("user-%08d", i),
						AccessKey: fmt.Sprintf("AK%018d", i), SecretKey: "secret-key-of-forty-characters-00000000"}}
				},
				func(i int) regionstate.Command { return regionstate.DeleteUser{Name: fmt.Sprintf("user-%08d", i)} })
		})
	}
}

// BenchmarkScaleListBuckets times State.Buckets, the sorted list every
// ListBuckets answer (each page) is cut from.
func BenchmarkScaleListBuckets(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("buckets=%d", size), func(b *testing.B) {
			n := openScaleNode(b)
			applyAll(b, n, 0, size, func(i int) regionstate.Command {
				return regionstate.CreateBucket{Bucket: regionstate.Bucket{Name: fmt.Sprintf("bucket-%08d", i), Owner: "root"}}
			})
			for b.Loop() {
				if got := len(n.State().Buckets()); got != size {
					b.Fatalf("%d buckets, want %d", got, size)
				}
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkScaleListUploads lists every open upload of a bucket in pages
// of 1000 (ListMultipartUploads' max-uploads), resuming after each page's
// last upload as the gateway does, and reports the heap the open uploads
// take (runtime.MemStats.HeapAlloc after GC, before and after creating
// them, divided by their number).
func BenchmarkScaleListUploads(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("uploads=%d", size), func(b *testing.B) {
			n := openScaleNode(b)
			if err := n.Apply(context.Background(), regionstate.CreateBucket{Bucket: regionstate.Bucket{Name: "bkt", Owner: "root"}}); err != nil {
				b.Fatal(err)
			}
			before := heapInUse()
			created := time.Unix(1_700_000_000, 0)
			applyAll(b, n, 0, size, func(i int) regionstate.Command {
				return regionstate.CreateUpload{Upload: regionstate.MultipartUpload{
					ID: fmt.Sprintf("%032x", i*2654435761), Bucket: "bkt", Key: fmt.Sprintf("data/shard-%08d.tar", i),
					Store: "nas", Initiator: "root", Created: created,
					Meta: regionstate.ObjectMeta{ContentType: "application/x-tar"}}}
			})
			perUpload := float64(int64(heapInUse())-int64(before)) / float64(size)
			st := n.State()
			for b.Loop() {
				total, key, id := 0, "", ""
				for {
					page := st.UploadsAfter("bkt", "", key, id, 1000)
					total += len(page)
					if len(page) < 1000 {
						break
					}
					key, id = page[len(page)-1].Key, page[len(page)-1].ID
				}
				if total != size {
					b.Fatalf("listed %d uploads, want %d", total, size)
				}
			}
			b.ReportMetric(perUpload, "heap-B/upload")
		})
	}
}
