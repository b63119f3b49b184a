package egress

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestReuseBucket(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	for _, c := range []struct {
		d     time.Duration
		first bool
		want  int
	}{
		{0, true, 0}, {h(5), true, 0},
		{0, false, 1}, {h(0.99), false, 1},
		{h(1), false, 2}, {h(1.99), false, 2},
		{h(2), false, 3}, {h(3.99), false, 3},
		{h(8), false, 5}, {h(15.99), false, 5}, {h(16), false, 6},
		{h(4096), false, 14}, {h(8191), false, 14}, {h(8192), false, 15}, {h(1e6), false, 15},
	} {
		if got := ReuseBucket(c.d, c.first); got != c.want {
			t.Errorf("ReuseBucket(%v, %v) = %d, want %d", c.d, c.first, got, c.want)
		}
		if i := c.want; i > 0 && (c.d.Hours() < reuseLo(i) || c.d.Hours() >= reuseHi(i)) {
			t.Errorf("%v is outside bucket %d [%v, %v)", c.d, i, reuseLo(i), reuseHi(i))
		}
	}
}

// series builds hourly reuse histograms: at each hour of [0, hours), gb
// GB of reads whose bucket is pick(hour).
func series(hours int, gb int64, pick func(h int) int) map[int64]*[ReuseBuckets]int64 {
	s := map[int64]*[ReuseBuckets]int64{}
	for h := range hours {
		var x [ReuseBuckets]int64
		x[pick(h)] = gb * GB
		s[int64(h)] = &x
	}
	return s
}

// LearnKeep on the shapes whose right answer is known. Prices: a fetch
// 0.09 USD/GB, storage 0.09/3000 USD/GB-hour, so T_even is 3000 h.
func TestLearnKeep(t *testing.T) {
	rate, store := 0.09/float64(GB), 0.09/3000/float64(GB)

	// Less than a day of history: no verdict.
	if k, ok := LearnKeep(series(20, 10, func(int) int { return 0 }), 20, rate, store); ok || k.BreakEvenHours < 2999 || k.BreakEvenHours > 3001 {
		t.Errorf("20 h of history: %+v, %v; want no verdict and T_even 3000 h", k, ok)
	}
	// Nor with less history than KeepEvidenceHours (+1): a read not yet
	// re-read may be a weekly job's.
	if _, ok := LearnKeep(series(KeepEvidenceHours, 10, func(int) int { return 0 }), KeepEvidenceHours, rate, store); ok {
		t.Errorf("%d h of history, T_even 3000 h: want no verdict", KeepEvidenceHours)
	}
	// One-shot reads for 250 hours: keeping never pays.
	k, ok := LearnKeep(series(250, 10, func(int) int { return 0 }), 250, rate, store)
	if !ok || !k.Learned || k.Hours != 0 || !strings.Contains(k.Basis, "0% of") {
		t.Errorf("one-shot reads: %+v, %v; want keep 0", k, ok)
	}
	// Every object read again 8 hours later (an epoch a third of a day
	// long), for 250 hours: keep until the next epoch, not longer.
	k, ok = LearnKeep(series(250, 10, func(h int) int {
		if h < 8 {
			return 0
		}
		return ReuseBucket(8*time.Hour, false)
	}), 250, rate, store)
	if !ok || k.Hours != 16 {
		t.Errorf("epochs every 8 h: %+v, %v; want keep 16 h (the bound of the 8-16 h bucket)", k, ok)
	}
	// Re-reads spread from under an hour to 64 hours apart, with history
	// long enough to see them all: keep 64 h, the longest distance seen.
	k, ok = LearnKeep(series(250, 10, func(h int) int { return 1 + h%7 }), 250, rate, store)
	if !ok || k.Hours != 64 {
		t.Errorf("re-reads up to 64 h apart: %+v, %v; want 64 h", k, ok)
	}
	// Re-reads later than the evidence reaches (256-512 h): keep for T_even.
	k, ok = LearnKeep(series(250, 10, func(h int) int { return ReuseBucket(300*time.Hour, false) }), 250, rate, store)
	if !ok || math.Abs(k.Hours-3000) > 1e-6 || !strings.Contains(k.Basis, "break-even") {
		t.Errorf("long re-reads: %+v, %v; want T_even (3000 h)", k, ok)
	}
	// A free fetch: never keep.
	if k, ok := LearnKeep(series(250, 10, func(int) int { return 2 }), 250, 0, store); !ok || k.Hours != 0 || k.BreakEvenHours != 0 {
		t.Errorf("free fetch: %+v, %v", k, ok)
	}
	// Rows at or after now do not count.
	if _, ok := LearnKeep(series(30, 10, func(int) int { return 0 }), 0, rate, store); ok {
		t.Error("rows after now were counted")
	}
}

// Advise on rows with reuse distances weighs keep times, per prefix, with
// the bucket's as the fallback; the rest of its advice is still there.
func TestAdviseKeep(t *testing.T) {
	since := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	h0 := HourOf(since)
	reuse := func(bucket int, n int64) []int64 {
		r := make([]int64, ReuseBuckets)
		r[bucket] = n
		return r
	}
	var rows []Row
	for h := range int64(250) {
		// "train/": 10 GB an hour, re-read 8 h later (half crossing, half
		// served by a copy); "scan/x/": 5 GB an hour, read once; "new/"
		// only in the last hours.
		b := 0
		if h >= 8 {
			b = ReuseBucket(8*time.Hour, false)
		}
		rows = append(rows, Row{Key: Key{Hour: h0 + h, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "ds", Store: "s3", Direction: Read, Prefix: "train/"},
			Counts: Counts{Bytes: 5 * GB, AvoidedBytes: 5 * GB, Reuse: reuse(b, 10*GB)}})
		rows = append(rows, Row{Key: Key{Hour: h0 + h, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "ds", Store: "s3", Direction: Read, Prefix: "scan/x/"},
			Counts: Counts{Bytes: 5 * GB, Reuse: reuse(0, 5*GB)}})
		if h >= 248 {
			rows = append(rows, Row{Key: Key{Hour: h0 + h, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "ds", Store: "s3", Direction: Read, Prefix: "new/"},
				Counts: Counts{Bytes: GB, Reuse: reuse(0, GB)}})
		}
	}
	// A bucket all of whose reads, in the last hour only, a copy served:
	// nothing crossed.
	rows = append(rows, Row{Key: Key{Hour: h0 + 249, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "served", Store: "s3", Direction: Read, Prefix: "a/"},
		Counts: Counts{AvoidedBytes: GB, Reuse: reuse(2, GB)}})
	priced, err := Price(rows, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	until := since.Add(250 * time.Hour)
	adv := Advise(priced, AdviseOptions{Since: since, Until: until})
	got := map[string]Advice{}
	for _, a := range adv {
		got[a.Bucket+"/"+a.Prefix] = a
	}
	train, scan, fresh, served := got["ds/train/"], got["ds/scan/x/"], got["ds/new/"], got["served/a/"]
	if train.Keep == nil || train.Keep.Hours != 16 || train.Keep.Scope != "prefix" || !train.Recommend || train.Demand != 2500*GB || train.BytesRead != 1250*GB {
		t.Errorf("train/: %+v keep %+v; want keep 16 h from its own history, 2500 GB demand, 1250 GB crossed", train, train.Keep)
	}
	if scan.Keep == nil || scan.Keep.Hours != 0 || scan.Recommend || !strings.HasPrefix(scan.Reason, "do not keep copies in gcp:us-central1") {
		t.Errorf("scan/x/: keep %+v, reason %q; want no copies", scan.Keep, scan.Reason)
	}
	// new/ has two hours of history: it takes the bucket's choice, which
	// weighs train/ and scan/x/ together.
	if fresh.Keep == nil || fresh.Keep.Scope != "bucket" || fresh.BucketKeep == nil || *fresh.Keep != *fresh.BucketKeep {
		t.Errorf("new/: keep %+v, bucket %+v; want the bucket's", fresh.Keep, fresh.BucketKeep)
	}
	if served.Keep == nil || served.Keep.Scope != "default" || served.Keep.Hours != served.Keep.BreakEvenHours || !served.CopyCost.IsZero() {
		t.Errorf("served/a/: %+v keep %+v; want the break-even default without history, and no division by the 0 bytes crossed", served, served.Keep)
	}

	var b bytes.Buffer
	if err := WriteAdvice(&b, adv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "keep copies in gcp:us-central1 for 16 h after each read (prefix: ") ||
		!strings.Contains(b.String(), "read 2.27 TiB in all (crossing or served by a copy in gcp:us-central1)") {
		t.Errorf("WriteAdvice:\n%s", b.String())
	}
	b.Reset()
	if err := WriteAdviceJSON(&b, adv); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Advice []struct {
			Prefix string `json:"prefix"`
			Demand *int64 `json:"demand_bytes"`
			Keep   *struct {
				Hours          *float64 `json:"hours"`
				Scope          string   `json:"scope"`
				BreakEvenHours *float64 `json:"break_even_hours"`
			} `json:"keep"`
		} `json:"advice"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, a := range doc.Advice {
		if a.Prefix == "train/" && (a.Keep == nil || a.Keep.Hours == nil || *a.Keep.Hours != 16 || a.Demand == nil || *a.Demand != 2500*GB) {
			t.Errorf("JSON of train/: %+v", a)
		}
	}

	// Without reuse distances, advice is what it was: no keep.
	plain := Advise(mustPrice(t, []Row{{Key: Key{Hour: h0, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "ds", Store: "s3", Direction: Read, Prefix: "train/"},
		Counts: Counts{Bytes: 500 * GB}}}), AdviseOptions{Since: since, Until: until})
	if len(plain) != 1 || plain[0].Keep != nil || plain[0].BucketKeep != nil {
		t.Errorf("advice without reuse distances: %+v", plain)
	}
}

func mustPrice(t *testing.T, rows []Row) []Priced {
	t.Helper()
	p, err := Price(rows, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Merge adds reuse distances up, bucket by bucket, and leaves the rows it
// was given alone.
func TestMergeReuse(t *testing.T) {
	k := Key{Hour: 1, Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: "b", Store: "s", Direction: Read}
	a := Row{Key: k, Counts: Counts{Bytes: 3, Reuse: []int64{1, 2, 0}}}
	b := Row{Key: k, Counts: Counts{Bytes: 4, Reuse: []int64{0, 0, 4}}}
	c := Row{Key: k, Counts: Counts{Bytes: 5}}
	m := Merge([]Row{a, b, c})
	if len(m) != 1 || m[0].Bytes != 12 || len(m[0].Reuse) != ReuseBuckets || m[0].Reuse[0] != 1 || m[0].Reuse[1] != 2 || m[0].Reuse[2] != 4 {
		t.Fatalf("merged: %+v", m)
	}
	if a.Reuse[2] != 0 {
		t.Error("Merge changed a row it was given")
	}
}
