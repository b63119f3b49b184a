package console

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
)

// The console's charts (docs/console.md, Charts): a sampler reads this
// node's own Prometheus registry every interval and keeps what it needs
// in two fixed-size rings: chartHourPoints points at the interval (an hour
// at the default 10 s) and chartDayPoints points at chartCoarse
// intervals (a day of 5-minute points at 10 s). Each point holds rates
// over its interval, computed from the counters' differences, so memory
// does not grow with time or traffic: 648 points, each a few maps as
// small as the node's operations and egress routes (measured: about
// 0.7 MiB in all with 10 operations busy in every interval, 1.6 MiB with
// 40).

const (
	// DefaultChartInterval is how often the sampler reads the registry.
	DefaultChartInterval = 10 * time.Second
	chartHourPoints      = 360 // × interval: the "hour" window
	chartCoarse          = 30  // intervals per point of the "day" window
	chartDayPoints       = 288 // × chartCoarse × interval: the "day" window
	// chartMaxOps is how many operations the requests chart draws (the
	// busiest in the window); the rest are summed as "other".
	chartMaxOps = 6
)

// Metric names the sampler reads.
const (
	mRequests     = "fedgate_s3_requests_total"
	mLatency      = "fedgate_s3_request_duration_seconds"
	mCacheServed  = "fedgate_cache_served_bytes_total"
	mPeerBytes    = "fedgate_cache_peer_read_bytes_total"
	mCacheHits    = "fedgate_cache_hits_total"
	mCacheMisses  = "fedgate_cache_misses_total"
	mEgressBytes  = "fedgate_egress_bytes_total"
	mBacklogBytes = "fedgate_writeback_backlog_bytes"
	mBacklogObjs  = "fedgate_writeback_backlog_objects"
)

// chartSkipOps are the /_fedgate/ endpoints' operations: not S3 traffic,
// and the console's own refreshes would show on its charts.
var chartSkipOps = map[string]bool{"Ops": true, "Console": true, "Admin": true}

type egressRoute struct{ Src, Dst string }

// chartSnap is one reading of the registry: cumulative counters and the
// gauges.
type chartSnap struct {
	at         time.Time
	ops        map[string]float64 // requests by operation
	latBounds  []float64          // histogram upper bounds, +Inf excluded
	latCum     []float64          // cumulative count at each bound, summed over operations
	latCount   float64
	cache      float64 // bytes served from this node's cached chunks
	peers      float64 // bytes read from peers' caches
	stores     float64 // bytes read from stores
	hits, miss float64
	hasCache   bool
	egress     map[egressRoute]float64 // bytes between locations (src != dst), both directions
	backlogB   float64
	backlogO   float64
	hasBacklog bool
}

// chartPoint is one interval's rates.
type chartPoint struct {
	At   time.Time // the end of the interval
	Secs float64   // its length
	Ops  map[string]float64
	// Bytes per second served from this node's cache, from peers' caches
	// and from stores.
	Cache, Peers, Stores float64
	HitRatio             float64 // NaN: no cache lookups (or no cache)
	Egress               map[egressRoute]float64
	BacklogBytes         float64 // NaN: no write-back metrics
	BacklogObjects       float64
	P50, P99             float64 // seconds; NaN: no requests
}

type chartRing struct {
	pts  []chartPoint
	next int
	full bool
}

func newChartRing(n int) chartRing { return chartRing{pts: make([]chartPoint, n)} }

func (r *chartRing) push(p chartPoint) {
	r.pts[r.next] = p
	r.next++
	if r.next == len(r.pts) {
		r.next, r.full = 0, true
	}
}

// points returns the ring's points, oldest first.
func (r *chartRing) points() []chartPoint {
	if !r.full {
		return slices.Clone(r.pts[:r.next])
	}
	return append(slices.Clone(r.pts[r.next:]), r.pts[:r.next]...)
}

// chartSampler reads a registry into the two rings.
type chartSampler struct {
	reg      prometheus.Gatherer
	interval time.Duration

	mu     sync.Mutex
	last   *chartSnap // the previous reading
	base   *chartSnap // the reading the next coarse point starts from
	n      int        // readings since base
	hour   chartRing
	day    chartRing
	gerror error // the last Gather error, for the page
}

func newChartSampler(reg prometheus.Gatherer, interval time.Duration) *chartSampler {
	if interval <= 0 {
		interval = DefaultChartInterval
	}
	return &chartSampler{reg: reg, interval: interval, hour: newChartRing(chartHourPoints), day: newChartRing(chartDayPoints)}
}

// run samples every interval until ctx ends.
func (s *chartSampler) run(ctx context.Context, now func() time.Time) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	s.sample(now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample(now())
		}
	}
}

// sample reads the registry at now and adds a point to the hour ring
// (and every chartCoarse readings one to the day ring).
func (s *chartSampler) sample(now time.Time) {
	mfs, err := s.reg.Gather()
	snap := readChartSnap(mfs, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gerror = err
	if s.last == nil {
		s.last, s.base = snap, snap
		return
	}
	if !now.After(s.last.at) {
		return // a clock that went back: wait for it
	}
	s.hour.push(chartDelta(s.last, snap))
	s.last = snap
	s.n++
	if s.n >= chartCoarse {
		s.day.push(chartDelta(s.base, snap))
		s.base, s.n = snap, 0
	}
}

// window returns the points of a window ("hour" or "day"), oldest first,
// its step and its span.
func (s *chartSampler) window(w string) (pts []chartPoint, step, span time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w == "day" {
		step = s.interval * chartCoarse
		return s.day.points(), step, step * chartDayPoints
	}
	return s.hour.points(), s.interval, s.interval * chartHourPoints
}

func readChartSnap(mfs []*dto.MetricFamily, now time.Time) *chartSnap {
	s := &chartSnap{at: now, ops: map[string]float64{}, egress: map[egressRoute]float64{}}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	sum := func(mf *dto.MetricFamily) (v float64) {
		for _, m := range mf.GetMetric() {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
		return v
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case mRequests:
			for _, m := range mf.GetMetric() {
				if op := label(m, "op"); !chartSkipOps[op] {
					s.ops[op] += m.GetCounter().GetValue()
				}
			}
		case mLatency:
			for _, m := range mf.GetMetric() {
				if chartSkipOps[label(m, "op")] {
					continue
				}
				h := m.GetHistogram()
				s.latCount += float64(h.GetSampleCount())
				for i, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue
					}
					if i == len(s.latBounds) {
						s.latBounds = append(s.latBounds, b.GetUpperBound())
						s.latCum = append(s.latCum, 0)
					}
					if i < len(s.latCum) && s.latBounds[i] == b.GetUpperBound() {
						s.latCum[i] += float64(b.GetCumulativeCount())
					}
				}
			}
		case mCacheServed:
			s.cache, s.hasCache = sum(mf), true
		case mPeerBytes:
			s.peers = sum(mf)
		case mCacheHits:
			s.hits = sum(mf)
		case mCacheMisses:
			s.miss = sum(mf)
		case mEgressBytes:
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				src, dst := label(m, "src"), label(m, "dst")
				if label(m, "direction") == "read" {
					s.stores += v
				}
				if src != dst {
					s.egress[egressRoute{src, dst}] += v
				}
			}
		case mBacklogBytes:
			s.backlogB, s.hasBacklog = sum(mf), true
		case mBacklogObjs:
			s.backlogO = sum(mf)
		}
	}
	return s
}

// chartDelta turns two readings into the rates between them. A counter
// that went down (it was reset) counts as 0.
func chartDelta(a, b *chartSnap) chartPoint {
	secs := b.at.Sub(a.at).Seconds()
	d := func(x, y float64) float64 { return max(y-x, 0) }
	p := chartPoint{At: b.at, Secs: secs, Ops: map[string]float64{}, Egress: map[egressRoute]float64{},
		HitRatio: math.NaN(), BacklogBytes: math.NaN(), BacklogObjects: math.NaN(), P50: math.NaN(), P99: math.NaN()}
	for op, v := range b.ops {
		if n := d(a.ops[op], v); n > 0 {
			p.Ops[op] = n / secs
		}
	}
	if b.hasCache {
		p.Cache, p.Peers = d(a.cache, b.cache)/secs, d(a.peers, b.peers)/secs
		if h, m := d(a.hits, b.hits), d(a.miss, b.miss); h+m > 0 {
			p.HitRatio = h / (h + m)
		}
	}
	p.Stores = d(a.stores, b.stores) / secs
	for r, v := range b.egress {
		if n := d(a.egress[r], v); n > 0 {
			p.Egress[r] = n
		}
	}
	if b.hasBacklog {
		p.BacklogBytes, p.BacklogObjects = b.backlogB, b.backlogO
	}
	if n := d(a.latCount, b.latCount); n > 0 && (len(a.latBounds) == 0 || slices.Equal(a.latBounds, b.latBounds)) {
		cum := make([]float64, len(b.latBounds))
		for i := range cum {
			var prev float64
			if i < len(a.latCum) {
				prev = a.latCum[i]
			}
			cum[i] = d(prev, b.latCum[i])
		}
		p.P50 = quantile(0.5, b.latBounds, cum, n)
		p.P99 = quantile(0.99, b.latBounds, cum, n)
	}
	return p
}

// quantile estimates the q-quantile from cumulative bucket counts as
// Prometheus's histogram_quantile does: linear within the bucket it falls
// in (from 0 in the first); past the last finite bound, that bound. NaN
// with no observations.
func quantile(q float64, bounds, cum []float64, total float64) float64 {
	if total <= 0 || len(bounds) == 0 {
		return math.NaN()
	}
	rank := q * total
	lo, below := 0.0, 0.0
	for i, ub := range bounds {
		if cum[i] >= rank {
			in := cum[i] - below
			if in <= 0 {
				return ub
			}
			return lo + (ub-lo)*(rank-below)/in
		}
		lo, below = ub, cum[i]
	}
	return bounds[len(bounds)-1]
}

// --- panels: what the charts and the JSON endpoints show ---

// ChartPanels are the console's panels, in the order the page shows them;
// each has a JSON endpoint (docs/console.md).
var ChartPanels = []string{"requests", "bytes-served", "hit-ratio", "egress-bytes", "egress-cost", "backlog-bytes", "backlog-objects", "latency"}

// ChartPanel is one panel's data: GET /_fedgate/admin/console/panels/{panel}
// and /_fedgate/ui/api/panels/{panel}.
type ChartPanel struct {
	Panel  string `json:"panel"`
	Title  string `json:"title"`
	Window string `json:"window"` // "hour" or "day"
	// Unit of every value: requests/s, bytes/s, ratio (0-1), bytes/h,
	// USD/h, bytes, objects, seconds.
	Unit        string    `json:"unit"`
	StepSeconds float64   `json:"step_seconds"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Node        string    `json:"node,omitempty"`
	// Scope is "node" (this node's traffic) or "region" (the write-back
	// backlog, which every node reports for the whole region).
	Scope  string        `json:"scope"`
	Note   string        `json:"note,omitempty"`
	Series []ChartSeries `json:"series"`
}

// ChartSeries is one line of a panel.
type ChartSeries struct {
	Name string `json:"name"`
	// Current is the newest point's value (null: none).
	Current *float64     `json:"current"`
	Points  []ChartValue `json:"points"`
}

// ChartValue is one point: the end of its interval and the value over it
// (null when there is nothing to measure, like a hit ratio with no
// lookups).
type ChartValue struct {
	T time.Time `json:"t"`
	V *float64  `json:"v"`
}

func chartWindowOK(w string) bool { return w == "hour" || w == "day" }

// panel builds one panel over a window from the sampler's points; table
// prices the egress routes.
func (s *chartSampler) panel(name, window string, now time.Time, table *egress.Table) (ChartPanel, bool) {
	pts, step, span := s.window(window)
	p := ChartPanel{Panel: name, Window: window, StepSeconds: step.Seconds(), From: now.Add(-span).UTC(), To: now.UTC(), Scope: "node", Series: []ChartSeries{}}
	// Points older than the window (a clock that jumped) are left out.
	pts = slices.DeleteFunc(pts, func(c chartPoint) bool { return c.At.Before(p.From) })
	series := func(name string, f func(chartPoint) float64) {
		cs := ChartSeries{Name: name, Points: make([]ChartValue, 0, len(pts))}
		for _, c := range pts {
			cs.Points = append(cs.Points, ChartValue{T: c.At.UTC(), V: finite(f(c))})
		}
		if len(pts) > 0 {
			cs.Current = cs.Points[len(pts)-1].V
		}
		p.Series = append(p.Series, cs)
	}
	switch name {
	case "requests":
		p.Title, p.Unit = "Requests per second by operation", "requests/s"
		p.Note = "S3 and batch requests this node served; the /_fedgate/ endpoints are left out."
		total := map[string]float64{}
		for _, c := range pts {
			for op, v := range c.Ops {
				total[op] += v
			}
		}
		ops := make([]string, 0, len(total))
		for op := range total {
			ops = append(ops, op)
		}
		sort.Slice(ops, func(i, j int) bool {
			if total[ops[i]] != total[ops[j]] {
				return total[ops[i]] > total[ops[j]]
			}
			return ops[i] < ops[j]
		})
		shown := ops[:min(len(ops), chartMaxOps)]
		for _, op := range shown {
			series(op, func(c chartPoint) float64 { return c.Ops[op] })
		}
		if len(ops) > len(shown) {
			rest := ops[len(shown):]
			series("other", func(c chartPoint) float64 {
				var v float64
				for _, op := range rest {
					v += c.Ops[op]
				}
				return v
			})
		}
	case "bytes-served":
		p.Title, p.Unit = "Bytes served: cache vs stores", "bytes/s"
		p.Note = "cache: from this node's cached chunks; peers: from chunks other nodes cache; stores: read from the stores (cache fills included)."
		series("cache", func(c chartPoint) float64 { return c.Cache })
		series("peers", func(c chartPoint) float64 { return c.Peers })
		series("stores", func(c chartPoint) float64 { return c.Stores })
	case "hit-ratio":
		p.Title, p.Unit = "Cache hit ratio", "ratio"
		p.Note = "Chunk lookups served by a cached chunk, of all lookups on this node."
		series("hit ratio", func(c chartPoint) float64 { return c.HitRatio })
	case "egress-bytes":
		p.Title, p.Unit = "Egress per hour", "bytes/h"
		p.Note = "Bytes this node moved between locations (store reads and writes whose source and destination differ), as a rate per hour."
		series("egress", func(c chartPoint) float64 {
			var v float64
			for _, n := range c.Egress {
				v += n
			}
			return v * 3600 / c.Secs
		})
	case "egress-cost":
		p.Title, p.Unit = "Egress cost per hour", "USD/h"
		p.Note = "The egress above priced at each route's paid rate (the policy's prices, else the built-in table; free tiers and volume tiers are not applied: fedgate egress report has the month's bill)."
		rates := map[egressRoute]float64{}
		rate := func(r egressRoute) float64 {
			if v, ok := rates[r]; ok {
				return v
			}
			var v float64
			src, err1 := policies.ParseLocationOrCloud(r.Src)
			dst, err2 := policies.ParseLocationOrCloud(r.Dst)
			if err1 == nil && err2 == nil {
				v, _ = table.Schedule(src, dst).PaidRate().Float64()
			}
			rates[r] = v
			return v
		}
		series("cost", func(c chartPoint) float64 {
			var v float64
			for r, n := range c.Egress {
				v += n * rate(r)
			}
			return v * 3600 / c.Secs
		})
	case "backlog-bytes":
		p.Title, p.Unit, p.Scope = "Write-back backlog (bytes)", "bytes", "region"
		p.Note = "Bytes written to write-back buckets and not yet drained to their stores, region-wide."
		series("backlog", func(c chartPoint) float64 { return c.BacklogBytes })
	case "backlog-objects":
		p.Title, p.Unit, p.Scope = "Write-back backlog (objects)", "objects", "region"
		p.Note = "Objects written to write-back buckets and not yet drained, region-wide."
		series("backlog", func(c chartPoint) float64 { return c.BacklogObjects })
	case "latency":
		p.Title, p.Unit = "Request latency", "seconds"
		p.Note = "p50 and p99 of S3 request durations on this node (first byte in to last byte out), from the histogram's buckets."
		series("p50", func(c chartPoint) float64 { return c.P50 })
		series("p99", func(c chartPoint) float64 { return c.P99 })
	default:
		return ChartPanel{}, false
	}
	return p, true
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// chartPanelName says whether name is a panel.
func chartPanelName(name string) bool { return slices.Contains(ChartPanels, name) }
