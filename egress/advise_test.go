package egress

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// Advice over a window of 365 hours (half of a 730-hour month, so monthly
// figures are twice the window's). Reads from GCP into aws:us-east-1 are
// priced by a policy override at 0.10 USD/GB, reads from AWS into
// gcp:us-central1 at 0.12 USD/GB (flat, to keep the arithmetic plain).
func TestAdvise(t *testing.T) {
	money := func(s string) policies.Money { return policies.Money{Micros: usd(t, s).Micros(), Currency: "USD"} }
	tab, err := NewTable([]policies.Price{
		{From: policies.Location{Cloud: GCP}, To: policies.Location{Cloud: AWS}, PerGB: money("0.10")},
		{From: policies.Location{Cloud: AWS}, To: policies.Location{Cloud: GCP}, PerGB: money("0.12")},
	})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(365 * time.Hour)
	h := HourOf(since)
	rows := []Row{
		row(h, "gcp:us-central1", "aws:us-east-1", "hot", "g", Read, 1000*GB, 0),
		row(h+100, "gcp:us-central1", "aws:us-east-1", "hot", "g", Read, 500*GB, 7*GB), // avoided bytes play no part
		row(h+1, "gcp:us-central1", "aws:us-east-1", "cold", "g", Read, 50*GB, 0),
		row(h+2, "gcp:us-central1", "aws:us-east-1", "warm", "g", Read, 25*GB, 0),
		row(h+3, "gcp:us-central1", "aws:us-east-1", "est", "g", Read, 50*GB, 0),
		row(h+4, "aws:us-east-1", "gcp:us-central1", "gcs", "s", Read, 512*GiB, 0),
		// Not advice material: free same-region reads, writes, outside the window.
		row(h+5, "aws:us-east-1", "aws:us-east-1", "hot", "s", Read, 900*GB, 0),
		row(h+6, "aws:us-east-1", "gcp:us-central1", "hot", "g", Write, 900*GB, 0),
		row(h+365, "gcp:us-central1", "aws:us-east-1", "hot", "g", Read, 900*GB, 0),
	}
	priced, err := Price(rows, tab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{"hot": 1000 * GB, "cold": 1000 * GB, "warm": 200 * GB, "gcs": 1024 * GiB}
	adv := Advise(priced, AdviseOptions{Since: since, Until: until, Size: func(bucket, prefix, store string) (int64, bool) {
		n, ok := sizes[bucket]
		return n, ok
	}})
	// By hand (S3 Standard 0.023/GB-month, GCS Standard 0.02/GiB-month):
	//   hot:  1500 GB read, 150 paid; 3000 GB/month, egress 300/month; copy
	//         1000 GB: storage 23/month, transfer 1000 × 0.10 = 100; saving
	//         277/month; break-even 100/277 = 0.361 months: replicate.
	//   gcs:  512 GiB read: 549755813888 B × 0.12/GB = 65.97069766656 paid;
	//         egress/month 131.94139533312; copy 1024 GiB: storage 20.48,
	//         transfer 131.94139533312; saving 111.46139533312; break-even
	//         1.18374... months: replicate.
	//   est:  50 GB read, 5 paid; 100 GB/month, 10/month; size unknown, so
	//         the copy is 100 GB: storage 2.30, transfer 10; saving 7.70;
	//         break-even 1.2987 months: replicate.
	//   warm: 25 GB read, 2.50 paid; 5/month; copy 200 GB: storage 4.60,
	//         transfer 20; saving 0.40; break-even 50 months > 12: not yet.
	//   cold: 50 GB read; 10/month; copy 1000 GB: storage 23 > 10: keep.
	want := []struct {
		bucket                          string
		bytesRead, perMonth, copy       int64
		estimated                       bool
		paid, egress, storage, transfer string
		saving                          string
		breakEven                       float64
		recommend                       bool
	}{
		{"hot", 1500 * GB, 3000 * GB, 1000 * GB, false, "150", "300", "23", "100", "277", 100.0 / 277, true},
		{"gcs", 512 * GiB, 1024 * GiB, 1024 * GiB, false, "65.97069766656", "131.94139533312", "20.48", "131.94139533312", "111.46139533312", 131.94139533312 / 111.46139533312, true},
		{"est", 50 * GB, 100 * GB, 100 * GB, true, "5", "10", "2.3", "10", "7.7", 10 / 7.7, true},
		{"warm", 25 * GB, 50 * GB, 200 * GB, false, "2.5", "5", "4.6", "20", "0.4", 50, false},
		{"cold", 50 * GB, 100 * GB, 1000 * GB, false, "5", "10", "23", "100", "-13", math.Inf(1), false},
	}
	if len(adv) != len(want) {
		t.Fatalf("%d advice, want %d: %+v", len(adv), len(want), adv)
	}
	for i, w := range want {
		a := adv[i]
		if a.Bucket != w.bucket || a.BytesRead != w.bytesRead || a.BytesPerMonth != w.perMonth || a.CopyBytes != w.copy ||
			a.CopyEstimated != w.estimated || a.Recommend != w.recommend || a.WindowHours != 365 {
			t.Errorf("advice %d: %+v, want %+v", i, a, w)
			continue
		}
		for _, c := range []struct {
			name string
			got  USD
			want string
		}{{"paid", a.Paid, w.paid}, {"egress", a.EgressPerMonth, w.egress}, {"storage", a.StoragePerMonth, w.storage},
			{"transfer", a.CopyCost, w.transfer}, {"saving", a.SavingPerMonth, w.saving}} {
			if c.got.Cmp(usd(t, c.want)) != 0 {
				t.Errorf("%s %s: %s, want %s", w.bucket, c.name, c.got.Rat().FloatString(12), c.want)
			}
		}
		if math.IsInf(w.breakEven, 1) != math.IsInf(a.BreakEvenMonths, 1) || (!math.IsInf(w.breakEven, 1) && math.Abs(a.BreakEvenMonths-w.breakEven) > 1e-9) {
			t.Errorf("%s break-even %v, want %v", w.bucket, a.BreakEvenMonths, w.breakEven)
		}
	}
	if adv[0].From != "gcp:us-central1" || adv[0].To != "aws:us-east-1" || !strings.HasPrefix(adv[0].Reason, "replicate into aws:us-east-1") ||
		!strings.Contains(adv[0].Reason, "already paid") || !strings.HasPrefix(adv[3].Reason, "not yet") || !strings.HasPrefix(adv[4].Reason, "keep") {
		t.Errorf("reasons: %q / %q / %q", adv[0].Reason, adv[3].Reason, adv[4].Reason)
	}

	var b bytes.Buffer
	if err := WriteAdvice(&b, adv); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"REPLICATE  bucket \"hot\" (store g", "break-even 0.4 months", "break-even never", "estimated"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("advice text lacks %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	if err := WriteAdviceJSON(&b, adv); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Advice []map[string]any `json:"advice"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Advice) != 5 || doc.Advice[0]["saving_usd_per_month"] != 277.0 || doc.Advice[0]["break_even_months"] != 0.36 ||
		doc.Advice[4]["break_even_months"] != nil {
		t.Errorf("advice JSON %v", doc.Advice)
	}
	if Advise(nil, AdviseOptions{}) != nil {
		t.Error("advice from nothing")
	}
}

// Reads are advised on per key prefix: a hot prefix is worth a copy while
// the rest of its bucket is not, each with its own size.
func TestAdvisePerPrefix(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(HoursPerMonth * time.Hour) // one month: monthly = window
	h := HourOf(since)
	mk := func(hour int64, prefix string, bytes int64) Row {
		r := row(hour, "aws:us-east-1", "gcp:us-central1", "data", "s3", Read, bytes, 0)
		r.Prefix = prefix
		return r
	}
	rows := []Row{mk(h, "train/imagenet/", 2000*GB), mk(h+1, "train/imagenet/", 1000*GB), mk(h+2, "scratch/", 10*GB), mk(h+3, "", 5*GB)}
	priced, err := Price(rows, DefaultTable(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	adv := Advise(priced, AdviseOptions{Since: since, Until: until, Size: func(bucket, prefix, store string) (int64, bool) {
		asked[bucket+" "+prefix+" "+store] = true
		switch prefix {
		case "train/imagenet/":
			return 1000 * GB, true
		case "scratch/":
			return 5000 * GB, true
		}
		return 1000 * GB, true
	}})
	if len(adv) != 3 || !asked["data train/imagenet/ s3"] || !asked["data scratch/ s3"] || !asked["data  s3"] {
		t.Fatalf("advice %+v; sizes asked %v", adv, asked)
	}
	if a := adv[0]; a.Prefix != "train/imagenet/" || !a.Recommend || a.BytesRead != 3000*GB || a.CopyBytes != 1000*GB {
		t.Errorf("hot prefix: %+v", a)
	}
	for _, a := range adv[1:] {
		if a.Recommend {
			t.Errorf("%s recommended: %s", a.What(), a.Reason)
		}
	}
	var rest Advice
	for _, a := range adv {
		if a.Prefix == "" {
			rest = a
		}
	}
	if !rest.Rest || rest.What() != `bucket "data" (objects outside the prefixes listed)` || rest.CopyBytes != 1000*GB {
		t.Errorf("rest of the bucket: %+v %q", rest, rest.What())
	}
	var b bytes.Buffer
	if err := WriteAdvice(&b, adv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `REPLICATE  bucket "data" prefix "train/imagenet/" (store s3, aws:us-east-1) read from gcp:us-central1`) {
		t.Errorf("advice text:\n%s", b.String())
	}
	b.Reset()
	if err := WriteAdviceJSON(&b, adv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"prefix": "train/imagenet/"`) {
		t.Errorf("advice JSON lacks the prefix:\n%s", b.String())
	}
}

func TestStorageTable(t *testing.T) {
	st := NewStorageTable(StoragePrice{Location: policies.Location{Cloud: OnPrem, Region: "lga1"}, Name: "NAS", Unit: GB, MicrosPerUnitMonth: 5_000})
	p, ok := st.Lookup(policies.Location{Cloud: OnPrem, Region: "lga1"})
	if !ok || p.Name != "NAS" || p.MonthlyCost(2000*GB).Cmp(usd(t, "10")) != 0 {
		t.Errorf("NAS: %+v", p)
	}
	p, _ = st.Lookup(policies.Location{Cloud: OnPrem, Region: "sjc1"})
	if !p.MonthlyCost(1000 * GB).IsZero() {
		t.Errorf("other on-prem: %+v", p)
	}
	p, _ = st.Lookup(policies.Location{Cloud: GCP, Region: "europe-west4"})
	if p.Unit != GiB || !p.Approx || p.MonthlyCost(GiB).Cmp(usd(t, "0.02")) != 0 {
		t.Errorf("GCS: %+v", p)
	}
}

// A composite bucket's reads come from several member stores, at several
// rates: one piece of advice covers them all.
func TestAdviseCompositeMembers(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(HoursPerMonth * time.Hour)
	h := HourOf(since)
	mk := func(src, st string, bytes int64) Row {
		r := row(h, src, "gcp:us-central1", "ckpt", st, Read, bytes, 0)
		r.Prefix = "run1/step-9/"
		return r
	}
	priced, err := Price([]Row{mk("aws:us-east-1", "s3", 600*GB), mk("azure:eastus", "blob", 600*GB), mk("gcp:us-central1", "gcs", 600*GB)},
		DefaultTable(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	adv := Advise(priced, AdviseOptions{Since: since, Until: until})
	if len(adv) != 1 {
		t.Fatalf("advice %+v", adv)
	}
	a := adv[0]
	if a.Store != "s3, blob" || a.From != "aws:us-east-1, azure:eastus" || a.BytesRead != 1200*GB || a.rate() != "several rates" {
		t.Errorf("composite advice: store %q from %q read %d rate %q", a.Store, a.From, a.BytesRead, a.rate())
	}
}
