// Package federation is fedgate's namespace: it maps a bucket to its policy
// and stores, routes reads and places writes. Region state (buckets, users,
// multipart sessions) lives in the region's Raft journal, reached through the
// small RegionState interface.
package federation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/lifecycle"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Errors the namespace returns besides the store sentinels. They are the
// backend package's (the gateway's contract), under the names federation
// has always used.
var (
	ErrNoSuchBucket      = backend.ErrNoSuchBucket
	ErrBucketNotEmpty    = backend.ErrBucketNotEmpty
	ErrNoSuchUpload      = backend.ErrNoSuchUpload
	ErrPolicyBucket      = backend.ErrPolicyBucket
	ErrInvalidBucketName = backend.ErrInvalidBucketName
	ErrAccessDenied      = backend.ErrAccessDenied
	ErrNoSuchUser        = backend.ErrNoSuchUser
	ErrUserExists        = backend.ErrUserExists
	ErrUserOwnsBuckets   = backend.ErrUserOwnsBuckets
	ErrAccessKeyInUse    = backend.ErrAccessKeyInUse
)

// BucketExistsError answers CreateBucket on a name that is taken.
type BucketExistsError = backend.BucketExistsError

// RegionState is the region's replicated state as the namespace uses it;
// a *regionstate.Node implements it. (The write-back journal is part of that
// state: State().Journal.)
type RegionState interface {
	Apply(ctx context.Context, cmd regionstate.Command) error
	ApplyIndex(ctx context.Context, cmd regionstate.Command) (uint64, error)
	State() *regionstate.State
}

// Config holds what a Namespace needs.
type Config struct {
	State RegionState
	// Stores by name; DefaultStore is where S3-created buckets live.
	Stores       map[string]store.Store
	DefaultStore string
	// Policy is the active policy (nil on embedded defaults) and
	// PolicyVersion its Raft version.
	Policy        *policies.Policy
	PolicyVersion uint64
	// Cache is the region's chunk cache (nil: reads go to the stores).
	Cache ChunkCache
	// FillConcurrency is how many ranged reads fill one large object's
	// chunks in parallel (default 8).
	FillConcurrency int
	// Region is the rest of the region (nil: a one-node region).
	Region Region
	// WriteBack configures write-back buckets.
	WriteBack WriteBackConfig
	// RegionLocation is this region's location ("cloud:region") for egress
	// accounting ("" turns accounting off).
	RegionLocation string
	// EgressRetention is how long egress ledger rows are kept (0: for
	// ever); older hours are pruned about once an hour.
	EgressRetention time.Duration
	// ReuseObjects is how many objects' last reads this node remembers to
	// count reuse distances (reuse.go; 16 bytes each): 0 means
	// DefaultReuseObjects, negative turns reuse distances off.
	ReuseObjects int
	// BudgetRefresh bounds how stale the egress budget statuses a read
	// sees may be: they are re-evaluated at most this often (default
	// DefaultBudgetRefresh, 5 s).
	BudgetRefresh time.Duration
	// Catalog is the global bucket catalog of peered regions (nil: not
	// peered).
	Catalog Catalog
	// Lifecycle configures the lifecycle runner (RunLifecycle).
	Lifecycle LifecycleConfig
	// Ready is the readiness check Namespace.Ready reports (e.g. "Raft
	// has a leader"; nil: always ready).
	Ready  func(context.Context) error
	Logger *slog.Logger
	Now    func() time.Time
}

// ChunkCache is the region's chunk cache as the namespace uses it; a
// *cachetier.Cache implements it.
type ChunkCache interface {
	NewReader(ctx context.Context, id cachetier.ObjectID, fetch cachetier.Fetcher, off, n int64, opts cachetier.ReadOptions) (io.ReadCloser, error)
	Invalidate(store, key string) int
	// Chunk makes one chunk present and returns it as a region of a
	// private, read-only descriptor (a short-circuit read).
	Chunk(ctx context.Context, id cachetier.ObjectID, idx int64, fetch cachetier.Fetcher, opts cachetier.ReadOptions) (cachetier.ChunkRef, error)
	// Lease pins a chunk against eviction until release (a short-circuit
	// reader holds its file).
	Lease(id cachetier.ObjectID, idx int64) (release func())
	// ReadChunk serves [off, off+n) of a chunk this node owns to a peer.
	ReadChunk(ctx context.Context, k cachetier.ChunkKey, fetch cachetier.Fetcher, off, n int64, opts cachetier.ReadOptions) (io.ReadCloser, error)
	// Prime fills a chunk here from bytes the caller holds already
	// (a small object's, fetched with its metadata); false: it was cached
	// or being filled, or a peer owns it, and fetch is not called.
	Prime(id cachetier.ObjectID, idx int64, fetch cachetier.Fetcher, opts cachetier.ReadOptions) bool
	// Alone reports whether this node owns every chunk (no peers in its
	// ring), so that Prime takes any chunk.
	Alone() bool
	// Warm fills one chunk (preload) if this node owns it.
	Warm(ctx context.Context, id cachetier.ObjectID, idx int64, fetch cachetier.Fetcher, opts cachetier.ReadOptions) error
	// Owner names the node owning a chunk (local: this node).
	Owner(k cachetier.ChunkKey) (node string, local bool)
	NumChunks(size int64) int64
	ChunkSize() int64
	SetPins(f cachetier.PinFunc)
	Repin()
	// SetPriority sets a group's (bucket's) eviction class.
	SetPriority(group string, p cachetier.Priority)
}

// Namespace is one region's view of every bucket.
type Namespace struct {
	// stalls holds when each peer last stalled a staged copy or read
	// (writeback.go: healthyFirst).
	stalls sync.Map
	rs     RegionState
	cache  ChunkCache
	fill   int
	stats  statCache
	// lastSeen is what other regions last reported of their objects
	// (remote buckets), for reads while they cannot be reached.
	lastSeen statCache
	// native: what each origin store last said of its versioning
	// (originversions.go), by store name.
	native  sync.Map
	view    atomic.Pointer[nsView] // the policy in force; swapped whole by ApplyPolicy
	log     *slog.Logger
	now     func() time.Time
	users   *Users
	ready   func(context.Context) error
	created time.Time

	region    Region
	catalog   Catalog         // nil: not peered
	egress    *egressRecorder // nil: accounting off
	reuse     *reuseTracker   // nil: no reuse distances
	budget    *budgets
	retention time.Duration // of the egress ledger; 0: for ever
	budgetTTL time.Duration // Config.BudgetRefresh
	wb        WriteBackConfig
	recent    recentStaged
	metrics   *drainMetrics
	drainWake chan struct{}
	preloads  preloadRuns
	degraded  *degradedTracker

	// The lifecycle runner (lifecycle.go).
	lc        LifecycleConfig
	lcMetrics *lifecycleMetrics
	lcWake    chan struct{}
	lcMu      sync.Mutex // one pass at a time
	lcParsed  lifecycleCache
	lcHook    func(bucket, key string) // tests: between the look and the delete
}

// nsView is what the active policy makes of the namespace: its stores,
// the default store and the buckets it declares. ApplyPolicy replaces it
// in one atomic step, so a request sees one policy from start to end.
type nsView struct {
	stores map[string]store.Store
	def    store.Store
	global map[string]*Bucket // buckets declared in the policy file
	globs  []globRule         // entries whose name is a glob, in file order
	policy *policies.Policy
	// price is the policy's egress price per byte between locations
	// (priceScore, built once per policy: read routing asks it per request).
	price   func(src, dst policies.Location) float64
	version uint64 // the Raft policy version (0: embedded defaults or --config seed)
	// replaced is closed when ApplyPolicy puts another view in force.
	replaced chan struct{}
}

func (n *Namespace) v() *nsView { return n.view.Load() }

// New validates cfg and builds the namespace.
func New(cfg Config) (*Namespace, error) {
	if cfg.State == nil {
		return nil, errors.New("federation: Config.State is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FillConcurrency <= 0 {
		cfg.FillConcurrency = 8
	}
	if cfg.BudgetRefresh <= 0 {
		cfg.BudgetRefresh = DefaultBudgetRefresh
	}
	if cfg.Region == nil {
		cfg.Region = soloRegion{id: "local"}
	}
	if cfg.Lifecycle.Every <= 0 {
		cfg.Lifecycle.Every = DefaultLifecycleEvery
	}
	if cfg.WriteBack.Copies <= 0 {
		cfg.WriteBack.Copies = 2
	}
	if cfg.WriteBack.Wait <= 0 {
		cfg.WriteBack.Wait = 30 * time.Second
	}
	if cfg.WriteBack.PeerStall <= 0 {
		cfg.WriteBack.PeerStall = 2 * time.Second
	}
	rs := regionState{cfg.State}
	n := &Namespace{rs: rs, log: cfg.Logger, now: cfg.Now, ready: cfg.Ready,
		created: cfg.Now(), cache: cfg.Cache, fill: cfg.FillConcurrency,
		region: cfg.Region, catalog: cfg.Catalog, wb: cfg.WriteBack, metrics: newDrainMetrics(), drainWake: make(chan struct{}, 1),
		degraded: newDegradedTracker(), lc: cfg.Lifecycle, lcMetrics: newLifecycleMetrics(), lcWake: make(chan struct{}, 1)}
	n.users = &Users{rs: rs, now: cfg.Now, catchUp: n.catchUp, cat: cfg.Catalog}
	if cfg.RegionLocation != "" {
		// Before the view: placements rank their members from the region's
		// location and meter them.
		n.egress = newEgressRecorder(cfg.RegionLocation, cfg.Now)
		if cfg.ReuseObjects == 0 {
			cfg.ReuseObjects = DefaultReuseObjects
		}
		n.reuse = newReuseTracker(cfg.ReuseObjects)
		n.retention = cfg.EgressRetention
		n.budgetTTL = cfg.BudgetRefresh
		n.budget = newBudgets()
	}
	view, err := n.buildView(cfg.Policy, cfg.Stores, cfg.DefaultStore)
	if err != nil {
		return nil, err
	}
	view.version = cfg.PolicyVersion
	n.view.Store(view)
	return n, nil
}

// buildView makes the namespace's view of a policy and its opened stores.
func (n *Namespace) buildView(p *policies.Policy, stores map[string]store.Store, defName string) (*nsView, error) {
	def, ok := stores[defName]
	if !ok {
		return nil, fmt.Errorf("federation: default store %q is not among the configured stores", defName)
	}
	v := &nsView{stores: maps.Clone(stores), def: def, global: map[string]*Bucket{}, policy: p, price: priceScore(p), replaced: make(chan struct{})}
	if p == nil {
		return v, nil
	}
	for _, pb := range p.Buckets {
		storeName, prefix := "", pb.Name+"/"
		switch {
		case pb.Origin != nil:
			storeName, prefix = pb.Origin.Store, pb.Origin.Prefix
		case pb.Placement.Kind == policies.PlacementSingle && len(pb.Placement.Stores) == 1:
			storeName = pb.Placement.Stores[0]
		case pb.Placement.Kind == policies.PlacementReplicate || pb.Placement.Kind == policies.PlacementErasure:
			cst, err := n.openPlacement(p, pb, v.stores)
			if err != nil {
				return nil, fmt.Errorf("federation: bucket %q: %w", pb.Name, err)
			}
			storeName = cst.Name()
			if !pb.Glob {
				// Exported at 0 from the start, so a rate or an alert sees
				// the first degraded read.
				for _, m := range pb.Placement.Stores {
					n.degraded.reads.WithLabelValues(pb.Name, m)
				}
			}
		default:
			storeName = def.Name()
		}
		st, ok := v.stores[storeName]
		if !ok && n.catalog != nil && !pb.Glob {
			// A store only another region reaches (its posix path): the
			// bucket is read and written through that region's gateway.
			if home := storeHome(p, storeName); home != "" && home != n.catalog.Region() {
				rst, err := n.catalog.RemoteStore(home, pb.Name)
				if err != nil {
					return nil, fmt.Errorf("federation: bucket %q: through region %s: %w", pb.Name, home, err)
				}
				b := &Bucket{Name: pb.Name, Owner: RootUser, Global: true, Created: n.created, store: rst, ns: n, remote: home,
					cache: CacheRules{Chunked: true, ReadAhead: n.fill, Quota: pb.Cache.Quota, Pin: pb.Cache.Pin, Priority: cachePriority(pb.Cache.Priority)}}
				b.path = pathFor(b, false)
				v.global[pb.Name] = b
				continue
			}
		}
		if !ok {
			return nil, fmt.Errorf("federation: bucket %q: store %q is not configured", pb.Name, storeName)
		}
		rules := n.cacheRules(pb, st)
		if pb.Glob {
			// Rules for buckets created through S3 whose names match; new
			// ones are created in st.
			v.globs = append(v.globs, globRule{pattern: pb.Name, store: st, cache: rules, writeBack: pb.Write == policies.WriteBack, lifecycle: pb.Lifecycle})
			continue
		}
		b := &Bucket{Name: pb.Name, Owner: RootUser, Global: true, Created: n.created,
			store: st, prefix: prefix, ns: n, cache: rules, origin: pb.Origin != nil, lifecycle: pb.Lifecycle}
		b.path = pathFor(b, pb.Write == policies.WriteBack)
		v.global[pb.Name] = b
	}
	return v, nil
}

// cacheRules are a policy bucket's cache rules on store st.
func (n *Namespace) cacheRules(pb policies.Bucket, st store.Store) CacheRules {
	rules := CacheRules{Chunked: needsCache(st), TTL: pb.Cache.TTL, Quota: pb.Cache.Quota, Pin: pb.Cache.Pin,
		Priority: cachePriority(pb.Cache.Priority)}
	if pb.Cache.Prefetch == policies.PrefetchSequential || pb.Cache.Prefetch == policies.PrefetchOnApply {
		rules.ReadAhead = n.fill
	}
	return rules
}

// globRule is a policy entry whose name is a glob: buckets created through
// S3 with a matching name are created in its store and take its rules.
type globRule struct {
	pattern   string
	store     store.Store
	cache     CacheRules
	writeBack bool // the policy entry's write mode
	lifecycle []lifecycle.Rule
}

// glob returns the first glob rule matching a bucket name.
func (v *nsView) glob(name string) (globRule, bool) {
	for _, g := range v.globs {
		if ok, _ := path.Match(g.pattern, name); ok {
			return g, true
		}
	}
	return globRule{}, false
}

// catchUp waits (briefly) until this node has applied every write the
// region committed before the call; a lookup that missed retries after it
// returns true, so a bucket or user created through another node a moment
// ago is found here too.
func (n *Namespace) catchUp() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.readBarrier(ctx) == nil
}

// awaitPolicy waits (up to 5 s) until the newest policy this node has
// applied from Raft is in force here (installing one opens its stores, so
// it lags the Raft apply a little); it reports whether one was awaited.
func (n *Namespace) awaitPolicy() bool {
	p, ok := n.rs.State().Policy()
	if !ok || p.Version <= n.v().version {
		return false
	}
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		v := n.v()
		if v.version >= p.Version {
			return true
		}
		select {
		case <-v.replaced: // ApplyPolicy swapped views: look again
		case <-timeout.C:
			return true
		}
	}
}

// Users gives the namespace's credential and grant operations.
func (n *Namespace) Users() *Users { return n.users }

// Ready reports whether this node can serve requests (Config.Ready).
func (n *Namespace) Ready(ctx context.Context) error {
	if n.ready == nil {
		return nil
	}
	return n.ready(ctx)
}

// Bucket is one bucket of the namespace and where its objects live.
type Bucket struct {
	Name    string
	Owner   string
	Created time.Time
	// Global: declared in the policy file (owned by root, not deletable).
	Global bool
	// remote is the home region of a bucket read through another region's
	// gateway ("": this region's).
	remote string
	// origin: mounted from an existing bucket of a store (policy origin:).
	origin bool
	store  store.Store
	prefix string
	ns     *Namespace
	cache  CacheRules
	// path is how objects are written: straight to the store, or staged
	// and journaled, then drained (writepath.go, writeback.go).
	path writePath
	// lifecycle is the policy file's lifecycle rules for the bucket (nil:
	// none; its S3 configuration applies).
	lifecycle []lifecycle.Rule
}

// WriteBack reports whether the bucket's writes are write-back.
func (b *Bucket) WriteBack() bool {
	_, wb := b.path.(writeBackPath)
	return wb
}

// needsCache: a store whose bytes are local files is read directly.
func needsCache(st store.Store) bool {
	_, local := st.(store.LocalFiler)
	return !local
}

// Cache returns how the bucket's reads use the region's cache.
func (b *Bucket) Cache() CacheRules { return b.cache }

// Bucket returns the named bucket, or ErrNoSuchBucket.
func (n *Namespace) Bucket(name string) (*Bucket, error) {
	if b, ok := n.v().global[name]; ok {
		return b, nil
	}
	if n.catalog != nil {
		// Peered: the catalog decides which buckets exist.
		b, ok, err := n.catalogBucket(name)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, ErrNoSuchBucket
		}
		return b, nil
	}
	rec, ok := n.rs.State().Bucket(name)
	if !ok && n.catchUp() {
		if n.awaitPolicy() {
			if b, ok := n.v().global[name]; ok {
				return b, nil
			}
		}
		rec, ok = n.rs.State().Bucket(name)
	}
	if !ok {
		return nil, ErrNoSuchBucket
	}
	return n.fromRecord(rec)
}

func (n *Namespace) fromRecord(rec regionstate.Bucket) (*Bucket, error) {
	v := n.v()
	st, ok := v.stores[rec.Store]
	if !ok {
		return nil, fmt.Errorf("federation: bucket %q lives on store %q, which is not configured on this node", rec.Name, rec.Store)
	}
	b := &Bucket{Name: rec.Name, Owner: rec.Owner, Created: rec.Created, store: st, prefix: rec.Prefix, ns: n,
		cache: CacheRules{Chunked: needsCache(st), ReadAhead: n.fill}}
	writeBack := false
	if g, ok := v.glob(rec.Name); ok {
		b.cache, writeBack, b.lifecycle = g.cache, g.writeBack, g.lifecycle
		b.cache.Chunked = needsCache(st) // the bucket stays where it was created
	}
	b.path = pathFor(b, writeBack)
	return b, nil
}

// ListBuckets returns the buckets u may read, sorted by name.
func (n *Namespace) ListBuckets(u User) []*Bucket {
	out, _ := n.ListBucketsPage(u, "", "", -1)
	return out
}

// ListBucketsPage returns, sorted by name, at most limit (every one if
// limit < 0) of the buckets u may read whose name starts with prefix and
// comes after after ("": from the first); more reports that more follow.
// A page of the region's own buckets costs O(log n + page) (the region
// state keeps them sorted, and indexed by owner and by grant, see
// regionstate.State.VisibleBuckets) plus a sort of the policy file's
// buckets; a peered region's page is still cut from the catalog's full
// list.
func (n *Namespace) ListBucketsPage(u User, prefix, after string, limit int) (page []*Bucket, more bool) {
	view := n.v()
	var out []*Bucket
	var globals []*Bucket // the policy file's: few
	for _, b := range view.global {
		if strings.HasPrefix(b.Name, prefix) && b.Name > after && n.Authorize(u, b, false) == nil {
			globals = append(globals, b)
		}
	}
	sort.Slice(globals, func(i, j int) bool { return globals[i].Name < globals[j].Name })
	// full: the page holds limit+1 buckets (one more than it returns, so
	// that more is known).
	full := func() bool { return limit >= 0 && len(out) > limit }
	for b := range n.regionBuckets(u, prefix, after) {
		if _, dup := view.global[b.Name]; dup {
			continue
		}
		for len(globals) > 0 && globals[0].Name < b.Name && !full() {
			out, globals = append(out, globals[0]), globals[1:]
		}
		if full() {
			break
		}
		out = append(out, b)
	}
	for len(globals) > 0 && !full() {
		out, globals = append(out, globals[0]), globals[1:]
	}
	if full() {
		return out[:limit], true
	}
	return out, false
}

// regionBuckets yields, by name, the buckets beside the policy file's that
// u may read, whose name starts with prefix and comes after after.
func (n *Namespace) regionBuckets(u User, prefix, after string) iter.Seq[*Bucket] {
	return func(yield func(*Bucket) bool) {
		if n.catalog != nil {
			cbs := slices.Clone(n.catalog.Buckets()) // sorted here, not in the catalog's copy
			sort.Slice(cbs, func(i, j int) bool { return cbs[i].Name < cbs[j].Name })
			for _, cb := range cbs {
				if !strings.HasPrefix(cb.Name, prefix) || cb.Name <= after {
					continue
				}
				b, _, err := n.catalogBucket(cb.Name)
				if err != nil || b == nil {
					n.log.Warn("bucket skipped in listing", "bucket", cb.Name, "error", err)
					continue
				}
				if n.Authorize(u, b, false) == nil && !yield(b) {
					return
				}
			}
			return
		}
		for rec := range n.rs.State().VisibleBuckets(u.Name, u.Root, prefix, after) {
			b, err := n.fromRecord(rec)
			if err != nil {
				n.log.Warn("bucket skipped in listing", "bucket", rec.Name, "error", err)
				continue
			}
			if n.Authorize(u, b, false) == nil && !yield(b) {
				return
			}
		}
	}
}

// Authorize returns nil when u may read (write=false) or write the bucket.
func (n *Namespace) Authorize(u User, b *Bucket, write bool) error {
	if u.Root || b.Owner == u.Name {
		return nil
	}
	st := n.rs.State()
	if write && st.CanWrite(u.Name, b.Name) || !write && st.CanRead(u.Name, b.Name) {
		return nil
	}
	return ErrAccessDenied
}

// CreateBucket creates a bucket owned by u in the region's default store.
func (n *Namespace) CreateBucket(ctx context.Context, u User, name string) error {
	if err := policies.ValidBucketName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBucketName, err)
	}
	if _, ok := n.v().global[name]; ok {
		return &BucketExistsError{Bucket: name, OwnedByCaller: u.Root}
	}
	// Each incarnation of a name gets its own prefix, so nothing a deleted
	// bucket left behind (a PUT that raced DeleteBucket, say) can show up in
	// a new bucket of the same name.
	var inc [6]byte
	_, _ = rand.Read(inc[:])
	v := n.v()
	storeName := v.def.Name()
	if g, ok := v.glob(name); ok {
		storeName = g.store.Name()
	}
	rec := regionstate.Bucket{Name: name, Owner: u.Name, Store: storeName, Prefix: name + "/" + hex.EncodeToString(inc[:]) + "/", Created: n.now().UTC()}
	if n.catalog != nil {
		return n.catalogCreate(ctx, rec)
	}
	err := n.rs.Apply(ctx, regionstate.CreateBucket{Bucket: rec})
	var exists *regionstate.BucketExistsError
	if errors.As(err, &exists) {
		return &BucketExistsError{Bucket: name, OwnedByCaller: exists.Owner == u.Name}
	}
	return err
}

// DeleteBucket removes an empty bucket. ErrBucketNotEmpty when it holds
// objects or multipart uploads in progress; ErrPolicyBucket for a bucket of
// the policy file.
func (n *Namespace) DeleteBucket(ctx context.Context, b *Bucket) error {
	if b.Global {
		return fmt.Errorf("%w: remove %q from the policy file instead", ErrPolicyBucket, b.Name)
	}
	if b.remote != "" {
		return fmt.Errorf("%w (%s)", ErrNotHomeRegion, b.remote)
	}
	for _, err := range b.List(ctx, store.ListOptions{}) {
		if err != nil {
			return err
		}
		return ErrBucketNotEmpty
	}
	if len(n.rs.State().Journal(b.Name, "")) > 0 || n.rs.State().HasVersions(b.Name) {
		return ErrBucketNotEmpty // S3: versions and delete markers count too
	}
	// Unfinished multipart uploads go with the bucket, as in S3 and MinIO
	// (a script that left one behind could never delete the bucket).
	for _, up := range n.rs.State().Uploads(b.Name, "") {
		if err := n.AbortUpload(ctx, b, up); err != nil && !errors.Is(err, ErrNoSuchUpload) {
			return fmt.Errorf("delete bucket %q: abort its upload of %q: %w", b.Name, up.Key, err)
		}
	}
	if n.catalog != nil {
		// The name is freed in the catalog first: a failure after it leaves
		// a record the region no longer shows (and replaces on a new create).
		if err := n.catalog.Delete(ctx, b.Name); err != nil {
			return err
		}
	}
	err := n.rs.Apply(ctx, regionstate.DeleteBucket{Name: b.Name})
	if errors.Is(err, regionstate.ErrNoSuchBucket) {
		if n.catalog != nil {
			return nil
		}
		return ErrNoSuchBucket
	}
	return err
}

// Store is the store holding the bucket's objects.
func (b *Bucket) Store() store.Store { return b.store }

// LocalFiler returns the store's local-file ability with the bucket's key
// prefix applied, or nil. A versioned bucket's files are found through
// its version index (versionedFiler).
func (b *Bucket) LocalFiler() (store.LocalFiler, string) {
	lf, prefix := b.path.localFiler()
	if lf != nil && b.versioned() {
		return versionedFiler{b: b, lf: lf}, ""
	}
	return lf, prefix
}

// LocalRead accounts for a read the caller serves straight from the
// store's local file (LocalFiler) of the object version info describes
// (its Key the bucket's key): it refuses it, like any read from the store,
// when a spent block-cold-reads budget covers it, and returns the function
// that counts the bytes sent (a posix store may be priced: an on-prem NAS
// read by a cloud region), under the read's reuse distance.
func (b *Bucket) LocalRead(ctx context.Context, info store.ObjectInfo) (sent func(n int64), err error) {
	if err := b.ns.checkColdRead(ctx, b.Name, b.store); err != nil {
		return nil, err
	}
	reuse := b.ns.readReuse(b.Name, info, b.store)
	return func(n int64) {
		b.ns.egress.count(egressTag{bucket: b.Name, key: info.Key}, b.store, "read", countBytes, n, reuse)
	}, nil
}

// Put writes an object (a new version in a versioned bucket).
func (b *Bucket) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return b.path.put(ctx, key, body, size, opts)
}

// touch tells every node of a multi-node region that key changed, before
// the write is acknowledged, when the bucket lets nodes cache metadata
// (TTL above 0): their caches drop it as they apply the Touch, and their
// reads wait for that (see Stat).
func (b *Bucket) touch(ctx context.Context, key string) error {
	if b.cache.TTL <= 0 || len(b.ns.region.Members()) < 2 {
		return nil
	}
	return b.ns.rs.Apply(context.WithoutCancel(ctx), regionstate.Touch{Store: b.store.Name(), Key: b.prefix + key})
}

// Delete removes an object; deleting a missing key is not an error. In a
// versioned bucket it adds a delete marker (DeleteObject answers its id).
func (b *Bucket) Delete(ctx context.Context, key string) error {
	_, err := b.DeleteLatest(ctx, key)
	return err
}

// DeleteLatest is Delete, returning the delete marker's version id in a
// versioned bucket ("" in an unversioned one).
func (b *Bucket) DeleteLatest(ctx context.Context, key string) (string, error) {
	if dp, ok := b.path.(directPath); ok {
		return dp.deleteLatest(ctx, key)
	}
	if err := b.ns.writeBarrier(ctx); err != nil {
		return "", err
	}
	if b.versioned() {
		return b.deleteVersioned(ctx, key)
	}
	return "", b.path.delete(ctx, key)
}

// List lists the bucket's objects; keys and prefixes are relative to the bucket.
func (b *Bucket) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	if b.versioned() {
		return b.listVersioned(ctx, opts)
	}
	return b.path.list(ctx, opts)
}
