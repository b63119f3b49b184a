package policies

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string, f Features) *Policy {
	t.Helper()
	p, err := Parse("policy.yaml", []byte(src), f)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestExampleParsesWithAllFeatures(t *testing.T) {
	p, err := Load("testdata/example.yaml", AllFeatures())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if p.File != "testdata/example.yaml" {
		t.Errorf("File = %q", p.File)
	}
	wantRegions := []Region{
		{Name: "us-east-gpu", Location: Location{"aws", "us-east-1"}},
		{Name: "lga-gpu", Location: Location{"onprem", "lga1"}},
	}
	if !reflect.DeepEqual(p.Regions, wantRegions) {
		t.Errorf("Regions = %+v", p.Regions)
	}
	wantStores := []Store{
		{Name: "datasets", Kind: KindS3, Location: Location{"aws", "us-east-1"}, Bucket: "acme-datasets",
			Endpoint: "https://s3.us-east-1.amazonaws.com", Credentials: Credentials{AccessKeyEnv: "DATASETS_AK", SecretKeyEnv: "DATASETS_SK"}},
		{Name: "ckpt-gcs", Kind: KindGCS, Location: Location{"gcp", "us-central1"}, Bucket: "acme-ckpt"},
		{Name: "ckpt-azure", Kind: KindAzure, Location: Location{"azure", "eastus"}, Account: "acmeckpt", Container: "ckpt"},
		{Name: "nas", Kind: KindPosix, Location: Location{"onprem", "lga1"}, Path: "/mnt/nas/fedgate"},
	}
	if !reflect.DeepEqual(p.Stores, wantStores) {
		t.Errorf("Stores =\n%+v\nwant\n%+v", p.Stores, wantStores)
	}
	wantBuckets := []Bucket{
		{Name: "imagenet", Origin: &Origin{Store: "datasets", Prefix: "imagenet/"}, Write: WriteThrough,
			Cache: Cache{TTL: 24 * time.Hour, Quota: 2 << 40, Prefetch: PrefetchSequential, Priority: PriorityNormal}},
		{Name: "checkpoints", Write: WriteBack,
			Placement: Placement{Kind: PlacementErasure, Data: 4, Parity: 2, Stores: []string{"ckpt-gcs", "ckpt-azure", "nas", "datasets"}},
			Cache:     Cache{TTL: 0, Quota: 500 << 30, Prefetch: PrefetchSequential, Priority: PriorityNormal}},
		{Name: "scratch", Write: WriteThrough, Placement: Placement{Kind: PlacementSingle, Stores: []string{"nas"}},
			Cache: Cache{TTL: DefaultCacheTTL, Prefetch: PrefetchSequential, Priority: PriorityNormal}},
	}
	if !reflect.DeepEqual(p.Buckets, wantBuckets) {
		t.Errorf("Buckets =\n%+v\nwant\n%+v", p.Buckets, wantBuckets)
	}
	if p.Routing.Prefer != PreferCheapest {
		t.Errorf("Routing = %+v", p.Routing)
	}
	wantBudgets := []Budget{{Bucket: "imagenet", Monthly: Money{Micros: 500e6, Currency: "USD"}, Action: ActionAlert}}
	if len(p.Egress.Prices) != 0 || !reflect.DeepEqual(p.Egress.Budgets, wantBudgets) {
		t.Errorf("Egress = %+v", p.Egress)
	}
	if got := p.Buckets[1].Placement.ShardsPerStore(); got != 2 {
		t.Errorf("ShardsPerStore = %d, want 2", got)
	}
}

func TestExampleRefusedBySkeleton(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("policy.yaml", data, SkeletonFeatures())
	checkErrors(t, err, []string{
		`8:11 stores[0].kind: store kind "s3" is not supported yet (this build supports: posix)`,
		`15:11 stores[1].kind: store kind "gcs" is not supported yet`,
		`19:11 stores[2].kind: store kind "azure" is not supported yet`,
		`29:5 buckets[0].origin: origin (mounting existing data) is not supported yet`,
		`30:13 buckets[0].cache.ttl: cache ttl is not supported yet`,
		`30:23 buckets[0].cache.quota: cache quota is not supported yet`,
		`30:36 buckets[0].cache.pin: cache pin is not supported yet`,
		`30:48 buckets[0].cache.prefetch: cache prefetch is not supported yet`,
		`33:7 buckets[1].placement.erasure: erasure placement is not supported yet (this build supports: single)`,
		`34:12 buckets[1].write: write mode "write-back" is not supported yet (this build supports: write-through)`,
		`35:13 buckets[1].cache.ttl: cache ttl is not supported yet`,
		`35:22 buckets[1].cache.quota: cache quota is not supported yet`,
		`38:11 routing.prefer: read routing is not supported yet`,
		`41:3 egress.budgets: enforcing egress budgets is not supported yet`,
	})
}

func TestSkeletonAcceptsTodaysFile(t *testing.T) {
	p := mustParse(t, `
regions:
  - {name: local, location: onprem:lab}
stores:
  - {name: disk, kind: posix, location: onprem:lab, path: /var/lib/fedgate/objects/}
buckets:
  - name: scratch
    placement: {single: disk}
    write: write-through
  - name: logs
defaults: {store: disk}
egress: {prices: {}, budgets: []}
`, SkeletonFeatures())
	if s, ok := p.DefaultStore(); !ok || s.Path != "/var/lib/fedgate/objects" {
		t.Errorf("DefaultStore = %+v, %v", s, ok)
	}
	r := p.Match("logs", "a/b")
	if !r.Declared || r.Placement.Kind != PlacementSingle || !reflect.DeepEqual(r.Placement.Stores, []string{"disk"}) {
		t.Errorf("Match(logs) = %+v", r)
	}
}

func TestEmptyPolicies(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only a comment\n# and another\n", "---\n", "{}\n", "regions:\nstores:\nbuckets:\n", "%YAML 1.2\n---\n"} {
		p, err := Parse("policy.yaml", []byte(src), SkeletonFeatures())
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if len(p.Regions)+len(p.Stores)+len(p.Buckets) != 0 || p.Routing.Prefer != PreferCheapest {
			t.Errorf("Parse(%q) = %+v, want an empty policy", src, p)
		}
	}
}

func TestRegion(t *testing.T) {
	one := mustParse(t, "regions: [{name: only, location: gcp:us-central1}]\n", AllFeatures())
	if r, err := one.Region(""); err != nil || r.Name != "only" {
		t.Errorf("Region(\"\") = %+v, %v", r, err)
	}
	if _, err := one.Region("other"); !errors.Is(err, ErrUnknownRegion) || !strings.Contains(err.Error(), "expected one of only") {
		t.Errorf("Region(other) error = %v", err)
	}
	two := mustParse(t, "regions: [{name: east, location: aws:us-east-1}, {name: west, location: aws:us-west-2}]\n", AllFeatures())
	if _, err := two.Region(""); !errors.Is(err, ErrRegionRequired) || !strings.Contains(err.Error(), "east, west") {
		t.Errorf("Region(\"\") error = %v", err)
	}
	if r, err := two.Region("west"); err != nil || r.Location != (Location{"aws", "us-west-2"}) {
		t.Errorf("Region(west) = %+v, %v", r, err)
	}
	if _, err := two.Region("wset"); err == nil || !strings.Contains(err.Error(), `did you mean "west"`) {
		t.Errorf("Region(wset) error = %v", err)
	}
	if _, err := (&Policy{}).Region(""); !errors.Is(err, ErrNoRegions) {
		t.Errorf("Region on empty policy: %v", err)
	}
}

func TestLookupsAndMatch(t *testing.T) {
	p, err := Load("testdata/example.yaml", AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := p.Store("nas"); !ok || s.Kind != KindPosix {
		t.Errorf("Store(nas) = %+v, %v", s, ok)
	}
	if _, ok := p.Store("nope"); ok {
		t.Error("Store(nope) found")
	}
	if b, ok := p.Bucket("scratch"); !ok || b.Placement.Stores[0] != "nas" {
		t.Errorf("Bucket(scratch) = %+v, %v", b, ok)
	}
	if _, ok := p.DefaultStore(); ok {
		t.Error("DefaultStore found without defaults.store")
	}
	if b, ok := p.Budget("imagenet"); !ok || b.Monthly.String() != "500USD" {
		t.Errorf("Budget(imagenet) = %+v, %v", b, ok)
	}

	r := p.Match("imagenet", "train/0001.tar")
	if !r.Declared || r.Origin == nil || r.Origin.Key("train/0001.tar") != "imagenet/train/0001.tar" ||
		r.Placement.Kind != PlacementSingle || r.Placement.Stores[0] != "datasets" || r.Cache.TTL != 24*time.Hour {
		t.Errorf("Match(imagenet) = %+v", r)
	}
	r = p.Match("checkpoints", "run1/step100")
	if r.Write != WriteBack || r.Placement.Kind != PlacementErasure || r.Cache.Quota != 500<<30 {
		t.Errorf("Match(checkpoints) = %+v", r)
	}
	r = p.Match("made-by-s3", "k")
	want := Rules{Bucket: "made-by-s3", Write: WriteThrough, Cache: Cache{TTL: DefaultCacheTTL, Prefetch: PrefetchSequential, Priority: PriorityNormal}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("Match(undeclared) = %+v, want %+v", r, want)
	}

	// A Policy built by hand (no indexes) answers the same.
	hand := &Policy{Stores: p.Stores, Buckets: p.Buckets, Defaults: Defaults{Store: "nas"}}
	if s, ok := hand.DefaultStore(); !ok || s.Name != "nas" {
		t.Errorf("hand DefaultStore = %+v, %v", s, ok)
	}
	if r := hand.Match("other", ""); r.Placement.Stores[0] != "nas" || r.Declared {
		t.Errorf("hand Match(other) = %+v", r)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"), AllFeatures())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(absent) error = %v, want fs.ErrNotExist", err)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	p := mustParse(t, `
stores:
  - &nas {name: nas, kind: posix, location: onprem:lga1, path: /mnt/a}
  - <<: *nas
    name: nas2
    path: /mnt/b
buckets:
  - name: one
    placement: {single: nas}
    cache: &fast {ttl: 7d, quota: 1.5TB, pin: true, prefetch: none}
  - name: two
    placement: {replicate: [nas, nas2]}
    cache: *fast
`, AllFeatures())
	if s := p.Stores[1]; s.Name != "nas2" || s.Path != "/mnt/b" || s.Kind != KindPosix || s.Location.Region != "lga1" {
		t.Errorf("merged store = %+v", s)
	}
	want := Cache{TTL: 7 * 24 * time.Hour, Quota: 1500e9, Pin: true, Prefetch: PrefetchNone, Priority: PriorityNormal}
	if p.Buckets[0].Cache != want || p.Buckets[1].Cache != want {
		t.Errorf("caches = %+v, %+v", p.Buckets[0].Cache, p.Buckets[1].Cache)
	}
}

func TestEgressPricesAndBudgets(t *testing.T) {
	p := mustParse(t, `
buckets: [{name: data}]
egress:
  prices:
    aws:
      gcp: 0.12USD
    aws:us-east-1:
      onprem:lga1: 0.02USD
  budgets:
    - {bucket: data, monthly: 1250.50 USD, action: block-cold-reads}
`, AllFeatures())
	want := []Price{
		{From: Location{Cloud: "aws"}, To: Location{Cloud: "gcp"}, PerGB: Money{120000, "USD"}},
		{From: Location{"aws", "us-east-1"}, To: Location{"onprem", "lga1"}, PerGB: Money{20000, "USD"}},
	}
	if !reflect.DeepEqual(p.Egress.Prices, want) {
		t.Errorf("Prices = %+v", p.Egress.Prices)
	}
	b := p.Egress.Budgets[0]
	if b.Monthly.String() != "1250.5USD" || b.Action != ActionBlockColdReads {
		t.Errorf("Budget = %+v (%s)", b, b.Monthly)
	}
}

func TestRegionPairBudgets(t *testing.T) {
	p := mustParse(t, `
buckets: [{name: data}]
egress:
  budgets:
    - {from: aws, to: gcp:us-central1, monthly: 2000USD, action: block-cold-reads}
    - {to: gcp, monthly: 3000USD}
    - {bucket: data, from: aws:us-east-1, monthly: 100USD}
    - {bucket: data, monthly: 500USD}
`, AllFeatures())
	want := []Budget{
		{From: Location{Cloud: "aws"}, To: Location{"gcp", "us-central1"}, Monthly: Money{2000e6, "USD"}, Action: ActionBlockColdReads},
		{To: Location{Cloud: "gcp"}, Monthly: Money{3000e6, "USD"}, Action: ActionAlert},
		{Bucket: "data", From: Location{"aws", "us-east-1"}, Monthly: Money{100e6, "USD"}, Action: ActionAlert},
		{Bucket: "data", Monthly: Money{500e6, "USD"}, Action: ActionAlert},
	}
	if !reflect.DeepEqual(p.Egress.Budgets, want) {
		t.Errorf("Budgets =\n%+v\nwant\n%+v", p.Egress.Budgets, want)
	}
	if b, ok := p.Budget("data"); !ok || b.Monthly.Micros != 500e6 {
		t.Errorf("Budget(data) = %+v, %v: want the bucket-only budget", b, ok)
	}
}

func TestCachePriority(t *testing.T) {
	p := mustParse(t, `
buckets:
  - {name: train, cache: {priority: high}}
  - {name: notebooks, cache: {priority: low}}
  - {name: other}
`, AllFeatures())
	for i, want := range []CachePriority{PriorityHigh, PriorityLow, PriorityNormal} {
		if got := p.Buckets[i].Cache.Priority; got != want {
			t.Errorf("bucket %s priority = %q, want %q", p.Buckets[i].Name, got, want)
		}
	}
	if PriorityLow.Rank() >= PriorityNormal.Rank() || PriorityNormal.Rank() >= PriorityHigh.Rank() || CachePriority("").Rank() != PriorityNormal.Rank() {
		t.Error("ranks out of order")
	}
}

func TestFeaturesSwitchOnOneByOne(t *testing.T) {
	src := `
stores:
  - {name: a, kind: posix, location: onprem:x, path: /a}
  - {name: b, kind: posix, location: onprem:x, path: /b}
buckets:
  - name: rep
    placement: {replicate: [a, b]}
`
	if _, err := Parse("policy.yaml", []byte(src), SkeletonFeatures()); err == nil ||
		!strings.Contains(err.Error(), "policy.yaml:7:17: buckets[0].placement.replicate: replicate placement is not supported yet") {
		t.Errorf("skeleton: %v", err)
	}
	f := SkeletonFeatures()
	f.Replicate = true
	p := mustParse(t, src, f)
	if got := p.Buckets[0].Placement; got.Kind != PlacementReplicate || len(got.Stores) != 2 {
		t.Errorf("Placement = %+v", got)
	}
}

func TestDefaultsPublicAccessBlock(t *testing.T) {
	p := mustParse(t, "defaults:\n  public_access_block: {block_public_policy: true, restrict_public_buckets: true}\n", AllFeatures())
	want := &PublicAccessBlock{BlockPublicPolicy: true, RestrictPublicBuckets: true}
	if !reflect.DeepEqual(p.Defaults.PublicAccessBlock, want) {
		t.Errorf("PublicAccessBlock = %+v, want %+v", p.Defaults.PublicAccessBlock, want)
	}
	if p := mustParse(t, "defaults: {}\n", AllFeatures()); p.Defaults.PublicAccessBlock != nil {
		t.Errorf("PublicAccessBlock without the key = %+v", p.Defaults.PublicAccessBlock)
	}
	_, err := Parse("p.yaml", []byte("defaults:\n  public_access_block: {block_public_acl: true, ignore_public_acls: maybe}\n"), AllFeatures())
	for _, want := range []string{`p.yaml:2:25: defaults.public_access_block.block_public_acl: unknown key "block_public_acl" (did you mean "block_public_acls"?)`, `p.yaml:2:69: defaults.public_access_block.ignore_public_acls: expected true or false, got the string "maybe"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	}
}
