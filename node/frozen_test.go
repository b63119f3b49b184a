package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/node/nodetest"
)

// electionBound is how long a request on a healthy node may take while
// another node is frozen: the harness's election timeout is 250 ms, so a
// new leader is known within about a second; the bound leaves room for
// that election, a 503 and the SDK's retry, on a loaded 2-core machine.
const electionBound = 4 * time.Second

// timed runs f and fails the test when it takes longer than bound.
func timed(t *testing.T, what string, bound time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	err := f()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s with a node frozen: %v (after %s)", what, err, took.Round(time.Millisecond))
	}
	if took > bound {
		t.Fatalf("%s with a node frozen took %s; want at most %s", what, took.Round(time.Millisecond), bound)
	}
	t.Logf("%s with a node frozen: %s", what, took.Round(time.Millisecond))
}

// A frozen leader (a GC pause, a hung disk, a stopped VM) does not stall
// the healthy nodes past the election that replaces it: a write forwarded
// to it, a follower's read barrier and a write-back PUT all complete.
func TestFrozenLeaderDoesNotStallTheRegion(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	old := r.WaitForLeader()
	fs := r.Followers()
	a, b := fs[0], fs[1]
	// Warm the paths (forwarding, read index) before the freeze.
	if _, err := r.Client(a).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("before")}); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(256<<10, 7)
	if _, err := r.Client(a).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String("k"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}

	r.Freeze(old)
	defer r.Thaw()
	timed(t, "CreateBucket through a follower", electionBound, func() error {
		_, err := r.Client(a).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("during")})
		return err
	})
	timed(t, "a write-back GET through the other follower", electionBound, func() error {
		got, _, err := getAll(ctx, r.Client(b), "ckpt", "k")
		if err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("read %d bytes, not the %d written", len(got), len(data))
		}
		return err
	})
	// Each write-back PUT stages a copy on a peer chosen per write; the
	// frozen node is given up after PeerStall (1 s here) and the next one used.
	for i := range 4 {
		timed(t, fmt.Sprintf("write-back PUT %d", i), electionBound+2*time.Second, func() error {
			_, err := r.Client(a).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(fmt.Sprintf("during/%d", i)),
				Body: bytes.NewReader(data)})
			return err
		})
	}
	r.Thaw()
	r.WaitForReplication()
	if _, err := r.Client(old).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("during")}); err != nil {
		t.Fatalf("the thawed node does not see the bucket made while it was frozen: %v", err)
	}
}

// A frozen follower does not stall writes through the leader: a write-back
// PUT whose peer copy would go to it is staged on the other follower after
// PeerStall, and reads through the healthy follower go on.
func TestFrozenFollowerDoesNotStallWrites(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	leader := r.WaitForLeader()
	fs := r.Followers()
	frozen, healthy := fs[0], fs[1]
	data := randomBytes(256<<10, 8)
	r.Freeze(frozen)
	defer r.Thaw()
	for i := range 4 {
		key := fmt.Sprintf("f/%d", i)
		timed(t, fmt.Sprintf("write-back PUT %d through the leader", i), 2*time.Second+electionBound, func() error {
			_, err := r.Client(leader).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(key), Body: bytes.NewReader(data)})
			return err
		})
		timed(t, fmt.Sprintf("GET %d through the healthy follower", i), electionBound, func() error {
			got, _, err := getAll(ctx, r.Client(healthy), "ckpt", key)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("read %d bytes, not the %d written", len(got), len(data))
			}
			return err
		})
		e, ok := journaled(r, leader, "ckpt", key)
		if ok && len(e.Segments) == 1 && slices.Contains(e.Segments[0].Nodes, r.Node(frozen).ID()) {
			t.Fatalf("PUT %d was staged on the frozen node %s: %v", i, r.Node(frozen).ID(), e.Segments[0].Nodes)
		}
	}
}

// A frozen holder of a staged object does not stall a GET through a node
// that holds no copy: the holder listed first is given up after PeerStall
// (1 s here) without an answer, and the other holder serves the object.
func TestFrozenHolderDoesNotStallReads(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	leader := r.WaitForLeader()
	fs := r.Followers()
	taker, reader := fs[0], fs[1]
	data := randomBytes(300<<10, 9)
	key := stageOnTakerAndLeader(t, ctx, r, taker, leader, "held", data)
	r.Freeze(taker)
	defer r.Thaw()
	timed(t, "GET through the node holding no copy", 2*time.Second+electionBound, func() error {
		got, _, err := getAll(ctx, r.Client(reader), "ckpt", key)
		if err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("read %d bytes, not the %d written", len(got), len(data))
		}
		return err
	})
}

// A GET under way through a node that is then cut off from every holder
// of the object's staged copy (a partition mid-stream) finishes once the
// partition heals, instead of being cut short (the chaos test saw a GET
// through a partitioned leader end at 430 of 633 KB): the read keeps
// trying its holders for up to midStreamWait.
func TestStagedReadOutlivesAPartitionMidStream(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	leader := r.WaitForLeader()
	fs := r.Followers()
	taker, reader := fs[0], fs[1]
	data := randomBytes(8<<20, 11)
	key := stageOnTakerAndLeader(t, ctx, r, taker, leader, "midstream", data)
	out, err := r.Client(reader).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(out.Body, head); err != nil {
		t.Fatal(err)
	}
	r.Partition(reader)
	time.AfterFunc(3*time.Second, r.Heal)
	rest, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("the GET was cut off after %d of %d bytes: %v", len(head)+len(rest), len(data), err)
	}
	if !bytes.Equal(append(head, rest...), data) {
		t.Fatal("the GET that outlived the partition read other bytes")
	}
}

// stageOnTakerAndLeader writes data to ckpt under prefix/N through the
// follower taker, its drain blocked, until a write's holders are [taker,
// leader] (the third node holds no copy and asks the taker first), and
// returns that key.
func stageOnTakerAndLeader(t *testing.T, ctx context.Context, r *nodetest.Region, taker, leader int, prefix string, data []byte) string {
	t.Helper()
	for i := range 20 {
		k := fmt.Sprintf("%s/%d", prefix, i)
		unblock := blockDrain(t, r, "ckpt/"+k)
		if _, err := r.Client(taker).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(k), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
		r.WaitForReplication()
		if e, ok := journaled(r, leader, "ckpt", k); ok && slices.Equal(e.Segments[0].Nodes, []string{r.Node(taker).ID(), r.Node(leader).ID()}) {
			return k
		}
		// The second copy went to the other follower (one in two: the
		// peers' order is a hash of the random stage id): let this one
		// drain, or blocked writes fill the staging area before a try
		// lands on the leader (seen in CI after 9 tries).
		unblock()
	}
	t.Fatal("no write staged on the taker and the leader in 20 tries")
	return ""
}
