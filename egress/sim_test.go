package egress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/big"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/egress/egresstest"
	"github.com/fedgate/fedgate/policies"
)

var simStart = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

func simPolicy(t testing.TB) *policies.Policy {
	t.Helper()
	pol, err := policies.Load("testdata/sim-policy.yaml", policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// simulate writes the trace as CSV and replays it, as the command does.
func simulate(t testing.TB, pol *policies.Policy, name string, trace iter.Seq[egress.TraceEvent], opts egress.SimOptions) *egress.SimResult {
	t.Helper()
	var buf bytes.Buffer
	if err := egresstest.WriteCSV(&buf, trace); err != nil {
		t.Fatal(err)
	}
	opts.Policy = pol
	if opts.Transfer == nil {
		tab, err := egress.NewTable(pol.Egress.Prices)
		if err != nil {
			t.Fatal(err)
		}
		opts.Transfer = tab
	}
	res, err := egress.Simulate(context.Background(), egress.NewTraceReader(name+".csv", &buf), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The advisor against the baselines on the traces whose answer is known
// (egresstest.Standard, fixed seeds), and on the four interleaved: the
// issue's bar. `go test ./egress -run TestSimulatorShapes -v`
// prints the tables docs/egress.md shows.
func TestSimulatorShapes(t *testing.T) {
	pol := simPolicy(t)
	traces := egresstest.Standard(simStart)
	// The defaults, and the advisor as it was before it learned keep times
	// (advisor-monthly: the advice a live ledger allows).
	strategies := append(egress.DefaultStrategies(), egress.Strategy{Kind: egress.StrategyAdvisorMonthly})
	for _, name := range egresstest.StandardShapes {
		res := simulate(t, pol, name, traces[name], egress.SimOptions{Strategy: strategies})
		var tab bytes.Buffer
		if err := egress.WriteSimTable(&tab, res); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", name, tableOnly(tab.String()))
		get := func(n string) egress.StrategyResult {
			s, ok := res.Strategy(n)
			if !ok {
				t.Fatalf("%s: no strategy %s", name, n)
			}
			return s
		}
		best, adv := res.Best(), get("advisor")
		// The offline optimum is a lower bound of every strategy.
		for _, s := range res.Strategies {
			if s.Total.Cmp(res.Optimum) < 0 {
				t.Errorf("%s: %s costs %s USD, less than the offline optimum %s USD", name, s.Name, s.Total, res.Optimum)
			}
		}
		// Within 5% of the best strategy, on every trace.
		if adv.Total.Rat().Cmp(new(big.Rat).Mul(best.Total.Rat(), big.NewRat(105, 100))) > 0 {
			t.Errorf("%s: advisor %s USD, more than 5%% over the best (%s, %s USD)", name, adv.Total, best.Name, best.Total)
		}
		winner := map[string]string{"epochs": "always-store", "scans": "always-evict"}[name]
		if winner != "" {
			w := get(winner)
			for _, s := range res.Strategies {
				if s.Total.Cmp(w.Total) < 0 {
					t.Errorf("%s: %s (%s USD) beats %s (%s USD), which should win here", name, s.Name, s.Total, winner, w.Total)
				}
			}
		}
		if name == "scans" {
			// Once egress.KeepEvidenceHours (8 days) of one-shot reads
			// are in its ledger (and the next advice has run), the
			// advisor makes no more copies; the ones made before keep the
			// keep time they were made with (T_even). T_even copies every
			// read, spread evenly over the 14 days.
			tEven := get("t-even")
			within := float64(egress.KeepEvidenceHours+1+6) / (14 * 24)
			if float64(adv.Puts) > float64(tEven.Puts)*within {
				t.Errorf("scans: the advisor made %d copies, T_even %d: want at most %.0f (the reads of the first %d h)", adv.Puts, tEven.Puts,
					float64(tEven.Puts)*within, egress.KeepEvidenceHours+1+6)
			}
		}
		if name == "epochs" {
			// Why the advisor learns keep times: advising on monthly
			// averages, it let the dataset's copies go once the copies
			// had stopped the egress it weighs, and fetched it again.
			if m, tEven := get("advisor-monthly"), get("t-even"); m.Total.Cmp(tEven.Total) <= 0 {
				t.Errorf("epochs: advisor-monthly %s USD, T_even %s USD: the old advisor no longer loses here; docs/egress.md says it does", m.Total, tEven.Total)
			}
		}
		if name == "mixed" {
			for _, n := range []string{"advisor-monthly", "t-even", "always-store", "always-evict", "ttl-12h", "ttl-24h", "single-region", "policy"} {
				if s := get(n); adv.Total.Cmp(s.Total) > 0 {
					t.Errorf("mixed: advisor %s USD costs more than %s (%s USD)", adv.Total, n, s.Total)
				}
			}
			// And the shapes pull apart: the comparison is not a tie.
			if tEven := get("t-even"); adv.Total.Cmp(tEven.Total) >= 0 || get("always-evict").Total.Cmp(tEven.Total) <= 0 {
				t.Errorf("mixed: advisor %s, T_even %s, always-evict %s: want advisor < T_even < always-evict", adv.Total, tEven.Total, get("always-evict").Total)
			}
		}
	}
}

func tableOnly(s string) string {
	if i := strings.Index(s, "\n\n  advisor "); i >= 0 {
		return s[:i]
	}
	return s
}

// The same trace and options give the same results, byte for byte.
func TestSimulatorDeterministic(t *testing.T) {
	pol := simPolicy(t)
	var out [2]bytes.Buffer
	for i := range out {
		res := simulate(t, pol, "mixed", egresstest.Standard(simStart)["mixed"], egress.SimOptions{})
		if err := egress.WriteSimJSON(&out[i], res); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].String() != out[1].String() {
		t.Fatal("two runs of the same trace differ")
	}
}

// One object's reads priced by hand. A policy override prices AWS to GCP
// at a flat 0.10 USD/GB (no free tier); 10 GB in S3 (aws:us-east-1) read
// by gpu-gcp (gcp:us-central1) at 0:00, 1:00 and 5:00.
func TestSimulatorByHand(t *testing.T) {
	pol, err := policies.Parse("p.yaml", []byte(`
regions: [{name: gpu, location: "gcp:us-central1"}]
stores: [{name: s3, kind: s3, location: "aws:us-east-1", bucket: b}]
buckets: [{name: data, placement: {single: s3}}]
egress: {prices: {aws: {gcp: 0.10USD}}}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	ev := func(h int, op egress.TraceOp) egress.TraceEvent {
		return egress.TraceEvent{Time: simStart.Add(time.Duration(h) * time.Hour), Region: "gpu", Bucket: "data", Key: "k", Size: 10 * egress.GB, Op: op}
	}
	trace := func(yield func(egress.TraceEvent) bool) {
		_ = yield(ev(0, egress.OpGet)) && yield(ev(1, egress.OpGet)) && yield(ev(5, egress.OpGet))
	}
	res := simulate(t, pol, "hand", trace, egress.SimOptions{Strategy: []egress.Strategy{
		{Kind: egress.StrategyAlwaysEvict}, {Kind: egress.StrategyAlwaysStore}, {Kind: egress.StrategyTTL, TTL: 2 * time.Hour}}})
	usd := func(s string) *big.Rat { r, _ := new(big.Rat).SetString(s); return r }
	gcsHour := new(big.Rat).Quo(usd("0.02"), new(big.Rat).SetInt64(egress.GiB*egress.HoursPerMonth)) // per byte-hour
	s3Hour := new(big.Rat).Quo(usd("0.023"), new(big.Rat).SetInt64(egress.GB*egress.HoursPerMonth))
	stored := func(bytes int64, hours int64, perHour *big.Rat) *big.Rat {
		return new(big.Rat).Mul(perHour, new(big.Rat).SetInt64(bytes*hours))
	}
	base := stored(10*egress.GB, 5, s3Hour) // the S3 object, from its first read to the last row
	for _, c := range []struct {
		name                     string
		egress, copies, requests *big.Rat
		moved                    int64
		hit                      float64
	}{
		// Three fetches; three S3 GETs (0.0004 USD per 1,000).
		{"always-evict", usd("3"), new(big.Rat), usd("0.0000012"), 30 * egress.GB, 0},
		// One fetch, a copy kept from 0:00 to the end (5 h); one S3 GET,
		// two GCS GETs and one GCS PUT (0.005 per 1,000).
		{"always-store", usd("1"), stored(10*egress.GB, 5, gcsHour), usd("0.0000062"), 10 * egress.GB, 2.0 / 3},
		// 0:00 fetch, kept to 2:00; 1:00 hit, kept to 3:00; 5:00 fetch
		// again, kept to the end: copies held 3 h + 0 h.
		{"ttl-2h", usd("2"), stored(10*egress.GB, 3, gcsHour), usd("0.0000112"), 20 * egress.GB, 1.0 / 3},
	} {
		s, _ := res.Strategy(c.name)
		if s.Egress.Rat().Cmp(c.egress) != 0 || s.CopyStorage.Rat().Cmp(c.copies) != 0 ||
			s.Storage.Rat().Cmp(new(big.Rat).Add(base, c.copies)) != 0 || s.Requests.Rat().Cmp(c.requests) != 0 ||
			s.Total.Rat().Cmp(new(big.Rat).Add(new(big.Rat).Add(c.egress, base), new(big.Rat).Add(c.copies, c.requests))) != 0 ||
			s.BytesMoved != c.moved || s.HitRatio != c.hit {
			t.Errorf("%s: egress %s storage %s (copies %s) requests %s moved %d hit %v; want egress %s copies %s requests %s moved %d hit %v",
				c.name, s.Egress.Rat().FloatString(9), s.Storage.Rat().FloatString(9), s.CopyStorage.Rat().FloatString(9), s.Requests.Rat().FloatString(9),
				s.BytesMoved, s.HitRatio, c.egress.FloatString(9), c.copies.FloatString(9), c.requests.FloatString(9), c.moved, c.hit)
		}
	}
}

// Writes, overwrites and deletes: a write pays its transfer at the writing
// region, a new version drops the copies of the old one, a delete ends
// storage; single-region writes a replicated bucket once.
func TestSimulatorWrites(t *testing.T) {
	pol, err := policies.Parse("p.yaml", []byte(`
regions: [{name: a, location: "aws:us-east-1"}, {name: g, location: "gcp:us-central1"}]
stores:
  - {name: s3, kind: s3, location: "aws:us-east-1", bucket: b}
  - {name: az, kind: azure, location: "azure:eastus", account: acme, container: ckpt}
buckets: [{name: ckpt, placement: {replicate: [s3, az]}}]
egress: {prices: {aws: {azure: 0.05USD, gcp: 0.10USD}, azure: {gcp: 0.20USD}}}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return simStart.Add(time.Duration(h) * time.Hour) }
	rows := []egress.TraceEvent{
		{Time: at(0), Region: "a", Bucket: "ckpt", Key: "k", Size: 10 * egress.GB, Op: egress.OpPut},
		{Time: at(1), Region: "g", Bucket: "ckpt", Key: "k", Size: 10 * egress.GB, Op: egress.OpGet},
		{Time: at(2), Region: "a", Bucket: "ckpt", Key: "k", Size: 10 * egress.GB, Op: egress.OpPut},
		{Time: at(3), Region: "g", Bucket: "ckpt", Key: "k", Size: 10 * egress.GB, Op: egress.OpGet},
		{Time: at(4), Region: "a", Bucket: "ckpt", Key: "k", Op: egress.OpDelete},
		{Time: at(6), Region: "a", Bucket: "ckpt", Key: "other", Size: 1, Op: egress.OpPut},
	}
	res := simulate(t, pol, "w", func(yield func(egress.TraceEvent) bool) {
		for _, r := range rows {
			if !yield(r) {
				return
			}
		}
	}, egress.SimOptions{Strategy: []egress.Strategy{{Kind: egress.StrategyAlwaysStore}, {Kind: egress.StrategySingleRegion}, {Kind: egress.StrategyPolicy}}})
	if res.Puts != 3 || res.Gets != 2 || res.Deletes != 1 || res.Objects != 2 {
		t.Fatalf("counts: %+v", res)
	}
	usd := func(s string) *big.Rat { r, _ := new(big.Rat).SetString(s); return r }
	// always-store and policy write both copies: 2 × 10 GB to Azure at
	// 0.05 = 1.00 (S3 is local to region a), plus 1 byte; they read the
	// cheaper copy from g (S3, 0.10): twice, as the second read is of a
	// new version: 2.00. single-region writes S3 only and reads it: 2.00.
	oneByte := new(big.Rat).SetFrac64(5, 100*egress.GB)
	for name, want := range map[string]*big.Rat{
		"always-store":  new(big.Rat).Add(usd("3"), oneByte),
		"policy":        new(big.Rat).Add(usd("3"), oneByte),
		"single-region": usd("2"),
	} {
		s, _ := res.Strategy(name)
		if s.Egress.Rat().Cmp(want) != 0 {
			t.Errorf("%s: egress %s, want %s", name, s.Egress.Rat().FloatString(12), want.FloatString(12))
		}
	}
	// always-store's copies: version 1 from 1:00 to 2:00 (overwritten),
	// version 2 from 3:00 to 4:00 (deleted): 20 GB-hours.
	s, _ := res.Strategy("always-store")
	gcsHour := new(big.Rat).Quo(usd("0.02"), new(big.Rat).SetInt64(egress.GiB*egress.HoursPerMonth))
	if want := new(big.Rat).Mul(gcsHour, new(big.Rat).SetInt64(20*egress.GB)); s.CopyStorage.Rat().Cmp(want) != 0 {
		t.Errorf("copies stored %s, want %s", s.CopyStorage.Rat().FloatString(12), want.FloatString(12))
	}
}

// A row the policy cannot place is an error at its line and field, and
// Simulate returns no results.
func TestSimulatorTraceErrors(t *testing.T) {
	pol, err := policies.Parse("p.yaml", []byte(`
regions: [{name: gpu, location: "gcp:us-central1"}]
stores: [{name: s3, kind: s3, location: "aws:us-east-1", bucket: b}]
buckets:
  - {name: data, placement: {single: s3}}
  - {name: nowhere}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	const head = "time,region,bucket,key,size,op\n2026-11-02T00:00:00Z,gpu,data,a,1,get\n"
	for _, c := range []struct{ in, want string }{
		{head + "2026-11-02T00:00:01Z,gpu-x,data,a,1,get\n", `t.csv:3:22: region: "gpu-x" is not a region of the policy p.yaml (it has gpu)`},
		{head + "2026-11-02T00:00:01Z,gpu,lost,a,1,get\n", `t.csv:3:26: bucket: "lost" is not a bucket of the policy, and the policy has no defaults.store for buckets created through S3 (p.yaml)`},
		{head + "2026-11-02T00:00:01Z,gpu,nowhere,a,1,get\n", `t.csv:3:26: bucket: "nowhere" has no placement, origin or defaults.store in the policy: it would live in a region's embedded store, which other regions cannot read (p.yaml)`},
		{head + "2026-11-02T00:00:01Z,gpu,data,b,1,get\n2026-11-02T00:00:02Z,gpu,data,c,1,get\n", `t.csv:4:31: key: the trace holds more than 2 distinct objects: raise the limit (--max-objects; each object costs about 125 bytes of memory plus its key)`},
	} {
		res, err := egress.Simulate(context.Background(), egress.NewTraceReader("t.csv", strings.NewReader(c.in)),
			egress.SimOptions{Policy: pol, MaxObjects: 2, Strategy: []egress.Strategy{{Kind: egress.StrategyAlwaysStore}}})
		var te *egress.TraceError
		if res != nil || !errors.As(err, &te) || err.Error() != c.want {
			t.Errorf("got %v (result %v)\nwant %s", err, res != nil, c.want)
		}
	}
}

// Memory follows the objects, not the rows: replaying 20 times as many
// rows over the same 50,000 objects takes no more heap. The trace streams
// through a pipe: it is never whole in memory.
func TestSimulatorStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 2 million rows")
	}
	pol := simPolicy(t)
	// peak is the most heap in use while replaying (sampled every 65536
	// rows, after a collection).
	heap := func(epochs int) (peak uint64, res *egress.SimResult) {
		pr, pw := io.Pipe()
		go func() {
			e := egresstest.Epochs{Region: "gpu-gcp", Bucket: "imagenet", Prefix: "train/", Objects: 50_000, Size: 1 << 20, Start: simStart,
				Epochs: epochs, Period: 8 * time.Hour, Duration: 6 * time.Hour, Seed: 3}
			pw.CloseWithError(egresstest.WriteCSV(pw, e.Events()))
		}()
		var m runtime.MemStats
		res, err := egress.Simulate(context.Background(), egress.NewTraceReader("e.csv", pr), egress.SimOptions{Policy: pol,
			Progress: func(rows int64) {
				if rows%65536 == 0 {
					runtime.GC()
					runtime.ReadMemStats(&m)
					peak = max(peak, m.HeapAlloc)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		return peak, res
	}
	small, r1 := heap(2)
	large, r2 := heap(40)
	t.Logf("peak heap replaying %d rows over %d objects: %d KiB; %d rows over %d objects: %d KiB (%d bytes per object, all in)",
		r1.Rows, r1.Objects, small>>10, r2.Rows, r2.Objects, large>>10, large/uint64(r2.Objects))
	if r1.Objects != r2.Objects || large > small+small/2 {
		t.Errorf("heap grew from %d KiB to %d KiB with the rows", small>>10, large>>10)
	}
}

// The three renderings: the table names every strategy, the JSON carries
// the figures, the HTML page is self-contained and well-formed.
func TestSimulatorOutputs(t *testing.T) {
	res := simulate(t, simPolicy(t), "checkpoints", egresstest.Standard(simStart)["checkpoints"], egress.SimOptions{})
	var tab, js, page bytes.Buffer
	if err := egress.WriteSimTable(&tab, res); err != nil {
		t.Fatal(err)
	}
	if err := egress.WriteSimJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	if err := egress.WriteSimHTML(&page, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Strategies {
		if !strings.Contains(tab.String(), s.Name) || !strings.Contains(page.String(), ">"+s.Name+"<") {
			t.Errorf("strategy %s missing from the table or the page", s.Name)
		}
	}
	var doc struct {
		Trace struct {
			Rows    int64    `json:"rows"`
			Regions []string `json:"regions"`
		} `json:"trace"`
		Strategies []struct {
			Name     string  `json:"name"`
			Total    float64 `json:"total_usd"`
			Egress   float64 `json:"egress_usd"`
			Storage  float64 `json:"storage_usd"`
			Requests float64 `json:"requests_usd"`
			HitRatio float64 `json:"hit_ratio"`
			VsBest   float64 `json:"vs_best"`
		} `json:"strategies"`
		Best  string   `json:"best"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	if doc.Trace.Rows != res.Rows || len(doc.Strategies) != len(res.Strategies) || doc.Best != res.Best().Name || len(doc.Notes) == 0 {
		t.Errorf("JSON: %+v", doc)
	}
	for i, s := range doc.Strategies {
		want := res.Strategies[i]
		if s.Name != want.Name || fmt.Sprintf("%.2f", s.Total) != want.Total.String() || s.VsBest < 1 {
			t.Errorf("JSON strategy %d: %+v, want %s %s", i, s, want.Name, want.Total)
		}
	}
	d := xml.NewDecoder(bytes.NewReader(page.Bytes()))
	d.Strict, d.AutoClose, d.Entity = true, nil, xml.HTMLEntity
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://", "<link", "@import"} {
		if strings.Contains(page.String(), banned) {
			t.Errorf("the page has %q: it must be self-contained", banned)
		}
	}
	if !strings.Contains(page.String(), `id="chart-strategies"`) {
		t.Error("no chart")
	}
}

// Epochs further apart than a day: a day of first reads is not taken for
// one-shot reads (the history must cover a fortieth of T_even first), so
// the dataset is not fetched again each epoch.
func TestSimulatorLongEpochs(t *testing.T) {
	e := egresstest.Epochs{Region: "gpu-gcp", Bucket: "imagenet", Prefix: "train/in1k/", Objects: 200, Size: 1 << 30, Start: simStart,
		Epochs: 10, Period: 36 * time.Hour, Duration: 30 * time.Hour, Seed: 4}
	res := simulate(t, simPolicy(t), "long-epochs", e.Events(), egress.SimOptions{})
	adv, _ := res.Strategy("advisor")
	store, _ := res.Strategy("always-store")
	if adv.Total.Rat().Cmp(new(big.Rat).Mul(store.Total.Rat(), big.NewRat(105, 100))) > 0 || adv.BytesMoved > store.BytesMoved*11/10 {
		t.Errorf("advisor %s USD (%s moved), always-store %s USD (%s moved)", adv.Total, egress.HumanBytes(adv.BytesMoved), store.Total, egress.HumanBytes(store.BytesMoved))
	}
}
