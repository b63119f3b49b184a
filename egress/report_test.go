package egress

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	nov1 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dec1 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

// smallReport: two rows whose rates are not approximate, so the notes are
// the two that every report carries.
func smallReport(t *testing.T, by string) Report {
	t.Helper()
	rows := []Row{
		// 150 GB from us-east-1 to GCP: 100 GB free, 50 × 0.09 = 4.50;
		// avoided 10 GB at 0.09 = 0.90.
		row(at(11, 2, 5), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 150*GB, 10*GB),
		// 100 GiB within North America on GCP: 100 × 0.02 = 2.00.
		row(at(11, 3, 0), "gcp:us-central1", "gcp:us-east4", "ckpt", "ckpt-gcs", Write, 100*GiB, 0),
		// Outside the window: not in the report.
		row(at(10, 31, 23), "gcp:us-central1", "gcp:us-east4", "ckpt", "ckpt-gcs", Write, 100*GiB, 0),
	}
	priced, err := Price(rows, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Build(priced, nov1, dec1, by)
}

func TestWriteJSONExact(t *testing.T) {
	r := smallReport(t, ByNone)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	notes, _ := json.MarshalIndent(r.Totals.Notes, "    ", "  ")
	// Hit ratio: 10 GB / (10 GB + 150 GB) = 0.0625.
	want := `{
  "since": "2026-11-01T00:00:00Z",
  "until": "2026-12-01T00:00:00Z",
  "rows": [
    {
      "src": "aws:us-east-1",
      "dst": "gcp:us-central1",
      "bucket": "imagenet",
      "store": "datasets",
      "direction": "read",
      "bytes": 150000000000,
      "cost_usd": 4.50,
      "avoided_bytes": 10000000000,
      "avoided_usd": 0.90
    },
    {
      "src": "gcp:us-central1",
      "dst": "gcp:us-east4",
      "bucket": "ckpt",
      "store": "ckpt-gcs",
      "direction": "write",
      "bytes": 107374182400,
      "cost_usd": 2.00,
      "avoided_bytes": 0,
      "avoided_usd": 0.00
    }
  ],
  "totals": {
    "bytes": 257374182400,
    "read_bytes": 150000000000,
    "write_bytes": 107374182400,
    "cost_usd": 6.50,
    "avoided_bytes": 10000000000,
    "avoided_usd": 0.90,
    "cache_hit_ratio": 0.0625,
    "notes": ` + string(notes) + `
  }
}
`
	if b.String() != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", b.String(), want)
	}
	if len(r.Totals.Notes) != 2 || !strings.Contains(r.Totals.Notes[0], "only the bytes fedgate moved") {
		t.Errorf("notes: %q", r.Totals.Notes)
	}
	// Top-level keys are exactly these four.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"rows", "since", "totals", "until"}) {
		t.Errorf("keys %v", keys)
	}
}

func TestWriteJSONByDayAndEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, smallReport(t, ByDay)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) != 2 || doc.Rows[0]["day"] != "2026-11-02" || doc.Rows[1]["day"] != "2026-11-03" {
		t.Errorf("rows by day: %v", doc.Rows)
	}
	b.Reset()
	if err := WriteJSON(&b, Build(nil, time.Time{}, time.Time{}, ByBucket)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"since": ""`) || !strings.Contains(b.String(), `"rows": []`) {
		t.Errorf("empty report:\n%s", b.String())
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, smallReport(t, ByRegionPair)); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"src", "dst", "bucket", "store", "direction", "bytes", "cost_usd", "avoided_bytes", "avoided_usd"},
		{"aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", "read", "150000000000", "4.50", "10000000000", "0.90"},
		{"gcp:us-central1", "gcp:us-east4", "ckpt", "ckpt-gcs", "write", "107374182400", "2.00", "0", "0.00"},
	}
	if !slices.EqualFunc(recs, want, slices.Equal) {
		t.Errorf("CSV %q", recs)
	}
	b.Reset()
	if err := WriteCSV(&b, smallReport(t, ByDay)); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(b.String(), "\n"); first != "day,src,dst,bucket,store,direction,bytes,cost_usd,avoided_bytes,avoided_usd" {
		t.Errorf("CSV by day header %q", first)
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, Build(pricedLedger(t), nov1, dec1, ByBucket)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"Egress from 2026-11-01T00:00:00Z to 2026-12-01T00:00:00Z, by bucket",
		"BUCKET", "imagenet", "$907.50", "$1071.19", "$20.64", "Cache hit ratio", "Money saved by the cache: $20.64",
		"only the bytes fedgate moved", "Rate from the policy file: policy price aws -> onprem.",
		"Approximate rate: Azure internet egress from eastus",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	// A failing writer's error comes back.
	if err := WriteTable(failWriter{}, Build(nil, nov1, dec1, ByBucket)); err == nil {
		t.Error("no error from a failing writer")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteHTML(t *testing.T) {
	priced := pricedLedger(t)
	// A store name that needs escaping.
	priced = append(priced, Priced{Row: row(at(11, 9, 0), "aws:us-east-1", "gcp:us-central1", "imagenet", `a<b>&"c'`, Read, 1, 0),
		Schedule: priced[0].Schedule, Cost: Dollars(1, 100)})
	r := Build(priced, nov1, dec1, ByStore)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Error("no doctype")
	}
	// Well-formed: a strict XML parser reads it to the end with every
	// element closed.
	d := xml.NewDecoder(strings.NewReader(out))
	d.Strict = true
	var stack []string
	svgs, rects := map[string]int{}, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			stack = append(stack, e.Name.Local)
			if e.Name.Local == "svg" {
				for _, a := range e.Attr {
					if a.Name.Local == "id" {
						svgs[a.Value]++
					}
				}
			}
			if e.Name.Local == "rect" && len(stack) > 1 && slices.Contains(stack, "svg") {
				rects++
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed %v", stack)
	}
	for _, id := range []string{"chart-time", "chart-pairs", "chart-buckets"} {
		if svgs[id] != 1 {
			t.Errorf("chart %s: %d", id, svgs[id])
		}
	}
	// Legends (2 per chart) plus bars: 30 days × 2, pairs and buckets.
	if rects < 60 {
		t.Errorf("only %d rects", rects)
	}
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "url("} {
		if strings.Contains(strings.ToLower(out), bad) {
			t.Errorf("HTML contains %q", bad)
		}
	}
	for _, s := range []string{"a&lt;b&gt;&amp;&#34;c&#39;", "imagenet", "$1071.20", "2026-11-01", "aws:us-east-1 \u2192 gcp:us-central1"} {
		if !strings.Contains(out, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	// An empty report renders too.
	b.Reset()
	if err := WriteHTML(&b, Build(nil, time.Time{}, time.Time{}, ByDay)); err != nil || !strings.Contains(b.String(), "no cost in this window") {
		t.Errorf("empty HTML: %v", err)
	}
}

func TestBuildDailyAndGrouping(t *testing.T) {
	r := Build(pricedLedger(t), nov1, dec1, ByRegionPair)
	if len(r.Daily) != 30 || r.Daily[0].Day != "2026-11-01" || r.Daily[29].Day != "2026-11-30" {
		t.Fatalf("daily: %d days", len(r.Daily))
	}
	// Day 2: r3 + r3b = 898.685.
	if r.Daily[1].Cost.Cmp(usd(t, "898.685")) != 0 {
		t.Errorf("Nov 2 cost %s", r.Daily[1].Cost.Rat().FloatString(6))
	}
	// The dearest pair: aws:us-east-1 -> gcp:us-central1, r1 r2 r3 r3b:
	// 0.90 + 898.60 + 0.085 = 899.585.
	top := r.Lines[0]
	if top.Src != "aws:us-east-1" || top.Dst != "gcp:us-central1" || top.Cost.Cmp(usd(t, "899.585")) != 0 || top.Bucket != "" || top.Direction != Read {
		t.Errorf("top pair %+v %s", top, top.Cost)
	}
	if len(r.Pairs) != len(r.Lines) || len(r.Buckets) != 4 {
		t.Errorf("chart groups: %d pairs %d buckets", len(r.Pairs), len(r.Buckets))
	}
	if CheckBy("prefix") == nil || CheckBy(ByDay) != nil {
		t.Error("CheckBy")
	}
}

// A row that carries only reuse distances (a gateway's row of a prefix
// served from the cache, or of a composite placement's reads) moves no
// bytes and shows no line.
func TestBuildSkipsReuseOnlyRows(t *testing.T) {
	rows := []Row{
		row(at(11, 2, 5), "aws:us-east-1", "gcp:us-central1", "imagenet", "datasets", Read, 5*GB, 0),
		{Key: Key{Hour: at(11, 2, 6), Src: "azure:eastus", Dst: "gcp:us-central1", Bucket: "far", Store: "replicate(s3,blob)", Direction: Read, Prefix: "ds/"},
			Counts: Counts{Reuse: []int64{0, 0, 0, 7}}},
	}
	priced, err := Price(rows, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, by := range []string{ByNone, ByStore, ByBucket, ByRegionPair, ByDay} {
		r := Build(priced, nov1, dec1, by)
		if len(r.Lines) != 1 || r.Lines[0].Bucket != "imagenet" || len(r.Buckets) != 1 || len(r.Pairs) != 1 {
			t.Errorf("--by %q: lines %+v, buckets %d, pairs %d; want imagenet's alone", by, r.Lines, len(r.Buckets), len(r.Pairs))
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1024: "1.00 KiB", 1_500_000_000: "1.40 GiB", 1 << 40: "1.00 TiB", 3 * 1000 * TB: "2.66 PiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
