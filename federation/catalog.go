package federation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Catalog is the global bucket catalog as the namespace uses it (issue 17,
// docs/regions.md): bucket names unique across peered regions, each bucket
// with its home region. node wires a catalog.Member to it; nil means the
// region is not peered and buckets created through S3 are the region's own.
type Catalog interface {
	// Region is this region's name.
	Region() string
	// Bucket and Buckets read this node's applied copy (never the network).
	Bucket(name string) (CatalogBucket, bool)
	Buckets() []CatalogBucket
	// Create and Delete commit through the catalog's leader and return
	// once this node has applied the change: a taken name is a
	// *BucketExistsError, no majority of regions ErrCatalogUnavailable.
	Create(ctx context.Context, b CatalogBucket) error
	Delete(ctx context.Context, name string) error
	// SetConfig records a bucket's S3 configuration document of kind
	// (value "": removed) for every region, from its home region.
	SetConfig(ctx context.Context, bucket, kind, value string) error
	// UserByKey and Users read users (the same in every region); PutUser
	// and DeleteUser change this region's users for every region. A name
	// or key taken is ErrUserExists or ErrAccessKeyInUse.
	UserByKey(accessKey string) (CatalogUser, bool)
	UserNamed(name string) (CatalogUser, bool)
	Users() []CatalogUser
	PutUser(ctx context.Context, u CatalogUser) error
	DeleteUser(ctx context.Context, name string) error
	// RemoteStore is the store through which this region reads and writes
	// a bucket whose home is another region: that region's S3 endpoint,
	// with the peering credential, located where that region is.
	RemoteStore(home, bucket string) (store.Store, error)
	// Reachable reports whether a region's endpoint answered lately
	// (true until known otherwise).
	Reachable(region string) bool
}

// CatalogBucket is a bucket as the catalog records it.
type CatalogBucket struct {
	Name, Owner, Home string
	// Store and Prefix say where the home region keeps its objects.
	Store, Prefix string
	Created       time.Time
	// Configs are its S3 configuration documents by kind (policy, acl, ...).
	Configs map[string]string
}

// CatalogUser is a user as the catalog records it (Home: the region that
// created it and alone changes it).
type CatalogUser struct {
	Name, AccessKey, SecretKey, Home string
	Created                          time.Time
}

// Errors of peered regions (backend's, under the same names).
var (
	ErrCatalogUnavailable = backend.ErrCatalogUnavailable
	ErrNotHomeRegion      = backend.ErrNotHomeRegion
)

// catalogBucket resolves a name the catalog knows: in its home region the
// region's own record (made from the catalog's when a create committed
// after its caller gave up waiting), elsewhere a bucket read through the
// home region's gateway.
func (n *Namespace) catalogBucket(name string) (*Bucket, bool, error) {
	cb, ok := n.catalog.Bucket(name)
	if !ok {
		return nil, false, nil
	}
	if cb.Home == n.catalog.Region() {
		rec, ok := n.rs.State().Bucket(name)
		if !ok || rec.Prefix != cb.Prefix {
			rec = regionstate.Bucket{Name: cb.Name, Owner: cb.Owner, Store: cb.Store, Prefix: cb.Prefix, Created: cb.Created}
		}
		b, err := n.fromRecord(rec)
		return b, true, err
	}
	if b, ok := n.directBucket(cb); ok {
		return b, true, nil
	}
	st, err := n.catalog.RemoteStore(cb.Home, cb.Name)
	if err != nil {
		return nil, true, fmt.Errorf("federation: bucket %q (home region %s): %w", name, cb.Home, err)
	}
	// Cached like an origin, and revalidated on every open (TTL 0): a
	// write acknowledged in the home region is read here as soon as the
	// home region answers.
	b := &Bucket{Name: cb.Name, Owner: cb.Owner, Created: cb.Created, store: st, ns: n, remote: cb.Home,
		cache: CacheRules{Chunked: true, ReadAhead: n.fill}}
	b.path = pathFor(b, false)
	return b, true, nil
}

// catalogCreate creates a bucket in the catalog, then the region's own
// record of it.
func (n *Namespace) catalogCreate(ctx context.Context, rec regionstate.Bucket) error {
	err := n.catalog.Create(ctx, CatalogBucket{Name: rec.Name, Owner: rec.Owner, Home: n.catalog.Region(),
		Store: rec.Store, Prefix: rec.Prefix, Created: rec.Created})
	if err != nil {
		return err
	}
	// A record the region kept of an earlier bucket of this name (deleted
	// from the catalog when its local delete failed) goes first.
	if old, ok := n.rs.State().Bucket(rec.Name); ok && old.Prefix != rec.Prefix {
		if err := n.rs.Apply(ctx, regionstate.DeleteBucket{Name: rec.Name}); err != nil && !errors.Is(err, regionstate.ErrNoSuchBucket) {
			return err
		}
	}
	err = n.rs.Apply(ctx, regionstate.CreateBucket{Bucket: rec})
	if err != nil {
		// The catalog has it: lookups make the region's record from the
		// catalog's, so the bucket works; report success.
		n.log.Warn("bucket created in the catalog; the region's record is made on first use", "bucket", rec.Name, "error", err)
	}
	return nil
}

// storeHome names the region at a store's location (the region whose
// nodes reach a posix store of a peered policy), "" when none is.
func storeHome(p *policies.Policy, storeName string) string {
	ps, ok := p.Store(storeName)
	if !ok {
		return ""
	}
	for _, r := range p.Regions {
		if r.Location == ps.Location {
			return r.Name
		}
	}
	return ""
}

// catalogConfig is a remote bucket's configuration document of kind, as
// its home region recorded it in the catalog.
func (n *Namespace) catalogConfig(b *Bucket, kind string) (string, bool) {
	cb, ok := n.catalog.Bucket(b.Name)
	if !ok {
		return "", false
	}
	v, ok := cb.Configs[kind]
	return v, ok
}

// travels reports whether a bucket's configuration changes go through the
// catalog: buckets created through S3 in a peered region (the policy
// file's buckets are the same in every region already).
func (b *Bucket) travels() bool { return b.ns.catalog != nil && !b.Global }

// directBucket routes reads of another region's bucket (ChooseRoute):
// when its store is open here too (a cloud store; a posix store of another
// site is not) and reading it straight is no dearer per byte than through
// the home region's gateway, or the home region cannot be reached, the
// bucket is served from the store under the home region's prefix, through
// this region's cache.
func (n *Namespace) directBucket(cb CatalogBucket) (*Bucket, bool) {
	v := n.v()
	if v.policy == nil || cb.Prefix == "" {
		return nil, false
	}
	home, err := v.policy.Region(cb.Home)
	if err != nil {
		return nil, false
	}
	here, err := policies.ParseLocation(n.RegionLocation())
	if err != nil {
		return nil, false
	}
	st, open := v.stores[cb.Store]
	o := RouteOptions{Here: here, Home: home.Location, StoreOpen: open, HomeReachable: n.catalog.Reachable(cb.Home)}
	if open {
		o.Store = st.Location()
	}
	if g, ok := v.glob(cb.Name); ok && g.writeBack {
		o.OnlyAtHome = true
	}
	if cb.Configs[regionstate.BucketConfVersioning] != "" {
		o.OnlyAtHome = true
	}
	if ChooseRoute(v.price, o) != RouteStore {
		return nil, false
	}
	b, err := n.fromRecord(regionstate.Bucket{Name: cb.Name, Owner: cb.Owner, Store: cb.Store, Prefix: cb.Prefix, Created: cb.Created})
	if err != nil {
		return nil, false
	}
	b.remote = cb.Home
	return b, true
}

// Route is where a region reads another region's bucket from.
type Route int

// The routes, cheapest first when both are open.
const (
	// RouteGateway: through the home region's S3 endpoint (its cache).
	RouteGateway Route = iota
	// RouteStore: the bucket's store, straight.
	RouteStore
)

// RouteOptions describe one read of another region's bucket.
type RouteOptions struct {
	Here, Home, Store policies.Location
	// StoreOpen: this region opens the bucket's store too (a cloud store;
	// another site's posix store is not).
	StoreOpen bool
	// OnlyAtHome: the bucket's bytes are right only in its home region
	// (write-back staging, fedgate versioning).
	OnlyAtHome bool
	// HomeReachable: the home region answered lately.
	HomeReachable bool
}

// ChooseRoute picks the cheapest reachable route by the per-byte price
// into Here: the store when it is open here and no dearer than the home
// region's location (whose cache holds what it read: its own read is paid
// once), or when the home region cannot be reached; else the gateway.
func ChooseRoute(price func(src, dst policies.Location) float64, o RouteOptions) Route {
	switch {
	case o.OnlyAtHome || !o.StoreOpen:
		return RouteGateway
	case !o.HomeReachable:
		return RouteStore
	case price(o.Store, o.Here) <= price(o.Home, o.Here):
		return RouteStore
	}
	return RouteGateway
}
