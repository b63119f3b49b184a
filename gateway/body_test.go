package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/internal/wait"
)

// bodyServer is a gateway over a fake with a private bucket "private",
// served by an http.Server whose connections go through a ConnLimiter
// (limit conns per address), as node serves the S3 port.
func bodyServer(t *testing.T, bodyTimeout time.Duration, limit int) (*gatewaytest.Fake, string, *gateway.ConnLimiter) {
	t.Helper()
	f := gatewaytest.New()
	f.AddBucket("private", backend.RootUser)
	srv, err := gateway.New(gateway.Config{Backend: f, BodyTimeout: bodyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	lim := gateway.NewConnLimiter(limit)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ConnContext: gateway.ConnContext, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(lim.Listener(ln)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return f, ln.Addr().String(), lim
}

// rawRequest writes head (and body) on a new connection from local (""
// for any) and returns the connection and a reader of its answers.
func rawRequest(t *testing.T, addr, local, head string, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// An anonymous PUT the caller may not make, whose body stops after 3 of
// 1000 bytes, is answered 403 at once and its connection closed: nothing
// waits for the rest (the probe's denial of service: 300 s with no answer).
func TestRefusedStalledBodyIsAnsweredAtOnce(t *testing.T) {
	_, addr, _ := bodyServer(t, time.Minute, 0)
	c, br := rawRequest(t, addr, "", "PUT /private/x HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n", "abc")
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a refused PUT with a stalled body: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(data), "<Code>AccessDenied</Code>") {
		t.Fatalf("status %d, body %s; want 403 AccessDenied", resp.StatusCode, data)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v; want at once", d)
	}
	if !resp.Close {
		t.Error("the connection is kept open with 997 body bytes unread; want Connection: close")
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF (the server closed the connection)", err)
	}
}

// S3 answers a refused request that asked Expect: 100-continue at once,
// without inviting its body; so does fedgate.
func TestRefusedExpectContinueGetsNoContinue(t *testing.T) {
	_, addr, _ := bodyServer(t, time.Minute, 0)
	for _, path := range []string{"/private/x", "/no-such-bucket/x"} {
		c, br := rawRequest(t, addr, "", "PUT "+path+" HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n", "")
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if strings.Contains(line, "100") {
			t.Fatalf("%s: first line %q: the server invited a body it refuses", path, line)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 403") && !strings.HasPrefix(line, "HTTP/1.1 404") {
			t.Fatalf("%s: first line %q, want 403 or 404", path, line)
		}
	}
}

// signedStalledPut sends a PUT signed by root (UNSIGNED-PAYLOAD) whose body
// sends first and then nothing until the test ends, and returns the
// answer.
func signedStalledPut(t *testing.T, addr, first string, size int) (*http.Response, time.Duration) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = io.WriteString(pw, first) }()
	req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/private/stalled", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(size)
	req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
	creds := aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("no answer to a stalled signed PUT: %v", err)
	}
	return resp, time.Since(start)
}

// A signed PUT whose body stops arriving fails with 400 RequestTimeout once
// no byte has come for the body timeout, and stores nothing.
func TestStalledSignedPutTimesOut(t *testing.T) {
	f, addr, _ := bodyServer(t, 500*time.Millisecond, 0)
	resp, d := signedStalledPut(t, addr, "abc", 1000)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "<Code>RequestTimeout</Code>") {
		t.Fatalf("status %d, body %s; want 400 RequestTimeout", resp.StatusCode, data)
	}
	if d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("answered after %v; want about the 500ms body timeout", d)
	}
	if _, _, ok := f.Object("private", "stalled"); ok {
		t.Error("the stalled PUT stored an object")
	}
}

// A slow body that keeps arriving is not cut: the timeout is on silence,
// not on the whole upload.
func TestSlowSteadyBodyIsNotCut(t *testing.T) {
	f, addr, _ := bodyServer(t, 300*time.Millisecond, 0)
	pr, pw := io.Pipe()
	go func() {
		for range 10 {
			// pacing: a slow client's body, a piece every 100 ms (the silence timeout is 300 ms)
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(pw, "0123456789"); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/private/slow", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 100
	req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
	creds := aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a 1 s upload with a 300 ms body timeout: %d %s", resp.StatusCode, data)
	}
	if got, _, ok := f.Object("private", "slow"); !ok || len(got) != 100 {
		t.Fatalf("stored %d bytes (%v), want 100", len(got), ok)
	}
}

// One address holding its limit of connections that never sent a signed
// request gets its next connection closed on accept; another address, and
// the same address once a connection of its own is signed, are served.
func TestUnauthenticatedConnectionsPerAddress(t *testing.T) {
	_, addr, lim := bodyServer(t, time.Minute, 4)
	var held []net.Conn
	for range 4 {
		c, _ := rawRequest(t, addr, "127.0.0.2", "", "")
		held = append(held, c)
	}
	wait.For(t, 5*time.Second, "4 connections from 127.0.0.2 counted", func() bool { return lim.Unauthenticated("127.0.0.2") == 4 })
	c, br := rawRequest(t, addr, "127.0.0.2", "GET /_fedgate/healthz HTTP/1.1\r\nHost: h\r\n\r\n", "")
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := http.ReadResponse(br, nil); err == nil {
		t.Fatal("a 5th unauthenticated connection from one address was served")
	}
	// Another address is not affected.
	c, br = rawRequest(t, addr, "127.0.0.3", "GET /_fedgate/healthz HTTP/1.1\r\nHost: h\r\n\r\n", "")
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("127.0.0.3 was not served: %v", err)
	}
	// A signed request takes its connection out of the count.
	pc, pbr := held[0], bufio.NewReader(held[0])
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("x-amz-content-sha256", emptySHA256)
	creds := aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, emptySHA256, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := req.Write(pc); err != nil {
		t.Fatal(err)
	}
	_ = pc.SetDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(pbr, req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("signed ListBuckets on a held connection: %v", err)
	}
	if n := lim.Unauthenticated("127.0.0.2"); n != 3 {
		t.Fatalf("after a signed request: %d unauthenticated connections counted, want 3", n)
	}
	c, br = rawRequest(t, addr, "127.0.0.2", "GET /_fedgate/healthz HTTP/1.1\r\nHost: h\r\n\r\n", "")
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a connection within the limit again was not served: %v", err)
	}
	// Closing gives the place back.
	for _, c := range held[1:] {
		c.Close()
	}
	wait.For(t, 5*time.Second, "closed connections leave the count", func() bool { return lim.Unauthenticated("127.0.0.2") <= 1 })
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Keys under _fedgate/ are fedgate's own in the stores it writes to (a
// bucket mounted at a store's root would reach its markers and versions):
// S3 requests naming one are refused and nothing is stored.
func TestReservedKeyDirRefused(t *testing.T) {
	e := newEnv(t)
	e.bucket("data")
	for _, key := range []string{"_fedgate/store-marker", "_fedgate/versions/x", "_fedgate"} {
		resp, body := e.rootSigned(http.MethodPut, "/data/"+key, []byte("x"), nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>InvalidArgument</Code>") {
			t.Fatalf("PUT %s: %d %s, want 400 InvalidArgument", key, resp.StatusCode, body)
		}
		if _, _, ok := e.fake.Object("data", key); ok {
			t.Fatalf("PUT %s stored an object", key)
		}
	}
	if resp, body := e.rootSigned(http.MethodPut, "/data/x/_fedgate/ok", []byte("x"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a _fedgate segment below the root is an ordinary key: %d %s", resp.StatusCode, body)
	}
}
