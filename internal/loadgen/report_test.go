package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// The histogram's quantiles are within its 3 significant digits of the
// exact ones, and merging rounds gives the quantiles of all samples.
func TestOpStatsQuantiles(t *testing.T) {
	a, b := newOpStats(), newOpStats()
	// 1..1000 ms, odd ones in a, even ones in b.
	for i := 1; i <= 1000; i++ {
		s := a
		if i%2 == 0 {
			s = b
		}
		s.add(result{lat: time.Duration(i) * time.Millisecond, ttfb: time.Duration(i) * time.Microsecond, objects: 1, bytes: 100})
	}
	a.add(result{err: errors.New("GET: 503 SlowDown: Please reduce your request rate.")})
	b.add(result{err: errors.New("GET: 503 SlowDown: Please reduce your request rate.")})
	b.add(result{err: errors.New("GET: read 3 bytes of an object of 4")})
	a.merge(b)
	r := a.report(OpGet, 10)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*0.001+1e-9 {
			t.Errorf("%s = %v, want %v (within 0.1%%)", name, got, want)
		}
	}
	near("p50", r.Latency.P50, 500)
	near("p90", r.Latency.P90, 900)
	near("p99", r.Latency.P99, 990)
	near("max", r.Latency.Max, 1000)
	near("mean", r.Latency.Mean, 500.5)
	near("first byte p50", r.FirstByte.P50, 0.5)
	if r.Count != 1000 || r.Errors != 3 || r.Bytes != 100000 || r.OpsPerSec != 100 || r.MiBPerSec != 100000.0/10/(1<<20) {
		t.Errorf("report = %+v", r)
	}
	want := []ErrorSample{{"GET: 503 SlowDown: Please reduce your request rate.", 2}, {"GET: read 3 bytes of an object of 4", 1}}
	if fmt.Sprint(r.ErrorSamples) != fmt.Sprint(want) {
		t.Errorf("error samples = %v, want %v", r.ErrorSamples, want)
	}
}

// Distinct error messages are bounded; the rest are counted together.
func TestOpStatsErrorSamplesBounded(t *testing.T) {
	s := newOpStats()
	for i := range 100 {
		s.add(result{err: fmt.Errorf("error %d", i)})
	}
	r := s.report(OpPut, 1)
	if len(r.ErrorSamples) != maxErrorSamples+1 || r.ErrorSamples[0].Message != "(other errors)" || r.ErrorSamples[0].Count != 100-maxErrorSamples {
		t.Fatalf("samples = %v", r.ErrorSamples)
	}
}

// Operations recorded from many goroutines at once are all counted.
func TestOpStatsConcurrent(t *testing.T) {
	s := newOpStats()
	var lv live
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 0))
			for range 1000 {
				res := result{lat: time.Duration(r.IntN(1000)+1) * time.Microsecond, objects: 2, bytes: 10}
				s.add(res)
				lv.add(res)
			}
		})
	}
	wg.Wait()
	if s.count != 8000 || s.lat.TotalCount() != 8000 || lv.ops.Load() != 8000 || lv.objects.Load() != 16000 || lv.bytes.Load() != 80000 {
		t.Fatalf("counted %d ops (%d in the histogram, %d live)", s.count, s.lat.TotalCount(), lv.ops.Load())
	}
}

func sampleReport() Report {
	ops := func(opsPerSec, p50 float64) []OpReport {
		return []OpReport{{Op: OpGet, Count: int64(opsPerSec * 10), Objects: int64(opsPerSec * 10), Bytes: int64(opsPerSec * 10 * 16384),
			OpsPerSec: opsPerSec, ObjectsPerSec: opsPerSec, BytesPerSec: opsPerSec * 16384, MiBPerSec: opsPerSec / 64,
			Latency: Latency{P50: p50, P90: 2 * p50, P99: 4 * p50, Max: 10 * p50, Mean: p50}}}
	}
	r := Report{
		Mode:     ModeGet,
		Workload: Workload{Sizes: "16KiB", Objects: 100, Concurrency: 16, DurationSeconds: 5, Rounds: 2, Prefix: "fedgate-bench-x/"},
		Targets: []TargetReport{
			{Name: "http://a", Endpoint: "http://a", Bucket: "b", Seconds: 10, Ops: ops(3000, 1),
				Rounds: []RoundReport{{Round: 1, OpsPerSec: 2900}, {Round: 2, OpsPerSec: 3100}}, Cleanup: CleanupReport{Removed: 100, BucketRemoved: true}},
			{Name: "http://b", Endpoint: "http://b", Bucket: "b", Seconds: 10, Ops: ops(1000, 4),
				Rounds: []RoundReport{{Round: 1, OpsPerSec: 1000}, {Round: 2, OpsPerSec: 1000}}, Cleanup: CleanupReport{Removed: 100}},
		},
	}
	r.Ratios = ratios(r.Targets[0], r.Targets[1])
	return r
}

func TestRatios(t *testing.T) {
	r := sampleReport()
	if len(r.Ratios) != 1 {
		t.Fatalf("ratios = %+v", r.Ratios)
	}
	x := r.Ratios[0]
	if *x.OpsPerSec != 3 || *x.BytesPerSec != 3 || *x.P50 != 0.25 || *x.Max != 0.25 {
		t.Fatalf("ratio = ops %v bytes %v p50 %v max %v", *x.OpsPerSec, *x.BytesPerSec, *x.P50, *x.Max)
	}
	// A target without a number has no ratio for it (not 0, not NaN).
	r.Targets[1].Ops[0].OpsPerSec = 0
	r.Targets[1].Ops[0].Latency = Latency{}
	x = ratios(r.Targets[0], r.Targets[1])[0]
	if x.OpsPerSec != nil || x.P50 != nil || x.BytesPerSec == nil {
		t.Fatalf("ratio with a missing number = %+v", x)
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"fedgate bench get: sizes 16KiB, 100 objects, concurrency 16, 2 rounds of 5s per endpoint",
		"http://a  bucket b, 10s measured",
		"3000.0", "46.88", "1.00ms", "4.00ms", "10.0ms",
		"per round (ops/s): 2900, 3100",
		"Ratio http://a / http://b",
		"3.00x", "0.25x",
		"Removed 100 objects under s3://b/fedgate-bench-x/ from http://a and the bucket it created.",
		"Removed 100 objects under s3://b/fedgate-bench-x/ from http://b.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The header and rows line up: every row of a table as wide as its header.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "OP ") {
			if len(lines[i+1]) != len(l) {
				t.Errorf("row %q is not as wide as its header %q", lines[i+1], l)
			}
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Targets[0].Ops[0].Latency.P99 != 4 || *back.Ratios[0].OpsPerSec != 3 || back.Workload.Prefix != "fedgate-bench-x/" {
		t.Fatalf("round trip: %+v", back)
	}
	for _, key := range []string{`"ops_per_sec": 3000`, `"latency_ms"`, `"p99": 4`, `"ratios"`, `"interrupted": false`, `"bucket_removed": true`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, buf.String())
		}
	}
}

func TestMsFormat(t *testing.T) {
	for v, want := range map[float64]string{0: "-", 0.123: "0.12ms", 9.999: "10.00ms", 12.34: "12.3ms", 123.4: "123ms", 12345: "12.3s"} {
		if got := ms(v); got != want {
			t.Errorf("ms(%v) = %q, want %q", v, got, want)
		}
	}
}
