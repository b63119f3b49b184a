package egress

import (
	"math/big"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// usd parses an exact decimal amount ("898.6", "0.0186264514923095703125").
func usd(t testing.TB, s string) USD {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad amount %q", s)
	}
	return USD{r}
}

// at returns the ledger hour of day d, hour h of month m 2026 (UTC).
func at(m time.Month, d, h int) int64 {
	return HourOf(time.Date(2026, m, d, h, 0, 0, 0, time.UTC))
}

func row(hour int64, src, dst, bucket, store string, dir Direction, bytes, avoided int64) Row {
	return Row{Key: Key{Hour: hour, Src: src, Dst: dst, Bucket: bucket, Store: store, Direction: dir},
		Counts: Counts{Bytes: bytes, AvoidedBytes: avoided}}
}

// testPolicy is a policy file with price overrides and budgets.
const testPolicy = `regions:
  - {name: us-east-gpu, location: "aws:us-east-1"}
  - {name: lga-gpu, location: "onprem:lga1"}
stores:
  - {name: nas, kind: posix, location: "onprem:lga1", path: /mnt/nas}
buckets:
  - {name: imagenet}
  - {name: checkpoints}
defaults: {store: nas}
egress:
  prices:
    aws:
      onprem: 0.03USD
    "aws:us-east-1":
      "onprem:lga1": 0.02USD
    "onprem:lga1":
      aws: 0.015USD
  budgets:
    - {bucket: imagenet, monthly: 900USD, action: block-cold-reads}
    - {bucket: checkpoints, monthly: 500USD}
`

func loadTestPolicy(t *testing.T) *policies.Policy {
	t.Helper()
	pol, err := policies.Parse("policy.yaml", []byte(testPolicy), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func testTable(t *testing.T) *Table {
	t.Helper()
	tab, err := NewTable(loadTestPolicy(t).Egress.Prices)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// A scripted ledger across AWS, GCP, Azure and on-prem, in November 2026
// plus one row in December, with each row's cost computed by hand. Accounts
// are the default: one per cloud. Units: AWS and Azure per GB = 10^9
// bytes, GCP per GiB = 2^30 bytes.
type ledgerCase struct {
	name          string
	row           Row
	cost, avoided string // exact USD
}

func ledger() []ledgerCase {
	const gib = GiB
	return []ledgerCase{
		// AWS internet egress, us-east-1 (pool aws-internet, month 2026-11):
		// 0 GB used; 60 GB all inside the free 100 GB.
		{"r1 aws free tier", row(at(11, 1, 0), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 60*GB, 0),
			"0", "0"},
		// 60 GB used; 50 GB: 40 GB free + 10 GB × 0.09 = 0.90.
		// Avoided 200 GB on the shadow total (read + avoided = 60 GB so far,
		// then this row's 50 GB read): positions 110..310 GB, all at 0.09:
		// 200 × 0.09 = 18.00.
		{"r2 crosses the free tier", row(at(11, 1, 1), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 50*GB, 200*GB),
			"0.9", "18"},
		// 110 GB used; 9990 GB to 10100 GB: 9890 GB × 0.09 = 890.10 up to
		// 10 TB, 100 GB × 0.085 = 8.50 after: 898.60.
		{"r3 crosses 10 TB", row(at(11, 2, 0), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 9990*GB, 0),
			"898.6", "0"},
		// 10100 GB used: 1 GB × 0.085 = 0.085 exactly (shown 0.08: half to
		// even).
		{"r3b second tier", row(at(11, 2, 1), "aws:us-east-1", "gcp:us-central1", "audio", "datasets", Read, 1*GB, 0),
			"0.085", "0"},
		// GCP internet Premium, per GiB (pool gcp-internet): 1100 GiB =
		// 1024 GiB × 0.12 = 122.88 + 76 GiB × 0.11 = 8.36: 131.24. (Priced
		// per GB it would be 1181.12 GB: the units matter.) Avoided 24 GiB at
		// shadow positions 1100..1124 GiB: 24 × 0.11 = 2.64.
		{"r4 gcp crosses 1 TiB", row(at(11, 3, 0), "gcp:us-central1", "aws:us-east-1", "checkpoints", "ckpt-gcs", Read, 1100*gib, 24*gib),
			"131.24", "2.64"},
		// GCP inter-region within North America, 0.02 per GiB: 500 × 0.02.
		{"r5a gcp inter-region", row(at(11, 3, 1), "gcp:us-central1", "gcp:us-east4", "checkpoints", "ckpt-gcs", Read, 500*gib, 0),
			"10", "0"},
		// 10^9 bytes at 0.02 per GiB = 0.02 × 10^9 / 2^30 =
		// 0.0186264514923095703125 exactly (shown 0.02).
		{"r5b a fraction of a GiB", row(at(11, 3, 2), "gcp:us-central1", "gcp:us-east4", "audio", "ckpt-gcs", Read, 1*GB, 0),
			"0.0186264514923095703125", "0"},
		// Azure internet (pool azure-internet): 150 GB = 100 GB free +
		// 50 GB × 0.087 = 4.35.
		{"r6 azure free tier", row(at(11, 4, 0), "azure:eastus", "onprem:lga1", "checkpoints", "ckpt-azure", Read, 150*GB, 0),
			"4.35", "0"},
		// On-prem source: policy price onprem:lga1 -> aws 0.015 per GB:
		// 1000 GB × 0.015 = 15.00.
		{"r7 on-prem priced by the policy", row(at(11, 4, 1), "onprem:lga1", "aws:us-east-1", "scratch", "datasets", Write, 1000*GB, 0),
			"15", "0"},
		// Policy: aws:us-east-1 -> onprem:lga1 0.02 beats aws -> onprem 0.03
		// (more specific): 250 GB × 0.02 = 5.00, flat: no free tier, and the
		// aws-internet pool does not move.
		{"r8a specific override", row(at(11, 5, 0), "aws:us-east-1", "onprem:lga1", "imagenet", "datasets", Read, 250*GB, 0),
			"5", "0"},
		// Only aws -> onprem matches: 100 GB × 0.03 = 3.00.
		{"r8b cloud-wide override", row(at(11, 5, 1), "aws:us-west-2", "onprem:lga1", "imagenet", "west", Read, 100*GB, 0),
			"3", "0"},
		// Same region: free, and so is what the cache avoided.
		{"r9 same region", row(at(11, 6, 0), "aws:us-east-1", "aws:us-east-1", "imagenet", "datasets", Read, 5000*GB, 1000*GB),
			"0", "0"},
		// AWS inter-region us-east-1 -> us-east-2: 300 GB × 0.01 = 3.00.
		{"r10 aws inter-region", row(at(11, 6, 1), "aws:us-east-1", "aws:us-east-2", "checkpoints", "backup", Write, 300*GB, 0),
			"3", "0"},
		// On-prem to on-prem: no override matches; default 0.
		{"r11 on-prem default", row(at(11, 7, 0), "onprem:lga1", "onprem:lga1", "scratch", "nas", Read, 2000*GB, 0),
			"0", "0"},
		// December: a new month, the free 100 GB again: 20 GB × 0.09.
		{"r12 next month", row(at(12, 1, 0), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 120*GB, 0),
			"1.8", "0"},
	}
}

func ledgerRows() []Row {
	var rows []Row
	cases := ledger()
	// Hand them over out of order: Price sorts by time.
	for i := len(cases) - 1; i >= 0; i-- {
		rows = append(rows, cases[i].row)
	}
	return rows
}

func pricedLedger(t *testing.T) []Priced {
	t.Helper()
	priced, err := Price(ledgerRows(), testTable(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return priced
}

func TestPriceLedgerToTheCent(t *testing.T) {
	priced := pricedLedger(t)
	cases := ledger()
	if len(priced) != len(cases) {
		t.Fatalf("%d priced rows, want %d", len(priced), len(cases))
	}
	for i, c := range cases {
		p := priced[i]
		if p.Key != c.row.Key {
			t.Fatalf("%s: row %d is %+v: not in time order", c.name, i, p.Key)
		}
		if want := usd(t, c.cost); p.Cost.Cmp(want) != 0 {
			t.Errorf("%s: cost %s (exact %s), want %s", c.name, p.Cost, p.Cost.Rat().FloatString(12), c.cost)
		}
		if want := usd(t, c.avoided); p.AvoidedCost.Cmp(want) != 0 {
			t.Errorf("%s: avoided %s (exact %s), want %s", c.name, p.AvoidedCost, p.AvoidedCost.Rat().FloatString(12), c.avoided)
		}
	}
	// The classes and the schedules chosen.
	for i, want := range []struct {
		class Class
		name  string
	}{
		{Internet, "AWS internet egress from us-east-1"},
		{Internet, "AWS internet egress from us-east-1"},
		{Internet, "AWS internet egress from us-east-1"},
		{Internet, "AWS internet egress from us-east-1"},
		{Internet, "GCP internet egress (Premium tier)"},
		{InterRegion, "GCP inter-region within North America"},
		{InterRegion, "GCP inter-region within North America"},
		{Internet, "Azure internet egress from eastus"},
		{FromOnPrem, "policy price onprem:lga1 -> aws"},
		{Internet, "policy price aws:us-east-1 -> onprem:lga1"},
		{Internet, "policy price aws -> onprem"},
		{SameRegion, "AWS same region (S3 -> EC2)"},
		{InterRegion, "AWS inter-region us-east-1 -> us-east-2"},
		{FromOnPrem, "on-prem egress (set it in egress.prices)"},
		{Internet, "AWS internet egress from us-east-1"},
	} {
		if s := priced[i].Schedule; s.Class != want.class || s.Name != want.name {
			t.Errorf("%s: %s %q, want %s %q", cases[i].name, s.Class, s.Name, want.class, want.name)
		}
	}
	// November in total: 0 + 0.90 + 898.60 + 0.085 + 131.24 + 10 +
	// 0.0186264514923095703125 + 4.35 + 15 + 5 + 3 + 0 + 3 + 0 =
	// 1071.1936264514923095703125, shown 1071.19; avoided 18 + 2.64.
	r := Build(priced, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), ByBucket)
	if want := usd(t, "1071.1936264514923095703125"); r.Totals.Cost.Cmp(want) != 0 {
		t.Errorf("total %s, want %s", r.Totals.Cost.Rat().FloatString(25), want.Rat().FloatString(25))
	}
	if r.Totals.Cost.String() != "1071.19" || r.Totals.AvoidedCost.String() != "20.64" {
		t.Errorf("totals shown %s and %s, want 1071.19 and 20.64", r.Totals.Cost, r.Totals.AvoidedCost)
	}
	// Reads: every row but r7 and r10 (writes) and r12 (December).
	read := int64(60+50+9990+1+150+250+100+5000+2000)*GB + 1100*GiB + 500*GiB + 1*GB
	if r.Totals.ReadBytes != read || r.Totals.WriteBytes != 1300*GB {
		t.Errorf("read %d written %d, want %d and %d", r.Totals.ReadBytes, r.Totals.WriteBytes, read, 1300*GB)
	}
	avoided := 200*GB + 24*GiB + 1000*GB
	if r.Totals.AvoidedBytes != avoided {
		t.Errorf("avoided %d, want %d", r.Totals.AvoidedBytes, avoided)
	}
	if want := float64(avoided) / float64(avoided+read); r.Totals.HitRatio != want {
		t.Errorf("hit ratio %v, want %v", r.Totals.HitRatio, want)
	}
	// By bucket, dearest first:
	//   imagenet    r1 r2 r3 r8a r8b r9: 0.90 + 898.60 + 5 + 3 = 907.50, avoided 18
	//   checkpoints r4 r5a r6 r10: 131.24 + 10 + 4.35 + 3 = 148.59, avoided 2.64
	//   scratch     r7 r11: 15
	//   audio       r3b r5b: 0.085 + 0.0186... = 0.1036..., shown 0.10
	want := []struct {
		bucket, src, dst, store string
		dir                     Direction
		bytes                   int64
		cost, avoided           string
	}{
		{"imagenet", "", "", "", Read, (60 + 50 + 9990 + 250 + 100 + 5000) * GB, "907.50", "18.00"},
		{"checkpoints", "", "", "", "", 1100*GiB + 500*GiB + 150*GB + 300*GB, "148.59", "2.64"},
		{"scratch", "onprem:lga1", "", "", "", 3000 * GB, "15.00", "0.00"},
		{"audio", "", "", "", Read, 2 * GB, "0.10", "0.00"},
	}
	if len(r.Lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(r.Lines), len(want), r.Lines)
	}
	for i, w := range want {
		l := r.Lines[i]
		if l.Bucket != w.bucket || l.Src != w.src || l.Dst != w.dst || l.Store != w.store || l.Direction != w.dir ||
			l.Bytes != w.bytes || l.Cost.String() != w.cost || l.AvoidedCost.String() != w.avoided {
			t.Errorf("line %d: %+v cost %s avoided %s, want %+v", i, l, l.Cost, l.AvoidedCost, w)
		}
	}
}

func TestPriceTiersPerAccount(t *testing.T) {
	// Two AWS accounts each get their own free 100 GB.
	rows := []Row{
		row(at(11, 1, 0), "aws:us-east-1", "gcp:us-central1", "a", "sa", Read, 100*GB, 0),
		row(at(11, 1, 1), "aws:us-east-1", "gcp:us-central1", "b", "sb", Read, 100*GB, 0),
	}
	byStore := func(r Row) string { return "acct-" + r.Store }
	priced, err := Price(rows, nil, Options{Account: byStore})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range priced {
		if !p.Cost.IsZero() {
			t.Errorf("%s: cost %s, want 0 (own free tier)", p.Account, p.Cost)
		}
	}
	// One account (the default): the second 100 GB is paid, 100 × 0.09.
	priced, _ = Price(rows, nil, Options{})
	if priced[1].Cost.String() != "9.00" {
		t.Errorf("second row %s, want 9.00", priced[1].Cost)
	}
	// Known prior use: 9 TB + 950 GB already used elsewhere this month:
	// 50 GB × 0.09 + 50 GB × 0.085 = 4.50 + 4.25 = 8.75.
	prior := map[PoolMonth]int64{{Account: "aws", Pool: "aws-internet", Month: "2026-11"}: 9950 * GB}
	priced, _ = Price(rows[:1], nil, Options{Prior: prior})
	if priced[0].Cost.Cmp(usd(t, "8.75")) != 0 {
		t.Errorf("with prior use %s, want 8.75", priced[0].Cost)
	}
}

func TestPriceErrors(t *testing.T) {
	for _, r := range []Row{
		row(1, "r2:auto", "aws:us-east-1", "b", "s", Read, 1, 0),
		row(1, "aws:us-east-1", ":x", "b", "s", Read, 1, 0),
		row(1, "aws:us-east-1", "gcp:us-central1", "b", "s", Read, -1, 0),
	} {
		if _, err := Price([]Row{r}, nil, Options{}); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}

func TestMerge(t *testing.T) {
	a := []Row{row(2, "aws:us-east-1", "gcp:us-central1", "b", "s", Read, 10, 1), row(1, "aws:us-east-1", "gcp:us-central1", "b", "s", Read, 5, 0)}
	b := []Row{row(2, "aws:us-east-1", "gcp:us-central1", "b", "s", Read, 7, 3)}
	got := Merge(a, b)
	if len(got) != 2 || got[0].Hour != 1 || got[1].Bytes != 17 || got[1].AvoidedBytes != 4 {
		t.Errorf("Merge = %+v", got)
	}
}

func TestMonthStart(t *testing.T) {
	got := MonthStart(time.Date(2026, 11, 17, 13, 5, 0, 0, time.FixedZone("x", 3600)))
	if want := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("MonthStart = %v", got)
	}
}
