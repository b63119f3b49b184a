package federation_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// reuseOf is a Counts.Reuse of (bucket, bytes) pairs.
func reuseOf(counts ...[2]int64) []int64 {
	r := make([]int64, egress.ReuseBuckets)
	for _, c := range counts {
		r[c[0]] += c[1]
	}
	return r
}

// readRange reads [off, off+n) of an object through the bucket (Stat, then
// Open): one read operation.
func readRange(t *testing.T, ns *federation.Namespace, bucket, key string, off, n int64) []byte {
	t.Helper()
	ctx := context.Background()
	b, err := ns.Bucket(bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		n = info.Size - off
	}
	rc, err := b.Open(ctx, info, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// ledgerRows returns the region's ledger rows (after this node's flush),
// keyed "bucket hour-offset prefix" for reads, hours counted from t0.
func ledgerRows(t *testing.T, ns *federation.Namespace, t0 time.Time) map[string]egress.Counts {
	t.Helper()
	ctx := context.Background()
	if err := ns.FlushEgress(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := ns.EgressLedger(ctx, t0.Add(-24*time.Hour), t0.Add(30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]egress.Counts{}
	for _, r := range rows {
		if r.Direction != egress.Read {
			continue
		}
		k := fmt.Sprintf("%s +%dh %q", r.Bucket, r.Hour-egress.HourOf(t0), r.Prefix)
		c := out[k]
		c.Bytes += r.Bytes
		c.AvoidedBytes += r.AvoidedBytes
		if r.Reuse != nil {
			if c.Reuse == nil {
				c.Reuse = make([]int64, egress.ReuseBuckets)
			}
			for i, n := range r.Reuse {
				c.Reuse[i] += n
			}
		}
		out[k] = c
	}
	return out
}

// A gateway's ledger carries reuse distances: each read of an object from
// a store in another location (a MinIO bucket in aws:us-east-1 read
// through the chunk cache, a posix directory in aws:us-east-1 read
// straight and with sendfile) counts its bytes under the time since this
// node last read that object version, on the row of the key's prefix,
// whether the bytes crossed or the cache served them; reads of a store in
// the region's own location carry none.
func TestEgressLedgerReuseDistances(t *testing.T) {
	ctx := t.Context()
	mio := testenv.MinIO(t)
	aws := policies.Location{Cloud: "aws", Region: "us-east-1"}
	s3s, err := s3store.New(ctx, s3store.Config{Name: "s3", Location: aws, Bucket: mio.NewBucket(t),
		Region: "us-east-1", Endpoint: mio.Endpoint, PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey, MinIOKeyRules: true})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cachetier.Open(cachetier.Config{Dir: t.TempDir(), Capacity: 1 << 30, ChunkSize: testChunk, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	stores := map[string]store.Store{
		"s3":    s3s,
		"nas":   posixStore(t, "nas", aws),
		"local": posixStore(t, "local", policies.Location{Cloud: "gcp", Region: "us-central1"}),
	}
	pol := &policies.Policy{Buckets: []policies.Bucket{
		{Name: "cached", Origin: &policies.Origin{Store: "s3"}},
		{Name: "plain", Origin: &policies.Origin{Store: "nas"}},
		{Name: "home", Origin: &policies.Origin{Store: "local"}},
	}}
	t0 := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	clock := &testClock{t: t0.Add(-time.Hour)}
	ns, err := federation.New(federation.Config{State: openState(t), Stores: stores, DefaultStore: "local", Policy: pol, Cache: cache,
		Region: region{self: "solo", members: []string{"solo"}}, RegionLocation: "gcp:us-central1", Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	const size = 100 << 10 // two chunks
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	const key = "train/a/obj"
	for _, bucket := range []string{"cached", "plain", "home"} {
		b, err := ns.Bucket(bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, key, bytes.NewReader(data), size, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(off, n int64) {
		t.Helper()
		for _, bucket := range []string{"cached", "plain", "home"} {
			if got := readRange(t, ns, bucket, key, off, n); !bytes.Equal(got, data[off:off+int64(len(got))]) || (n > 0 && int64(len(got)) != n) {
				t.Fatalf("%s: read %d bytes at %d, wrong", bucket, len(got), off)
			}
		}
	}
	clock.set(t0)
	readAll(0, -1) // first reads
	clock.set(t0.Add(3 * time.Hour))
	readAll(0, -1) // 3 h later: 2-4 h; the cache serves the cached bucket
	clock.set(t0.Add(3*time.Hour + 30*time.Minute))
	readAll(0, 10<<10) // a range, 30 min later: < 1 h

	// A new version of the plain bucket's object is a new object: its first
	// read is a first read; a sendfile read of it 2 h later is 2-4 h.
	clock.set(t0.Add(4 * time.Hour))
	data2 := bytes.Repeat([]byte("new!"), 1000)
	b, err := ns.Bucket("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, key, bytes.NewReader(data2), int64(len(data2)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readRange(t, ns, "plain", key, 0, -1); !bytes.Equal(got, data2) {
		t.Fatal("plain: the new version reads wrong")
	}
	clock.set(t0.Add(6 * time.Hour))
	lf, prefix := b.LocalFiler()
	if lf == nil {
		t.Fatal("a posix bucket has no local files")
	}
	f, _, info, err := lf.OpenLocal(ctx, prefix+key)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	info.Key = key
	sent, err := b.LocalRead(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	sent(1000) // the client took 1000 bytes

	got := ledgerRows(t, ns, t0)
	p := `"train/a/"`
	want := map[string]egress.Counts{
		// The cache fetched the object once (its bytes), then served it.
		"cached +0h " + p: {Bytes: size, Reuse: reuseOf([2]int64{0, size})},
		"cached +3h " + p: {Reuse: reuseOf([2]int64{3, size}, [2]int64{1, 10 << 10})},
		"cached +3h \"\"": {AvoidedBytes: size + 10<<10},
		"plain +0h " + p:  {Bytes: size, Reuse: reuseOf([2]int64{0, size})},
		"plain +3h " + p:  {Bytes: size + 10<<10, Reuse: reuseOf([2]int64{3, size}, [2]int64{1, 10 << 10})},
		"plain +4h " + p:  {Bytes: int64(len(data2)), Reuse: reuseOf([2]int64{0, int64(len(data2))})},
		"plain +6h " + p:  {Bytes: 1000, Reuse: reuseOf([2]int64{3, 1000})},
		"home +0h \"\"":   {Bytes: size},
		"home +3h \"\"":   {Bytes: size + 10<<10},
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.Bytes != w.Bytes || g.AvoidedBytes != w.AvoidedBytes || !slices.Equal(g.Reuse, w.Reuse) {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && (g.Bytes != 0 || g.AvoidedBytes != 0 || g.Reuse != nil) {
			t.Errorf("unexpected row %s: %+v", k, g)
		}
	}
}

// `fedgate egress advise` learns keep times from a live ledger: objects
// read every 8 hours for six days get copies kept 16 h after each read
// (their reuse distances are 8-16 h), objects read once get none. The
// ledger comes from real reads through a namespace (posix stores in
// aws:us-east-1, a region in gcp:us-central1, the clock advanced), then
// goes through what the command runs: Price and Advise.
func TestEgressAdviseLearnsKeepFromLedger(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	clock := &testClock{t: t0}
	ns := meterFixtureWith(t, nil, clock.now, 0)
	b, err := ns.Bucket("plain") // origin in aws:us-east-1
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 4096)
	put := func(key string) {
		t.Helper()
		if _, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		put(fmt.Sprintf("train/epochs/shard-%d", i))
	}
	const days = 9 // a learned keep needs more than egress.KeepEvidenceHours (192 h) of history
	scans := 0
	for h := 0; h < days*24; h += 2 {
		clock.set(t0.Add(time.Duration(h) * time.Hour))
		if h%8 == 0 { // an epoch over the dataset
			for i := range 4 {
				readRange(t, ns, "plain", fmt.Sprintf("train/epochs/shard-%d", i), 0, -1)
			}
		}
		key := fmt.Sprintf("scan/once/part-%03d", scans) // read once, never again
		put(key)
		readRange(t, ns, "plain", key, 0, -1)
		scans++
	}
	until := t0.Add(days * 24 * time.Hour)
	clock.set(until)
	if err := ns.FlushEgress(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := ns.EgressLedger(ctx, t0, until)
	if err != nil {
		t.Fatal(err)
	}
	table, err := egress.NewTable(nil)
	if err != nil {
		t.Fatal(err)
	}
	priced, err := egress.Price(rows, table, egress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	advice := egress.Advise(priced, egress.AdviseOptions{Since: t0, Until: until})
	byPrefix := map[string]egress.Advice{}
	for _, a := range advice {
		byPrefix[a.Bucket+" "+a.Prefix] = a
	}
	epochs, ok := byPrefix["plain train/epochs/"]
	if !ok || epochs.Keep == nil {
		t.Fatalf("no keep time for the epochs' prefix: %+v", advice)
	}
	if k := epochs.Keep; !k.Learned || k.Scope != "prefix" || k.Hours != 16 || !epochs.Recommend {
		t.Errorf("epochs every 8 h: keep %+v (recommend %v); want 16 h learned from the prefix", *k, epochs.Recommend)
	}
	if want := int64(days * 3 * 4 * len(data)); epochs.Demand != want {
		t.Errorf("epochs: demand %d bytes, want %d (every read)", epochs.Demand, want)
	}
	once, ok := byPrefix["plain scan/once/"]
	if !ok || once.Keep == nil {
		t.Fatalf("no keep time for the one-shot prefix: %+v", advice)
	}
	if k := once.Keep; !k.Learned || k.Hours != 0 || once.Recommend {
		t.Errorf("reads never repeated: keep %+v (recommend %v); want 0, learned", *k, once.Recommend)
	}
}

// A composite placement's read counts its reuse distance once, on the
// placement's own row (at its location: its first member in read order),
// while its members count the bytes; a placement whose first member is in
// the region's location (rep, ec from gcp:us-central1) counts none.
func TestEgressReuseOfComposites(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	clock := &testClock{t: t0}
	ns := meterFixtureWith(t, nil, clock.now, 0, func(c *federation.Config) {
		c.Policy.Buckets = append(c.Policy.Buckets, policies.Bucket{Name: "far",
			Placement: policies.Placement{Kind: policies.PlacementReplicate, Stores: []string{"s3", "blob"}}})
	})
	const size = 8 << 10
	data := bytes.Repeat([]byte("abcdefgh"), size/8)
	for _, bucket := range []string{"far", "rep", "ec"} {
		putGet(t, ns, bucket, "ds/x/obj", data) // the first read, at t0
	}
	clock.set(t0.Add(20 * time.Hour))
	for _, bucket := range []string{"far", "rep", "ec"} {
		readRange(t, ns, bucket, "ds/x/obj", 0, -1) // 20 h later: 16-32 h
	}
	ctx := context.Background()
	if err := ns.FlushEgress(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := ns.EgressLedger(ctx, t0, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	reuse := map[string][]int64{}
	var farBytes int64
	for _, r := range rows {
		if r.Direction != egress.Read {
			continue
		}
		if r.Bucket == "far" && r.Reuse == nil {
			farBytes += r.Bytes
		}
		if r.Reuse != nil {
			k := fmt.Sprintf("%s %s %s +%dh %q", r.Bucket, r.Store, r.Src, r.Hour-egress.HourOf(t0), r.Prefix)
			if reuse[k] != nil {
				t.Fatalf("two rows %s", k)
			}
			reuse[k] = r.Reuse
			if r.Bytes != 0 {
				t.Errorf("%s: the placement's own row has %d bytes of egress", k, r.Bytes)
			}
		}
	}
	// Azure (0.087 USD/GB) is cheaper than AWS (0.09) from GCP: blob first.
	want := map[string][]int64{
		`far replicate(s3,blob) azure:eastus +0h "ds/x/"`:  reuseOf([2]int64{0, size}),
		`far replicate(s3,blob) azure:eastus +20h "ds/x/"`: reuseOf([2]int64{6, size}),
	}
	if len(reuse) != len(want) {
		t.Errorf("rows with reuse distances: %v, want %v", reuse, want)
	}
	for k, w := range want {
		if !slices.Equal(reuse[k], w) {
			t.Errorf("%s: %v, want %v", k, reuse[k], w)
		}
	}
	if farBytes != 2*size {
		t.Errorf("far: its members read %d bytes, want %d", farBytes, 2*size)
	}
	// The node exports its tracker: one object remembered (far's; rep's
	// and ec's reads are at home), none forgotten.
	reg := prometheus.NewRegistry()
	if err := ns.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"fedgate_egress_reuse_objects": 1, "fedgate_egress_reuse_evictions_total": 0, "fedgate_egress_reuse_horizon_seconds": 0} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
		}
	}
}
