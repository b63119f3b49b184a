package nodetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/node/nodetest"
)

func TestMakeRegion(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	leader, followers := r.Leader(), r.Followers()
	if len(followers) != 2 || followers[0] == leader || followers[1] == leader {
		t.Fatalf("leader %d, followers %v; want 2 followers besides the leader", leader, followers)
	}
	for i := range r.Len() {
		m, err := r.Node(i).Raft().Members()
		if err != nil || len(m) != 3 {
			t.Fatalf("node %d: members %v, %v; want 3", i, m, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.Client(followers[0]).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("made")}); err != nil {
		t.Fatal(err)
	}
	r.WaitForReplication()
	for i := range r.Len() {
		if _, ok := r.Node(i).Raft().State().Bucket("made"); !ok {
			t.Errorf("node %d does not hold the bucket after WaitForReplication", i)
		}
	}
}

// A stopped node misses writes; restarted on its data dir and addresses it
// rejoins and catches up.
func TestStopRestart(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := r.Followers()[0]
	id, addr := r.Node(f).ID(), r.Node(f).Addr().String()
	r.Stop(f)
	if r.Node(f) != nil {
		t.Fatal("Node returns a stopped node")
	}
	if _, err := r.Client(r.Leader()).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("while-down")}); err != nil {
		t.Fatal(err)
	}
	r.Restart(f)
	if n := r.Node(f); n == nil || n.ID() != id || n.Addr().String() != addr {
		t.Fatalf("restarted node %v; want %s on %s", n, id, addr)
	}
	r.WaitForReplication()
	if _, ok := r.Node(f).Raft().State().Bucket("while-down"); !ok {
		t.Fatal("the restarted node does not hold the bucket made while it was down")
	}
	if _, err := r.Client(f).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("while-down")}); err != nil {
		t.Fatalf("HeadBucket through the restarted node: %v", err)
	}
}
