package federation_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"syscall"
	"testing"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// fakeCatalog is a catalog of fixed buckets; RemoteStore hands out the
// stores standing for other regions' gateways and counts the calls.
type fakeCatalog struct {
	region  string
	buckets map[string]federation.CatalogBucket
	remotes map[string]store.Store // by home region
	asked   []string
}

func (c *fakeCatalog) Region() string { return c.region }
func (c *fakeCatalog) Bucket(name string) (federation.CatalogBucket, bool) {
	b, ok := c.buckets[name]
	return b, ok
}
func (c *fakeCatalog) Buckets() []federation.CatalogBucket {
	var out []federation.CatalogBucket
	for _, b := range c.buckets {
		out = append(out, b)
	}
	return out
}
func (c *fakeCatalog) Create(context.Context, federation.CatalogBucket) error {
	return errors.New("not here")
}
func (c *fakeCatalog) Delete(context.Context, string) error { return errors.New("not here") }
func (c *fakeCatalog) SetConfig(context.Context, string, string, string) error {
	return errors.New("not here")
}
func (c *fakeCatalog) UserByKey(string) (federation.CatalogUser, bool) {
	return federation.CatalogUser{}, false
}
func (c *fakeCatalog) UserNamed(string) (federation.CatalogUser, bool) {
	return federation.CatalogUser{}, false
}
func (c *fakeCatalog) Users() []federation.CatalogUser { return nil }
func (c *fakeCatalog) PutUser(context.Context, federation.CatalogUser) error {
	return errors.New("not here")
}
func (c *fakeCatalog) DeleteUser(context.Context, string) error { return errors.New("not here") }
func (c *fakeCatalog) Reachable(string) bool                    { return true }
func (c *fakeCatalog) RemoteStore(home, bucket string) (store.Store, error) {
	c.asked = append(c.asked, home+"/"+bucket)
	return c.remotes[home], nil
}

// TestCatalogRouting: in region b (aws:us-east-1), a bucket at home in
// region a (gcp) whose store b opens too and which sits beside b is read
// straight from that store under a's prefix; a bucket whose store b does
// not open (a's NAS) is read through a's gateway; a versioned one through
// a's gateway too; a write-back one too. Every one of them refuses a
// configuration change and a delete here.
func TestCatalogRouting(t *testing.T) {
	ctx := context.Background()
	loc := func(s string) policies.Location { l, _ := policies.ParseLocation(s); return l }
	shared := posixStore(t, "s3-east", loc("aws:us-east-1"))
	local := posixStore(t, "local", loc("aws:us-east-1"))
	gateway := posixStore(t, "region:a", loc("gcp:us-central1"))
	pol, err := policies.Parse("p.yaml", []byte(`regions:
  - {name: a, location: gcp:us-central1, endpoint: http://a:9000, catalog: a:7500}
  - {name: b, location: aws:us-east-1, endpoint: http://b:9000, catalog: b:7500}
buckets:
  - {name: "ckpt-*", write: write-back}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	cat := &fakeCatalog{region: "b", remotes: map[string]store.Store{"a": gateway}, buckets: map[string]federation.CatalogBucket{
		"shared":   {Name: "shared", Owner: "alice", Home: "a", Store: "s3-east", Prefix: "shared/0001/"},
		"nas":      {Name: "nas", Owner: "alice", Home: "a", Store: "nas-a", Prefix: "nas/0002/"},
		"versions": {Name: "versions", Owner: "alice", Home: "a", Store: "s3-east", Prefix: "versions/0003/", Configs: map[string]string{"versioning": "Enabled"}},
		"ckpt-1":   {Name: "ckpt-1", Owner: "alice", Home: "a", Store: "s3-east", Prefix: "ckpt-1/0004/"},
	}}
	ns, err := federation.New(federation.Config{State: openState(t), Stores: map[string]store.Store{"s3-east": shared, "local": local},
		DefaultStore: "local", Policy: pol, Catalog: cat, Region: region{self: "b1", members: []string{"b1"}}, RegionLocation: "aws:us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("written by region a")
	if _, err := shared.Put(ctx, "shared/0001/k", bytes.NewReader(body), int64(len(body)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shared": "s3-east", "nas": "region:a", "versions": "region:a", "ckpt-1": "region:a"}
	for name, st := range want {
		b, err := ns.Bucket(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := b.Store().Name(); got != st {
			t.Errorf("bucket %s is read through %s, want %s", name, got, st)
		}
		h, err := ns.Backend().Bucket(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.SetConfig(ctx, "policy", "{}"); !errors.Is(err, federation.ErrNotHomeRegion) {
			t.Errorf("%s: a configuration change in a region not its home: %v", name, err)
		}
		if err := ns.DeleteBucket(ctx, b); !errors.Is(err, federation.ErrNotHomeRegion) {
			t.Errorf("%s: delete in a region not its home: %v", name, err)
		}
	}
	b, _ := ns.Bucket("shared")
	info, err := b.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := b.Open(ctx, info, 0, info.Size)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("read straight from the shared store: %q", got)
	}
}

// downStore stands for the gateway of a region that cannot be reached:
// every call fails as a refused connection does.
type downStore struct{ store.Store }

var errDown = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (downStore) Stat(context.Context, string) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, errDown
}

func (downStore) List(context.Context, store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) { yield(store.Entry{}, errDown) }
}

// TestHomeRegionDown: while a bucket's home region cannot be reached, a
// listing of it, and a read of a key never cached, fail with an error
// naming the region (backend.ErrRegionUnreachable, a 503 for clients),
// not an anonymous dial error (a 500).
func TestHomeRegionDown(t *testing.T) {
	ctx := context.Background()
	loc := func(s string) policies.Location { l, _ := policies.ParseLocation(s); return l }
	local := posixStore(t, "local", loc("aws:us-east-1"))
	pol, err := policies.Parse("p.yaml", []byte(`regions:
  - {name: a, location: gcp:us-central1, endpoint: http://a:9000, catalog: a:7500}
  - {name: b, location: aws:us-east-1, endpoint: http://b:9000, catalog: b:7500}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	gw := downStore{posixStore(t, "region:a", loc("gcp:us-central1"))}
	cat := &fakeCatalog{region: "b", remotes: map[string]store.Store{"a": gw}, buckets: map[string]federation.CatalogBucket{
		"nas": {Name: "nas", Owner: "alice", Home: "a", Store: "nas-a", Prefix: "nas/0002/"},
	}}
	ns, err := federation.New(federation.Config{State: openState(t), Stores: map[string]store.Store{"local": local},
		DefaultStore: "local", Policy: pol, Catalog: cat, Region: region{self: "b1", members: []string{"b1"}}, RegionLocation: "aws:us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ns.Bucket("nas")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var ru *backend.RegionUnreachableError
		if !errors.Is(err, backend.ErrRegionUnreachable) || !errors.As(err, &ru) || ru.Region != "a" || ru.Bucket != "nas" ||
			!errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s while the home region is down: %v", what, err)
		}
	}
	n := 0
	for _, err := range b.List(ctx, store.ListOptions{}) {
		check("list", err)
		n++
		break
	}
	if n == 0 {
		t.Fatal("the listing of a bucket whose home region is down ended without an error")
	}
	_, err = b.Stat(ctx, "never-cached")
	check("stat", err)
}
