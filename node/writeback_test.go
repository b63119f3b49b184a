package node_test

// Write-back and the drainer on an in-process 3-node region
// (node/nodetest): staged copies, reads through every node before and
// after the drain, the death of the node that took a write, multipart
// uploads staged on different nodes, and deletes.

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node/nodetest"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// getAll reads bucket/key through c.
func getAll(ctx context.Context, c *s3.Client, bucket, key string) ([]byte, string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, aws.ToString(out.ETag), err
}

// readEverywhere checks that every running node serves bucket/key as want
// with ETag etag.
func readEverywhere(t *testing.T, ctx context.Context, r *nodetest.Region, bucket, key string, want []byte, etag string) {
	t.Helper()
	for i := range r.Len() {
		if r.Node(i) == nil {
			continue
		}
		got, gotTag, err := getAll(ctx, r.Client(i), bucket, key)
		if err != nil {
			t.Fatalf("GET %s/%s through node %d: %v", bucket, key, i, err)
		}
		if !bytes.Equal(got, want) || gotTag != `"`+etag+`"` {
			t.Fatalf("GET %s/%s through node %d: %d bytes (md5 %s), ETag %s; want %d bytes (md5 %s), ETag %q",
				bucket, key, i, len(got), md5hex(got), gotTag, len(want), md5hex(want), etag)
		}
	}
}

// storeOf opens the region's shared store as a node does, to look at what
// was drained.
func storeOf(t *testing.T, r *nodetest.Region) *posix.Store {
	t.Helper()
	s, err := posix.New("nas", policies.Location{Cloud: "onprem", Region: "lga1"}, r.StoreDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeHolds reads storeKey from the store; ok false when it is absent.
func storeHolds(t *testing.T, s *posix.Store, storeKey string) ([]byte, bool) {
	t.Helper()
	ctx := context.Background()
	info, err := s.Stat(ctx, storeKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("store Stat %s: %v", storeKey, err)
	}
	rc, err := s.ReadRange(ctx, storeKey, 0, info.Size, "")
	if err != nil {
		t.Fatalf("store read %s: %v", storeKey, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("store read %s: %v", storeKey, err)
	}
	return b, true
}

// blockDrain makes every write of storeKey to the shared store fail until
// the returned func is called: a non-empty directory stands where the
// object's file goes, so the drain's rename fails and is retried. It holds
// a write-back write in staging while a test reads it. The path is found
// by writing a probe through the store itself.
func blockDrain(t *testing.T, r *nodetest.Region, storeKey string) (unblock func()) {
	t.Helper()
	s := storeOf(t, r)
	probe := []byte("nodetest probe " + storeKey)
	if _, err := s.Put(context.Background(), storeKey, bytes.NewReader(probe), int64(len(probe)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var path string
	err := filepath.WalkDir(r.StoreDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, probe) {
				path = p
			}
		}
		return err
	})
	if err != nil || path == "" {
		t.Fatalf("the probe of %s is not in the store directory (%v)", storeKey, err)
	}
	if err := s.Delete(context.Background(), storeKey); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o755); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
	}
}

// journaled returns node i's journal entry for bucket/key.
func journaled(r *nodetest.Region, i int, bucket, key string) (regionstate.JournalEntry, bool) {
	return r.Node(i).Raft().State().JournalEntry(bucket, key)
}

// waitDrained waits until no running node's journal holds bucket/key.
func waitDrained(t *testing.T, r *nodetest.Region, bucket, key string) {
	t.Helper()
	wait.For(t, nodetest.Timeout, fmt.Sprintf("the journal entry of %s/%s to clear on every node", bucket, key), func() bool {
		for i := range r.Len() {
			if r.Node(i) == nil {
				continue
			}
			if _, ok := journaled(r, i, bucket, key); ok {
				return false
			}
		}
		return true
	})
}

// stagedOn reports which running nodes hold staged file id, and checks
// each copy holds want.
func stagedOn(t *testing.T, r *nodetest.Region, id string, want []byte) []string {
	t.Helper()
	var on []string
	for i := range r.Len() {
		n := r.Node(i)
		if n == nil {
			continue
		}
		rc, _, err := n.Namespace().OpenStaged(id, 0, -1)
		if err != nil {
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("node %s's staged copy %s: %d bytes, %v; want the %d bytes written", n.ID(), id, len(got), err, len(want))
		}
		on = append(on, n.ID())
	}
	slices.Sort(on)
	return on
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestWriteBackPutIsStagedReadEverywhereAndDrained(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	const bucket, key = "ckpt", "model/step-1"
	unblock := blockDrain(t, r, "ckpt/"+key)
	body := randomBytes(300<<10, 1)
	taker := r.Followers()[0]
	out, err := r.Client(taker).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ETag) != `"`+md5hex(body)+`"` {
		t.Fatalf("PUT ETag %s, want the body's MD5 %s", aws.ToString(out.ETag), md5hex(body))
	}

	// Acknowledged: journaled on every node with one segment on 2 nodes,
	// the first the node that took the PUT, each holding the bytes.
	r.WaitForReplication()
	e, ok := journaled(r, taker, bucket, key)
	if !ok {
		t.Fatal("the acknowledged write is not in the journal (drained although the store refuses it?)")
	}
	if e.Tombstone || e.Size != int64(len(body)) || e.ETag != md5hex(body) || e.StoreKey != "ckpt/"+key || len(e.Segments) != 1 {
		t.Fatalf("journal entry %+v; want %d bytes, ETag %s, store key ckpt/%s, one segment", e, len(body), md5hex(body), key)
	}
	seg := e.Segments[0]
	if len(seg.Nodes) != 2 || seg.Nodes[0] != r.Node(taker).ID() || seg.Nodes[1] == seg.Nodes[0] {
		t.Fatalf("segment nodes %v; want 2 nodes, %s first", seg.Nodes, r.Node(taker).ID())
	}
	for i := range r.Len() {
		if e2, ok := journaled(r, i, bucket, key); !ok || e2.Version != e.Version {
			t.Fatalf("node %d: journal entry %v (version %d); want version %d", i, ok, e2.Version, e.Version)
		}
	}
	if on := stagedOn(t, r, seg.ID, body); !slices.Equal(on, sorted(seg.Nodes)) {
		t.Fatalf("staged copies on %v; want exactly %v", on, sorted(seg.Nodes))
	}
	// Readable through every node from staging, the node without a copy
	// included.
	readEverywhere(t, ctx, r, bucket, key, body, md5hex(body))

	unblock()
	waitDrained(t, r, bucket, key)
	got, ok := storeHolds(t, storeOf(t, r), e.StoreKey)
	if !ok || !bytes.Equal(got, body) {
		t.Fatalf("after the drain the store holds %d bytes (present %v); want the %d bytes written", len(got), ok, len(body))
	}
	// Drained copies are kept on every holder for readers still reading
	// them (the sweep's grace), marked so a new write may take their room.
	wait.For(t, nodetest.Timeout, "the staged copies to be marked drained", func() bool {
		for i := range r.Len() {
			if slices.Contains(seg.Nodes, r.Node(i).ID()) && !r.Node(i).Staging().DrainedWithin(seg.ID, time.Minute) {
				return false
			}
		}
		return true
	})
	if on := stagedOn(t, r, seg.ID, body); !slices.Equal(on, sorted(seg.Nodes)) {
		t.Fatalf("right after the drain the staged copies are on %v; want them kept on %v", on, sorted(seg.Nodes))
	}
	readEverywhere(t, ctx, r, bucket, key, body, md5hex(body))
	for i := range r.Len() {
		if b := r.Node(i).Namespace().Backlog(); b.Entries != 0 || b.Bytes != 0 {
			t.Errorf("node %d: backlog %+v after the drain; want empty", i, b)
		}
	}
}

func TestWriteBackSurvivesTheDeathOfTheNodeThatTookIt(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	const bucket, key = "ckpt", "model/step-2"
	unblock := blockDrain(t, r, "ckpt/"+key)
	body := randomBytes(200<<10, 2)
	taker := r.Leader() // its death also costs the region its leader
	if _, err := r.Client(taker).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	r.WaitForReplication()
	e, ok := journaled(r, taker, bucket, key)
	if !ok || len(e.Segments) != 1 || len(e.Segments[0].Nodes) != 2 || e.Segments[0].Nodes[0] != r.Node(taker).ID() {
		t.Fatalf("journal entry %+v (present %v); want one segment on 2 nodes, %s first", e, ok, r.Node(taker).ID())
	}
	r.Stop(taker)
	if r.Leader() == taker {
		t.Fatal("the stopped node still leads")
	}
	if on := stagedOn(t, r, e.Segments[0].ID, body); !slices.Equal(on, []string{e.Segments[0].Nodes[1]}) {
		t.Fatalf("surviving staged copies on %v; want %s's", on, e.Segments[0].Nodes[1])
	}
	readEverywhere(t, ctx, r, bucket, key, body, md5hex(body))

	// A survivor drains it once its first holder's turn has passed.
	unblock()
	waitDrained(t, r, bucket, key)
	if got, ok := storeHolds(t, storeOf(t, r), e.StoreKey); !ok || !bytes.Equal(got, body) {
		t.Fatalf("after the drain the store holds %d bytes (present %v); want the %d bytes written", len(got), ok, len(body))
	}
	readEverywhere(t, ctx, r, bucket, key, body, md5hex(body))
}

func TestWriteBackMultipartPartsOnDifferentNodes(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	const bucket, key = "ckpt", "model/shards"
	unblock := blockDrain(t, r, "ckpt/"+key)
	parts := [][]byte{randomBytes(5<<20, 3), randomBytes(100<<10, 4)}
	up, err := r.Client(0).CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	sum := md5.New()
	for i, p := range parts {
		n := int32(i + 1)
		out, err := r.Client(i+1).UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key),
			UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatalf("UploadPart %d through node %d: %v", n, i+1, err)
		}
		if aws.ToString(out.ETag) != `"`+md5hex(p)+`"` {
			t.Fatalf("part %d ETag %s; want %s", n, aws.ToString(out.ETag), md5hex(p))
		}
		raw := md5.Sum(p)
		sum.Write(raw[:])
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
	}
	out, err := r.Client(1).CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	etag := hex.EncodeToString(sum.Sum(nil)) + "-2"
	if aws.ToString(out.ETag) != `"`+etag+`"` {
		t.Fatalf("CompleteMultipartUpload ETag %s; want %s", aws.ToString(out.ETag), etag)
	}
	r.WaitForReplication()
	e, ok := journaled(r, 0, bucket, key)
	if !ok || len(e.Segments) != 2 {
		t.Fatalf("journal entry %+v (present %v); want 2 segments", e, ok)
	}
	for i, s := range e.Segments {
		if want := r.Node(i + 1).ID(); len(s.Nodes) != 2 || s.Nodes[0] != want {
			t.Fatalf("part %d staged on %v; want 2 nodes, %s (the node it went through) first", i+1, s.Nodes, want)
		}
		if on := stagedOn(t, r, s.ID, parts[i]); !slices.Equal(on, sorted(s.Nodes)) {
			t.Fatalf("part %d's staged copies on %v; want %v", i+1, on, sorted(s.Nodes))
		}
	}
	whole := slices.Concat(parts...)
	readEverywhere(t, ctx, r, bucket, key, whole, etag)

	unblock()
	waitDrained(t, r, bucket, key)
	if got, ok := storeHolds(t, storeOf(t, r), e.StoreKey); !ok || !bytes.Equal(got, whole) {
		t.Fatalf("after the drain the store holds %d bytes (present %v); want the %d bytes of both parts", len(got), ok, len(whole))
	}
	readEverywhere(t, ctx, r, bucket, key, whole, etag)
}

func TestWriteBackDeleteHidesAtOnceAndDrains(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	const bucket, key = "ckpt", "old/step-0"
	body := randomBytes(64<<10, 5)
	if _, err := r.Client(0).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	waitDrained(t, r, bucket, key)
	s := storeOf(t, r)
	if got, ok := storeHolds(t, s, "ckpt/"+key); !ok || !bytes.Equal(got, body) {
		t.Fatalf("the store holds %d bytes (present %v) of the drained PUT; want %d", len(got), ok, len(body))
	}

	// Node 2 has applied the PUT's drain too before it starts recording
	// (a lagging node 2 applied it after subscribing once in CI, under load).
	r.WaitForReplication()
	// Node 2 records what it applies for the key: the delete must reach
	// it as a journaled tombstone, then a drain that cleared it.
	applied := make(chan string, 64)
	cancel := r.Node(2).Raft().Subscribe(func(cmd regionstate.Command) {
		switch c := cmd.(type) {
		case *regionstate.StageObject:
			if c.Entry.Key == key {
				applied <- fmt.Sprintf("stage tombstone=%v", c.Entry.Tombstone)
			}
		case *regionstate.FinishDrain:
			if c.Key == key {
				applied <- fmt.Sprintf("finish failed=%v", c.Failed)
			}
		}
	})
	defer cancel()
	deleter := r.Followers()[0]
	if _, err := r.Client(deleter).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	// Hidden at once, through every node (each read waits for what was
	// acknowledged before it).
	for i := range r.Len() {
		_, _, err := getAll(ctx, r.Client(i), bucket, key)
		if nsk := (*types.NoSuchKey)(nil); !errors.As(err, &nsk) {
			t.Fatalf("GET through node %d after the delete: %v; want NoSuchKey", i, err)
		}
	}
	waitDrained(t, r, bucket, key)
	if _, ok := storeHolds(t, s, "ckpt/"+key); ok {
		t.Fatal("the store still holds the object after the delete drained")
	}
	// Node 2 must apply the delete as a journaled tombstone, then a drain
	// that cleared it. What it applies before the tombstone is the PUT's
	// drain finishing late (a leader change during the PUT's drain can
	// finish it twice: the second is a no-op), and a drain that failed in
	// between is retried; neither is what this test is about.
	want := []string{"stage tombstone=true", "finish failed=false"}
	var seen []string
	for _, w := range want {
		for found := false; !found; {
			select {
			case got := <-applied:
				seen = append(seen, got)
				switch {
				case got == w:
					found = true
				case w == want[0] && strings.HasPrefix(got, "finish"),
					w == want[1] && got == "finish failed=true":
				default:
					t.Fatalf("node 2 applied %v; want %v in that order", seen, want)
				}
			case <-ctx.Done():
				t.Fatalf("node 2 applied %v; did not apply %q", seen, w)
			}
		}
	}
}
