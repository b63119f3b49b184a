package loadgen

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in HdrHistograms: microseconds from 1 µs to an
// hour with 3 significant digits (every quantile within 0.1 % of the true
// value), about 190 KB each whatever the number of operations, and
// histograms of several rounds merge exactly. Sorting every sample would be
// exact but grows with the run (a 5-minute run at 50k ops/s is 15 million
// samples); a histogram per operation kind and target stays fixed.
const (
	histMin    = 1                       // µs
	histMax    = int64(time.Hour / 1000) // µs
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	_ = h.RecordValue(min(max(us, histMin), histMax))
}

// maxErrorSamples is how many distinct error messages an operation keeps.
const maxErrorSamples = 8

// opStats accumulates one kind of operation on one target.
type opStats struct {
	mu                 sync.Mutex
	lat, ttfb          *hdrhistogram.Histogram
	count, objects     int64 // successful operations; objects read or written by them
	bytes              int64
	errors, entryErrs  int64
	errSamples         map[string]int64
	errSamplesOverflow int64
}

func newOpStats() *opStats {
	return &opStats{lat: newHist(), ttfb: newHist(), errSamples: map[string]int64{}}
}

// result is what one operation did.
type result struct {
	lat, ttfb      time.Duration // ttfb 0: not measured
	objects, bytes int64
	err            error
	// entryErrs are batch entries that came back as errors (the batch
	// itself succeeded).
	entryErrs []string
}

func (s *opStats) add(r result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range r.entryErrs {
		s.entryErrs++
		s.sample(e)
	}
	if r.err != nil {
		s.errors++
		s.sample(r.err.Error())
		return
	}
	s.count++
	s.objects += r.objects
	s.bytes += r.bytes
	record(s.lat, r.lat)
	if r.ttfb > 0 {
		record(s.ttfb, r.ttfb)
	}
}

func (s *opStats) sample(msg string) {
	if _, ok := s.errSamples[msg]; ok || len(s.errSamples) < maxErrorSamples {
		s.errSamples[msg]++
		return
	}
	s.errSamplesOverflow++
}

// merge adds o into s.
func (s *opStats) merge(o *opStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat.Merge(o.lat)
	s.ttfb.Merge(o.ttfb)
	s.count += o.count
	s.objects += o.objects
	s.bytes += o.bytes
	s.errors += o.errors
	s.entryErrs += o.entryErrs
	for m, n := range o.errSamples {
		if _, ok := s.errSamples[m]; ok || len(s.errSamples) < maxErrorSamples {
			s.errSamples[m] += n
		} else {
			s.errSamplesOverflow += n
		}
	}
	s.errSamplesOverflow += o.errSamplesOverflow
}

// report is s over seconds of wall time.
func (s *opStats) report(op Op, seconds float64) OpReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := OpReport{
		Op: op, Count: s.count, Objects: s.objects, Bytes: s.bytes,
		Errors: s.errors, EntryErrors: s.entryErrs,
		Latency: latency(s.lat),
	}
	if seconds > 0 {
		r.OpsPerSec = float64(s.count) / seconds
		r.ObjectsPerSec = float64(s.objects) / seconds
		r.BytesPerSec = float64(s.bytes) / seconds
		r.MiBPerSec = r.BytesPerSec / (1 << 20)
	}
	if s.ttfb.TotalCount() > 0 {
		l := latency(s.ttfb)
		r.FirstByte = &l
	}
	for m, n := range s.errSamples {
		r.ErrorSamples = append(r.ErrorSamples, ErrorSample{Message: m, Count: n})
	}
	if s.errSamplesOverflow > 0 {
		r.ErrorSamples = append(r.ErrorSamples, ErrorSample{Message: "(other errors)", Count: s.errSamplesOverflow})
	}
	sort.Slice(r.ErrorSamples, func(i, j int) bool {
		a, b := r.ErrorSamples[i], r.ErrorSamples[j]
		return a.Count > b.Count || a.Count == b.Count && a.Message < b.Message
	})
	return r
}

func latency(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		Max:  ms(h.Max()),
		Mean: h.Mean() / 1000,
	}
}

// live are the counters progress reads while a phase runs.
type live struct {
	ops, objects, bytes, errors atomic.Int64
}

func (l *live) add(r result) {
	if r.err != nil {
		l.errors.Add(1)
		return
	}
	l.ops.Add(1)
	l.objects.Add(r.objects)
	l.bytes.Add(r.bytes)
	l.errors.Add(int64(len(r.entryErrs)))
}
