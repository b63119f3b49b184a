package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/nodetest"
)

// TestLifecycleResumesOnNewLeader: the region leader runs the lifecycle
// passes; when it stops, the new leader runs the next ones.
func TestLifecycleResumesOnNewLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node region")
	}
	ctx := context.Background()
	r := nodetest.MakeRegion(t, 3, nodetest.Options{
		Config: func(_ int, c *node.Config) { c.LifecycleEvery = 300 * time.Millisecond; c.LifecycleRate = -1 },
		Policy: func(dir string) string {
			return strings.Replace(nodetest.DefaultPolicy(dir), "defaults:", `  - name: scratch
    placement: {single: nas}
    lifecycle:
      - id: everything-under-tmp
        filter: {prefix: tmp/}
        expiration: {date: 2020-01-01}
defaults:`, 1)
		},
	})
	l := r.WaitForLeader()
	put := func(i int, key string) {
		t.Helper()
		if _, err := r.Client(i).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("scratch"), Key: aws.String(key),
			Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(i int, key string) bool {
		_, err := r.Client(i).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("scratch"), Key: aws.String(key)})
		return err != nil && strings.Contains(err.Error(), "404")
	}
	waitGone := func(i int, key string) {
		t.Helper()
		if wait.Until(ctx, 30*time.Second, func() bool { return gone(i, key) }) != nil {
			t.Fatalf("%s was not expired (lifecycle status %+v)", key, r.Node(i).Namespace().LifecycleStatus())
		}
	}
	put(l, "tmp/first")
	put(l, "keep/first")
	waitGone(l, "tmp/first")
	first := r.Node(l).Namespace().LifecycleStatus().Last.Node
	// Stop the node that ran the pass: under load the leader may have
	// changed since WaitForLeader, and stopping another one would leave
	// the runner where it was.
	for i := range r.Len() {
		if r.Node(i).ID() == first {
			l = i
		}
	}

	r.Stop(l)
	l2 := r.WaitForLeader()
	put(l2, "tmp/second")
	waitGone(l2, "tmp/second")
	if wait.Until(ctx, 30*time.Second, func() bool {
		st := r.Node(l2).Namespace().LifecycleStatus()
		return st.Last.Node != "" && st.Last.Node != first
	}) != nil {
		t.Fatalf("no pass by the new leader: %+v (the old leader was %s)", r.Node(l2).Namespace().LifecycleStatus(), first)
	}
	if gone(l2, "keep/first") {
		t.Error("an object no rule selects was deleted")
	}
}
