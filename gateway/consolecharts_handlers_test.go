package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/console"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// chartsEnv is a gateway over the fake with a clock the test moves; the
// sampler is driven by the test (SampleCharts), the traffic by the SDK.
type chartsEnv struct {
	*consoleEnv
	srv  *gateway.Server
	s3   *env // SDK clients and signed requests against the same server
	mu   sync.Mutex
	now  time.Time
	node string
}

func newChartsEnv(t *testing.T) *chartsEnv {
	t.Helper()
	// The clock starts now: SigV4 requests are signed with the real time
	// and must be within the verifier's skew of it.
	ce := &chartsEnv{now: time.Now().UTC().Truncate(time.Second), node: "n7"}
	ce.consoleEnv = &consoleEnv{t: t, fake: gatewaytest.New()}
	ce.fake.AddUser("alice", "ALICEKEY", "alice-secret")
	ce.fake.AddBucket("data", backend.RootUser)
	ce.fake.SetPolicy("")
	if err := ce.fake.Users().Grant(t.Context(), backend.User{Name: backend.RootUser, Root: true}, "alice", "data", "read"); err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Config{Backend: ce.fake, RegionName: "lab", NodeID: ce.node, Now: ce.clock,
		ChartInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ce.srv = srv
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ce.url = hs.URL
	ce.s3 = &env{t: t, fake: ce.fake, url: hs.URL}
	ce.s3.root = ce.s3.client(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	return ce
}

func (ce *chartsEnv) clock() time.Time {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return ce.now
}

// tick moves the clock by d and takes a reading.
func (ce *chartsEnv) tick(d time.Duration) {
	ce.mu.Lock()
	ce.now = ce.now.Add(d)
	now := ce.now
	ce.mu.Unlock()
	ce.srv.SampleCharts(now)
}

// load PUTs puts objects and GETs each gets times with the SDK.
func (ce *chartsEnv) load(puts, gets int) {
	t := ce.t
	for i := range puts {
		key := "obj-" + string(rune('a'+i))
		if _, err := ce.s3.root.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key),
			Body: bytes.NewReader([]byte(strings.Repeat("x", 1000)))}); err != nil {
			t.Fatal(err)
		}
		for range gets {
			out, err := ce.s3.root.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, out.Body)
			_ = out.Body.Close()
		}
	}
}

func decodePanel(t *testing.T, body string) console.ChartPanel {
	t.Helper()
	var p console.ChartPanel
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("not a panel: %v\n%s", err, body)
	}
	return p
}

func series(p console.ChartPanel, name string) (console.ChartSeries, bool) {
	for _, s := range p.Series {
		if s.Name == name {
			return s, true
		}
	}
	return console.ChartSeries{}, false
}

// The panels' JSON on the admin API: SigV4 with the root keys, like the
// rest of it; unsigned or another user's requests refused.
func TestConsoleChartsAdminJSON(t *testing.T) {
	ce := newChartsEnv(t)
	ce.tick(0)
	ce.load(4, 5) // 4 PUTs and 20 GETs in the next 10 s
	ce.tick(10 * time.Second)

	const path = "/_fedgate/admin/console/panels/requests"
	resp, body := ce.get(http.DefaultClient, path)
	var ae adminapi.Error
	if resp.StatusCode != http.StatusForbidden || json.Unmarshal([]byte(body), &ae) != nil || ae.Code != "AccessDenied" {
		t.Errorf("unsigned: %d %s, want 403 AccessDenied", resp.StatusCode, body)
	}
	if r, b := ce.s3.signed(http.MethodGet, path, nil, nil, "ALICEKEY", "alice-secret"); r.StatusCode != http.StatusForbidden {
		t.Errorf("signed by alice: %d %s, want 403", r.StatusCode, b)
	}
	if r, b := ce.s3.signed(http.MethodGet, path, nil, nil, gatewaytest.RootAccessKey, "not-the-secret"); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(string(b), "SignatureDoesNotMatch") {
		t.Errorf("a wrong secret: %d %s, want 403 SignatureDoesNotMatch", r.StatusCode, b)
	}

	r, b := ce.s3.rootSigned(http.MethodGet, path, nil, nil)
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("root: %d %s", r.StatusCode, b)
	}
	p := decodePanel(t, string(b))
	if p.Panel != "requests" || p.Window != "hour" || p.Unit != "requests/s" || p.StepSeconds != 10 || p.Node != ce.node || p.Scope != "node" ||
		!p.To.Equal(ce.clock()) || !p.From.Equal(ce.clock().Add(-time.Hour)) {
		t.Errorf("panel head: %+v", p)
	}
	for op, want := range map[string]float64{"GetObject": 2, "PutObject": 0.4} {
		s, ok := series(p, op)
		if !ok || len(s.Points) != 1 || s.Points[0].V == nil || *s.Points[0].V != want || s.Current == nil || *s.Current != want {
			t.Errorf("%s: %+v, want one point of %v req/s", op, s, want)
		}
	}
	if _, ok := series(p, "Admin"); ok {
		t.Error("the admin API's own requests are charted")
	}

	// Latency: p50 and p99 of those requests.
	_, b = ce.s3.rootSigned(http.MethodGet, "/_fedgate/admin/console/panels/latency?window=hour", nil, nil)
	lat := decodePanel(t, string(b))
	for _, name := range []string{"p50", "p99"} {
		if s, ok := series(lat, name); !ok || len(s.Points) != 1 || s.Points[0].V == nil || *s.Points[0].V <= 0 || *s.Points[0].V > 60 {
			t.Errorf("latency %s: %+v", name, s)
		}
	}

	// Every panel at once, over a day (no day point yet: a day point
	// takes 30 readings).
	r, b = ce.s3.rootSigned(http.MethodGet, "/_fedgate/admin/console/panels?window=day", nil, nil)
	var list console.ChartPanelList
	if err := json.Unmarshal(b, &list); err != nil || r.StatusCode != 200 || list.Window != "day" || list.IntervalSeconds != 10 || len(list.Panels) != len(console.ChartPanels) {
		t.Fatalf("all panels: %d %v %s", r.StatusCode, err, b)
	}
	for i, p := range list.Panels {
		if p.Panel != console.ChartPanels[i] || p.StepSeconds != 300 || p.Title == "" || p.Unit == "" || p.Series == nil {
			t.Errorf("panel %d: %+v", i, p)
		}
	}
	if !strings.Contains(string(b), `"series": []`) || !strings.Contains(string(b), `"current": null`) {
		t.Errorf("empty series and values are not [] and null:\n%s", b)
	}

	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/_fedgate/admin/console/panels/requests?window=week", 400, "InvalidArgument"},
		{"/_fedgate/admin/console/panels?window=", 200, ""},
		{"/_fedgate/admin/console/panels/cpu", 404, "NoSuchPanel"},
		{"/_fedgate/admin/console/panels/requests.json", 404, "NoSuchPanel"},
	} {
		r, b := ce.s3.rootSigned(http.MethodGet, c.path, nil, nil)
		if r.StatusCode != c.status || c.code != "" && !strings.Contains(string(b), `"code": "`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.path, r.StatusCode, b, c.status, c.code)
		}
	}
}

// The same JSON under the console with its session cookie: no session is
// 401 (a JSON answer, not the sign-in redirect), a non-root session 403.
func TestConsoleChartsSessionJSON(t *testing.T) {
	ce := newChartsEnv(t)
	ce.tick(0)
	ce.load(2, 3)
	ce.tick(10 * time.Second)
	const path = "/_fedgate/ui/api/panels/requests"
	resp, body := ce.get(ce.browser(), path)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code": "Unauthorized"`) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("no session: %d %s, want 401 JSON", resp.StatusCode, body)
	}
	if resp, body = ce.get(ce.signedIn("ALICEKEY", "alice-secret"), path); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice: %d %s, want 403", resp.StatusCode, body)
	}
	root := ce.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	resp, body = ce.get(root, path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("root's session: %d %s", resp.StatusCode, body)
	}
	p := decodePanel(t, body)
	if s, ok := series(p, "GetObject"); !ok || len(s.Points) != 1 || *s.Points[0].V != 0.6 {
		t.Errorf("GetObject: %+v, want 0.6 req/s", s)
	}
	if resp, body = ce.get(root, "/_fedgate/ui/api/panels"); resp.StatusCode != 200 || !strings.Contains(body, `"panel": "egress-cost"`) {
		t.Errorf("all panels: %d %s", resp.StatusCode, body)
	}
	// Signed out, the cookie is refused.
	ce.post(root, "/_fedgate/ui/logout", nil)
	if resp, _ = ce.get(root, path); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", resp.StatusCode)
	}
}

var (
	svgRE      = regexp.MustCompile(`(?s)<svg .*?</svg>`)
	seriesPath = regexp.MustCompile(`<path class="series" data-series="([^"]*)" data-points="(\d+)"`)
)

// The charts page: root's, server-rendered SVG under the console's CSP,
// one chart per panel, the requests chart with a line per operation.
func TestConsoleChartsPage(t *testing.T) {
	ce := newChartsEnv(t)
	wantRedirectToLogin(t, func() *http.Response { r, _ := ce.get(ce.browser(), "/_fedgate/ui/charts"); return r }(), "charts without a session")
	ce.tick(0)
	for range 3 {
		ce.load(2, 2)
		ce.tick(10 * time.Second)
	}
	if resp, body := ce.get(ce.signedIn("ALICEKEY", "alice-secret"), "/_fedgate/ui/charts"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "root user") {
		t.Errorf("alice: %d, want 403 saying the charts are root's\n%s", resp.StatusCode, body)
	}
	root := ce.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	if resp, _ := ce.get(root, "/_fedgate/ui/charts?window=week"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("window=week: %d, want 400", resp.StatusCode)
	}
	resp, page := ce.get(root, "/_fedgate/ui/charts")
	if resp.StatusCode != 200 {
		t.Fatalf("charts: %d\n%s", resp.StatusCode, page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "script") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the page has a script or an external reference")
	}
	svgs := svgRE.FindAllString(page, -1)
	if len(svgs) != len(console.ChartPanels) {
		t.Fatalf("%d charts, want %d", len(svgs), len(console.ChartPanels))
	}
	for i, svg := range svgs {
		if !strings.Contains(svg, `id="chart-`+console.ChartPanels[i]+`"`) {
			t.Errorf("chart %d is not %s", i, console.ChartPanels[i])
		}
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("chart %d is not XML: %v", i, err)
			}
		}
	}
	got := map[string]string{}
	for _, m := range seriesPath.FindAllStringSubmatch(svgs[0], -1) {
		got[m[1]] = m[2]
	}
	if got["GetObject"] != "3" || got["PutObject"] != "3" {
		t.Errorf("requests chart lines %v, want GetObject and PutObject with 3 points each", got)
	}
	for _, want := range []string{"req/s", "node <b id=\"node\">n7</b>", "last hour", `href="/_fedgate/ui/charts?window=day"`, "GetObject <tspan"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The overview links to the charts (for root).
	if ov := ce.overview(root); !strings.Contains(ov, `id="nav-charts"`) {
		t.Error("the overview has no link to the charts")
	}
	if resp, page = ce.get(root, "/_fedgate/ui/charts?window=day"); resp.StatusCode != 200 || strings.Count(page, "no data yet") != len(console.ChartPanels) {
		t.Errorf("the day window before its first point: %d, %d empty charts", resp.StatusCode, strings.Count(page, "no data yet"))
	}
}

// Capacities are in IEC units, as the CLI writes them.
func TestConsoleIECUnits(t *testing.T) {
	e := newConsoleEnv(t)
	e.cluster.st.Members[0].CacheUsed = 3 << 30
	e.cluster.st.Members[0].CacheCapacity = 2164663517 * 100 // 201.6 GiB
	page := e.overview(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	members := section(t, page, "members")
	if !strings.Contains(members, "3.00 GiB / 201.60 GiB") {
		t.Errorf("members' cache in IEC units: want 3.00 GiB / 201.60 GiB\n%s", members)
	}
	if strings.Contains(members, " GB") || strings.Contains(members, " kB") {
		t.Errorf("decimal units in the members table:\n%s", members)
	}
}

// RunCharts samples on its own, on the real clock, while pages and JSON
// are served (run with -race): the requests made show up in the JSON.
func TestConsoleChartsSamplerRuns(t *testing.T) {
	f := gatewaytest.New()
	f.AddBucket("data", backend.RootUser)
	srv, err := gateway.New(gateway.Config{Backend: f, ChartInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); srv.RunCharts(ctx) }()
	e := &env{t: t, fake: f, url: hs.URL}
	c := e.client(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("k")}); err != nil {
			t.Fatal(err)
		}
		resp, b := e.rootSigned(http.MethodGet, "/_fedgate/admin/console/panels/requests", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		p := decodePanel(t, string(b))
		s, ok := series(p, "HeadObject")
		if ok && len(s.Points) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the sampler charted no HeadObject: %s", b)
		}
	}
	cancel()
	<-done
}
