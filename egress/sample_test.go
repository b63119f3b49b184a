package egress

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// sampleMonth is a made-up month of traffic for a GPU region in
// gcp:us-central1: a dataset read from S3 (mostly served by the cache
// after the first epochs), checkpoints written to Azure and read back,
// and an on-prem NAS.
func sampleMonth() []Row {
	r := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var rows []Row
	for d := range 30 {
		h := HourOf(start.AddDate(0, 0, d)) + 9
		jitter := func(n int64) int64 { return n/2 + r.Int64N(n) }
		// Epoch 1 reads the dataset cold; later days mostly hit the cache.
		cold := int64(40 * GB)
		if d == 0 || d == 14 {
			cold = 900 * GB // a new dataset version
		}
		rows = append(rows,
			Row{Key{Hour: h, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "imagenet", Store: "datasets", Direction: Read, Prefix: "train/"},
				Counts{Bytes: jitter(cold), AvoidedBytes: jitter(2500 * GB)}},
			Row{Key{Hour: h + 1, Src: "gcp:us-central1", Dst: "azure:eastus", Bucket: "checkpoints", Store: "ckpt-azure", Direction: Write},
				Counts{Bytes: jitter(60 * GB)}},
			Row{Key{Hour: h + 2, Src: "azure:eastus", Dst: "gcp:us-central1", Bucket: "checkpoints", Store: "ckpt-azure", Direction: Read},
				Counts{Bytes: jitter(8 * GB), AvoidedBytes: jitter(30 * GB)}},
			Row{Key{Hour: h + 3, Src: "onprem:lga1", Dst: "gcp:us-central1", Bucket: "audio", Store: "nas", Direction: Read},
				Counts{Bytes: jitter(120 * GB), AvoidedBytes: jitter(200 * GB)}},
			Row{Key{Hour: h + 4, Src: "gcp:us-central1", Dst: "gcp:us-central1", Bucket: "scratch", Store: "ckpt-gcs", Direction: Write},
				Counts{Bytes: jitter(300 * GB)}},
		)
	}
	return rows
}

// The sample month's HTML report is one self-contained page with its
// three charts. With FEDGATE_SAMPLE_HTML set it is written there
// (scripts/egress-screenshot.sh makes docs/images/egress-report.png of it).
func TestSampleReportHTML(t *testing.T) {
	priced, err := Price(sampleMonth(), DefaultTable(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	nov, dec := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := Build(priced, nov, dec, ByBucket)
	r.Totals.Budgets = Evaluate([]Limit{
		{Bucket: "imagenet", Monthly: Dollars(2000, 1), Action: policies.ActionAlert},
		{Src: policies.Location{Cloud: AWS}, Dst: policies.Location{Cloud: GCP}, Monthly: Dollars(5000, 1), Action: policies.ActionBlockColdReads},
	}, priced, dec.Add(-time.Hour))
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, "<svg"); n != 3 {
		t.Errorf("%d charts, want 3", n)
	}
	for _, ref := range []string{"src=", "<script", "<link", "@import", "url("} {
		if strings.Contains(html, ref) {
			t.Errorf("the page refers to something outside it: %q", ref)
		}
	}
	if out := os.Getenv("FEDGATE_SAMPLE_HTML"); out != "" {
		if err := os.WriteFile(out, page.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
