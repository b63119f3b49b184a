package gateway

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// request is one authenticated S3 request as the handlers see it.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	query  url.Values // the request's query, parsed once
	bucket string
	key    string
	user   backend.User
	// body is the request payload after SigV4 decoding (aws-chunked removed,
	// signatures and payload hash verified as it is read).
	body io.Reader
	// size is the decoded payload length, -1 if unknown.
	size    int64
	trailer func() http.Header
	// anonymous: the request carries no signature; user is empty.
	anonymous bool
	// action is the S3 action of the operation (s3:GetObject, ...) that
	// bucket policies, grants and ACLs are checked for.
	action string
	// postForm: a browser-form POST upload (s3:authType POST).
	postForm bool
	keys     map[string]string // condition keys, built once (conditionKeys)
}

type handlerFunc func(*request) error

func (s *Server) isVirtualHost(r *http.Request) bool {
	_, ok := s.hostBucket(r)
	return ok
}

// hostBucket returns the bucket named by a virtual-hosted-style Host header.
func (s *Server) hostBucket(r *http.Request) (string, bool) {
	return VirtualHostBucket(r.Host, s.cfg.Domain)
}

// VirtualHostBucket returns the bucket a virtual-hosted-style Host header
// names under domain ("bucket.domain", with or without a port or a final
// "."), or false when host is not under domain or domain is "". Every
// handler of the S3 port decides with it.
func VirtualHostBucket(host, domain string) (string, bool) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if domain == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	b, ok := strings.CutSuffix(host, "."+domain)
	if !ok || b == "" {
		return "", false
	}
	return b, true
}

// resolve splits the request into bucket and key, path-style or
// virtual-hosted-style.
func (s *Server) resolve(r *http.Request) (bucket, key string) {
	p := r.URL.Path
	if b, ok := s.hostBucket(r); ok {
		return b, strings.TrimPrefix(p, "/")
	}
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// route picks the operation for a request from its method, bucket, key,
// query and headers (the table s3Routes, else refuse); the name is what
// metrics and logs use.
func (s *Server) route(r *http.Request, q url.Values, bucket, key string) (string, handlerFunc) {
	if rt := findRoute(r, q, bucket, key); rt != nil {
		return rt.op, func(req *request) error { return rt.handle(s, req) }
	}
	return refuse(r, q, bucket, key)
}

// authParam reports a query parameter of a presigned URL (SigV4, or SigV2
// which is refused later with a clear error), not a subresource.
func authParam(k string) bool {
	switch {
	case len(k) > 6 && strings.EqualFold(k[:6], "X-Amz-"):
		return true
	case k == "AWSAccessKeyId", k == "Signature", k == "Expires":
		return true
	}
	return false
}

func (s *Server) serveS3(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	bucket, key := s.resolve(r)
	ri.bucket, ri.key = bucket, key
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
		writeError(w, r, errServiceUnavail)
		return
	}
	q := r.URL.Query()
	op, fn := s.route(r, q, bucket, key)
	ri.op = op
	s.setCORSHeaders(w, r, bucket)
	if err := checkKey(key); err != nil {
		writeError(w, r, err)
		return
	}
	if headerBytes(r.Header) > maxHeaderBytes {
		writeError(w, r, s3err.Newf(s3err.CodeRequestHeaderSectionTooLarge, "Your request header section exceeds the maximum allowed size (%d bytes).", maxHeaderBytes))
		return
	}
	res, err := s.authenticate(r, op)
	if err != nil {
		ri.cause = err
		writeError(w, r, err)
		return
	}
	var user backend.User
	if res.Anonymous {
		// Anonymous requests reach only what a bucket policy or an ACL
		// opens to everyone (docs/security.md).
		if bucket == "" || op == "CreateBucket" {
			writeError(w, r, s3err.New(s3err.CodeAccessDenied, "Access Denied: anonymous requests may only read or write what a bucket's policy or ACL allows everyone; sign the request with an access key (the root user creates one with: fedgate user add NAME)"))
			return
		}
		ri.user = "anonymous"
	} else {
		var ok bool
		if user, ok = s.be.Users().ByAccessKey(res.AccessKey); !ok {
			writeError(w, r, s3err.New(s3err.CodeInvalidAccessKeyID, ""))
			return
		}
		ri.setUser(user.Name)
	}
	if err := checkExpectedOwner(r, bucket); err != nil {
		ri.cause = err
		writeError(w, r, err)
		return
	}
	req := &request{w: w, r: r, query: q, bucket: bucket, key: key, user: user, anonymous: res.Anonymous,
		action: opActions[op], body: res.Body, size: res.DecodedLength, trailer: res.Trailer}
	if req.body == nil {
		req.body = http.NoBody
	}
	if err := fn(req); err != nil {
		if err == errNotModified {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		ri.cause = err
		writeError(w, r, err)
	}
}

// reservedKeyDir is the first key segment fedgate keeps for its own
// objects in the stores it writes to (federation: store markers, versions;
// node: the region's claim).
const reservedKeyDir = "_fedgate"

// maxHeaderBytes is S3's limit on the request header section.
const maxHeaderBytes = 8 << 10

func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// checkKey refuses keys fedgate will not store: longer than S3 allows, not
// UTF-8, or with "." / ".." path segments (clients and file-backed stores disagree on
// what they mean) or NUL bytes.
func checkKey(key string) error {
	if key == "" {
		return nil
	}
	if len(key) > store.MaxKeyLen {
		return errKeyTooLong
	}
	if !utf8.ValidString(key) {
		// S3 keys are UTF-8; AWS answers 400 InvalidURI for one that is not.
		return s3err.New(s3err.CodeInvalidURI, "Couldn't parse the specified URI: the object key is not valid UTF-8.")
	}
	if strings.IndexByte(key, 0) >= 0 {
		return s3err.New(s3err.CodeInvalidArgument, "Object key contains a NUL byte.")
	}
	if first, _, _ := strings.Cut(key, "/"); first == reservedKeyDir {
		return s3err.Newf(s3err.CodeInvalidArgument, "Object key %q is reserved: fedgate keeps its own state (store markers, object versions, the region's claim) under %s/ at the root of the stores it writes to, which a bucket mounted at a store's root would reach.", key, reservedKeyDir)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "." || seg == ".." {
			return s3err.Newf(s3err.CodeInvalidArgument, "Object key %q contains a '.' or '..' path segment, which fedgate does not accept.", key)
		}
	}
	return nil
}
