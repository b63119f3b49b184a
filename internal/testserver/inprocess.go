package testserver

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

// Stack is a whole fedgate node built in the test's process around an
// origin store, so a test can inject faults into the origin, count its
// reads, or benchmark the read path without a second process.
type Stack struct {
	Endpoint string
	Cache    *cachetier.Cache
}

// StackOptions tune InProcess; zero values are the server's defaults.
type StackOptions struct {
	TTL             time.Duration // the bucket's cache.ttl
	FillConcurrency int
}

// InProcess serves bucket "data" whose origin is origin (existing data read
// through the chunk cache), with root credentials RootAccessKey and
// RootSecretKey. Everything is closed when the test ends.
func InProcess(tb testing.TB, origin store.Store, opts StackOptions) *Stack {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := regionstate.Open(ctx, regionstate.Config{NodeID: "n1", Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { node.Close() })
	local, err := posix.New("local", policies.Location{Cloud: "onprem", Region: "test"}, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	cache, err := cachetier.Open(cachetier.Config{Dir: tb.TempDir(), Capacity: 4 << 30})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cache.Close() })
	pol := &policies.Policy{Buckets: []policies.Bucket{{Name: "data", Origin: &policies.Origin{Store: origin.Name()},
		Cache: policies.Cache{TTL: opts.TTL, Prefetch: policies.PrefetchSequential}}}}
	ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"local": local, origin.Name(): origin},
		DefaultStore: "local", Policy: pol, Cache: cache, FillConcurrency: opts.FillConcurrency})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ns.Users().EnsureRoot(ctx, federation.Credentials{AccessKey: RootAccessKey, SecretKey: RootSecretKey}); err != nil {
		tb.Fatal(err)
	}
	srv, err := gateway.New(gateway.Config{Backend: ns.Backend()})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	return &Stack{Endpoint: hs.URL, Cache: cache}
}
