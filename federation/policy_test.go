package federation_test

import (
	"context"
	"testing"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// A bucket declared by a policy that Raft has committed but this node has
// not put in force yet is found once ApplyPolicy installs it: the lookup
// waits for the install (a notification), not for a poll or a timeout.
func TestBucketAwaitsCommittedPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := openState(t)
	local := posixStore(t, "local", testLoc)
	stores := map[string]store.Store{"local": local}
	ns, err := federation.New(federation.Config{State: node, Stores: stores, DefaultStore: "local",
		Region: region{self: "solo", members: []string{"solo"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Bucket("late"); err == nil {
		t.Fatal(`bucket "late" exists before any policy declares it`)
	}
	// Raft commits policy version 1; this node installs it a moment later.
	if err := node.Apply(ctx, &regionstate.SetPolicy{YAML: []byte("buckets: [{name: late}]\n"), Version: 1}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   *federation.Bucket
		err error
		d   time.Duration
	}
	got := make(chan result, 1)
	go func() {
		start := time.Now()
		b, err := ns.Bucket("late")
		got <- result{b, err, time.Since(start)}
	}()
	pol := &policies.Policy{Buckets: []policies.Bucket{{Name: "late", Origin: &policies.Origin{Store: "local"}}}}
	if err := ns.ApplyPolicy(pol, stores, "local", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.b == nil || r.b.Name != "late" {
			t.Fatalf("Bucket(late) = %v, %v", r.b, r.err)
		}
		if r.d > 2*time.Second {
			t.Errorf("Bucket(late) took %v: it should wake when the policy is installed", r.d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Bucket(late) did not return")
	}
}
