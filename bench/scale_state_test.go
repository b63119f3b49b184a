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

// BenchmarkScaleListBuckets times State.Buckets, the whole sorted list (an
// unpaged ListBuckets of root; before issue 40's paging every page was cut
// from it).
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

// fillBuckets creates size buckets bucket-00000000..., every tenth owned
// by "alice", the rest by root.
func fillBuckets(b *testing.B, n *regionstate.Node, size int) {
	b.Helper()
	applyAll(b, n, 0, 1, func(int) regionstate.Command {
		return regionstate.PutUser{User: regionstate.User{Name: "alice", AccessKey: "AKALICE", SecretKey: "secret-key-of-forty-characters-00000000"}}
	})
	applyAll(b, n, 0, size, func(i int) regionstate.Command {
		owner := "root"
		if i%10 == 0 {
			owner = "alice"
		}
		return regionstate.CreateBucket{Bucket: regionstate.Bucket{Name: fmt.Sprintf("bucket-%08d", i), Owner: owner}}
	})
}

// BenchmarkScaleListBucketsPage times one ListBuckets page as the
// namespace reads it (State.VisibleBuckets, the region's part of
// Namespace.ListBucketsPage): root's page of 1,000 from the middle of the
// list, and the page of 100 of a user who owns one bucket in ten, from the
// middle of theirs.
func BenchmarkScaleListBucketsPage(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("buckets=%d", size), func(b *testing.B) {
			n := openScaleNode(b)
			fillBuckets(b, n, size)
			st := n.State()
			page := func(b *testing.B, user string, root bool, after string, limit int) {
				for b.Loop() {
					got := 0
					for range st.VisibleBuckets(user, root, "", after) {
						if got++; got == limit {
							break
						}
					}
					if got != limit {
						b.Fatalf("page of %d, want %d", got, limit)
					}
				}
			}
			mid := fmt.Sprintf("bucket-%08d", size/2)
			b.Run("root-1000", func(b *testing.B) { page(b, "root", true, mid, min(1000, size/2-1)) })
			b.Run("owner-100", func(b *testing.B) { page(b, "alice", false, mid, min(100, size/20-1)) })
		})
	}
}

// BenchmarkScaleConfigWrite times grants and bucket configuration writes
// with size buckets, each with one grant (to one of 100 users) and one
// configuration: rounds of 2,000 writes (each changes a value, so each is
// a write) by 16 appliers.
func BenchmarkScaleConfigWrite(b *testing.B) {
	for _, size := range stateSizes {
		b.Run(fmt.Sprintf("buckets=%d", size), func(b *testing.B) {
			n := openScaleNode(b)
			fillBuckets(b, n, size)
			applyAll(b, n, 0, 100, func(i int) regionstate.Command {
				return regionstate.PutUser{User: regionstate.User{Name: fmt.Sprintf("user-%03d", i),
					AccessKey: fmt.Sprintf("AKUSER%014d", i), SecretKey: "secret-key-of-forty-characters-00000000"}}
			})
			grant := func(i int) regionstate.Command {
				perm := regionstate.PermRead
				if i/size%2 == 1 {
					perm = regionstate.PermWrite
				}
				return regionstate.Grant{User: fmt.Sprintf("user-%03d", i%size%100), Bucket: fmt.Sprintf("bucket-%08d", i%size), Perm: perm}
			}
			conf := func(i int) regionstate.Command {
				return regionstate.SetBucketConfig{Bucket: fmt.Sprintf("bucket-%08d", i%size), Kind: regionstate.BucketConfTagging,
					Value: fmt.Sprintf("<Tagging><TagSet><Tag><Key>round</Key><Value>%d</Value></Tag></TagSet></Tagging>", i/size)}
			}
			applyAll(b, n, 0, size, grant)
			applyAll(b, n, 0, size, conf)
			for _, w := range []struct {
				name string
				cmd  func(int) regionstate.Command
			}{{"grant", grant}, {"bucket-config", conf}} {
				b.Run(w.name, func(b *testing.B) {
					next, spent, rounds := size, time.Duration(0), 0
					for b.Loop() {
						start := time.Now()
						applyAll(b, n, next, next+scaleRound, w.cmd)
						spent += time.Since(start)
						next += scaleRound
						rounds++
					}
					b.ReportMetric(float64(rounds*scaleRound)/spent.Seconds(), "writes/s")
				})
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
