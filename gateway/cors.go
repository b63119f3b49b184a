package gateway

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
)

// S3's CORS (docs/browser-uploads.md): a bucket's CORSConfiguration,
// the unauthenticated preflight (OPTIONS) it answers, and the
// Access-Control-* headers it adds to the answers of cross-origin
// requests.

// authenticate is SigV4 verification for every operation but the two
// that S3 answers without header authentication: a preflight (browsers
// never sign one) and a POST form (signed in its fields, checked by
// postObject). Both start anonymous.
func (s *Server) authenticate(r *http.Request, op string) (sigv4.Result, error) {
	if op == "PreflightCors" || op == "PostObject" {
		return sigv4.Result{Anonymous: true, Body: r.Body, DecodedLength: r.ContentLength}, nil
	}
	return s.verifier.Verify(r)
}

// CORS configuration limits (S3's).
const (
	maxCORSRules  = 100
	maxCORSBody   = 64 << 10
	maxCORSRuleID = 255
)

// corsConfiguration is S3's CORSConfiguration document.
type corsConfiguration struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	Xmlns   string     `xml:"xmlns,attr,omitempty"`
	Rules   []corsRule `xml:"CORSRule"`
}

type corsRule struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds"`
}

// corsMethods are the methods a rule may allow.
var corsMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodHead}

// parseCORS reads and validates a CORSConfiguration as S3 does: at least
// one and at most 100 rules, each with an AllowedOrigin and an
// AllowedMethod; methods GET, PUT, POST, DELETE or HEAD; at most one `*`
// in an origin or an allowed header. Errors are MalformedXML or
// InvalidRequest.
func parseCORS(data []byte) (*corsConfiguration, error) {
	var c corsConfiguration
	if err := decodeXML(data, &c); err != nil {
		return nil, err
	}
	if len(c.Rules) == 0 {
		return nil, errMalformedXML
	}
	if len(c.Rules) > maxCORSRules {
		return nil, s3err.Newf(s3err.CodeInvalidRequest, "The CORS configuration may have at most %d rules; this one has %d.", maxCORSRules, len(c.Rules))
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		r.ID = strings.TrimSpace(r.ID)
		trimAll(r.AllowedHeaders)
		trimAll(r.AllowedMethods)
		trimAll(r.AllowedOrigins)
		trimAll(r.ExposeHeaders)
		switch {
		case len(r.AllowedMethods) == 0 || len(r.AllowedOrigins) == 0:
			return nil, errMalformedXML
		case r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0:
			return nil, errMalformedXML
		case len(r.ID) > maxCORSRuleID:
			return nil, s3err.Newf(s3err.CodeInvalidRequest, "The ID of a CORS rule must be at most %d characters long.", maxCORSRuleID)
		}
		for _, m := range r.AllowedMethods {
			if !isCORSMethod(m) {
				return nil, s3err.Newf(s3err.CodeInvalidRequest, "Found unsupported HTTP method in CORS config. Unsupported method is %s", m)
			}
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return nil, s3err.Newf(s3err.CodeInvalidRequest, "AllowedOrigin %q can not have more than one wildcard.", o)
			}
		}
		for _, h := range r.AllowedHeaders {
			if strings.Count(h, "*") > 1 {
				return nil, s3err.Newf(s3err.CodeInvalidRequest, "AllowedHeader %q can not have more than one wildcard.", h)
			}
		}
	}
	return &c, nil
}

func trimAll(vs []string) {
	for i, v := range vs {
		vs[i] = strings.TrimSpace(v)
	}
}

func isCORSMethod(m string) bool {
	for _, c := range corsMethods {
		if m == c {
			return true
		}
	}
	return false
}

// encode is the configuration as fedgate stores and returns it.
func (c *corsConfiguration) encode() (string, error) {
	out := *c
	out.Xmlns = s3NS
	b, err := xml.Marshal(out)
	return string(b), err
}

// match returns the first rule that allows a request from origin with
// method and (for a preflight) the request headers, or nil.
func (c *corsConfiguration) match(origin, method string, headers []string) *corsRule {
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.allows(origin, method, headers) {
			return r
		}
	}
	return nil
}

func (r *corsRule) allows(origin, method string, headers []string) bool {
	ok := false
	for _, m := range r.AllowedMethods {
		if m == method {
			ok = true
			break
		}
	}
	if !ok || r.originMatch(origin) == "" {
		return false
	}
next:
	for _, h := range headers {
		for _, a := range r.AllowedHeaders {
			if wildcardMatch(strings.ToLower(a), h) {
				continue next
			}
		}
		return false
	}
	return true
}

// originMatch returns what Access-Control-Allow-Origin says for origin
// under this rule: "*" for a rule open to every origin (S3 answers so),
// origin itself for a rule that names it (exactly or with a wildcard),
// "" when the rule does not allow it.
func (r *corsRule) originMatch(origin string) string {
	for _, o := range r.AllowedOrigins {
		if o == "*" {
			return "*"
		}
	}
	for _, o := range r.AllowedOrigins {
		if wildcardMatch(o, origin) {
			return origin
		}
	}
	return ""
}

// wildcardMatch matches s against a pattern with at most one `*`, which
// stands for any run of characters (also none).
func wildcardMatch(pattern, s string) bool {
	pre, suf, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	return len(s) >= len(pre)+len(suf) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, suf)
}

// setHeaders writes the Access-Control-* answer of rule r to a request
// from origin.
func (r *corsRule) setHeaders(h http.Header, origin string) {
	allow := r.originMatch(origin)
	h.Set("Access-Control-Allow-Origin", allow)
	if allow != "*" {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(r.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		h.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
	h.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// requestHeaders splits Access-Control-Request-Headers into lower-case
// names.
func requestHeaders(v string) []string {
	var out []string
	for h := range strings.SplitSeq(v, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// corsCache holds parsed CORS configurations by their text, so that a
// cross-origin request does not parse its bucket's configuration again.
type corsCache struct {
	mu sync.Mutex
	m  map[string]*corsConfiguration
}

// corsOf returns b's parsed CORS configuration, nil without one.
func (s *Server) corsOf(b backend.Bucket) *corsConfiguration {
	doc, ok := b.Config(backend.ConfCORS)
	if !ok {
		return nil
	}
	c := &s.cors
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg, ok := c.m[doc]; ok {
		return cfg
	}
	cfg, err := parseCORS([]byte(doc))
	if err != nil {
		// Stored configurations were validated when put; one this build
		// cannot read (written by a newer node) allows nothing.
		cfg = &corsConfiguration{}
	}
	if len(c.m) >= 1024 {
		clear(c.m)
	}
	if c.m == nil {
		c.m = map[string]*corsConfiguration{}
	}
	c.m[doc] = cfg
	return cfg
}

// setCORSHeaders adds the Access-Control-* headers of the bucket's
// matching CORS rule to the answer of a cross-origin request (one with an
// Origin header), error answers included. Preflights answer on their own.
func (s *Server) setCORSHeaders(w http.ResponseWriter, r *http.Request, bucket string) {
	origin := r.Header.Get("Origin")
	if origin == "" || bucket == "" || r.Method == http.MethodOptions {
		return
	}
	b, err := s.be.Bucket(bucket)
	if err != nil {
		return
	}
	if cfg := s.corsOf(b); cfg != nil {
		if rule := cfg.match(origin, r.Method, nil); rule != nil {
			rule.setHeaders(w.Header(), origin)
		}
	}
}

// preflightCORS answers a CORS preflight, without authentication: 200
// with the Access-Control-* headers of the first matching rule, 403
// AccessForbidden without one.
func (s *Server) preflightCORS(q *request) error {
	h := q.r.Header
	origin := h.Get("Origin")
	if origin == "" {
		return s3err.New(s3err.CodeBadRequest, "Insufficient information. Origin request header needed.")
	}
	method := h.Get("Access-Control-Request-Method")
	if method == "" {
		return s3err.New(s3err.CodeBadRequest, "Insufficient information. Access-Control-Request-Method request header needed.")
	}
	b, err := s.be.Bucket(q.bucket)
	if errors.Is(err, backend.ErrNoSuchBucket) {
		return s3err.New(s3err.CodeCORSForbidden, "CORSResponse: Bucket not found")
	}
	if err != nil {
		return err
	}
	cfg := s.corsOf(b)
	if cfg == nil {
		return s3err.New(s3err.CodeCORSForbidden, "CORSResponse: CORS is not enabled for this bucket.")
	}
	reqHeaders := requestHeaders(h.Get("Access-Control-Request-Headers"))
	rule := cfg.match(origin, method, reqHeaders)
	if rule == nil {
		return s3err.New(s3err.CodeCORSForbidden, "")
	}
	out := q.w.Header()
	rule.setHeaders(out, origin)
	if len(reqHeaders) > 0 {
		out.Set("Access-Control-Allow-Headers", strings.Join(reqHeaders, ", "))
	}
	out.Set("Content-Length", "0")
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getBucketCORS(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	cfg := s.corsOf(b)
	if cfg == nil {
		return s3err.Newf(s3err.CodeNoSuchCORSConfiguration, "The CORS configuration does not exist: bucket %q has none.", b.Name())
	}
	out := *cfg
	out.Xmlns = s3NS
	writeXML(q.w, http.StatusOK, out)
	return nil
}

func (s *Server) putBucketCORS(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	body, err := q.readDigested(maxCORSBody)
	if err != nil {
		return err
	}
	cfg, err := parseCORS(body)
	if err != nil {
		return err
	}
	doc, err := cfg.encode()
	if err != nil {
		return err
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfCORS, doc); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// readDigested reads a configuration body of at most limit bytes that S3
// requires an integrity check for (PutBucketCors,
// PutBucketLifecycleConfiguration): Content-MD5 or an
// x-amz-checksum-*, verified as it is read.
func (q *request) readDigested(limit int) ([]byte, error) {
	if !hasBodyDigest(q.r.Header) {
		return nil, s3err.New(s3err.CodeInvalidRequest, "Missing required header for this request: Content-MD5 (or an x-amz-checksum-* header).")
	}
	body, err := checksum.NewReader(q.r.Header, q.body, q.trailer)
	if err != nil {
		return nil, err
	}
	return readBounded(body, limit)
}
