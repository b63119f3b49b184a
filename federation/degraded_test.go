package federation_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/azure"
	"github.com/fedgate/fedgate/store/gcs"
	"github.com/fedgate/fedgate/store/posix"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// lockedBuffer is a log sink the namespace's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A store wiped under a replicated and an erasure-coded bucket: reads
// still succeed, and the namespace says they were degraded — per bucket
// and store in fedgate_degraded_reads_total (exported at 0 before any),
// one WARN per bucket and store a minute, the objects in Degraded — and
// the store's health check reports it wiped (its marker vanished) until a
// repair, and fails once its directory is removed.
func TestDegradedReadsAreVisible(t *testing.T) {
	ctx := context.Background()
	node := openState(t)
	dirs := map[string]string{}
	stores := map[string]store.Store{}
	for name, loc := range map[string]string{"s3": "aws:us-east-1", "gcs": "gcp:us-central1", "blob": "azure:eastus", "local": "gcp:us-central1"} {
		l, err := policies.ParseLocation(loc)
		if err != nil {
			t.Fatal(err)
		}
		dirs[name] = t.TempDir()
		if stores[name], err = posix.New(name, l, dirs[name]); err != nil {
			t.Fatal(err)
		}
	}
	pol := &policies.Policy{Buckets: []policies.Bucket{
		{Name: "rep", Placement: policies.Placement{Kind: policies.PlacementReplicate, Stores: []string{"s3", "gcs"}}},
		{Name: "ec", Placement: policies.Placement{Kind: policies.PlacementErasure, Stores: []string{"s3", "gcs", "blob"}, Data: 2, Parity: 1}},
	}}
	var logs lockedBuffer
	ns, err := federation.New(federation.Config{State: node, Stores: stores, DefaultStore: "local", Policy: pol,
		Region: region{self: "solo", members: []string{"solo"}}, RegionLocation: "gcp:us-central1",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := ns.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	reads := func(bucket, st string) float64 {
		t.Helper()
		return metricValue(t, reg, "fedgate_degraded_reads_total", map[string]string{"bucket": bucket, "store": st})
	}
	if n := testutil.CollectAndCount(reg, "fedgate_degraded_reads_total"); n != 5 {
		t.Fatalf("fedgate_degraded_reads_total has %d series before any read, want 5 (one per bucket and member, at 0)", n)
	}

	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, k := range []string{"a", "b"} {
		putGet(t, ns, "rep", k, data)
		putGet(t, ns, "ec", k, data)
	}
	if reads("rep", "gcs")+reads("ec", "gcs") != 0 {
		t.Fatal("healthy reads were counted as degraded")
	}
	ns.CheckStores(ctx)
	d, err := ns.Degraded(ctx)
	if err != nil || len(d.Objects) != 0 || len(d.Stores) != 4 {
		t.Fatalf("Degraded before the wipe = %+v, %v; want 4 healthy stores, no objects", d, err)
	}
	for _, s := range d.Stores {
		if !s.Healthy {
			t.Fatalf("store %s unhealthy before the wipe: %s", s.Store, s.Error)
		}
	}

	// Wipe the GCS store: the one this region reads first (it is free).
	ents, err := os.ReadDir(dirs["gcs"])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dirs["gcs"], e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		for _, b := range []string{"rep", "ec"} {
			for _, k := range []string{"a", "b"} {
				got, err := readObject(ctx, ns, b, k)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read %s/%s after the wipe: %v (%d bytes)", b, k, err, len(got))
				}
			}
		}
	}
	if got := reads("rep", "gcs"); got != 4 {
		t.Errorf("fedgate_degraded_reads_total{rep,gcs} = %v, want 4", got)
	}
	if got := reads("ec", "gcs"); got != 4 {
		t.Errorf("fedgate_degraded_reads_total{ec,gcs} = %v, want 4", got)
	}
	if got := reads("rep", "s3") + reads("ec", "s3") + reads("ec", "blob"); got != 0 {
		t.Errorf("reads counted against the intact stores: %v", got)
	}
	d, err = ns.Degraded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, o := range d.Objects {
		objs = append(objs, o.Bucket+"/"+o.Key+":"+strings.Join(o.Stores, ","))
	}
	slices.Sort(objs)
	if want := []string{"ec/a:gcs", "ec/b:gcs", "rep/a:gcs", "rep/b:gcs"}; !slices.Equal(objs, want) {
		t.Errorf("Degraded objects = %v, want %v", objs, want)
	}
	if len(d.Buckets) != 2 || d.Buckets[0].Reads != 4 || d.Buckets[0].Store != "gcs" {
		t.Errorf("Degraded buckets = %+v", d.Buckets)
	}
	if n := strings.Count(logs.String(), "degraded read"); n != 2 {
		t.Errorf("%d WARN lines for degraded reads, want 2 (one per bucket and store a minute):\n%s", n, logs.String())
	}

	// Emptied, the store lost its marker: it is reported wiped until a
	// repair of its buckets; then, its directory removed, it fails its
	// check.
	ns.CheckStores(ctx)
	d, _ = ns.Degraded(ctx)
	for _, s := range d.Stores {
		if s.Healthy != (s.Store != "gcs") || s.Store == "gcs" && !strings.Contains(s.Error, "wiped") {
			t.Errorf("store %s after gcs was emptied: healthy=%v %q; want gcs reported wiped", s.Store, s.Healthy, s.Error)
		}
	}
	if v := metricValue(t, reg, "fedgate_store_up", map[string]string{"store": "gcs"}); v != 0 {
		t.Errorf("fedgate_store_up{store=gcs} = %v after the wipe, want 0", v)
	}
	for _, b := range []string{"rep", "ec"} {
		if _, err := ns.Repair(ctx, b, "", nil); err != nil {
			t.Fatalf("repair %s: %v", b, err)
		}
	}
	ns.CheckStores(ctx)
	d, _ = ns.Degraded(ctx)
	for _, s := range d.Stores {
		if !s.Healthy {
			t.Errorf("store %s unhealthy after the repair: %s", s.Store, s.Error)
		}
	}
	if err := os.RemoveAll(dirs["gcs"]); err != nil {
		t.Fatal(err)
	}
	ns.CheckStores(ctx)
	d, _ = ns.Degraded(ctx)
	for _, s := range d.Stores {
		if s.Healthy != (s.Store != "gcs") {
			t.Errorf("store %s healthy=%v (%s) after gcs's directory was removed", s.Store, s.Healthy, s.Error)
		}
	}
	if !strings.Contains(logs.String(), "store health check failed") || !strings.Contains(logs.String(), "store wiped or replaced") {
		t.Errorf("no WARN for the failed store check:\n%s", logs.String())
	}
}

// metricValue is the value of the series of name whose labels include
// want (a counter's or a gauge's); the test fails when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// The health check of real cloud stores (MinIO, fake-gcs-server, Azurite)
// under an erasure placement: every one is healthy and keeps its marker
// (the probe and marker keys are ones every store kind accepts), and one
// whose marker is deleted is reported wiped.
func TestStoreHealthOfCloudStores(t *testing.T) {
	ctx := t.Context()
	mio, fg, az := testenv.MinIO(t), testenv.FakeGCS(t), testenv.Azurite(t)
	s3s, err := s3store.New(ctx, s3store.Config{Name: "s3", Location: policies.Location{Cloud: "aws", Region: "us-east-1"}, Bucket: mio.NewBucket(t),
		Region: "us-east-1", Endpoint: mio.Endpoint, PathStyle: true, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey, MinIOKeyRules: true})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := gcs.New(ctx, gcs.Config{Name: "gcs", Location: policies.Location{Cloud: "gcp", Region: "us-central1"},
		Bucket: fg.NewBucket(t), Endpoint: fg.Endpoint, WithoutAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	as, err := azure.New(ctx, azure.Config{Name: "az", Location: policies.Location{Cloud: "azure", Region: "eastus"},
		Account: az.Account, AccountKey: az.AccountKey, Endpoint: az.Endpoint, Container: az.NewContainer(t)})
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]store.Store{"s3": s3s, "gcs": gs, "az": as}
	pol := &policies.Policy{Buckets: []policies.Bucket{
		{Name: "ec", Placement: policies.Placement{Kind: policies.PlacementErasure, Stores: []string{"s3", "gcs", "az"}, Data: 2, Parity: 1}},
	}}
	ns, err := federation.New(federation.Config{State: openState(t), Stores: stores, DefaultStore: "s3", Policy: pol,
		Region: region{self: "solo", members: []string{"solo"}}, RegionLocation: "gcp:us-central1"})
	if err != nil {
		t.Fatal(err)
	}
	health := func() map[string]string {
		ns.CheckStores(ctx)
		d, err := ns.Degraded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, h := range d.Stores {
			out[h.Store] = h.Error
			if h.Healthy {
				out[h.Store] = "ok"
			}
		}
		return out
	}
	for range 2 {
		if got := health(); got["s3"] != "ok" || got["gcs"] != "ok" || got["az"] != "ok" {
			t.Fatalf("health of the cloud stores = %v, want all ok", got)
		}
	}
	for name, st := range stores {
		if _, err := st.Stat(ctx, "_fedgate/store-marker"); err != nil {
			t.Errorf("%s has no marker: %v", name, err)
		}
	}
	if err := s3s.Delete(ctx, "_fedgate/store-marker"); err != nil {
		t.Fatal(err)
	}
	if got := health(); !strings.Contains(got["s3"], "wiped") || got["gcs"] != "ok" || got["az"] != "ok" {
		t.Fatalf("health after s3 lost its marker = %v, want s3 reported wiped", got)
	}
}
