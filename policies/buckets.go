package policies

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
)

// ref is a use of a store or bucket name, checked once everything is read.
type ref struct {
	name string
	p    pos
	path string
}

type refs struct{ stores, buckets []ref }

var bucketKeys = []string{"name", "origin", "placement", "write", "cache", "routing", "lifecycle"}

func (d *decoder) buckets(e entry, r *refs) []Bucket {
	items, _ := d.list(e.val, e.vpos, "buckets", "buckets")
	var out []Bucket
	seen := names{}
	for i, item := range items {
		pth := index("buckets", i)
		n, p := d.value(item, e.vpos, pth)
		m, ok := d.fields(n, p, pth, bucketKeys)
		if !ok {
			continue
		}
		b := Bucket{Write: WriteThrough, Cache: defaultCache()}
		var npos pos
		if b.Name, npos, ok = d.name(m, p, pth, "bucket", validBucketNameOrGlob); ok {
			d.addName(seen, b.Name, npos, join(pth, "name"), "bucket")
		}
		b.Glob = strings.ContainsAny(b.Name, "*?")
		if e, has := m["origin"]; has && b.Glob {
			d.errorf(e.kpos, join(pth, "origin"), "a bucket name glob gives rules to buckets created through S3; it cannot mount an origin")
		}
		if e, ok := m["origin"]; ok {
			b.Origin = d.origin(e, join(pth, "origin"), r)
		}
		if e, ok := m["placement"]; ok {
			if o, has := m["origin"]; has {
				d.errorf(e.kpos, join(pth, "placement"), "a bucket with an origin (line %d) keeps its objects in the origin store; remove placement or origin", o.kpos.line)
			}
			b.Placement = d.placement(e, join(pth, "placement"), r)
		}
		if e, ok := m["write"]; ok {
			w, ok := d.enum(e, join(pth, "write"), "write mode", []string{string(WriteThrough), string(WriteBack)})
			if ok {
				b.Write = WriteMode(w)
				if b.Write == WriteBack && !d.feat.WriteBack {
					d.unsupported(e.vpos, join(pth, "write"), "write mode \"write-back\"", []string{string(WriteThrough)})
				}
			}
		}
		if e, ok := m["cache"]; ok {
			b.Cache = d.cache(e, join(pth, "cache"))
		}
		if e, ok := m["routing"]; ok {
			b.Routing = d.bucketRouting(e, join(pth, "routing"), b.Placement, r)
		}
		if e, ok := m["lifecycle"]; ok {
			b.Lifecycle = d.lifecycle(e, join(pth, "lifecycle"), b.Origin != nil)
		}
		out = append(out, b)
	}
	return out
}

// origin reads "store" or "store/prefix/".
func (d *decoder) origin(e entry, pth string, r *refs) *Origin {
	if !d.feat.Origin {
		d.unsupported(e.kpos, pth, "origin (mounting existing data)", nil)
	}
	s, ok := d.str(e, pth, "store or store/prefix/")
	if !ok {
		return nil
	}
	store, prefix, _ := strings.Cut(s, "/")
	if err := validName(store); err != nil {
		d.errorf(e.vpos, pth, "invalid origin %s: expected STORE or STORE/PREFIX/ naming a declared store", quote(s))
		return nil
	}
	switch {
	case !utf8.ValidString(prefix) || len(prefix) > 1024:
		d.errorf(e.vpos, pth, "invalid origin prefix: expected at most 1024 bytes of UTF-8")
		return nil
	case strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "//"):
		d.errorf(e.vpos, pth, "invalid origin %s: the prefix must not start with '/' or contain \"//\"", quote(s))
		return nil
	case prefix != "" && !strings.HasSuffix(prefix, "/"):
		d.errorf(e.vpos, pth, "origin prefix must end with '/' (did you mean %s?)", quote(s+"/"))
		return nil
	}
	r.stores = append(r.stores, ref{store, e.vpos, pth})
	return &Origin{Store: store, Prefix: prefix}
}

var placementKeys = []string{"single", "replicate", "erasure"}

func (d *decoder) placement(e entry, pth string, r *refs) Placement {
	m, ok := d.fields(e.val, e.vpos, pth, placementKeys)
	if !ok {
		return Placement{}
	}
	var first *entry
	for _, k := range placementKeys {
		if e, ok := m[k]; ok && (first == nil || before(e.kpos, first.kpos)) {
			first = &e
		}
	}
	if first == nil {
		d.errorf(e.vpos, pth, "expected one of single, replicate or erasure")
		return Placement{}
	}
	for _, k := range placementKeys {
		if e, ok := m[k]; ok && e.key != first.key {
			d.errorf(e.kpos, join(pth, k), "a placement is one of single, replicate or erasure; %s is already set", first.key)
		}
	}
	switch pth := join(pth, first.key); first.key {
	case "single":
		if name, ok := d.str(*first, pth, "a store name"); ok {
			r.stores = append(r.stores, ref{name, first.vpos, pth})
			return Placement{Kind: PlacementSingle, Stores: []string{name}}
		}
	case "replicate":
		if !d.feat.Replicate {
			d.unsupported(first.kpos, pth, "replicate placement", []string{"single"})
		}
		stores := d.storeList(*first, pth, r)
		if stores != nil && len(stores) < 2 {
			d.errorf(first.vpos, pth, "replicate needs at least 2 stores, got %d (for one store use single)", len(stores))
		}
		return Placement{Kind: PlacementReplicate, Stores: stores}
	case "erasure":
		if !d.feat.Erasure {
			d.unsupported(first.kpos, pth, "erasure placement", []string{"single"})
		}
		return d.erasure(*first, pth, r)
	}
	return Placement{}
}

func before(a, b pos) bool { return a.line < b.line || (a.line == b.line && a.col < b.col) }

// Erasure coding limits.
const (
	MinDataShards = 2
	MaxShards     = 256 // data + parity
)

func (d *decoder) erasure(e entry, pth string, r *refs) Placement {
	m, ok := d.fields(e.val, e.vpos, pth, []string{"data", "parity", "stores"})
	if !ok {
		return Placement{}
	}
	pl := Placement{Kind: PlacementErasure}
	for _, k := range []string{"data", "parity", "stores"} {
		if _, ok := m[k]; !ok {
			d.errorf(e.vpos, join(pth, k), "missing required key (erasure needs data, parity and stores)")
		}
	}
	valid := true
	if e, ok := m["data"]; ok {
		n, ok := d.integer(e, join(pth, "data"))
		switch {
		case !ok:
			valid = false
		case n < MinDataShards:
			d.errorf(e.vpos, join(pth, "data"), "expected at least %d data shards, got %d (with 1, use replicate)", MinDataShards, n)
			valid = false
		case n > MaxShards:
			d.errorf(e.vpos, join(pth, "data"), "expected at most %d shards, got %d", MaxShards, n)
			valid = false
		default:
			pl.Data = int(n)
		}
	}
	if e, ok := m["parity"]; ok {
		n, ok := d.integer(e, join(pth, "parity"))
		switch {
		case !ok:
			valid = false
		case n < 1 || n > MaxShards:
			d.errorf(e.vpos, join(pth, "parity"), "expected 1 to %d parity shards, got %d", MaxShards, n)
			valid = false
		default:
			pl.Parity = int(n)
		}
	}
	if valid && pl.Data+pl.Parity > MaxShards {
		d.errorf(m["parity"].vpos, join(pth, "parity"), "data + parity must be at most %d shards, got %d", MaxShards, pl.Data+pl.Parity)
		valid = false
	}
	se, ok := m["stores"]
	if !ok {
		return pl
	}
	pl.Stores = d.storeList(se, join(pth, "stores"), r)
	if pl.Stores == nil || !valid || pl.Data == 0 || pl.Parity == 0 {
		return pl
	}
	spth, n, shards := join(pth, "stores"), len(pl.Stores), pl.Data+pl.Parity
	switch {
	case n < 2:
		d.errorf(se.vpos, spth, "erasure needs at least 2 stores, got %d", n)
	case n > shards:
		d.errorf(se.vpos, spth, "%d stores for %d+%d = %d shards: expected at most one store per shard", n, pl.Data, pl.Parity, shards)
	case pl.ShardsPerStore() > pl.Parity:
		d.errorf(se.vpos, spth, "%d shards over %d stores puts up to %d shards on one store, more than parity %d: losing one store would lose data (expected at least %d stores, or more parity)",
			shards, n, pl.ShardsPerStore(), pl.Parity, (shards+pl.Parity-1)/pl.Parity)
	}
	return pl
}

// storeList reads a list of distinct store names. It returns nil if the
// value is not a list.
func (d *decoder) storeList(e entry, pth string, r *refs) []string {
	items, ok := d.list(e.val, e.vpos, pth, "store names")
	if !ok {
		return nil
	}
	out := []string{}
	seen := names{}
	for i, item := range items {
		ipth := index(pth, i)
		n, p := d.value(item, e.vpos, ipth)
		name, ok := d.str(entry{val: n, vpos: p}, ipth, "a store name")
		if !ok {
			continue
		}
		if first, dup := seen[name]; dup {
			d.errorf(p, ipth, "store %s is listed twice (first at %d:%d)", quote(name), first.line, first.col)
			continue
		}
		seen[name] = p
		r.stores = append(r.stores, ref{name, p, ipth})
		out = append(out, name)
	}
	return out
}

var (
	prefetchModes = []string{string(PrefetchNone), string(PrefetchSequential), string(PrefetchOnApply)}
	cacheKeys     = []string{"ttl", "quota", "pin", "prefetch", "priority"}
)

func priorityNames() []string {
	out := make([]string, len(CachePriorities))
	for i, p := range CachePriorities {
		out[i] = string(p)
	}
	return out
}

func (d *decoder) cache(e entry, pth string) Cache {
	c := defaultCache()
	m, ok := d.fields(e.val, e.vpos, pth, cacheKeys)
	if !ok {
		return c
	}
	if e, ok := m["ttl"]; ok {
		if !d.feat.Cache {
			d.unsupported(e.kpos, join(pth, "ttl"), "cache ttl", nil)
		}
		ttl, _ := d.parsed(e, join(pth, "ttl"), "a duration like 30s, 15m or 24h", func(s string) (int64, error) {
			v, err := parseDuration(s)
			return int64(v), err
		})
		c.TTL = time.Duration(ttl)
	}
	if e, ok := m["quota"]; ok {
		if !d.feat.Cache {
			d.unsupported(e.kpos, join(pth, "quota"), "cache quota", nil)
		}
		c.Quota, _ = d.parsed(e, join(pth, "quota"), "a size like 500GiB or 2TiB", parseSize)
	}
	if e, ok := m["pin"]; ok {
		if !d.feat.Pin {
			d.unsupported(e.kpos, join(pth, "pin"), "cache pin", nil)
		}
		c.Pin, _ = d.boolean(e, join(pth, "pin"))
	}
	if e, ok := m["prefetch"]; ok {
		if !d.feat.Prefetch {
			d.unsupported(e.kpos, join(pth, "prefetch"), "cache prefetch", nil)
		}
		if v, ok := d.enum(e, join(pth, "prefetch"), "prefetch mode", prefetchModes); ok {
			c.Prefetch = Prefetch(v)
		}
	}
	if e, ok := m["priority"]; ok {
		if !d.feat.Priority {
			d.unsupported(e.kpos, join(pth, "priority"), "cache priority", nil)
		}
		if v, ok := d.enum(e, join(pth, "priority"), "cache priority", priorityNames()); ok {
			c.Priority = CachePriority(v)
		}
	}
	return c
}

// parsed reads a string through parse; a bare 0 reads as 0 and another
// non-negative whole number is passed to parse as text.
func (d *decoder) parsed(e entry, pth, what string, parse func(string) (int64, error)) (int64, bool) {
	if n, ok := e.val.(*ast.IntegerNode); ok {
		if v, ok := n.Value.(int64); ok && v == 0 {
			return 0, true
		}
	}
	s, ok := d.str(e, pth, what)
	if !ok {
		return 0, false
	}
	v, err := parse(s)
	if err != nil {
		d.errorf(e.vpos, pth, "%v", err)
		return 0, false
	}
	return v, true
}

// checkRefs reports every use of an undeclared store or bucket.
func (d *decoder) checkRefs(pol *Policy, r *refs) {
	var storeNames, bucketNames []string
	for _, s := range pol.Stores {
		if s.Name != "" {
			storeNames = append(storeNames, s.Name)
		}
	}
	for _, b := range pol.Buckets {
		if b.Name != "" {
			bucketNames = append(bucketNames, b.Name)
		}
	}
	check := func(rs []ref, what string, declared []string) {
		for _, x := range rs {
			if slices.Contains(declared, x.name) {
				continue
			}
			hint := expected(x.name, declared)
			if len(declared) == 0 {
				hint = fmt.Sprintf("(no %ss are declared)", what)
			}
			d.errorf(x.p, x.path, "unknown %s %s %s", what, quote(x.name), hint)
		}
	}
	check(r.stores, "store", storeNames)
	check(r.buckets, "bucket", bucketNames)
	// A read-only store takes no writes: it can be an origin, not where
	// new objects (a placement) or S3-created buckets (defaults.store) go.
	for _, x := range r.stores {
		st, ok := pol.Store(x.name)
		if !ok || !st.ReadOnly || (x.path != "defaults.store" && !strings.Contains(x.path, ".placement")) {
			continue
		}
		d.errorf(x.p, x.path, "store %s is read_only: it takes no writes, so it can be a bucket's origin but not %s", quote(x.name),
			map[bool]string{true: "the default store (where S3-created buckets go)", false: "in a placement"}[x.path == "defaults.store"])
	}
}

// bucketRouting reads a bucket's routing: cheapest, nearest, or a list of
// the placement's stores in the order reads should try them.
func (d *decoder) bucketRouting(e entry, pth string, pl Placement, r *refs) BucketRouting {
	if !d.feat.Routing {
		d.unsupported(e.kpos, pth, "read routing", nil)
	}
	if isScalar(e.val) {
		v, ok := d.enum(e, pth, "routing rule", []string{string(PreferCheapest), string(PreferNearest)})
		if !ok {
			return BucketRouting{}
		}
		return BucketRouting{Prefer: Prefer(v)}
	}
	items, ok := d.list(e.val, e.vpos, pth, "store names (an explicit read order), or cheapest or nearest")
	if !ok {
		return BucketRouting{}
	}
	var out BucketRouting
	for i, item := range items {
		ipth := index(pth, i)
		n, p := d.value(item, e.vpos, ipth)
		name, ok := d.str(entry{val: n, vpos: p}, ipth, "a store name")
		if !ok {
			continue
		}
		if pl.Kind != PlacementReplicate && pl.Kind != PlacementErasure {
			d.errorf(p, ipth, "an explicit read order needs a replicate or erasure placement (this bucket has %s)", describePlacement(pl))
			return BucketRouting{}
		}
		if !slices.Contains(pl.Stores, name) {
			d.errorf(p, ipth, "store %s is not in the bucket's placement %s", quote(name), oneOf(pl.Stores))
			continue
		}
		if slices.Contains(out.Order, name) {
			d.errorf(p, ipth, "store %s is listed twice", quote(name))
			continue
		}
		r.stores = append(r.stores, ref{name, p, ipth})
		out.Order = append(out.Order, name)
	}
	return out
}

func describePlacement(pl Placement) string {
	if pl.Kind == PlacementDefault {
		return "no placement"
	}
	return string(pl.Kind) + " placement"
}

// validBucketNameOrGlob accepts a bucket name, or a glob of one: * and ?
// stand for any run of characters and any one character, and what remains
// uses only bucket name characters.
func validBucketNameOrGlob(name string) error {
	if !strings.ContainsAny(name, "*?") {
		return ValidBucketName(name)
	}
	if _, err := path.Match(name, ""); err != nil || strings.ContainsAny(name, "[]\\") {
		return fmt.Errorf("bucket name glob %s: only * and ? are wildcards", quote(name))
	}
	for i, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '-' && r != '*' && r != '?' {
			return fmt.Errorf("bucket name glob %s may contain only lowercase letters, digits, '.', '-', '*' and '?' (found %q at offset %d)", quote(name), r, i)
		}
	}
	if len(name) > 63 {
		return fmt.Errorf("bucket name glob %s is longer than 63 characters", quote(name))
	}
	return nil
}
