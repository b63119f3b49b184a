// Package policies reads fedgate's placement-policy file: the YAML that
// declares regions, stores, buckets and their rules. Parse checks the whole
// file against the schema and against a Features set (what this build can
// do), and reports every problem with its file:line:column. The resulting
// Policy is plain data with a few lookups for the namespace.
//
// docs/policies.md describes every key.
package policies

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/fedgate/fedgate/lifecycle"
)

// Policy is one parsed and validated policy file. Treat it as read-only; the
// lookups below are safe for concurrent use.
type Policy struct {
	File     string // the name given to Parse or Load
	Regions  []Region
	Peering  Peering
	Stores   []Store
	Buckets  []Bucket
	Routing  Routing
	Egress   Egress
	Defaults Defaults

	stores  map[string]int // name -> index in Stores; built by Parse
	buckets map[string]int // name -> index in Buckets; built by Parse
}

// Location is where something lives (a GPU region, a store's bytes): a
// cloud and a region in it, written "cloud:region" (aws:us-east-1,
// gcp:us-central1, azure:eastus, onprem:lga1). It is fedgate's one location
// type: store's Store.Location and egress use it too.
// ParseLocation and ParseLocationOrCloud read it; String writes it.
type Location struct {
	Cloud  string // aws, gcp, azure or onprem
	Region string // "" only in an egress price or budget, where it means every region of Cloud
}

func (l Location) String() string {
	if l.Region == "" {
		return l.Cloud
	}
	return l.Cloud + ":" + l.Region
}

// Region is one GPU region that applies the policy.
type Region struct {
	Name     string
	Location Location
	// Endpoint is the region's S3 endpoint (a load balancer or one node),
	// through which other regions read and write its buckets ("" : the
	// region is not peered). docs/regions.md.
	Endpoint string
	// Catalog is host:port of the region's voter in the global bucket
	// catalog (the --catalog-addr of one of its nodes); every region of a
	// peered policy names one.
	Catalog string
}

// Peering is how regions reach each other (docs/regions.md): the
// credential one region's gateway presents to another's S3 endpoint, and
// the TLS material of the catalog's region-to-region links and of https
// endpoints.
type Peering struct {
	// Credentials: access_key_env/secret_key_env or access_key_file/
	// secret_key_file; empty means the node's own root credentials (every
	// region then shares them).
	Credentials Credentials
	// CAFile verifies other regions' https endpoints and catalog links;
	// CertFile and KeyFile are this region's certificate for the catalog's
	// mutual TLS (all three, or none: plain TCP).
	CAFile, CertFile, KeyFile string
}

// Peered reports whether the policy's regions know each other (a global
// bucket catalog).
func (p *Policy) Peered() bool {
	for _, r := range p.Regions {
		if r.Catalog != "" {
			return true
		}
	}
	return false
}

// StoreKind names a storage system.
type StoreKind string

// The store kinds.
const (
	KindS3    StoreKind = "s3"
	KindGCS   StoreKind = "gcs"
	KindAzure StoreKind = "azure"
	KindPosix StoreKind = "posix"
	// KindFS is an existing file tree served as it is: each regular file
	// an object (store/fs).
	KindFS StoreKind = "fs"
)

// StoreKinds lists every kind the schema knows, in documentation order.
var StoreKinds = []StoreKind{KindS3, KindGCS, KindAzure, KindPosix, KindFS}

// Store is one bucket, container or directory that holds object bytes.
type Store struct {
	Name      string
	Kind      StoreKind
	Location  Location
	Bucket    string // s3, gcs
	Account   string // azure storage account
	Container string // azure
	Path      string // posix, fs: an absolute directory
	ReadOnly  bool   // fs: refuse every write
	Endpoint  string // s3, gcs, azure: optional URL of a compatible server
	PathStyle bool   // s3: path-style addressing
	// Credentials name where secrets come from; they never hold secrets.
	Credentials Credentials
}

// Credentials say where a store's secrets are read from (by cmd, once at
// start). All empty means the platform's default chain (instance role,
// workload identity, managed identity).
type Credentials struct {
	AccessKeyEnv    string // s3: env var with the access key id
	SecretKeyEnv    string // s3: env var with the secret key
	SessionTokenEnv string // s3: optional env var with a session token
	AccountKeyEnv   string // azure: env var with the account key
	SASTokenEnv     string // azure: env var with a SAS token
	File            string // s3: shared credentials file; gcs: service-account JSON
	Profile         string // s3: profile in File
	// Files holding one secret each (a mounted Kubernetes secret, a Vault
	// agent's output), read again when they change: a rotated credential
	// is used without a restart. Each is an alternative to its *Env.
	AccessKeyFile    string // s3
	SecretKeyFile    string // s3
	SessionTokenFile string // s3
	AccountKeyFile   string // azure
}

// Bucket is one bucket of the global namespace.
type Bucket struct {
	// Name is a bucket name, or a glob (with * and ?) whose rules apply to
	// the buckets created through S3 that it matches (Glob is set).
	Name      string
	Glob      bool
	Origin    *Origin   // existing data mounted as this bucket; nil if none
	Placement Placement // where new objects go; Kind "" when not set in the file
	Write     WriteMode
	Cache     Cache // defaults filled in
	// Routing orders which member of a replicate or erasure placement
	// reads use first; the zero value follows the file's routing.prefer.
	Routing BucketRouting
	// Lifecycle is the bucket's S3 lifecycle rules (nil: none in the file;
	// the bucket's own S3 configuration, if any, applies). On a glob, the
	// rules of the buckets it matches.
	Lifecycle []lifecycle.Rule
}

// BucketRouting is a bucket's read routing: a rule, or an explicit order
// of the placement's stores.
type BucketRouting struct {
	Prefer Prefer   // "" (the file's routing.prefer), cheapest or nearest
	Order  []string // explicit store order (Prefer is "")
}

// Origin mounts existing data: the objects under Prefix in Store.
type Origin struct {
	Store  string
	Prefix string // "" or ends with "/"
}

// Key returns the store key that holds the bucket key k.
func (o Origin) Key(k string) string { return o.Prefix + k }

// PlacementKind names a placement.
type PlacementKind string

// The placements. PlacementDefault means the file sets none: the object goes
// to the origin store, else the default store (see (*Policy).Match).
const (
	PlacementDefault   PlacementKind = ""
	PlacementSingle    PlacementKind = "single"
	PlacementReplicate PlacementKind = "replicate"
	PlacementErasure   PlacementKind = "erasure"
)

// Placement is where a bucket's new objects are written.
type Placement struct {
	Kind   PlacementKind
	Stores []string // single: one store; replicate: two or more; erasure: the shard stores
	Data   int      // erasure: data shards
	Parity int      // erasure: parity shards
}

// ShardsPerStore is the most shards of one erasure-coded object that any one
// store holds when shards are spread round-robin over Stores.
func (p Placement) ShardsPerStore() int {
	if p.Kind != PlacementErasure || len(p.Stores) == 0 {
		return 0
	}
	n := p.Data + p.Parity
	return (n + len(p.Stores) - 1) / len(p.Stores)
}

// WriteMode says when a PUT is acknowledged.
type WriteMode string

// The write modes.
const (
	WriteThrough WriteMode = "write-through" // ack when the placement's stores have it
	WriteBack    WriteMode = "write-back"    // ack when staged on two nodes; drain later
)

// Prefetch says how the cache reads ahead.
type Prefetch string

// The prefetch modes.
const (
	PrefetchNone       Prefetch = "none"       // fetch only what is read
	PrefetchSequential Prefetch = "sequential" // read ahead for sequential readers
	// PrefetchOnApply reads ahead like sequential, and preloads the whole
	// bucket into the region's cache when the policy that says so is
	// applied (or seeds a new region).
	PrefetchOnApply Prefetch = "on-apply"
)

// Cache is a bucket's cache rules.
type Cache struct {
	TTL      time.Duration // how long object metadata is trusted before revalidation
	Quota    int64         // bytes of the region cache this bucket may use; 0: no bucket limit
	Pin      bool          // keep cached chunks out of eviction
	Prefetch Prefetch
	// Priority orders eviction between buckets: the region cache evicts
	// the least recently used chunks of the lowest priority first, and a
	// bucket's fills evict only chunks of its own priority or lower.
	Priority CachePriority
}

// CachePriority is a bucket's eviction class in the region cache.
type CachePriority string

// The cache priorities, lowest first.
const (
	PriorityLow    CachePriority = "low"
	PriorityNormal CachePriority = "normal"
	PriorityHigh   CachePriority = "high"
)

// CachePriorities lists the priorities, lowest first.
var CachePriorities = []CachePriority{PriorityLow, PriorityNormal, PriorityHigh}

// Rank is the priority's position in CachePriorities (low 0, normal 1,
// high 2); an empty or unknown priority ranks as normal.
func (p CachePriority) Rank() int {
	switch p {
	case PriorityLow:
		return 0
	case PriorityHigh:
		return 2
	}
	return 1
}

// Defaults for a cache section that leaves keys out.
const (
	DefaultCacheTTL = 0 // revalidate against the origin on every open
	DefaultPrefetch = PrefetchSequential
	DefaultPriority = PriorityNormal
)

// Prefer names the read-routing rule.
type Prefer string

// The routing rules.
const (
	PreferCheapest Prefer = "cheapest"
	PreferNearest  Prefer = "nearest"
)

// Routing chooses which replica a read uses.
type Routing struct {
	Prefer Prefer // default cheapest
}

// Egress holds price overrides and budgets.
type Egress struct {
	Prices  []Price
	Budgets []Budget
}

// Price overrides the built-in per-GB price for bytes moving From -> To. A
// Location with an empty Region matches every region of its cloud.
type Price struct {
	From, To Location
	PerGB    Money
}

// BudgetAction is what happens when a budget is spent.
type BudgetAction string

// The budget actions.
const (
	ActionAlert          BudgetAction = "alert"
	ActionBlockColdReads BudgetAction = "block-cold-reads"
)

// Budget caps the monthly egress cost of a bucket, of a region pair (bytes
// moving From -> To), or of a bucket on a region pair: every criterion set
// must match, and at least one is set.
type Budget struct {
	Bucket string // "" for every bucket
	// From and To select a region pair; a Location with an empty Region
	// matches every region of its cloud, a zero Location anything.
	From, To Location
	Monthly  Money
	Action   BudgetAction // default alert
}

// Money is an amount in millionths of a currency unit.
type Money struct {
	Micros   int64
	Currency string // "USD"
}

func (m Money) String() string {
	s := fmt.Sprintf("%d.%06d", m.Micros/1e6, m.Micros%1e6)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + m.Currency
}

// Defaults names the region's default store: where buckets created through
// S3 (with no entry in the file) and buckets without placement live.
type Defaults struct {
	Store string // "" means the embedded posix store
	// PublicAccessBlock, when set, is the region-wide S3 Block Public
	// Access setting: each flag set here applies to every bucket on top
	// of the bucket's own setting.
	PublicAccessBlock *PublicAccessBlock
}

// PublicAccessBlock is S3's Block Public Access configuration.
type PublicAccessBlock struct {
	BlockPublicACLs       bool
	IgnorePublicACLs      bool
	BlockPublicPolicy     bool
	RestrictPublicBuckets bool
}

// Region returns the region called name. With name "" it returns the only
// region of a one-region policy. The errors wrap ErrNoRegions,
// ErrRegionRequired or ErrUnknownRegion and list the region names.
func (p *Policy) Region(name string) (Region, error) {
	if len(p.Regions) == 0 {
		return Region{}, ErrNoRegions
	}
	names := make([]string, len(p.Regions))
	for i, r := range p.Regions {
		if r.Name == name || (name == "" && len(p.Regions) == 1) {
			return r, nil
		}
		names[i] = r.Name
	}
	if name == "" {
		return Region{}, fmt.Errorf("%w (--region one of %s)", ErrRegionRequired, strings.Join(names, ", "))
	}
	return Region{}, fmt.Errorf("%w %q %s", ErrUnknownRegion, name, expected(name, names))
}

// Store returns the store called name.
func (p *Policy) Store(name string) (Store, bool) {
	if p.stores != nil {
		i, ok := p.stores[name]
		if !ok {
			return Store{}, false
		}
		return p.Stores[i], true
	}
	i := slices.IndexFunc(p.Stores, func(s Store) bool { return s.Name == name })
	if i < 0 {
		return Store{}, false
	}
	return p.Stores[i], true
}

// Bucket returns the bucket called name, if the file declares it.
// MatchGlob returns the first glob bucket entry whose pattern matches
// name (buckets created through S3 take its rules).
func (p *Policy) MatchGlob(name string) (Bucket, bool) {
	for _, b := range p.Buckets {
		if b.Glob {
			if ok, _ := path.Match(b.Name, name); ok {
				return b, true
			}
		}
	}
	return Bucket{}, false
}

func (p *Policy) Bucket(name string) (Bucket, bool) {
	if p.buckets != nil {
		i, ok := p.buckets[name]
		if !ok {
			return Bucket{}, false
		}
		return p.Buckets[i], true
	}
	i := slices.IndexFunc(p.Buckets, func(b Bucket) bool { return b.Name == name })
	if i < 0 {
		return Bucket{}, false
	}
	return p.Buckets[i], true
}

// DefaultStore returns the store named by defaults.store; false means the
// file names none: the region's default store is then its first declared
// store that is not an fs store, else its embedded posix store.
func (p *Policy) DefaultStore() (Store, bool) {
	if p.Defaults.Store == "" {
		return Store{}, false
	}
	return p.Store(p.Defaults.Store)
}

// Budget returns the egress budget of a bucket (the one that names the
// bucket and no region pair), if it has one.
func (p *Policy) Budget(bucket string) (Budget, bool) {
	for _, b := range p.Egress.Budgets {
		if b.Bucket == bucket && b.From.Cloud == "" && b.To.Cloud == "" {
			return b, true
		}
	}
	return Budget{}, false
}

// Rules are the effective rules for one object.
type Rules struct {
	Bucket    string
	Declared  bool    // the bucket is declared in the file (global namespace)
	Origin    *Origin // nil if the bucket mounts no existing data
	Placement Placement
	Write     WriteMode
	Cache     Cache
}

// Match returns the rules for key in bucket. Every key of a bucket has its
// bucket's rules today; key is taken so per-prefix rules can come without
// changing callers. A bucket the file does not declare (one created through
// S3) gets the default rules, with Declared false. The placement is always
// resolved: a bucket without one writes to its origin store, else to
// defaults.store; with neither, Placement.Kind stays PlacementDefault and
// Stores is empty, meaning the region's embedded store.
func (p *Policy) Match(bucket, key string) Rules {
	b, ok := p.Bucket(bucket)
	if !ok {
		b = Bucket{Name: bucket, Write: WriteThrough, Cache: defaultCache()}
	}
	r := Rules{Bucket: b.Name, Declared: ok, Origin: b.Origin, Placement: b.Placement, Write: b.Write, Cache: b.Cache}
	if r.Placement.Kind == PlacementDefault {
		switch {
		case b.Origin != nil:
			r.Placement = Placement{Kind: PlacementSingle, Stores: []string{b.Origin.Store}}
		case p.Defaults.Store != "":
			r.Placement = Placement{Kind: PlacementSingle, Stores: []string{p.Defaults.Store}}
		}
	}
	return r
}

func defaultCache() Cache {
	return Cache{TTL: DefaultCacheTTL, Prefetch: DefaultPrefetch, Priority: DefaultPriority}
}
