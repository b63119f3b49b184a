package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store/posix"
)

// region is a multi-node fedgate region of real processes on loopback.
type region struct {
	t     *testing.T
	nodes []*server
	byID  map[string]*server
	nas   string
	// internal holds each node's --internal-addr.
	internal []string
}

// writeBackPolicy declares a shared NAS store, a write-back bucket "ckpt"
// and a write-through bucket "datasets" on it.
func writeBackPolicy(t *testing.T, nas string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	yaml := `stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: ` + nas + `
buckets:
  - name: ckpt
    placement: {single: nas}
    write: write-back
  - name: datasets
    placement: {single: nas}
defaults: {store: nas}
`
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startRegion starts n nodes with --bootstrap-expect n over one shared NAS
// and waits until every member is healthy.
func startRegion(t *testing.T, n int, extra ...string) *region {
	t.Helper()
	nas := t.TempDir()
	return startRegionWith(t, n, writeBackPolicy(t, nas), nas, extra...)
}

// startRegionWith is startRegion with a policy file of the caller's.
func startRegionWith(t *testing.T, n int, policy, nas string, extra ...string) *region {
	t.Helper()
	addrs := freeAddrs(t, 3*n)
	httpAddrs, raftAddrs, internalAddrs := addrs[:n], addrs[n:2*n], addrs[2*n:]
	r := &region{t: t, byID: map[string]*server{}, nas: nas, internal: internalAddrs}
	for i := range n {
		var join []string
		for j := range n {
			if j != i {
				join = append(join, httpAddrs[j])
			}
		}
		id := fmt.Sprintf("n%d", i+1)
		args := append([]string{"--node-id", id, "--listen", httpAddrs[i], "--raft-addr", raftAddrs[i], "--internal-addr", internalAddrs[i],
			"--bootstrap-expect", fmt.Sprint(n), "--join", strings.Join(join, ","), "--config", policy}, extra...)
		p := testserver.Spawn(t, binary, t.TempDir(), args...)
		s := &server{Process: p, t: t}
		r.nodes = append(r.nodes, s)
		r.byID[id] = s
	}
	for _, s := range r.nodes {
		s.WaitReady(t)
	}
	r.settle(n)
	return r
}

// settle waits until want members are healthy and there is a leader, and
// returns the status.
func (r *region) settle(want int) adminapi.Cluster {
	r.t.Helper()
	var st adminapi.Cluster
	wait.For(r.t, 60*time.Second, fmt.Sprintf("%d healthy members and a leader", want), func() bool {
		for _, s := range r.nodes {
			if s.Exited() {
				continue
			}
			var err error
			if st, err = clusterStatus(s); err == nil && settled(st, want) {
				return true
			}
		}
		return false
	})
	return st
}

func (r *region) leader() *server { return r.byID[r.settle(len(r.nodes)).Leader] }

// drained waits until the region's write-back backlog is empty.
func (r *region) drained(via *server, timeout time.Duration) {
	r.t.Helper()
	wait.For(r.t, timeout, "the write-back backlog to drain", func() bool {
		st, err := clusterStatus(via)
		return err == nil && st.DrainBacklog.Objects == 0
	})
}

func isNotFound(err error) bool {
	var nf *types.NotFound
	var nk *types.NoSuchKey
	var ae smithy.APIError
	return errors.As(err, &nf) || errors.As(err, &nk) || errors.As(err, &ae) && ae.ErrorCode() == "NotFound"
}

// TestClusterReadAfterWrite: once a node acknowledges a write, every node
// sees it — PUT via node 1 then GET via node 3, 1,000 times with random
// keys; overwrite via node 2, GET via node 3; DELETE via node 3, HEAD via
// node 1; LIST via node 2 — for a write-through and a write-back bucket.
func TestClusterReadAfterWrite(t *testing.T) {
	r := startRegion(t, 3)
	c1, c2, c3 := r.nodes[0].root(), r.nodes[1].root(), r.nodes[2].root()
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	for _, bucket := range []string{"datasets", "ckpt"} {
		t.Run(bucket, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(bucket))))
			for i := range rounds {
				key := fmt.Sprintf("raw/%d/%x", i, rng.Uint64())
				data := []byte(fmt.Sprintf("%s %d %x", bucket, i, rng.Uint64()))
				put(t, c1, bucket, key, data)
				if got, _ := getBytes(t, c3, bucket, key); !bytes.Equal(got, data) {
					t.Fatalf("round %d: GET via node 3 returned %q, want %q", i, got, data)
				}
			}
			put(t, c1, bucket, "ow", []byte("old"))
			put(t, c2, bucket, "ow", []byte("new bytes"))
			if got, _ := getBytes(t, c3, bucket, "ow"); string(got) != "new bytes" {
				t.Fatalf("after an overwrite via node 2, node 3 returned %q", got)
			}
			_, err := c3.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("ow")})
			mustOK(t, err)
			if _, err := c1.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("ow")}); !isNotFound(err) {
				t.Fatalf("HEAD via node 1 after DELETE via node 3: %v, want 404", err)
			}
			// A multipart upload whose parts arrive at different nodes
			// completes on a third and reads back through every node.
			mp := payload(bucket+"-mp", 11<<20)
			cu, err := c1.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp")})
			mustOK(t, err)
			var parts []types.CompletedPart
			for i, span := range [][2]int{{0, 6 << 20}, {6 << 20, 11 << 20}} {
				up, err := []*s3.Client{c2, c3}[i].UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("mp"),
					UploadId: cu.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(mp[span[0]:span[1]])})
				mustOK(t, err)
				parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
			}
			_, err = c1.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"),
				UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			mustOK(t, err)
			for _, c := range []*s3.Client{c1, c2, c3} {
				if got, _ := getBytes(t, c, bucket, "mp"); !bytes.Equal(got, mp) {
					t.Fatal("a multipart object assembled from parts sent to different nodes reads back wrong")
				}
			}

			put(t, c1, bucket, "listed/x", []byte("x"))
			out, err := c2.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("listed/")})
			mustOK(t, err)
			if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "listed/x" {
				t.Fatalf("LIST via node 2 right after PUT via node 1: %+v", out.Contents)
			}
			out, err = c2.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("raw/"), Delimiter: aws.String("/")})
			mustOK(t, err)
			if len(out.CommonPrefixes) != min(rounds, 1000) {
				t.Fatalf("LIST raw/ with a delimiter: %d common prefixes, want %d", len(out.CommonPrefixes), rounds)
			}
		})
	}
	// An S3-created bucket and a user made through one node work at once on another.
	_, err := c1.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("fresh")})
	mustOK(t, err)
	put(t, c3, "fresh", "k", []byte("v"))
	out, err := r.nodes[0].fedgate("user", "add", "dave", "--access-key", "DAVEACCESSKEY0000001", "--secret-key", "dave-secret-key-00001")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := r.nodes[2].s3Client("DAVEACCESSKEY0000001", "dave-secret-key-00001").ListBuckets(ctx(t), &s3.ListBucketsInput{}); err != nil {
		t.Fatalf("a user added via node 1 is unknown to node 3 right after: %v", err)
	}
	// Everything written to the write-back bucket reaches the NAS.
	r.drained(r.nodes[1], 60*time.Second)
}

// payload is the deterministic content of a test object.
func payload(key string, size int) []byte {
	seed := sha256.Sum256([]byte(key))
	rng := rand.New(rand.NewChaCha8(seed))
	b := make([]byte, size)
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// writeBackLoad runs puts concurrent write-back PUTs of 1..maxMiB MiB and
// multiparts 3-part uploads whose parts go to different nodes, calling
// mid once about a third of them have been acknowledged. It returns the
// acknowledged keys with their sha256, and every key attempted.
func writeBackLoad(t *testing.T, r *region, tag string, puts, multiparts, maxMiB int, mid func()) (acked map[string][32]byte, attempted map[string]bool) {
	t.Helper()
	var (
		mu      sync.Mutex
		ackedN  atomic.Int64
		midOnce sync.Once
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 12)
	)
	acked, attempted = map[string][32]byte{}, map[string]bool{}
	record := func(key string, sum [32]byte) {
		mu.Lock()
		acked[key] = sum
		mu.Unlock()
		if ackedN.Add(1) == int64((puts+multiparts)/3) {
			midOnce.Do(func() { go mid() })
		}
	}
	rng := rand.New(rand.NewPCG(7, uint64(len(tag))))
	for i := range puts {
		key := fmt.Sprintf("%s/put-%03d", tag, i)
		size := 1<<20 + rng.IntN(maxMiB<<20-1<<20+1)
		node := r.nodes[i%len(r.nodes)]
		attempted[key] = true
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			data := payload(key, size)
			_, err := node.root().PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(key), Body: bytes.NewReader(data)})
			if err == nil {
				record(key, sha256.Sum256(data))
			}
		})
	}
	for i := range multiparts {
		key := fmt.Sprintf("%s/mp-%02d", tag, i)
		attempted[key] = true
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			n := len(r.nodes)
			data := payload(key, 11<<20)
			cu, err := r.nodes[i%n].root().CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String(key)})
			if err != nil {
				return
			}
			var parts []types.CompletedPart
			for p, span := range [][2]int{{0, 5 << 20}, {5 << 20, 10 << 20}, {10 << 20, 11 << 20}} {
				up, err := r.nodes[(i+p+1)%n].root().UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String("ckpt"), Key: aws.String(key),
					UploadId: cu.UploadId, PartNumber: aws.Int32(int32(p + 1)), Body: bytes.NewReader(data[span[0]:span[1]])})
				if err != nil {
					return
				}
				parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(p + 1)), ETag: up.ETag})
			}
			_, err = r.nodes[(i+2)%n].root().CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("ckpt"),
				Key: aws.String(key), UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			if err == nil {
				record(key, sha256.Sum256(data))
			}
		})
	}
	wg.Wait()
	midOnce.Do(mid) // fewer than a third acknowledged: run it anyway
	return acked, attempted
}

// checkObjects reads every acknowledged key through every live node and
// compares sha256; nothing outside the attempted keys is listed, and no
// listed object has bytes other than what was sent.
func checkObjects(t *testing.T, r *region, tag string, acked map[string][32]byte, attempted map[string]bool) {
	t.Helper()
	for _, s := range r.nodes {
		if s.Exited() {
			continue
		}
		c := s.root()
		for key, want := range acked {
			got, _ := getBytes(t, c, "ckpt", key)
			if sha256.Sum256(got) != want {
				t.Fatalf("%s via %s: %d bytes with the wrong sha256", key, s.Endpoint, len(got))
			}
		}
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("ckpt"), Prefix: aws.String(tag + "/")})
		listed := 0
		for p.HasMorePages() {
			page, err := p.NextPage(ctx(t))
			mustOK(t, err)
			for _, o := range page.Contents {
				key := aws.ToString(o.Key)
				listed++
				if !attempted[key] {
					t.Fatalf("%s lists %s, which nobody wrote", s.Endpoint, key)
				}
				if _, ok := acked[key]; !ok {
					// Not acknowledged (its node died), yet committed: then it must be whole.
					got, _ := getBytes(t, c, "ckpt", key)
					if !bytes.Equal(got, payload(key, len(got))) || int64(len(got)) != aws.ToInt64(o.Size) {
						t.Fatalf("unacknowledged %s is visible with bytes nobody sent", key)
					}
				}
			}
		}
		if listed < len(acked) {
			t.Fatalf("%s lists %d objects under %s/, but %d were acknowledged", s.Endpoint, listed, tag, len(acked))
		}
	}
}

// checkNAS reads every acknowledged key straight from the shared store.
func checkNAS(t *testing.T, r *region, acked map[string][32]byte) {
	t.Helper()
	st, err := posix.New("nas", policies.Location{Cloud: "onprem", Region: "lga1"}, r.nas)
	mustOK(t, err)
	for key, want := range acked {
		info, err := st.Stat(ctx(t), "ckpt/"+key)
		if err != nil {
			t.Fatalf("%s is not in the store after the drain: %v", key, err)
		}
		rc, err := st.ReadRange(ctx(t), "ckpt/"+key, 0, info.Size, "")
		if err != nil {
			t.Fatalf("%s is not in the store after the drain: %v", key, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		mustOK(t, err)
		if [32]byte(h.Sum(nil)) != want {
			t.Fatalf("%s in the store has the wrong bytes", key)
		}
	}
}

// TestClusterWriteBackSurvivesKill: 100 concurrent write-back PUTs and 10
// multipart uploads spread over 3 nodes; kill -9 the leader mid-way and
// restart it; then kill -9 a follower mid-way (it holds staging copies)
// and check reads before restarting it. Every acknowledged object is
// readable, byte-identical, through every node and reaches the store.
// Last, a node restarted with a wiped data dir catches up from a snapshot.
func TestClusterWriteBackSurvivesKill(t *testing.T) {
	puts, maxMiB := 100, 8
	if os.Getenv("FEDGATE_SOAK") != "" {
		puts, maxMiB = 200, 64
	}
	r := startRegion(t, 3, "--raft-trailing-logs", "64", "--staging-size", "4GiB")

	// Round 1: the leader dies mid-way.
	leader := r.leader()
	acked, attempted := writeBackLoad(t, r, "r1", puts, 10, maxMiB, func() { leader.stop(syscall.SIGKILL) })
	t.Logf("round 1: %d of %d writes acknowledged with the leader killed mid-way", len(acked), len(attempted))
	if len(acked) < len(attempted)/2 {
		t.Fatalf("only %d of %d writes acknowledged", len(acked), len(attempted))
	}
	leader.start()
	r.settle(3)
	checkObjects(t, r, "r1", acked, attempted)
	r.drained(r.nodes[0], 3*time.Minute)
	checkNAS(t, r, acked)

	// Round 2: a follower (which holds staging copies) dies mid-way; the
	// others serve everything and drain without it.
	var follower *server
	lead := r.leader()
	for _, s := range r.nodes {
		if s != lead {
			follower = s
			break
		}
	}
	acked2, attempted2 := writeBackLoad(t, r, "r2", puts, 10, maxMiB, func() { follower.stop(syscall.SIGKILL) })
	t.Logf("round 2: %d of %d writes acknowledged with a follower killed mid-way", len(acked2), len(attempted2))
	checkObjects(t, r, "r2", acked2, attempted2)
	r.drained(lead, 3*time.Minute)
	checkNAS(t, r, acked2)
	follower.start()
	r.settle(3)
	checkObjects(t, r, "r2", acked2, attempted2)

	// A node restarted with a wiped data dir rejoins and catches up from a
	// snapshot (the log is compacted to 64 entries after the snapshot).
	lead = r.leader()
	var wiped *server
	for _, s := range r.nodes {
		if s != lead {
			wiped = s
			break
		}
	}
	wiped.stop(syscall.SIGTERM)
	mustOK(t, os.RemoveAll(wiped.DataDir))
	mustOK(t, os.MkdirAll(wiped.DataDir, 0o700))
	_, err := lead.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("after-wipe")})
	mustOK(t, err)
	for i := range 100 {
		put(t, lead.root(), "after-wipe", fmt.Sprintf("k%d", i), []byte("v"))
	}
	if out, err := lead.fedgate("cluster", "snapshot"); err != nil {
		t.Fatalf("cluster snapshot: %v %s", err, out)
	}
	wiped.start()
	r.settle(3)
	wait.For(t, 30*time.Second, "the wiped node to serve the bucket made while it was gone", func() bool {
		_, err := wiped.root().HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("after-wipe"), Key: aws.String("k99")})
		return err == nil
	})
	// A follower that installs the leader's snapshot keeps it in its own
	// snapshot store; one that replayed the log would have none yet.
	snaps, _ := os.ReadDir(filepath.Join(wiped.DataDir, "raft", "snapshots"))
	if len(snaps) == 0 {
		t.Fatal("the wiped node caught up without installing a snapshot")
	}
	checkObjects(t, r, "r1", acked, attempted)
}
