package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// TestEgressReportTwoRegions: two regions (one fedgate cluster each, on
// loopback) share one policy file over four stand-in stores in four
// clouds. A scripted sequence of reads and writes crosses clouds; `fedgate
// egress report` with both endpoints shows exactly the bytes moved, the
// bytes the cache avoided, and costs equal to a ledger computed by hand
// from the policy's price overrides, to the cent.
func TestEgressReportTwoRegions(t *testing.T) {
	s3o, gcso, azo := s3Origin(t), gcsOrigin(t), azureOrigin(t)
	const mb = 1_000_000
	gcsData, s3Data := randBytes(t, 30*mb), randBytes(t, 20*mb)
	gcso.put(t, "ds/train/a/shard-g", gcsData)
	s3o.put(t, "ds/shard-s", s3Data)
	var stores strings.Builder
	for name, o := range map[string]originKind{"s3": s3o, "gcs": gcso, "az": azo} {
		y, env := o.store(t)
		stores.WriteString("  - name: " + name + "\n" + y)
		for k, v := range env {
			t.Setenv(k, v)
		}
	}
	nas := t.TempDir()
	// Flat per-GB overrides (10^9 bytes) large enough that megabytes cost cents.
	policy := "regions:\n  - {name: east, location: aws:us-east-1}\n  - {name: central, location: gcp:us-central1}\n" +
		"stores:\n" + stores.String() +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + nas + "}\n" +
		"buckets:\n" +
		"  - {name: ds-gcs, origin: gcs/ds/}\n" +
		"  - {name: ds-s3, origin: s3/ds/}\n" +
		"  - {name: out-az, origin: az/out/}\n" +
		"defaults: {store: nas}\n" +
		"egress:\n  prices:\n    gcp:us-central1:\n      aws:us-east-1: 100USD\n      azure:eastus: 40USD\n" +
		"    aws:us-east-1:\n      gcp:us-central1: 90USD\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	east := startServer(t, "--config", pf, "--region", "east", "--cache-size", "1GiB")
	central := startServer(t, "--config", pf, "--region", "central", "--cache-size", "1GiB")

	// East reads the GCS shard twice (the second time from its cache),
	// central reads the S3 shard once and writes 5 MB to Azure.
	for range 2 {
		if got, _ := getBytes(t, east.root(), "ds-gcs", "train/a/shard-g"); !bytes.Equal(got, gcsData) {
			t.Fatal("east read of ds-gcs differs")
		}
	}
	if got, _ := getBytes(t, central.root(), "ds-s3", "shard-s"); !bytes.Equal(got, s3Data) {
		t.Fatal("central read of ds-s3 differs")
	}
	_, err := central.root().PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("out-az"), Key: aws.String("ckpt"),
		Body: bytes.NewReader(randBytes(t, 5*mb))})
	mustOK(t, err)

	out, err := east.fedgate("egress", "report", "--format", "json", "--since", "1d",
		"--endpoint", east.Endpoint, "--endpoint", central.Endpoint)
	if err != nil {
		t.Fatalf("egress report: %v\n%s", err, out)
	}
	var rep struct {
		Rows []struct {
			Src, Dst, Bucket, Store, Direction string
			Bytes                              int64
			CostUSD                            json.Number `json:"cost_usd"`
			AvoidedBytes                       int64       `json:"avoided_bytes"`
			AvoidedUSD                         json.Number `json:"avoided_usd"`
		} `json:"rows"`
		Totals struct {
			CostUSD    json.Number `json:"cost_usd"`
			AvoidedUSD json.Number `json:"avoided_usd"`
		} `json:"totals"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	mustOK(t, dec.Decode(&rep))
	// The hand ledger: bytes x $/GB / 1e9.
	type want struct {
		bytes, avoided int64
		cost, saved    string
	}
	ledger := map[string]want{
		"gcp:us-central1>aws:us-east-1 ds-gcs gcs read": {30 * mb, 30 * mb, "3.00", "3.00"}, // 30 MB x $100/GB; the cached read avoided as much
		"aws:us-east-1>gcp:us-central1 ds-s3 s3 read":   {20 * mb, 0, "1.80", "0.00"},       // 20 MB x $90/GB
		"gcp:us-central1>azure:eastus out-az az write":  {5 * mb, 0, "0.20", "0.00"},        // 5 MB x $40/GB
	}
	if len(rep.Rows) != len(ledger) {
		t.Fatalf("report rows:\n%s", out)
	}
	for _, r := range rep.Rows {
		k := fmt.Sprintf("%s>%s %s %s %s", r.Src, r.Dst, r.Bucket, r.Store, r.Direction)
		w, ok := ledger[k]
		if !ok {
			t.Fatalf("unexpected row %s in\n%s", k, out)
		}
		if r.Bytes != w.bytes || r.AvoidedBytes != w.avoided || !sameMoney(r.CostUSD, w.cost) || !sameMoney(r.AvoidedUSD, w.saved) {
			t.Fatalf("row %s: bytes %d avoided %d cost %s saved %s; want %+v", k, r.Bytes, r.AvoidedBytes, r.CostUSD, r.AvoidedUSD, w)
		}
	}
	if !sameMoney(rep.Totals.CostUSD, "5.00") || !sameMoney(rep.Totals.AvoidedUSD, "3.00") {
		t.Fatalf("totals: cost %s saved %s; want 5.00 and 3.00\n%s", rep.Totals.CostUSD, rep.Totals.AvoidedUSD, out)
	}

	// Advice is per key prefix, with the prefix's size listed: east's
	// misses of train/a/ (30 MB at $100/GB in one day) beat a copy's
	// storage by far.
	out, err = east.fedgate("egress", "advise", "--format", "json", "--since", "1d")
	if err != nil {
		t.Fatalf("egress advise: %v\n%s", err, out)
	}
	var adv struct {
		Advice []struct {
			Bucket, Prefix, From, To string
			CopyBytes                int64 `json:"copy_bytes"`
			Estimated                bool  `json:"copy_bytes_estimated"`
			BytesRead                int64 `json:"bytes_read"`
			Recommend                bool
			Demand                   int64 `json:"demand_bytes"`
			Keep                     *struct {
				Hours   *float64 `json:"hours"`
				Learned bool     `json:"learned"`
				Scope   string   `json:"scope"`
			} `json:"keep"`
		} `json:"advice"`
	}
	mustOK(t, json.Unmarshal([]byte(out), &adv))
	if len(adv.Advice) != 1 {
		t.Fatalf("advice:\n%s", out)
	}
	if a := adv.Advice[0]; a.Bucket != "ds-gcs" || a.Prefix != "train/a/" || a.From != "gcp:us-central1" || a.To != "aws:us-east-1" ||
		a.BytesRead != 30*mb || a.CopyBytes != 30*mb || a.Estimated || !a.Recommend {
		t.Fatalf("advice: %+v\n%s", a, out)
	}
	// The ledger has reuse distances of both reads (the first, and the
	// re-read the cache served): with less than a day of history the
	// advice keeps copies for the break-even time, by default.
	if a := adv.Advice[0]; a.Demand != 60*mb || a.Keep == nil || a.Keep.Learned || a.Keep.Scope != "default" || a.Keep.Hours == nil || *a.Keep.Hours <= 0 {
		t.Fatalf("advice's keep time from the live ledger: %+v\n%s", a, out)
	}

	// The ledger survives a restart; other formats render.
	east.restart(9) // SIGKILL: counts were flushed to Raft when the report asked
	out, err = east.fedgate("egress", "report", "--since", "1d", "--by", "region-pair")
	if err != nil || !strings.Contains(out, "gcp:us-central1") || !strings.Contains(out, "$3.00") {
		t.Fatalf("table report after restart: %v\n%s", err, out)
	}
	html, err := east.fedgate("egress", "report", "--since", "1d", "--format", "html")
	if err != nil || !strings.Contains(html, "<svg") || strings.Contains(html, "http://") && !strings.Contains(html, "http://www.w3.org/2000/svg") {
		t.Fatalf("html report: %v\n%.300s", err, html)
	}
}

// sameMoney compares a JSON amount with dollars written "d.cc".
func sameMoney(got json.Number, want string) bool {
	g, ok1 := new(big.Rat).SetString(string(got))
	w, ok2 := new(big.Rat).SetString(want)
	return ok1 && ok2 && g.Cmp(w) == 0
}

// startSpentBudget starts a server whose bucket dsb mounts a MinIO prefix
// holding a (1 MB, returned) and b00..b<tries-1> (1 KB each) under a
// block-cold-reads budget of $0.05 a month at $100 a GB, and reads a: the
// budget is spent.
// Cold reads after it: the first one to start after the node re-evaluates
// the budget (every 100 ms) is refused; until then each is served (and
// cached, so every try reads a key not read before).
func startSpentBudget(t *testing.T) (s *server, a []byte, tries int) {
	t.Helper()
	o := s3Origin(t)
	a = randBytes(t, 1_000_000)
	o.put(t, "ds/a", a)
	tries = 40
	for i := range tries {
		o.put(t, fmt.Sprintf("ds/b%02d", i), randBytes(t, 1000))
	}
	y, env := o.store(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n  - name: s3\n" + y +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: dsb, origin: s3/ds/}\ndefaults: {store: nas}\n" +
		"egress:\n  prices:\n    aws:us-east-1:\n      onprem:lga1: 100USD\n" +
		"  budgets:\n    - {bucket: dsb, monthly: 0.05USD, action: block-cold-reads}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s = startServer(t, "--config", pf, "--cache-size", "1GiB", "--egress-budget-refresh", "100ms")
	if got, _ := getBytes(t, s.root(), "dsb", "a"); !bytes.Equal(got, a) { // $0.10 of a $0.05 budget
		t.Fatal("first read differs")
	}
	return s, a, tries
}

// TestEgressBudgetBlocksColdReads: once a bucket's month of egress has
// spent its block-cold-reads budget, reads that would go to the store get
// a clear S3 error naming the budget, and cached data is still served.
func TestEgressBudgetBlocksColdReads(t *testing.T) {
	s, a, tries := startSpentBudget(t)
	var ae smithy.APIError
	refused := false
	for i := 0; i < tries && !refused; i++ {
		_, err := s.root().GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("dsb"), Key: aws.String(fmt.Sprintf("b%02d", i))})
		switch {
		case err == nil:
			time.Sleep(50 * time.Millisecond) // pacing: the next try, on a fresh key: refresh is every 100 ms
		case errors.As(err, &ae) && ae.ErrorCode() == "EgressBudgetExceeded":
			refused = true
		default:
			t.Fatalf("cold read b%02d: %v", i, err)
		}
	}
	if !refused {
		t.Fatalf("%d cold reads at 50 ms intervals with the budget spent and a 100 ms refresh were all served", tries)
	}
	if !strings.Contains(ae.ErrorMessage(), `bucket "dsb"`) || !strings.Contains(ae.ErrorMessage(), "0.05") {
		t.Fatalf("the error does not name the budget: %s", ae.ErrorMessage())
	}
	if got, _ := getBytes(t, s.root(), "dsb", "a"); !bytes.Equal(got, a) {
		t.Fatal("a cached object was not served with the budget spent")
	}
	if out, _ := s.fedgate("egress", "report", "--since", "1d"); !strings.Contains(out, "spent") {
		t.Fatalf("the report does not flag the spent budget:\n%s", out)
	}
}
