// Package gateway is fedgate's S3 protocol layer: routing, SigV4
// authentication, XML, S3 error codes and the handlers. It knows S3 and
// nothing about clouds: every operation goes to a backend.Backend (the
// region's namespace, or a fake in the handler tests).
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/console"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
)

// Config holds what a Server needs. Everything is passed in; nothing is read
// from the environment here.
type Config struct {
	// Backend is the region's namespace (required).
	Backend backend.Backend
	// Admin serves the admin API's cache, egress and repair routes (nil:
	// they answer an error).
	Admin backend.Admin
	// Region is the SigV4 signing region (us-east-1 unless configured).
	Region string
	// Domain enables virtual-hosted-style addressing (bucket.Domain).
	Domain   string
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Now is the clock (tests inject one); time.Now when nil.
	Now func() time.Time
	// Version is reported by the admin API.
	Version string
	// Cluster serves the admin API's /cluster routes (nil: they answer
	// an error).
	Cluster Cluster
	// Regions answers `fedgate region status` (nil: not served).
	Regions Regions
	// Policy serves the admin API's /policy routes (nil: they answer an
	// error).
	Policy PolicyAdmin
	// RegionName is the region's name, for reports.
	RegionName string
	// Batch tunes the batch GET endpoint (POST /_fedgate/v1/batch).
	Batch BatchConfig
	// LocalLease is how long a short-circuit read's descriptors are kept
	// at most (POST /_fedgate/v1/local on the Unix socket); 0:
	// DefaultLocalLease.
	LocalLease time.Duration
	// BodyTimeout is how long a request body may stall before the request
	// fails with RequestTimeout (0: DefaultBodyTimeout; negative: never).
	BodyTimeout time.Duration
	// NodeID names this node on the console's charts.
	NodeID string
	// ChartInterval is how often the console's chart sampler reads
	// Registry (0: console.DefaultChartInterval); RunCharts runs it.
	ChartInterval time.Duration
}

// Server serves the S3 API and the /_fedgate/ operations endpoints.
type Server struct {
	cfg      Config
	be       backend.Backend
	admin    backend.Admin
	verifier *sigv4.Verifier
	log      *slog.Logger
	metrics  *metrics
	ops      http.Handler
	draining atomic.Bool
	reqSeq   atomic.Uint64
	idPrefix string
	console  *console.Console
	policies policyCache
	cors     corsCache
	batch    *batcher
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("gateway: Config.Backend is required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Admin == nil {
		cfg.Admin, _ = cfg.Backend.(backend.Admin)
	}
	cfg.Domain = strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	s := &Server{cfg: cfg, be: cfg.Backend, admin: cfg.Admin, log: cfg.Logger}
	s.verifier = &sigv4.Verifier{
		Region:  cfg.Region,
		Service: "s3",
		Lookup:  cfg.Backend.Users().SecretFor,
		Now:     cfg.Now,
		VirtualHost: func(host string) (string, bool) {
			return VirtualHostBucket(host, cfg.Domain)
		},
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s.idPrefix = strings.ToUpper(hex.EncodeToString(b[:]))
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.batch, err = newBatcher(cfg.Batch, cfg.Registry); err != nil {
		return nil, err
	}
	if s.console, err = console.New(console.Config{Backend: cfg.Backend, Admin: cfg.Admin, Cluster: cfg.Cluster,
		Policy: cfg.Policy, Registry: cfg.Registry, ChartInterval: cfg.ChartInterval, RegionName: cfg.RegionName,
		Version: cfg.Version, NodeID: cfg.NodeID, Now: cfg.Now, Logger: cfg.Logger,
		Explain: explainRegionError, SetUser: setRequestUser}); err != nil {
		return nil, err
	}
	s.ops = s.opsRouter()
	return s, nil
}

// Drain makes readyz fail and new S3 requests get 503, for a clean shutdown
// behind a load balancer. In-flight requests continue.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) opsRouter() http.Handler {
	r := chi.NewRouter()
	r.Get(adminapi.ReservedPrefix+"healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	r.Get(adminapi.ReservedPrefix+"readyz", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if s.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "draining\n")
			return
		}
		if err := s.be.Ready(req.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	r.Handle(adminapi.ReservedPrefix+"metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
	r.Post(BatchPath, s.batchGet)
	r.Post(LocalPath, s.localRead)
	r.Route(adminapi.ReservedPrefix+"admin", s.adminRoutes)
	r.Route(console.ConsolePath, func(r chi.Router) {
		r.Use(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if ri := infoFrom(req.Context()); ri != nil {
					ri.op = "Console"
				}
				next.ServeHTTP(w, req)
			})
		})
		s.console.Routes(r)
	})
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, s3err.Newf(s3err.CodeNoSuchResource, "No such fedgate endpoint: %s", req.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, errMethodNotAllowed)
	})
	return r
}

// requestInfo travels in the request context so the access log and metrics
// see what the handler decided.
type requestInfo struct {
	id      string
	op      string
	bucket  string
	key     string
	user    string
	errCode string
	cause   error
	// body is the request's guarded body (nil when it has none); conn the
	// client connection's entry in the per-address count (nil off TCP or
	// when not counted).
	body *bodyGuard
	conn *trackedConn
}

// setUser records who signed the request; a signed request also takes its
// connection out of the per-address count of unauthenticated ones.
func (ri *requestInfo) setUser(name string) {
	ri.user = name
	if ri.conn != nil {
		ri.conn.authenticated()
	}
}

func (ri *requestInfo) bodyBytes() int64 {
	if ri.body == nil {
		return 0
	}
	return ri.body.n
}

type ctxKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(ctxKey{}).(*requestInfo)
	return ri
}

func (s *Server) newRequestID() string {
	return fmt.Sprintf("%s%08X", s.idPrefix, s.reqSeq.Add(1))
}

// ServeHTTP is the entry point of every request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ri := &requestInfo{id: s.newRequestID(), op: "Unknown"}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
	h := w.Header()
	h.Set("x-amz-request-id", ri.id)
	h.Set("x-amz-id-2", ri.id)
	h.Set("Server", "fedgate")
	if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// An empty body that asks to be invited: net/http sends 100
		// Continue only when a handler reads a body, which an empty one
		// never is. botocore (Debian's 1.29) then leaves its pooled
		// connection in a state where its next request waits a minute
		// for an answer (MinIO: 30 s); inviting the empty body keeps the
		// exchange ordinary.
		w.WriteHeader(http.StatusContinue)
	}
	rec := &recorder{ResponseWriter: w, status: 200}
	ri.conn = connFrom(r.Context())
	if r.Body != nil && r.Body != http.NoBody {
		ri.body = newBodyGuard(w, r, s.cfg.BodyTimeout)
		r.Body = ri.body
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				// A transfer cut short on purpose: record it, then let
				// net/http close the connection.
				s.finish(r, rec, ri, ri.bodyBytes(), time.Since(start))
				panic(p)
			}
			ri.cause = fmt.Errorf("panic: %v", p)
			if !rec.wrote {
				writeError(rec, r, errInternal)
			}
		}
		s.finish(r, rec, ri, ri.bodyBytes(), time.Since(start))
	}()
	if strings.HasPrefix(r.URL.Path, adminapi.ReservedPrefix) && !s.isVirtualHost(r) {
		if r.URL.Path == BatchPath && s.refuseBehind(rec, r, ri) {
			return
		}
		ri.op = "Ops"
		s.ops.ServeHTTP(rec, r)
		return
	}
	if s.refuseBehind(rec, r, ri) {
		return
	}
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	s.serveS3(rec, r, ri)
}

// refuseBehind makes this node apply every write it acknowledged before an
// S3 or batch request is served (Backend.AwaitAcked), so a client reads
// its own writes on the node that took them, and answers its error when
// the node is too far behind (true: answered).
func (s *Server) refuseBehind(w http.ResponseWriter, r *http.Request, ri *requestInfo) bool {
	err := s.be.AwaitAcked(r.Context()) // bounded there; a node far behind answers 503
	if err == nil {
		return false
	}
	ri.cause = err
	writeError(w, r, err)
	return true
}

func (s *Server) finish(r *http.Request, rec *recorder, ri *requestInfo, in int64, d time.Duration) {
	s.metrics.observe(ri.op, rec.status, in, rec.n, d)
	level := slog.LevelInfo
	if (ri.op == "Ops" || ri.op == "Console") && rec.status < 400 {
		level = slog.LevelDebug
	}
	if rec.status >= 500 {
		level = slog.LevelError
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", ri.id),
		slog.String("op", ri.op),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", rec.status),
		slog.Int64("bytes_in", in),
		slog.Int64("bytes_out", rec.n),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("remote", remoteHost(r.RemoteAddr)),
	}
	if ri.bucket != "" {
		attrs = append(attrs, slog.String("bucket", ri.bucket))
	}
	if ri.key != "" {
		attrs = append(attrs, slog.String("key", ri.key))
	}
	if ri.user != "" {
		attrs = append(attrs, slog.String("user", ri.user))
	}
	if ri.errCode != "" {
		attrs = append(attrs, slog.String("error_code", ri.errCode))
	}
	if ri.cause != nil {
		attrs = append(attrs, slog.String("error", ri.cause.Error()))
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// recorder captures status and bytes written and keeps io.ReaderFrom, so
// sendfile still reaches the connection.
type recorder struct {
	http.ResponseWriter
	status int
	n      int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status = code
		r.wrote = true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	r.wrote = true
	n, err := io.Copy(r.ResponseWriter, src)
	r.n += n
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// RunCharts samples the node's metrics for the console's charts every
// Config.ChartInterval until ctx ends. The node runs it with its loops.
func (s *Server) RunCharts(ctx context.Context) { s.console.RunCharts(ctx) }

// chartsRoutes are the admin API's console routes (root, SigV4).
func (s *Server) chartsRoutes(r chi.Router) {
	r.Get("/console/panels", s.console.WritePanels)
	r.Get("/console/panels/{panel}", s.console.WritePanel)
}

// explainRegionError is the S3 message of a region error, for the
// console's sections ("" for another error).
func explainRegionError(err error) string {
	if se := regionError(err); se != nil {
		return se.Message
	}
	return ""
}

// setRequestUser names the user of a console request in its access log.
func setRequestUser(ctx context.Context, name string) {
	if ri := infoFrom(ctx); ri != nil {
		ri.setUser(name)
	}
}
