package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

// `fedgate egress advise` against a gateway whose ledger holds reuse
// distances: a one-node region in gcp:us-central1 (the real namespace and
// gateway, the admin API over HTTP) reads a bucket in aws:us-east-1 — four
// objects every 8 hours for nine days (more than egress.KeepEvidenceHours), and other objects once each — on a
// clock the test advances; the command then advises keeping copies of the
// first 16 h after each read, and none of the others.
func TestEgressAdviseLearnsKeepFromGateway(t *testing.T) {
	ctx := t.Context()
	rs, err := regionstate.Open(ctx, regionstate.Config{NodeID: "n1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	stores := map[string]store.Store{}
	for name, loc := range map[string]policies.Location{"nas": {Cloud: "aws", Region: "us-east-1"}, "local": {Cloud: "gcp", Region: "us-central1"}} {
		if stores[name], err = posix.New(name, loc, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := t0
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	ns, err := federation.New(federation.Config{State: rs, Stores: stores, DefaultStore: "local", RegionLocation: "gcp:us-central1", Now: now,
		Policy: &policies.Policy{Buckets: []policies.Bucket{{Name: "data", Origin: &policies.Origin{Store: "nas"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	root := federation.NewCredentials()
	if err := ns.Users().EnsureRoot(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The gateway keeps the real clock: it checks the CLI's signatures.
	srv, err := gateway.New(gateway.Config{Backend: ns.Backend(), Admin: ns.Backend(), RegionName: "gpu-gcp"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	b, err := ns.Bucket("data")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 4096)
	// The same reads as a trace, for the replay below.
	trace := "time,region,bucket,key,size,op\n"
	read := func(key string, put bool) {
		t.Helper()
		if put {
			trace += fmt.Sprintf("%s,gpu-gcp,data,%s,%d,put\n", now().Format(time.RFC3339), key, len(data))
		}
		trace += fmt.Sprintf("%s,gpu-gcp,data,%s,%d,get\n", now().Format(time.RFC3339), key, len(data))
		if put {
			if _, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		info, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := b.Open(ctx, info, 0, info.Size)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != int64(len(data)) {
			t.Fatalf("read %s: %d bytes, %v", key, n, err)
		}
		rc.Close()
	}
	for h := 0; h < 9*24; h += 2 {
		mu.Lock()
		clock = t0.Add(time.Duration(h) * time.Hour)
		mu.Unlock()
		if h%8 == 0 {
			for i := range 4 {
				read(fmt.Sprintf("train/epochs/shard-%d", i), h == 0)
			}
		}
		read(fmt.Sprintf("scan/once/part-%03d", h), true)
	}
	if err := ns.FlushEgress(context.Background()); err != nil {
		t.Fatal(err)
	}

	args := []string{"egress", "advise", "--endpoint", hs.URL, "--root-access-key", root.AccessKey, "--root-secret-key", root.SecretKey,
		"--since", "2026-11-02", "--until", "2026-11-11", "--measure=false"}
	out, _, err := runFedgate(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Advice []struct {
			Bucket, Prefix string
			Keep           *struct {
				Hours   *float64 `json:"hours"`
				Learned bool     `json:"learned"`
				Scope   string   `json:"scope"`
			} `json:"keep"`
			Demand    *int64 `json:"demand_bytes"`
			Recommend bool   `json:"recommend"`
		} `json:"advice"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, a := range doc.Advice {
		if a.Keep == nil || a.Keep.Hours == nil || !a.Keep.Learned || a.Demand == nil {
			t.Errorf("%s %q: no learned keep time: %s", a.Bucket, a.Prefix, out)
			continue
		}
		switch a.Prefix {
		case "train/epochs/":
			seen[a.Prefix] = true
			if *a.Keep.Hours != 16 || a.Keep.Scope != "prefix" || !a.Recommend || *a.Demand != 9*3*4*int64(len(data)) {
				t.Errorf("epochs every 8 h: keep %v h (%s), recommend %v, demand %d; want 16 h learned from the prefix, every read",
					*a.Keep.Hours, a.Keep.Scope, a.Recommend, *a.Demand)
			}
		case "scan/once/":
			seen[a.Prefix] = true
			if *a.Keep.Hours != 0 || a.Recommend {
				t.Errorf("objects read once: keep %v h, recommend %v; want no copies", *a.Keep.Hours, a.Recommend)
			}
		}
	}
	if !seen["train/epochs/"] || !seen["scan/once/"] {
		t.Fatalf("advice misses a prefix:\n%s", out)
	}
	out, _, err = runFedgate(t, args...)
	if err != nil || !strings.Contains(out, "keep copies in gcp:us-central1 for 16 h after each read") {
		t.Fatalf("table: %v\n%s", err, out)
	}

	// The replay's advisor runs the same code: `fedgate egress simulate`'s
	// advice at the end of the same window, on the ledger the replay
	// writes for the same reads, keeps what the live command advised. (A
	// local read on 2026-11-11 moves the replay's clock there.)
	trace += "2026-11-11T00:00:00Z,gpu-gcp,scratch,x,1,get\n"
	pol, err := policies.Parse("advise-replay.yaml", []byte(`regions: [{name: gpu-gcp, location: "gcp:us-central1"}]
stores:
  - {name: nas, kind: posix, location: "aws:us-east-1", path: /nas}
  - {name: local, kind: posix, location: "gcp:us-central1", path: /local}
buckets:
  - {name: data, origin: nas/data/}
  - {name: scratch, placement: {single: local}}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	until := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	var replayed []egress.Advice
	_, err = egress.Simulate(ctx, egress.NewTraceReader("advise-replay.csv", strings.NewReader(trace)), egress.SimOptions{Policy: pol,
		Strategy: []egress.Strategy{{Kind: egress.StrategyAdvisor}}, AdviseEvery: 6 * time.Hour, AdviseWindow: until.Sub(t0),
		OnAdvice: func(_ string, at time.Time, advice []egress.Advice) {
			if at.Equal(until) {
				replayed = advice
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != len(doc.Advice) {
		t.Fatalf("the replay advised %d prefixes, the live command %d:\n%s", len(replayed), len(doc.Advice), out)
	}
	for _, live := range doc.Advice {
		i := slices.IndexFunc(replayed, func(a egress.Advice) bool { return a.Bucket == live.Bucket && a.Prefix == live.Prefix })
		if i < 0 || replayed[i].Keep == nil {
			t.Errorf("%s %q: no keep time in the replay's advice", live.Bucket, live.Prefix)
			continue
		}
		r := replayed[i]
		if r.Keep.Hours != *live.Keep.Hours || r.Keep.Learned != live.Keep.Learned || r.Keep.Scope != live.Keep.Scope || r.Demand != *live.Demand || r.Recommend != live.Recommend {
			t.Errorf("%s %q: replay keeps %v h (learned %v, %s, demand %d, recommend %v); live %v h (learned %v, %s, demand %d, recommend %v)",
				live.Bucket, live.Prefix, r.Keep.Hours, r.Keep.Learned, r.Keep.Scope, r.Demand, r.Recommend,
				*live.Keep.Hours, live.Keep.Learned, live.Keep.Scope, *live.Demand, live.Recommend)
		}
	}
}
