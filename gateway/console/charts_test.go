package console

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
)

// chartMetrics is a registry with the series the sampler reads, under
// their real names and labels, set by the test.
type chartMetrics struct {
	reg                      *prometheus.Registry
	requests                 *prometheus.CounterVec
	latency                  *prometheus.HistogramVec
	served, peers, hits, mis prometheus.Counter
	egress                   *prometheus.CounterVec
	backlogB, backlogO       prometheus.Gauge
}

func newChartMetrics(t *testing.T) *chartMetrics {
	t.Helper()
	m := &chartMetrics{reg: prometheus.NewRegistry()}
	// The gateway's request metrics, as gateway/metrics.go declares them
	// (gateway's TestConsoleCharts* sample its real registry).
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests}, []string{"op", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mLatency,
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"op"})
	m.reg.MustRegister(m.requests, m.latency)
	c := func(name string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
		m.reg.MustRegister(x)
		return x
	}
	m.served, m.peers, m.hits, m.mis = c(mCacheServed), c(mPeerBytes), c(mCacheHits), c(mCacheMisses)
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mEgressBytes}, []string{"src", "dst", "direction"})
	m.backlogB = prometheus.NewGauge(prometheus.GaugeOpts{Name: mBacklogBytes})
	m.backlogO = prometheus.NewGauge(prometheus.GaugeOpts{Name: mBacklogObjs})
	m.reg.MustRegister(m.egress, m.backlogB, m.backlogO)
	return m
}

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestChartSamplerRates(t *testing.T) {
	m := newChartMetrics(t)
	s := newChartSampler(m.reg, 10*time.Second)
	s.sample(t0)
	if pts, _, _ := s.window("hour"); len(pts) != 0 {
		t.Fatalf("one reading made %d points, want 0 (a rate needs two)", len(pts))
	}
	m.requests.WithLabelValues("GetObject", "200").Add(40)
	m.requests.WithLabelValues("GetObject", "404").Add(10)
	m.requests.WithLabelValues("PutObject", "200").Add(5)
	m.requests.WithLabelValues("Console", "200").Add(7) // the console's own pages: not S3 traffic
	m.requests.WithLabelValues("Ops", "200").Add(3)
	for range 99 {
		m.latency.WithLabelValues("GetObject").Observe(0.003) // (0.0025, 0.005]
	}
	m.latency.WithLabelValues("PutObject").Observe(0.2) // (0.1, 0.25]
	m.latency.WithLabelValues("Console").Observe(20)    // left out
	m.served.Add(10 << 20)
	m.peers.Add(1 << 20)
	m.hits.Add(30)
	m.mis.Add(10)
	m.egress.WithLabelValues("aws:us-east-1", "onprem:lga1", "read").Add(4 << 20)
	m.egress.WithLabelValues("onprem:lga1", "onprem:lga1", "read").Add(6 << 20) // same location: read from stores, no egress
	m.egress.WithLabelValues("onprem:lga1", "aws:us-east-1", "write").Add(1 << 20)
	m.backlogB.Set(5 << 30)
	m.backlogO.Set(12)
	s.sample(t0.Add(10 * time.Second))

	pts, step, span := s.window("hour")
	if len(pts) != 1 || step != 10*time.Second || span != time.Hour {
		t.Fatalf("%d points, step %s, span %s; want 1, 10s, 1h", len(pts), step, span)
	}
	p := pts[0]
	for op, want := range map[string]float64{"GetObject": 5, "PutObject": 0.5} {
		if !near(p.Ops[op], want) {
			t.Errorf("%s: %v req/s, want %v", op, p.Ops[op], want)
		}
	}
	if _, ok := p.Ops["Console"]; ok || len(p.Ops) != 2 {
		t.Errorf("ops %v: want GetObject and PutObject only", p.Ops)
	}
	if !near(p.Cache, float64(10<<20)/10) || !near(p.Peers, float64(1<<20)/10) || !near(p.Stores, float64(10<<20)/10) {
		t.Errorf("bytes/s cache %v peers %v stores %v", p.Cache, p.Peers, p.Stores)
	}
	if !near(p.HitRatio, 0.75) {
		t.Errorf("hit ratio %v, want 0.75", p.HitRatio)
	}
	if len(p.Egress) != 2 || p.Egress[egressRoute{"aws:us-east-1", "onprem:lga1"}] != 4<<20 || p.Egress[egressRoute{"onprem:lga1", "aws:us-east-1"}] != 1<<20 {
		t.Errorf("egress %v", p.Egress)
	}
	if p.BacklogBytes != 5<<30 || p.BacklogObjects != 12 {
		t.Errorf("backlog %v bytes %v objects", p.BacklogBytes, p.BacklogObjects)
	}
	// 100 requests: rank 50 in (0.0025, 0.005] holding 99 (none below):
	// 0.0025 + 0.0025*50/99; rank 99 is the bucket's last.
	if want := 0.0025 + 0.0025*50/99; !near(p.P50, want) {
		t.Errorf("p50 %v, want %v", p.P50, want)
	}
	if !near(p.P99, 0.005) {
		t.Errorf("p99 %v, want 0.005", p.P99)
	}

	// An idle interval: zero rates, no hit ratio, no latency.
	s.sample(t0.Add(20 * time.Second))
	pts, _, _ = s.window("hour")
	q := pts[1]
	if len(q.Ops) != 0 || q.Cache != 0 || !math.IsNaN(q.HitRatio) || !math.IsNaN(q.P50) || q.BacklogBytes != 5<<30 {
		t.Errorf("idle point: %+v", q)
	}
}

// Each ring holds a fixed number of points however long the node runs;
// the day ring gets one point per chartCoarse readings, over all of them.
func TestChartSamplerRingsBounded(t *testing.T) {
	m := newChartMetrics(t)
	s := newChartSampler(m.reg, time.Second)
	at := t0
	s.sample(at)
	const readings = chartCoarse*chartDayPoints + chartCoarse + 17
	for i := 1; i <= readings; i++ {
		m.requests.WithLabelValues("GetObject", "200").Add(float64(i % 7))
		at = at.Add(time.Second)
		s.sample(at)
	}
	hour, _, _ := s.window("hour")
	day, dstep, dspan := s.window("day")
	if len(hour) != chartHourPoints || len(day) != chartDayPoints {
		t.Fatalf("%d and %d points, want %d and %d", len(hour), len(day), chartHourPoints, chartDayPoints)
	}
	if dstep != chartCoarse*time.Second || dspan != chartCoarse*chartDayPoints*time.Second {
		t.Errorf("day step %s span %s", dstep, dspan)
	}
	if !hour[len(hour)-1].At.Equal(at) || !hour[0].At.Equal(at.Add(-(chartHourPoints-1)*time.Second)) {
		t.Errorf("hour ring from %s to %s, want the newest %d readings up to %s", hour[0].At, hour[len(hour)-1].At, chartHourPoints, at)
	}
	for i := 1; i < len(day); i++ {
		if d := day[i].At.Sub(day[i-1].At); d != chartCoarse*time.Second {
			t.Fatalf("day points %d and %d are %s apart", i-1, i, d)
		}
	}
	// A coarse point's rate is the mean over its readings.
	last := day[len(day)-1]
	var sum float64
	for _, p := range hour[len(hour)-chartCoarse-(readings%chartCoarse):][:chartCoarse] {
		sum += p.Ops["GetObject"]
	}
	if !near(last.Ops["GetObject"], sum/chartCoarse) || last.Secs != chartCoarse {
		t.Errorf("coarse point %v req/s over %vs, want %v over %d", last.Ops["GetObject"], last.Secs, sum/chartCoarse, chartCoarse)
	}
}

// A counter that goes down (a collector that restarted) gives no
// negative rate; a clock that goes back adds no point.
func TestChartSamplerResetAndClock(t *testing.T) {
	v := 100.0
	g := prometheus.NewRegistry()
	g.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: mCacheServed}, func() float64 { return v }))
	s := newChartSampler(g, 10*time.Second)
	s.sample(t0)
	v = 40
	s.sample(t0.Add(10 * time.Second))
	s.sample(t0.Add(5 * time.Second))
	pts, _, _ := s.window("hour")
	if len(pts) != 1 || pts[0].Cache != 0 {
		t.Fatalf("points %+v: want one, with 0 bytes/s", pts)
	}
}

func TestChartQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, c := range []struct {
		q    float64
		cum  []float64
		n    float64
		want float64
	}{
		{0.5, []float64{10, 10, 10}, 10, 0.5}, // in the first bucket, from 0
		{0.5, []float64{0, 10, 10}, 10, 1.5},
		{0.99, []float64{0, 0, 5}, 10, 4}, // past the last bound: that bound
		{0.5, []float64{5, 5, 10}, 10, 1},
	} {
		if got := quantile(c.q, bounds, c.cum, c.n); !near(got, c.want) {
			t.Errorf("quantile(%v, %v) = %v, want %v", c.q, c.cum, got, c.want)
		}
	}
	if !math.IsNaN(quantile(0.5, bounds, []float64{0, 0, 0}, 0)) {
		t.Error("no observations: want NaN")
	}
}

// The panels: the busiest operations with the rest as "other", nulls where
// nothing was measured, and egress priced per route.
func TestChartPanels(t *testing.T) {
	m := newChartMetrics(t)
	s := newChartSampler(m.reg, 10*time.Second)
	s.sample(t0)
	ops := []string{"GetObject", "PutObject", "HeadObject", "ListObjectsV2", "DeleteObject", "CopyObject", "BatchGet", "GetObjectTagging"}
	for i, op := range ops {
		m.requests.WithLabelValues(op, "200").Add(float64(10 * (len(ops) - i)))
	}
	m.egress.WithLabelValues("aws:us-east-1", "onprem:lga1", "read").Add(1e9)
	s.sample(t0.Add(10 * time.Second))
	s.sample(t0.Add(20 * time.Second))
	now := t0.Add(20 * time.Second)

	p, ok := s.panel("requests", "hour", now, egress.DefaultTable())
	if !ok || p.Unit != "requests/s" || p.Window != "hour" || !p.From.Equal(now.Add(-time.Hour)) || !p.To.Equal(now) {
		t.Fatalf("requests panel: %+v", p)
	}
	var names []string
	for _, sr := range p.Series {
		names = append(names, sr.Name)
		if len(sr.Points) != 2 {
			t.Errorf("series %s: %d points, want 2", sr.Name, len(sr.Points))
		}
	}
	if want := "GetObject PutObject HeadObject ListObjectsV2 DeleteObject CopyObject other"; strings.Join(names, " ") != want {
		t.Errorf("series %v, want %s", names, want)
	}
	other := p.Series[len(p.Series)-1]
	if other.Points[0].V == nil || !near(*other.Points[0].V, (20+10)/10.0) || other.Current == nil || *other.Current != 0 {
		t.Errorf("other: %v then current %v", other.Points[0].V, other.Current)
	}

	hr, _ := s.panel("hit-ratio", "hour", now, nil)
	if len(hr.Series) != 1 || hr.Series[0].Points[0].V != nil || hr.Series[0].Current != nil {
		t.Errorf("no cache lookups: the hit ratio is %+v, want null points", hr.Series[0])
	}
	eb, _ := s.panel("egress-bytes", "hour", now, nil)
	if v := eb.Series[0].Points[0].V; v == nil || !near(*v, 1e9*360) {
		t.Errorf("egress bytes/h %v, want %v", v, 1e9*360)
	}
	table := egress.DefaultTable()
	sched := table.Schedule(mustLoc(t, "aws:us-east-1"), mustLoc(t, "onprem:lga1"))
	rate, _ := sched.PaidRate().Float64()
	if rate <= 0 {
		t.Fatalf("AWS egress to on-prem has no paid rate: %s", sched)
	}
	ec, _ := s.panel("egress-cost", "hour", now, table)
	if v := ec.Series[0].Points[0].V; v == nil || !near(*v, 1e9*rate*360) {
		t.Errorf("egress USD/h %v, want %v", v, 1e9*rate*360)
	}
	if bl, _ := s.panel("backlog-bytes", "hour", now, nil); bl.Scope != "region" || bl.Series[0].Points[0].V == nil {
		t.Errorf("backlog panel: %+v", bl)
	}
	if _, ok := s.panel("nope", "hour", now, nil); ok {
		t.Error("an unknown panel was built")
	}
	for _, name := range ChartPanels {
		// No day point yet: every panel but requests (a series per
		// operation seen) still names its series, with no points.
		if p, ok := s.panel(name, "day", now, table); !ok || (len(p.Series) == 0) != (name == "requests") || len(p.Series) > 0 && len(p.Series[0].Points) != 0 {
			t.Errorf("panel %s over a day: %v %+v", name, ok, p)
		}
	}
}

// validXML decodes every token of doc.
func validXML(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, doc)
		}
	}
}

var (
	pathRE  = regexp.MustCompile(`<path class="series" data-series="([^"]*)" data-points="(\d+)" d="([^"]*)"`)
	coordRE = regexp.MustCompile(`[ML](-?[\d.]+) (-?[\d.]+)`)
)

func TestChartSVG(t *testing.T) {
	from := t0
	f := func(v float64) *float64 { return &v }
	p := ChartPanel{Panel: "latency", Title: "Request <latency> & more", Window: "hour", Unit: "seconds", From: from, To: from.Add(time.Hour),
		Series: []ChartSeries{
			{Name: "p50", Current: f(0.004), Points: []ChartValue{{from.Add(time.Minute), f(0.002)}, {from.Add(2 * time.Minute), f(0.003)}, {from.Add(3 * time.Minute), f(0.004)}}},
			{Name: `p99 "<x>"`, Current: f(0.3), Points: []ChartValue{{from.Add(time.Minute), f(0.1)}, {from.Add(2 * time.Minute), nil}, {from.Add(3 * time.Minute), f(0.3)}, {from.Add(4 * time.Minute), f(0.25)}}},
			{Name: "empty", Points: []ChartValue{{from.Add(time.Minute), nil}}},
		}}
	svg := renderChartSVG(p)
	validXML(t, svg)
	if !strings.HasPrefix(svg, `<svg xmlns="http://www.w3.org/2000/svg" id="chart-latency"`) {
		t.Errorf("svg starts %q", svg[:80])
	}
	paths := pathRE.FindAllStringSubmatch(svg, -1)
	if len(paths) != 2 {
		t.Fatalf("%d series paths, want 2 (the empty series draws none):\n%s", len(paths), svg)
	}
	for i, want := range []struct {
		name   string
		points int
		moves  int
	}{{"p50", 3, 1}, {`p99 &#34;&lt;x&gt;&#34;`, 3, 2}} { // the null breaks the line
		name, n, d := paths[i][1], paths[i][2], paths[i][3]
		coords := coordRE.FindAllStringSubmatch(d, -1)
		if name != want.name || n != strconv.Itoa(want.points) || len(coords) != want.points || strings.Count(d, "M") != want.moves {
			t.Errorf("path %d: %s, %s points, d=%q; want %s with %d points, %d moves", i, name, n, d, want.name, want.points, want.moves)
		}
		for _, c := range coords {
			x, _ := strconv.ParseFloat(c[1], 64)
			y, _ := strconv.ParseFloat(c[2], 64)
			if x < svgPadL || x > svgW-svgPadR || y < svgPadT || y > svgPadT+svgPlotH {
				t.Errorf("path %d: point (%v, %v) outside the plot", i, x, y)
			}
		}
	}
	// The top is a round value above 0.3 s; the axis and legend have units.
	for _, want := range []string{">400 ms<", ">0 ms<", ">latency<", ">09:00<", ">10:00<", "p50 <tspan", ">4 ms<", ">300 ms<", "UTC · last hour", "Request &lt;latency&gt; &amp; more"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "no data yet") {
		t.Error("a chart with data says no data yet")
	}
	// The newest point of p99 sits at 4 minutes of 60, 250 ms of 400.
	x := svgPadL + (svgW-svgPadR-svgPadL)*4.0/60
	y := svgPadT + svgPlotH - svgPlotH*0.25/0.4
	if !strings.Contains(paths[1][3], "L"+strconv.FormatFloat(x, 'f', 1, 64)+" "+strconv.FormatFloat(y, 'f', 1, 64)) {
		t.Errorf("p99's last point is not at (%.1f, %.1f): %s", x, y, paths[1][3])
	}
}

func TestChartSVGEmpty(t *testing.T) {
	for _, p := range []ChartPanel{
		{Panel: "requests", Title: "Requests", Window: "hour", Unit: "requests/s", From: t0, To: t0.Add(time.Hour)},
		{Panel: "hit-ratio", Title: "Hit ratio", Window: "day", Unit: "ratio", From: t0, To: t0.Add(24 * time.Hour),
			Series: []ChartSeries{{Name: "hit ratio", Points: []ChartValue{{t0.Add(time.Hour), nil}}}}},
		{Panel: "x", Title: "no span", Unit: "bytes", From: t0, To: t0},
	} {
		svg := renderChartSVG(p)
		validXML(t, svg)
		if !strings.Contains(svg, "no data yet") || strings.Contains(svg, `class="series"`) || strings.Contains(svg, "NaN") {
			t.Errorf("%s: empty chart:\n%s", p.Panel, svg)
		}
	}
}

func TestChartUnits(t *testing.T) {
	for _, c := range []struct {
		unit string
		v    float64
		want string
	}{
		{"bytes", 0, "0 B"},
		{"bytes", 1023, "1023 B"},
		{"bytes", 1536, "1.50 KiB"},
		{"bytes", 201.6 * (1 << 30), "201.60 GiB"},
		{"bytes", 5 << 30, "5.00 GiB"},
		{"bytes/s", 12.5 * (1 << 20), "12.50 MiB/s"},
		{"bytes/h", 3 << 40, "3.00 TiB/h"},
		{"ratio", 0.573, "57.3%"},
		{"seconds", 0.0123, "12.3 ms"},
		{"seconds", 2.5, "2.5 s"},
		{"requests/s", 0.5, "0.5 req/s"},
		{"USD/h", 0.0123456, "0.01235 USD/h"},
		{"objects", 12, "12"},
	} {
		if got := chartValue(c.unit, c.v); got != c.want {
			t.Errorf("chartValue(%s, %v) = %q, want %q", c.unit, c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		unit       string
		vmax, top  float64
		scaleLabel string
	}{
		{"requests/s", 0, 1, ""},
		{"requests/s", 3.2, 4, ""},
		{"requests/s", 0.31, 0.4, ""},
		{"bytes/s", 3 << 20, 4 << 20, "4 MiB/s"},
		{"bytes/s", 700 << 10, 800 << 10, "800 KiB/s"},
		{"ratio", 0.2, 1, "100%"},
	} {
		top, scale := chartTop(c.unit, c.vmax)
		if !near(top, c.top) {
			t.Errorf("chartTop(%s, %v) = %v, want %v", c.unit, c.vmax, top, c.top)
		}
		if c.scaleLabel != "" && chartTick(c.unit, top, scale) != c.scaleLabel {
			t.Errorf("chartTick(%s, %v) = %q, want %q", c.unit, top, chartTick(c.unit, top, scale), c.scaleLabel)
		}
	}
}

func mustLoc(t *testing.T, s string) policies.Location {
	t.Helper()
	l, err := policies.ParseLocationOrCloud(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
