package federation_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
)

// The policy's cache.priority reaches the cache when the namespace starts
// and again when a policy that changes it is applied, and reads keep it.
func TestCachePriorityFromPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := openState(t)
	loc := testLoc
	inner := posixStore(t, "origin", loc)
	origin := faulty.Wrap(inner, faulty.Config{}) // not posix: read through the cache
	data := bytes.Repeat([]byte("x"), 3*testChunk)
	if _, err := inner.Put(ctx, "ds/a", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := cachetier.Open(cachetier.Config{Dir: t.TempDir(), Capacity: 1 << 30, ChunkSize: testChunk, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	policy := func(train, scratch policies.CachePriority) *policies.Policy {
		return &policies.Policy{Buckets: []policies.Bucket{
			{Name: "train", Origin: &policies.Origin{Store: "origin", Prefix: "ds/"}, Cache: policies.Cache{Priority: train}},
			{Name: "scratch", Origin: &policies.Origin{Store: "origin", Prefix: "ds/"}, Cache: policies.Cache{Priority: scratch}},
		}}
	}
	stores := map[string]store.Store{"origin": origin}
	ns, err := federation.New(federation.Config{State: node, Stores: stores, DefaultStore: "origin",
		Policy: policy(policies.PriorityHigh, policies.PriorityLow), Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	ns.StartPins()
	want := func(train, scratch cachetier.Priority) {
		t.Helper()
		g := c.Stats().Groups
		if g["train"].Priority != train || g["scratch"].Priority != scratch {
			t.Fatalf("cache groups: train %v, scratch %v; want %v, %v", g["train"].Priority, g["scratch"].Priority, train, scratch)
		}
	}
	want(cachetier.PriorityHigh, cachetier.PriorityLow)

	read := func(bucket string) {
		t.Helper()
		if got, err := readObject(ctx, ns, bucket, "a"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s: %v (%d bytes)", bucket, err, len(got))
		}
	}
	read("train")
	want(cachetier.PriorityHigh, cachetier.PriorityLow)

	if err := ns.ApplyPolicy(policy(policies.PriorityNormal, policies.PriorityHigh), stores, "origin", 2); err != nil {
		t.Fatal(err)
	}
	want(cachetier.PriorityNormal, cachetier.PriorityHigh)
	read("scratch")
	want(cachetier.PriorityNormal, cachetier.PriorityHigh)
}
