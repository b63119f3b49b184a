package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// The console's handler tests: a gateway over the fake backend, with a
// fake cluster and policy, driven by a plain HTTP client with a cookie jar
// that does not follow redirects (so each answer is seen).

type fakeCluster struct {
	st  adminapi.Cluster
	err error
}

func (c *fakeCluster) ClusterStatus(context.Context) (adminapi.Cluster, error) {
	return c.st, c.err
}
func (c *fakeCluster) AddMember(context.Context, string) (adminapi.Member, error) {
	return adminapi.Member{}, nil
}
func (c *fakeCluster) RemoveMember(context.Context, string) error          { return nil }
func (c *fakeCluster) Snapshot(context.Context) (uint64, error)            { return 0, nil }
func (p fakePolicy) ActivePolicy(context.Context) (adminapi.Policy, error) { return p.p, p.err }
func (p fakePolicy) ApplyPolicy(context.Context, adminapi.PolicyApply) (adminapi.Policy, error) {
	return p.p, nil
}

type fakePolicy struct {
	p   adminapi.Policy
	err error
}

const consolePolicy = `regions:
  - {name: lab, location: onprem:lga1}
stores:
  - {name: nas, kind: posix, location: onprem:lga1, path: /srv/nas}
  - {name: a, kind: posix, location: onprem:lga1, path: /srv/a}
  - {name: b, kind: posix, location: onprem:lga1, path: /srv/b}
  - {name: c, kind: posix, location: onprem:lga1, path: /srv/c}
buckets:
  - name: ckpt
    placement:
      erasure: {data: 2, parity: 1, stores: [a, b, c]}
  - name: scratch
    placement: {single: nas}
    write: write-back
defaults: {store: nas}
`

type consoleEnv struct {
	t       *testing.T
	fake    *gatewaytest.Fake
	cluster *fakeCluster
	url     string
	mu      sync.Mutex
	now     time.Time
}

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	e := &consoleEnv{t: t, fake: gatewaytest.New(), now: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	e.fake.AddUser("alice", "ALICEKEY", "alice-secret")
	e.fake.AddUser("bob", "BOBKEY", "bob-secret")
	e.fake.AddBucket("ckpt", backend.RootUser)
	e.fake.AddBucket("scratch", backend.RootUser)
	e.fake.SetPolicy("")
	e.cluster = &fakeCluster{st: adminapi.Cluster{Leader: "n1", Members: []adminapi.Member{
		{ID: "n1", Address: "127.0.0.1:7001", HTTP: "http://127.0.0.1:9001", Voter: true, Healthy: true, State: "Leader"},
		{ID: "n2", Address: "127.0.0.1:7002", HTTP: "http://127.0.0.1:9002", Voter: true, Healthy: true, State: "Follower",
			NodeUsage: adminapi.NodeUsage{DegradedReads: 4, UnhealthyStores: []adminapi.StoreProblem{{Store: "b", Error: "gone"}}}},
		{ID: "n3", Address: "127.0.0.1:7003", HTTP: "http://127.0.0.1:9003", Voter: true, Healthy: false, Problem: "no answer"},
	}}}
	srv, err := gateway.New(gateway.Config{Backend: e.fake, Cluster: e.cluster, RegionName: "lab",
		Policy: fakePolicy{p: adminapi.Policy{Version: 1, YAML: consolePolicy}}, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

func (e *consoleEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *consoleEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// browser is a client with its own cookie jar that reports redirects
// instead of following them.
func (e *consoleEnv) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *consoleEnv) do(c *http.Client, req *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(body)
}

func (e *consoleEnv) get(c *http.Client, path string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(c, req)
}

func (e *consoleEnv) post(c *http.Client, path string, form url.Values) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(c, req)
}

func (e *consoleEnv) login(c *http.Client, ak, sk string) (*http.Response, string) {
	e.t.Helper()
	return e.post(c, "/_fedgate/ui/login", url.Values{"access_key": {ak}, "secret_key": {sk}})
}

// signedIn is a browser signed in with ak/sk; it fails the test otherwise.
func (e *consoleEnv) signedIn(ak, sk string) *http.Client {
	e.t.Helper()
	c := e.browser()
	resp, body := e.login(c, ak, sk)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/_fedgate/ui/" {
		e.t.Fatalf("sign-in as %s: %d %q, want 303 to /_fedgate/ui/\n%s", ak, resp.StatusCode, resp.Header.Get("Location"), body)
	}
	return c
}

// overview fetches the overview page, which must answer 200.
func (e *consoleEnv) overview(c *http.Client) string {
	e.t.Helper()
	resp, body := e.get(c, "/_fedgate/ui/")
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("overview: %d, want 200\n%s", resp.StatusCode, body)
	}
	return body
}

func wantRedirectToLogin(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/_fedgate/ui/login" {
		t.Fatalf("%s: %d to %q, want 303 to /_fedgate/ui/login", what, resp.StatusCode, resp.Header.Get("Location"))
	}
}

// section returns the HTML of the page's section with the given id.
func section(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<section id="`+id+`"`)
	if start < 0 {
		t.Fatalf("no section %q in the page:\n%s", id, page)
	}
	end := strings.Index(page[start:], "</section>")
	return page[start : start+end]
}

func TestConsoleRedirectsToLogin(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.browser()
	for _, p := range []string{"/_fedgate/ui", "/_fedgate/ui/", "/_fedgate/ui/buckets"} {
		resp, _ := e.get(c, p)
		wantRedirectToLogin(t, resp, "GET "+p)
	}
	// A forged or tampered cookie is no session.
	u, _ := url.Parse(e.url + "/_fedgate/ui/")
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "fedgate_console", Value: "v1.Uk9PVEFDQ0VTU0tFWQ.99999999999.00", Path: "/_fedgate/ui"}})
	resp, _ := e.get(c, "/_fedgate/ui/")
	wantRedirectToLogin(t, resp, "GET with a forged cookie")

	resp, body := e.get(c, "/_fedgate/ui/login")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="secret_key"`) || !strings.Contains(body, `type="password"`) {
		t.Fatalf("login form: %d\n%s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("Content-Security-Policy %q, want default-src 'none'", csp)
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Fatalf("the login page loads something from elsewhere or runs script:\n%s", body)
	}
}

func TestConsoleLogin(t *testing.T) {
	e := newConsoleEnv(t)
	const refused = "Sign-in failed: the access key or the secret key is wrong."
	// A wrong secret and an unknown key get the same answer.
	for _, tc := range []struct{ what, ak, sk string }{
		{"wrong secret", gatewaytest.RootAccessKey, "not-the-secret"},
		{"unknown key", "NOSUCHKEY", gatewaytest.RootSecretKey},
		{"empty", "", ""},
	} {
		c := e.browser()
		resp, body := e.login(c, tc.ak, tc.sk)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, refused) {
			t.Fatalf("%s: %d, want 401 with %q\n%s", tc.what, resp.StatusCode, refused, body)
		}
		if len(resp.Cookies()) != 0 {
			t.Fatalf("%s: a refused sign-in set cookies %v", tc.what, resp.Cookies())
		}
		resp, _ = e.get(c, "/_fedgate/ui/")
		wantRedirectToLogin(t, resp, tc.what+", then GET")
	}

	c := e.browser()
	resp, _ := e.login(c, gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/_fedgate/ui/" {
		t.Fatalf("root sign-in: %d to %q, want 303 to /_fedgate/ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == "fedgate_console" {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/_fedgate/ui" || ck.MaxAge != 12*3600 {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/_fedgate/ui, 12 h", ck)
	}
	if strings.Contains(ck.Value, gatewaytest.RootSecretKey) {
		t.Fatal("the session cookie holds the secret key")
	}
	page := e.overview(c)
	if !strings.Contains(page, `id="user">root (root)`) {
		t.Fatalf("the overview does not say who is signed in:\n%s", page)
	}
	// Signed in, the login form sends the browser to the overview.
	resp, _ = e.get(c, "/_fedgate/ui/login")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/_fedgate/ui/" {
		t.Fatalf("login form while signed in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The session ends after 12 hours.
	e.advance(12*time.Hour + time.Second)
	resp, _ = e.get(c, "/_fedgate/ui/")
	wantRedirectToLogin(t, resp, "GET after 12 hours")
}

func TestConsoleLogout(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	e.overview(c)
	resp, _ := e.post(c, "/_fedgate/ui/logout", nil)
	wantRedirectToLogin(t, resp, "POST logout")
	resp, _ = e.get(c, "/_fedgate/ui/")
	wantRedirectToLogin(t, resp, "GET after logout")
}

func TestConsoleRefusesCrossSiteLogin(t *testing.T) {
	e := newConsoleEnv(t)
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"https://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden}, // a sandboxed frame
		{e.url, http.StatusSeeOther},   // what a browser sends with Referrer-Policy same-origin
	} {
		c := e.browser()
		req, err := http.NewRequest(http.MethodPost, e.url+"/_fedgate/ui/login",
			strings.NewReader(url.Values{"access_key": {gatewaytest.RootAccessKey}, "secret_key": {gatewaytest.RootSecretKey}}.Encode()))
		noErr(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", tc.origin)
		resp, _ := e.do(c, req)
		if resp.StatusCode != tc.want || (tc.want != http.StatusSeeOther) != (len(resp.Cookies()) == 0) {
			t.Fatalf("sign-in with Origin %s: %d, cookies %v; want %d", tc.origin, resp.StatusCode, resp.Cookies(), tc.want)
		}
	}
}

func TestConsoleWhoSeesWhat(t *testing.T) {
	e := newConsoleEnv(t)
	noErr(t, e.fake.Users().Grant(ctx, backend.User{Name: backend.RootUser, Root: true}, "alice", "ckpt", "read"))
	e.fake.SetDegraded(backend.Degraded{
		Stores: []backend.StoreHealth{{Store: "b", Kind: "onprem", Healthy: false, Error: "open /srv/b: no such file or directory"}},
		Buckets: []backend.DegradedBucket{
			{Bucket: "ckpt", Store: "b", Reads: 3},
			{Bucket: "scratch", Store: "nas", Reads: 1},
		},
		Objects: []backend.DegradedObject{
			{Bucket: "ckpt", Key: "model/step-1", Stores: []string{"b"}},
			{Bucket: "scratch", Key: "tmp/secret-plan", Stores: []string{"nas"}},
		},
	})
	_, err := e.fake.StartPreload(ctx, "scratch", "warm/", false)
	noErr(t, err)

	// Root sees every bucket, job and degraded object.
	root := e.overview(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	for _, want := range []string{"ckpt", "scratch", "tmp/secret-plan", "warm/", "open /srv/b"} {
		if !strings.Contains(root, want) {
			t.Errorf("root's page lacks %q", want)
		}
	}

	// alice may read ckpt only: she sees the region's members and store
	// health, ckpt, and nothing of scratch.
	alice := e.overview(e.signedIn("ALICEKEY", "alice-secret"))
	for _, want := range []string{`id="user">alice<`, "n1", "n2", "n3", "ckpt", "model/step-1"} {
		if !strings.Contains(alice, want) {
			t.Errorf("alice's page lacks %q", want)
		}
	}
	for _, hidden := range []string{"scratch", "tmp/secret-plan", "warm/", "/srv/b"} {
		if strings.Contains(alice, hidden) {
			t.Errorf("alice's page shows %q, of a bucket she may not read (or a root-only detail)", hidden)
		}
	}

	// bob may read nothing: a clear refusal, and no session.
	c := e.browser()
	resp, body := e.login(c, "BOBKEY", "bob-secret")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "bob may read no bucket") || len(resp.Cookies()) != 0 {
		t.Fatalf("bob's sign-in: %d, cookies %v, want 403 saying he may read no bucket\n%s", resp.StatusCode, resp.Cookies(), body)
	}
	resp, _ = e.get(c, "/_fedgate/ui/")
	wantRedirectToLogin(t, resp, "bob's GET")

	// A session ends when its user is removed.
	ac := e.signedIn("ALICEKEY", "alice-secret")
	noErr(t, e.fake.Users().Remove(ctx, "alice"))
	resp, _ = e.get(ac, "/_fedgate/ui/")
	wantRedirectToLogin(t, resp, "GET after alice was removed")
}

func TestConsoleShowsRegionBucketsAndDegraded(t *testing.T) {
	e := newConsoleEnv(t)
	e.fake.SetDegraded(backend.Degraded{
		Stores: []backend.StoreHealth{
			{Store: "a", Kind: "onprem", Healthy: true, Latency: 2 * time.Millisecond},
			{Store: "b", Kind: "onprem", Healthy: false, Error: "stat /srv/b: no such file or directory"},
		},
		Buckets: []backend.DegradedBucket{{Bucket: "ckpt", Store: "b", Reads: 7, Last: e.now}},
		Objects: []backend.DegradedObject{{Bucket: "ckpt", Key: "<script>alert(1)</script>&x", Stores: []string{"b"}, Seen: e.now}},
	})
	// n2 read another object degraded: a read is counted where the store
	// was read (a cached chunk's owner), so the page lists every member's.
	e.cluster.st.Members[1].DegradedObjects = []adminapi.DegradedObject{{Bucket: "ckpt", Key: "read/by/n2", Stores: []string{"b"}, Seen: e.now}}
	page := e.overview(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))

	members := section(t, page, "members")
	for _, want := range []string{`id="leader">n1<`, "n2", "n3", "no answer", "2 / 3", "unhealthy", "http://127.0.0.1:9002",
		`badge bad">4 reads<`, `badge bad">store b down<`} {
		if !strings.Contains(members, want) {
			t.Errorf("the members section lacks %q:\n%s", want, members)
		}
	}
	buckets := section(t, page, "buckets")
	for _, want := range []string{"erasure 2&#43;1: a, b, c", "single: nas", "write-back", "badge bad\">degraded", "2 objects read degraded in the region; 7 degraded reads on this node"} {
		if !strings.Contains(buckets, want) {
			t.Errorf("the buckets section lacks %q:\n%s", want, buckets)
		}
	}
	deg := section(t, page, "degraded")
	for _, want := range []string{`badge bad">degraded`, `badge bad">down`, "stat /srv/b: no such file or directory", "ckpt", ">7<",
		"read/by/n2</td><td class=\"mono\">b</td><td>n2</td>", "<td>this node</td>",
		"&lt;script&gt;alert(1)&lt;/script&gt;&amp;x"} {
		if !strings.Contains(deg, want) {
			t.Errorf("the degraded section lacks %q:\n%s", want, deg)
		}
	}
	if strings.Contains(page, "<script") {
		t.Fatalf("a key reached the page unescaped:\n%s", deg)
	}
	if eg := section(t, page, "egress"); !strings.Contains(eg, "No egress recorded this month") || !strings.Contains(eg, "2026-12-01 00:00:00Z") {
		t.Errorf("the egress section:\n%s", eg)
	}
}

// A part that fails renders its error in its section; the page still
// answers 200 with the other parts.
func TestConsolePartsFailInline(t *testing.T) {
	e := newConsoleEnv(t)
	e.cluster.err = backend.ErrNoLeader
	e.fake.Fail(gatewaytest.OpDegraded, context.DeadlineExceeded)
	e.fake.Fail(gatewaytest.OpEgressLedger, backend.ErrNoLeader)
	page := e.overview(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	if m := section(t, page, "members"); !strings.Contains(m, `class="error">cluster status: The region has no Raft leader`) {
		t.Errorf("members section:\n%s", m)
	}
	if d := section(t, page, "degraded"); !strings.Contains(d, `class="error">degraded data: no answer within 5s`) {
		t.Errorf("degraded section:\n%s", d)
	}
	if eg := section(t, page, "egress"); !strings.Contains(eg, `class="error">egress ledger: The region has no Raft leader`) {
		t.Errorf("egress section:\n%s", eg)
	}
	if b := section(t, page, "buckets"); !strings.Contains(b, "ckpt") || !strings.Contains(b, "erasure 2&#43;1") {
		t.Errorf("buckets section:\n%s", b)
	}
}
