package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
)

// The read-only web console at /_fedgate/ui (docs/console.md): one
// server-rendered page with the region's members, the buckets with their
// placement and cache use, preload jobs, degraded data and this month's
// egress. No script, no external asset: it works offline and under a
// Content-Security-Policy that allows nothing but its own inline style.
//
// Users sign in with their S3 keys. The session cookie holds only a random
// session id; the session itself (the access key, a digest of its secret
// at sign-in, the expiry) is kept in this process's memory. So a session
// ends when it is signed out (its entry is removed: the old cookie is
// refused from then on), when its user is removed or its secret changes
// (checked at every request), when it expires, and with the process; a
// node does not accept another node's. Root sees everything; any other
// user sees the region's health and only the buckets it may read, and a
// user who may read no bucket is refused.

const (
	// ConsolePath is where the console lives on the S3 port.
	ConsolePath = adminapi.ReservedPrefix + "ui"

	consoleCookie  = "fedgate_console"
	consoleSession = 12 * time.Hour
	// consoleMaxSessions bounds the sessions a node keeps, and
	// consoleMaxUserSessions those of one access key: a sign-in past
	// either ends the oldest session (of that key first).
	consoleMaxSessions     = 10000
	consoleMaxUserSessions = 32
	// consoleRefresh is the page's auto-refresh, in seconds.
	consoleRefresh = 10
	// consolePartTimeout bounds each section's backend call, so one slow
	// part (a member that does not answer) cannot hold the page.
	consolePartTimeout = 5 * time.Second
	// consoleMaxObjects is how many objects read degraded the page lists.
	consoleMaxObjects = 50
)

//go:embed *.html *.css
var consoleFiles embed.FS

// Config is what the console reads: the backend (users, buckets), its
// admin side, the region's members and policy, and the node's metrics.
type Config struct {
	// Backend is required: sign-in checks its users' keys, the page lists
	// the buckets a user may read.
	Backend backend.Backend
	// Admin (may be nil) answers the region's location, degraded data,
	// pins, preloads and the egress ledger.
	Admin backend.Admin
	// Cluster (may be nil) describes the region's members.
	Cluster ClusterStatus
	// Policy (may be nil) returns the region's active policy file.
	Policy ActivePolicy
	// Registry is sampled for the charts every ChartInterval (0:
	// DefaultChartInterval; RunCharts runs the sampler).
	Registry      prometheus.Gatherer
	ChartInterval time.Duration
	// RegionName, Version and NodeID are shown on the pages.
	RegionName, Version, NodeID string
	Now                         func() time.Time
	Logger                      *slog.Logger
	// Explain, when not nil, is what the server says of a backend error
	// (a region error's S3 message), "" to use the error's own text.
	Explain func(err error) string
	// SetUser, when not nil, tells the server's access log who a console
	// request was from once its session is known.
	SetUser func(ctx context.Context, name string)
}

// ClusterStatus describes every member of the region (gateway.Cluster).
type ClusterStatus interface {
	ClusterStatus(ctx context.Context) (adminapi.Cluster, error)
}

// ActivePolicy returns the region's active policy file
// (gateway.PolicyAdmin).
type ActivePolicy interface {
	ActivePolicy(ctx context.Context) (adminapi.Policy, error)
}

// Console serves the console's pages and the charts' JSON.
type Console struct {
	cfg  Config
	tmpl *template.Template
	css  template.CSS

	sessMu   sync.Mutex
	sessions map[[32]byte]*consoleSess // by the SHA-256 of the cookie's id
	sessSeq  uint64

	mu        sync.Mutex
	polV      uint64 // the version pol was parsed from
	pol       *policies.Policy
	polParsed bool

	charts *chartSampler
}

// New builds a console from cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Backend == nil {
		return nil, errors.New("console: Config.Backend is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SetUser == nil {
		cfg.SetUser = func(context.Context, string) {}
	}
	css, err := consoleFiles.ReadFile("console.css")
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("console").Funcs(template.FuncMap{
		"bytes": func(n int64) string { return iecBytes(float64(n)) },
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"ms": func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) },
		"pct": func(done, total int64) string {
			if total <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*float64(done)/float64(total))
		},
		"join": strings.Join,
	}).ParseFS(consoleFiles, "*.html")
	if err != nil {
		return nil, err
	}
	return &Console{cfg: cfg, tmpl: tmpl, css: template.CSS(css), sessions: map[[32]byte]*consoleSess{},
		charts: newChartSampler(cfg.Registry, cfg.ChartInterval)}, nil
}

// RunCharts samples the node's metrics for the charts every
// Config.ChartInterval until ctx ends.
func (c *Console) RunCharts(ctx context.Context) { c.charts.run(ctx, c.cfg.Now) }

// SampleCharts takes one reading for the charts at now, as RunCharts does
// every interval (tests drive it with their clock instead of waiting).
func (c *Console) SampleCharts(now time.Time) { c.charts.sample(now) }

// Routes mounts the console's pages on r (at ConsolePath).
func (c *Console) Routes(r chi.Router) {
	r.Use(c.headers)
	r.Get("/", c.overview)
	r.Get("/charts", c.chartsPage)
	r.Get("/api/panels", c.apiPanels)
	r.Get("/api/panels/{panel}", c.apiPanel)
	r.Get("/login", c.loginForm)
	r.Post("/login", c.login)
	r.Post("/logout", c.logout)
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		if _, ok := c.session(req); !ok {
			c.toLogin(w, req)
			return
		}
		c.render(w, http.StatusNotFound, "message", messagePage{Title: "Not found", Message: "The console has no page " + req.URL.Path + "."})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		c.render(w, http.StatusMethodNotAllowed, "message", messagePage{Title: "Not allowed", Message: "The console is read-only."})
	})
}

// headers marks console requests for the access log and sets the headers
// every console answer carries.
func (c *Console) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer a browser posts
		// forms with "Origin: null", which sameOrigin refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type messagePage struct {
	Title   string
	Message string
	User    string // signed in as (shows the sign-out button)
}

type loginPage struct {
	Title     string
	Error     string
	AccessKey string
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, struct {
		CSS  template.CSS
		Page any
	}{c.css, data}); err != nil {
		c.cfg.Logger.Error("console: rendering failed", "template", name, "error", err)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("the console could not render this page; see the server log\n"))
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, ConsolePath+"/login", http.StatusSeeOther)
}

// --- sessions ---

// consoleSess is one signed-in session.
type consoleSess struct {
	accessKey string
	secret    [32]byte // SHA-256 of the key's secret at sign-in
	seq       uint64   // the order of sign-ins: the lowest is the oldest
	expiry    time.Time
}

// consoleCookiePrefix marks the cookie's format: "v2." and the session id,
// 32 random bytes in unpadded base64url.
const consoleCookiePrefix = "v2."

// sessionID reads the session id of r's cookie: the table's key.
func sessionID(r *http.Request) ([32]byte, bool) {
	ck, err := r.Cookie(consoleCookie)
	if err != nil {
		return [32]byte{}, false
	}
	v, ok := strings.CutPrefix(ck.Value, consoleCookiePrefix)
	if !ok {
		return [32]byte{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) != 32 {
		return [32]byte{}, false
	}
	return sha256.Sum256(raw), true
}

// newSession starts a session for accessKey and returns its cookie value.
// Past consoleMaxUserSessions for the key or consoleMaxSessions in all,
// the oldest session (the key's own first) ends.
func (c *Console) newSession(accessKey, secret string, now, expiry time.Time) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	id := sha256.Sum256(raw)
	sess := &consoleSess{accessKey: accessKey, secret: sha256.Sum256([]byte(secret)), expiry: expiry}
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	c.sessSeq++
	sess.seq = c.sessSeq
	mine := 0
	for k, o := range c.sessions {
		if !now.Before(o.expiry) {
			delete(c.sessions, k)
		} else if o.accessKey == accessKey {
			mine++
		}
	}
	for mine >= consoleMaxUserSessions {
		c.evictOldest(func(o *consoleSess) bool { return o.accessKey == accessKey })
		mine--
	}
	for len(c.sessions) >= consoleMaxSessions {
		c.evictOldest(func(*consoleSess) bool { return true })
	}
	c.sessions[id] = sess
	return consoleCookiePrefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// evictOldest ends the oldest session that match accepts; c.sessMu is held.
func (c *Console) evictOldest(match func(*consoleSess) bool) {
	var oldest [32]byte
	var at uint64
	found := false
	for k, o := range c.sessions {
		if match(o) && (!found || o.seq < at) {
			oldest, at, found = k, o.seq, true
		}
	}
	if found {
		delete(c.sessions, oldest)
	}
}

// endSession removes r's session, if it has one.
func (c *Console) endSession(r *http.Request) {
	id, ok := sessionID(r)
	if !ok {
		return
	}
	c.sessMu.Lock()
	delete(c.sessions, id)
	c.sessMu.Unlock()
}

// session returns the signed-in user, if the request carries the cookie of
// a session this node keeps, not expired, whose user still exists with the
// secret it signed in with. A session found otherwise is removed.
func (c *Console) session(r *http.Request) (backend.User, bool) {
	id, ok := sessionID(r)
	if !ok {
		return backend.User{}, false
	}
	c.sessMu.Lock()
	sess, ok := c.sessions[id]
	c.sessMu.Unlock()
	if !ok {
		return backend.User{}, false
	}
	end := func() (backend.User, bool) {
		c.sessMu.Lock()
		delete(c.sessions, id)
		c.sessMu.Unlock()
		return backend.User{}, false
	}
	if !c.cfg.Now().Before(sess.expiry) {
		return end()
	}
	users := c.cfg.Backend.Users()
	secret, ok := users.SecretFor(sess.accessKey)
	if !ok {
		return end()
	}
	if sum := sha256.Sum256([]byte(secret)); subtle.ConstantTimeCompare(sum[:], sess.secret[:]) != 1 {
		return end()
	}
	u, ok := users.ByAccessKey(sess.accessKey)
	if !ok {
		return end()
	}
	return u, true
}

// sameOrigin refuses a form posted from another site (login CSRF): a
// browser sends Origin with every POST; tools that send none pass.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(r); ok {
		http.Redirect(w, r, ConsolePath+"/", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "login", loginPage{Title: "Sign in"})
}

// errSignIn is the one answer to a wrong access key or a wrong secret, so
// the form does not tell which keys exist.
const errSignIn = "Sign-in failed: the access key or the secret key is wrong."

// dummySecret is compared against when the access key is unknown, so an
// unknown key costs the same as a wrong secret.
const dummySecret = "fedgate-console-no-such-access-key-0000"

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.render(w, http.StatusForbidden, "message", messagePage{Title: "Refused", Message: "The sign-in form was posted from another site."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		c.render(w, http.StatusBadRequest, "login", loginPage{Title: "Sign in", Error: "The sign-in form could not be read."})
		return
	}
	ak, sk := strings.TrimSpace(r.PostForm.Get("access_key")), r.PostForm.Get("secret_key")
	users := c.cfg.Backend.Users()
	secret, known := users.SecretFor(ak)
	want := secret
	if !known {
		want = dummySecret
	}
	// Compare digests: equal lengths, so the time says nothing of either.
	a, b := sha256.Sum256([]byte(sk)), sha256.Sum256([]byte(want))
	match := subtle.ConstantTimeCompare(a[:], b[:]) == 1 && known && ak != ""
	u, found := users.ByAccessKey(ak)
	remote := remoteHost(r.RemoteAddr)
	if !match || !found {
		c.cfg.Logger.Warn("console sign-in refused", "remote", remote)
		c.render(w, http.StatusUnauthorized, "login", loginPage{Title: "Sign in", Error: errSignIn, AccessKey: ak})
		return
	}
	c.cfg.SetUser(r.Context(), u.Name)
	if !u.Root && len(c.cfg.Backend.ListBuckets(u)) == 0 {
		c.cfg.Logger.Warn("console sign-in refused: the user may read no bucket", "user", u.Name, "remote", remote)
		c.render(w, http.StatusForbidden, "message", noGrantPage(u))
		return
	}
	now := c.cfg.Now()
	expiry := now.Add(consoleSession)
	value, err := c.newSession(ak, secret, now, expiry)
	if err != nil {
		c.cfg.Logger.Error("console: no session id", "error", err)
		c.render(w, http.StatusInternalServerError, "message", messagePage{Title: "Error", Message: "The session could not be started; see the server log."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     consoleCookie,
		Value:    value,
		Path:     ConsolePath,
		Expires:  expiry,
		MaxAge:   int(consoleSession / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	c.cfg.Logger.Info("console sign-in", "user", u.Name, "remote", remote)
	http.Redirect(w, r, ConsolePath+"/", http.StatusSeeOther)
}

func noGrantPage(u backend.User) messagePage {
	return messagePage{Title: "No access",
		Message: fmt.Sprintf("User %s may read no bucket, so the console has nothing to show it. "+
			"Ask the region's administrator for a grant (fedgate user grant %s BUCKET read), or sign in as root.", u.Name, u.Name)}
}

// logout ends the session on the server, so its cookie is refused from
// now on (a copy kept elsewhere included), and clears the browser's.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if u, ok := c.session(r); ok {
		c.cfg.Logger.Info("console sign-out", "user", u.Name, "remote", remoteHost(r.RemoteAddr))
	}
	c.endSession(r)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: ConsolePath, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.toLogin(w, r)
}

// --- the overview page ---

type overviewPage struct {
	Title    string
	User     string
	Root     bool
	Region   string
	Location string
	Version  string
	Now      time.Time
	Refresh  int

	Members  membersView
	Buckets  bucketsView
	Jobs     jobsView
	Degraded degradedView
	Egress   egressView
}

type membersView struct {
	Err     string
	Leader  string
	Backlog adminapi.Backlog
	Members []adminapi.Member
	Healthy int
}

type bucketsView struct {
	Err       string
	PolicyErr string
	Rows      []bucketRow
	CacheNote string
}

type bucketRow struct {
	Name      string
	Owner     string
	Placement string
	Write     string
	CacheUsed int64
	Cached    bool // CacheUsed is known
	Quota     int64
	Pins      []string
	Degraded  int64 // degraded reads of it on this node
	// DegradedObjects counts its objects that members of the region
	// read degraded lately.
	DegradedObjects int
}

type jobsView struct {
	Err  string
	Jobs []backend.PreloadStatus
}

type degradedView struct {
	Err       string
	Stores    []backend.StoreHealth
	Unhealthy int
	Buckets   []backend.DegradedBucket
	// Objects are the objects read degraded lately by any member (from
	// the cluster status; this node's own when that is not available).
	Objects []degradedObject
	More    int // objects not listed
}

type degradedObject struct {
	backend.DegradedObject
	Node string // the member that read it
}

type egressView struct {
	Err         string
	Since       time.Time
	Until       time.Time
	Report      egress.Report
	Budgets     []egress.Status
	Partial     bool // a non-root view: only the user's buckets
	HitRatioPct string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	u, ok := c.session(r)
	if !ok {
		c.toLogin(w, r)
		return
	}
	c.cfg.SetUser(r.Context(), u.Name)
	visible := c.cfg.Backend.ListBuckets(u)
	if !u.Root && len(visible) == 0 {
		p := noGrantPage(u)
		p.User = u.Name
		c.render(w, http.StatusForbidden, "message", p)
		return
	}
	allowed := map[string]bool{}
	for _, b := range visible {
		allowed[b.Name()] = true
	}
	see := func(bucket string) bool { return u.Root || allowed[bucket] }

	now := c.cfg.Now().UTC()
	p := overviewPage{Title: "Overview", User: u.Name, Root: u.Root, Region: c.cfg.RegionName, Version: c.cfg.Version,
		Now: now, Refresh: consoleRefresh}
	if c.cfg.Admin != nil {
		p.Location = c.cfg.Admin.RegionLocation()
	}

	// The parts that may wait on the network run at once, each bounded.
	var (
		wg   sync.WaitGroup
		deg  backend.Degraded
		derr error
	)
	part := func(f func(ctx context.Context)) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), consolePartTimeout)
			defer cancel()
			f(ctx)
		})
	}
	part(func(ctx context.Context) { p.Members = c.members(ctx) })
	part(func(ctx context.Context) {
		if c.cfg.Admin == nil {
			derr = errNoAdmin
			return
		}
		deg, derr = c.cfg.Admin.Degraded(ctx)
	})
	part(func(ctx context.Context) { p.Egress = c.egress(ctx, now, u.Root, see) })
	var pol *policies.Policy
	var polErr error
	part(func(ctx context.Context) { pol, polErr = c.policy(ctx) })
	wg.Wait()

	p.Degraded = c.degradedSection(deg, derr, p.Members, u.Root, see)
	p.Buckets = c.buckets(visible, pol, polErr, deg, p.Degraded.Objects)
	p.Jobs = c.jobs(see)
	c.render(w, http.StatusOK, "overview", p)
}

var errNoAdmin = errors.New("this server has no admin backend")

// partError is how a section says what went wrong, in one line.
func (c *Console) partError(err error) string {
	if c.cfg.Explain != nil {
		if m := c.cfg.Explain(err); m != "" {
			return m
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", consolePartTimeout)
	}
	return err.Error()
}

func (c *Console) members(ctx context.Context) membersView {
	if c.cfg.Cluster == nil {
		return membersView{Err: "this server has no cluster support"}
	}
	st, err := c.cfg.Cluster.ClusterStatus(ctx)
	if err != nil {
		c.cfg.Logger.Warn("console: cluster status failed", "error", err)
		return membersView{Err: "cluster status: " + c.partError(err)}
	}
	v := membersView{Leader: st.Leader, Backlog: st.DrainBacklog, Members: st.Members}
	for _, m := range st.Members {
		if m.Healthy {
			v.Healthy++
		}
	}
	return v
}

// policy returns the region's active policy, parsed (nil on embedded
// defaults). The parse is kept until the version changes.
func (c *Console) policy(ctx context.Context) (*policies.Policy, error) {
	if c.cfg.Policy == nil {
		return nil, nil
	}
	a, err := c.cfg.Policy.ActivePolicy(ctx)
	if err != nil {
		return nil, err
	}
	if a.Version == 0 || a.YAML == "" {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.polParsed && c.polV == a.Version {
		return c.pol, nil
	}
	pol, err := policies.Parse(fmt.Sprintf("policy version %d", a.Version), []byte(a.YAML), policies.AllFeatures())
	if err != nil {
		return nil, err
	}
	c.pol, c.polV, c.polParsed = pol, a.Version, true
	return pol, nil
}

// describePlacement says where a bucket's objects go, by the policy.
func describePlacement(pol *policies.Policy, bucket string) (placement, write string) {
	if pol == nil {
		return "the node's embedded store", string(policies.WriteThrough)
	}
	rules := pol.Match(bucket, "")
	pl, wm := rules.Placement, rules.Write
	prefix := ""
	if !rules.Declared {
		if g, ok := pol.MatchGlob(bucket); ok {
			if g.Placement.Kind != policies.PlacementDefault {
				pl = g.Placement
			}
			wm = g.Write
			prefix = "by " + g.Name + ": "
		}
	}
	if wm == "" {
		wm = policies.WriteThrough
	}
	var where string
	switch pl.Kind {
	case policies.PlacementSingle:
		where = "single: " + strings.Join(pl.Stores, ", ")
	case policies.PlacementReplicate:
		where = "replicate: " + strings.Join(pl.Stores, ", ")
	case policies.PlacementErasure:
		where = fmt.Sprintf("erasure %d+%d: %s", pl.Data, pl.Parity, strings.Join(pl.Stores, ", "))
	default:
		where = "the node's embedded store"
	}
	if rules.Origin != nil {
		where += " (origin " + rules.Origin.Store
		if rules.Origin.Prefix != "" {
			where += "/" + rules.Origin.Prefix
		}
		where += ")"
	}
	return prefix + where, string(wm)
}

func (c *Console) buckets(visible []backend.Bucket, pol *policies.Policy, polErr error, deg backend.Degraded, objects []degradedObject) bucketsView {
	var v bucketsView
	if polErr != nil {
		v.PolicyErr = "active policy: " + c.partError(polErr)
		pol = nil
	}
	used, quota, known := c.cacheUse()
	if known {
		v.CacheNote = "Cache use is this node's share of the region cache (each chunk has one owner node)."
	} else {
		v.CacheNote = "This node reports no cache use."
	}
	pins := map[string][]string{}
	if c.cfg.Admin != nil {
		for _, pn := range c.cfg.Admin.Pins() {
			pre := pn.Prefix
			if pre == "" {
				pre = "(all)"
			}
			pins[pn.Bucket] = append(pins[pn.Bucket], pre)
		}
	}
	degraded := map[string]int64{}
	for _, d := range deg.Buckets {
		degraded[d.Bucket] += d.Reads
	}
	degradedObjects := map[string]int{}
	for _, o := range objects {
		degradedObjects[o.Bucket]++
	}
	for _, b := range visible {
		row := bucketRow{Name: b.Name(), Owner: b.Owner(), Pins: pins[b.Name()], Degraded: degraded[b.Name()],
			DegradedObjects: degradedObjects[b.Name()]}
		row.Placement, row.Write = describePlacement(pol, b.Name())
		if pol == nil && v.PolicyErr != "" {
			row.Placement, row.Write = "unknown", "unknown"
		}
		row.CacheUsed, row.Cached = used[b.Name()]
		row.Quota = quota[b.Name()]
		v.Rows = append(v.Rows, row)
	}
	return v
}

// cacheUse reads this node's cache use per bucket from its metrics
// registry (cachetier's fedgate_cache_group_used_bytes: a group is a
// bucket), the one place the node publishes it.
func (c *Console) cacheUse() (used, quota map[string]int64, known bool) {
	used, quota = map[string]int64{}, map[string]int64{}
	mfs, err := c.cfg.Registry.Gather()
	if err != nil && len(mfs) == 0 {
		return used, quota, false
	}
	for _, mf := range mfs {
		var into map[string]int64
		switch mf.GetName() {
		case "fedgate_cache_group_used_bytes":
			into = used
		case "fedgate_cache_group_quota_bytes":
			into = quota
		case "fedgate_cache_used_bytes":
			known = true
			continue
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					into[l.GetValue()] = int64(m.GetGauge().GetValue())
				}
			}
		}
	}
	return used, quota, known
}

func (c *Console) jobs(see func(string) bool) jobsView {
	if c.cfg.Admin == nil {
		return jobsView{Err: errNoAdmin.Error()}
	}
	var v jobsView
	for _, j := range c.cfg.Admin.Jobs() {
		if see(j.Bucket) {
			v.Jobs = append(v.Jobs, j)
		}
	}
	// Running first, then newest first.
	slices.SortStableFunc(v.Jobs, func(a, b backend.PreloadStatus) int {
		ra, rb := a.State() == "running", b.State() == "running"
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return b.Created.Compare(a.Created)
	})
	return v
}

func (c *Console) degradedSection(d backend.Degraded, err error, members membersView, root bool, see func(string) bool) degradedView {
	var v degradedView
	if err != nil {
		v.Err = "degraded data: " + c.partError(err)
	}
	for _, h := range d.Stores {
		if !h.Healthy {
			v.Unhealthy++
			if !root {
				h.Error = "" // may name paths and hosts; root sees it
			}
		}
		v.Stores = append(v.Stores, h)
	}
	for _, b := range d.Buckets {
		if see(b.Bucket) {
			v.Buckets = append(v.Buckets, b)
		}
	}
	// A read is counted on the node that fetched from the stores (a
	// cached chunk's owner), so the region's objects come from every
	// member's report.
	// This node's own report is in the status too; it is added only for
	// what the status lacks (no status, or a newer read).
	var objs []degradedObject
	seen := map[[2]string]bool{}
	for _, m := range members.Members {
		for _, o := range m.DegradedObjects {
			objs = append(objs, degradedObject{DegradedObject: backend.DegradedObject{Bucket: o.Bucket, Key: o.Key, Stores: o.Stores, Seen: o.Seen}, Node: m.ID})
			seen[[2]string{o.Bucket, o.Key}] = true
		}
	}
	for _, o := range d.Objects {
		if !seen[[2]string{o.Bucket, o.Key}] {
			objs = append(objs, degradedObject{DegradedObject: o, Node: "this node"})
		}
	}
	slices.SortStableFunc(objs, func(a, b degradedObject) int { return b.Seen.Compare(a.Seen) })
	for _, o := range objs {
		if !see(o.Bucket) {
			continue
		}
		if len(v.Objects) == consoleMaxObjects {
			v.More++
			continue
		}
		v.Objects = append(v.Objects, o)
	}
	return v
}

// egress prices the ledger of the current month like `fedgate egress
// report` does (the month's rows from its start, so tiers count right) and
// groups it by route. A non-root user sees the rows of its buckets only.
func (c *Console) egress(ctx context.Context, now time.Time, root bool, see func(string) bool) egressView {
	since := egress.MonthStart(now)
	v := egressView{Since: since, Until: now, Partial: !root}
	if c.cfg.Admin == nil {
		v.Err = errNoAdmin.Error()
		return v
	}
	rows, err := c.cfg.Admin.EgressLedger(ctx, since, now)
	if err != nil {
		v.Err = "egress ledger: " + c.partError(err)
		return v
	}
	var pol *policies.Policy
	if c.cfg.Admin.HasPolicy() {
		if pol, err = c.policy(ctx); err != nil {
			v.Err = "active policy: " + c.partError(err)
			return v
		}
	}
	var prices []policies.Price
	if pol != nil {
		prices = pol.Egress.Prices
	}
	table, err := egress.NewTable(prices)
	if err != nil {
		v.Err = "egress prices: " + err.Error()
		return v
	}
	priced, err := egress.Price(rows, table, egress.Options{})
	if err != nil {
		v.Err = "pricing the ledger: " + err.Error()
		return v
	}
	if root && pol != nil && len(pol.Egress.Budgets) > 0 {
		if v.Budgets, err = egress.EvaluateBudgets(pol.Egress.Budgets, priced, now); err != nil {
			v.Err = "egress budgets: " + err.Error()
		}
	}
	mine := priced[:0:0]
	for _, p := range priced {
		if see(p.Bucket) {
			mine = append(mine, p)
		}
	}
	v.Report = egress.Build(mine, since, now, egress.ByRegionPair)
	v.HitRatioPct = fmt.Sprintf("%.1f%%", 100*v.Report.Totals.HitRatio)
	return v
}

// writeJSON answers v as indented JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// remoteHost is the host of a request's remote address, for the log.
func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
