package testenv

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// S3Calls is an HTTP reverse proxy in front of an S3 endpoint that counts
// the calls through it by kind (S3CallKind), so a test or benchmark can
// check what a client made the origin do. Point the client at URL; signed
// requests pass unchanged (the Host a client signed is forwarded as is).
type S3Calls struct {
	URL string
	mu  sync.Mutex
	n   map[string]int
}

// CountS3Calls starts a counting proxy to target (an http:// endpoint),
// closed when tb ends.
func CountS3Calls(tb testing.TB, target string) *S3Calls {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	c := &S3Calls{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[S3CallKind(r)]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Take returns the counts since the last Take and starts again.
func (c *S3Calls) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// S3CallKind names an S3 request: "copy" (x-amz-copy-source),
// "create-upload", "complete", "upload-part", "abort", else its method.
func S3CallKind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Header.Get("X-Amz-Copy-Source") != "":
		return "copy"
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "create-upload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "complete"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "upload-part"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return "abort"
	}
	return r.Method
}
