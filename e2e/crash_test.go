package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/wait"
)

// TestRestartKeepsState: buckets, objects, a multipart upload in progress and
// users survive a clean restart (SIGTERM) on the same data dir.
func TestRestartKeepsState(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("keep")})
	mustOK(t, err)
	put(t, c, "keep", "obj", []byte("kept"))
	mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("keep"), Key: aws.String("big")})
	mustOK(t, err)
	p1data := randBytes(t, 5*mib)
	p1 := uploadPart(t, c, "keep", "big", *mp.UploadId, 1, p1data)
	out, err := s.fedgate("user", "add", "carol", "--access-key", "CAROLACCESSKEY000001", "--secret-key", "carol-secret-key-0001")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}

	s.restart(syscall.SIGTERM)
	c = s.root()
	if got, _ := getBytes(t, c, "keep", "obj"); string(got) != "kept" {
		t.Fatal("object lost on restart")
	}
	p2 := uploadPart(t, c, "keep", "big", *mp.UploadId, 2, []byte("end"))
	_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("keep"), Key: aws.String("big"),
		UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{p1, p2}}})
	mustOK(t, err)
	if got, _ := getBytes(t, c, "keep", "big"); !bytes.Equal(got, append(p1data, "end"...)) {
		t.Fatal("multipart upload across restart: bytes differ")
	}
	carol := s.s3Client("CAROLACCESSKEY000001", "carol-secret-key-0001")
	_, err = carol.ListBuckets(ctx(t), &s3.ListBucketsInput{})
	mustOK(t, err)
}

// TestCrashDuringWrites kills the server with SIGKILL in the middle of 20
// concurrent PUTs and multipart uploads, restarts it, and checks that every
// acknowledged object reads back byte-identical and that no partial object
// is visible.
func TestCrashDuringWrites(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("crash")})
	mustOK(t, err)

	var (
		mu       sync.Mutex
		acked    = map[string][32]byte{} // key -> sha256 of the acknowledged bytes
		intended = map[string][32]byte{} // key -> sha256 of what was being written
		wg       sync.WaitGroup
		stop     atomic.Bool
		okCount  atomic.Int64
	)
	record := func(m map[string][32]byte, k string, sum [32]byte) { mu.Lock(); m[k] = sum; mu.Unlock() }
	for w := range 20 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%02d/obj-%04d", w, i)
				if w%4 == 0 { // every fourth writer does multipart uploads
					a, b := randBytes(t, 5*mib), randBytes(t, 64<<10)
					sum := sha256.Sum256(append(append([]byte{}, a...), b...))
					record(intended, key, sum)
					mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("crash"), Key: aws.String(key)})
					if err != nil {
						return
					}
					var parts []types.CompletedPart
					for n, data := range [][]byte{a, b} {
						out, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String("crash"), Key: aws.String(key),
							UploadId: mp.UploadId, PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(data)})
						if err != nil {
							return
						}
						parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(n + 1)), ETag: out.ETag})
					}
					_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("crash"), Key: aws.String(key),
						UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
					if err != nil {
						return
					}
					record(acked, key, sum)
				} else {
					data := randBytes(t, 64<<10+w*37<<10+i%7*1000)
					sum := sha256.Sum256(data)
					record(intended, key, sum)
					if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("crash"), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
						return
					}
					record(acked, key, sum)
				}
				okCount.Add(1)
			}
		})
	}
	wait.For(t, 60*time.Second, "writes to be acknowledged", func() bool { return okCount.Load() >= 60 })
	s.stop(syscall.SIGKILL)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes acknowledged before SIGKILL", len(acked))

	s.start()
	c = s.root()
	for key, sum := range acked {
		got, _ := getBytes(t, c, "crash", key)
		if sha256.Sum256(got) != sum {
			t.Fatalf("acknowledged object %s differs after crash", key)
		}
	}
	listed := 0
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("crash")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx(t))
		mustOK(t, err)
		for _, o := range page.Contents {
			listed++
			want, ok := intended[*o.Key]
			if !ok {
				t.Fatalf("unexpected object %s after crash", *o.Key)
			}
			got, _ := getBytes(t, c, "crash", *o.Key)
			if sha256.Sum256(got) != want {
				t.Fatalf("partial or corrupt object %s visible after crash (%d bytes)", *o.Key, len(got))
			}
		}
	}
	if listed < len(acked) {
		t.Fatalf("listing shows %d objects, %d were acknowledged", listed, len(acked))
	}
}
