package node_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/nodetest"
	"github.com/fedgate/fedgate/node/peerapi"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tlsFiles are a CA and the files of one certificate it issued for
// 127.0.0.1 (serial 100).
type tlsFiles struct {
	ca                *testserver.CA
	cert, key, caFile string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	f := tlsFiles{ca: testserver.NewCA(t), cert: filepath.Join(dir, "s3.pem"), key: filepath.Join(dir, "s3.key"), caFile: filepath.Join(dir, "ca.pem")}
	f.ca.Issue(t, f.cert, f.key, 100, time.Now().Add(48*time.Hour))
	f.ca.WriteCA(t, f.caFile)
	return f
}

// httpClient trusts only the CA.
func (f tlsFiles) httpClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}}
}

// withCA makes an S3 client trust the CA (and only it).
func (f tlsFiles) withCA(o *s3.Options) {
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.TLSClientConfig = &tls.Config{RootCAs: f.ca.Pool()}
	})
}

// servedSerial is the serial of the certificate a new TLS handshake with
// addr presents (verified against the CA), and the protocol agreed when
// the client offers h2 first.
func (f tlsFiles) servedSerial(t *testing.T, addr string) (*big.Int, string) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: f.ca.Pool(), NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer c.Close()
	st := c.ConnectionState()
	return st.PeerCertificates[0].SerialNumber, st.NegotiatedProtocol
}

// TestS3PortTLS: with CertFile and KeyFile the S3 port serves HTTPS only
// (HTTP/1.1): aws-sdk-go-v2 trusting the CA puts and gets over it, plain
// HTTP is refused, the metric shows the certificate's expiry, and
// ReloadTLS (what SIGHUP calls) serves renewed files from the next
// handshake on while a broken file keeps the certificate in use and logs
// an error naming the file.
func TestS3PortTLS(t *testing.T) {
	f := newTLSFiles(t)
	var logs syncBuffer
	cfg := testConfig(t, "n1", func(c *node.Config) {
		c.CertFile, c.KeyFile = f.cert, f.key
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	ctx := testCtx(t, 2*time.Minute)
	n, err := node.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	addr := n.Addr().String()
	if n.Endpoint() != "https://"+addr {
		t.Fatalf("Endpoint() = %s, want https://%s", n.Endpoint(), addr)
	}

	c := s3Client(n.Endpoint(), f.withCA)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("tls")}); err != nil {
		t.Fatal(err)
	}
	putGet(t, ctx, c, c, "tls", "over/https", strings.Repeat("x", 3<<20))

	// A client that does not trust the CA is refused by its own check.
	if _, err := s3Client(n.Endpoint(), func(o *s3.Options) { o.RetryMaxAttempts = 1 }).ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v, want a certificate error", err)
	}
	// Plain HTTP meets the TLS server's refusal, never an S3 answer.
	resp, err := http.Get("http://" + addr + "/_fedgate/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Fatalf("plain HTTP to the S3 port: %s %q, want 400 from the TLS server", resp.Status, body)
	}

	if strings.Contains(logs.String(), "TLS handshake error") {
		t.Errorf("a failed handshake was logged above DEBUG:\n%s", logs.String())
	}

	serial, proto := f.servedSerial(t, addr)
	if serial.Int64() != 100 || proto != "http/1.1" {
		t.Fatalf("served serial %v over %q, want 100 over http/1.1", serial, proto)
	}
	hc := f.httpClient()
	if got := tlsMetric(t, hc, n.Endpoint()); got != float64(n.TLSCertificate().NotAfter.Unix()) {
		t.Errorf("fedgate_tls_cert_not_after_seconds = %v, want %d", got, n.TLSCertificate().NotAfter.Unix())
	}

	// Renewed files: the next handshake presents the new certificate.
	renewedUntil := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	f.ca.Issue(t, f.cert, f.key, 101, renewedUntil)
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if serial, _ := f.servedSerial(t, addr); serial.Int64() != 101 {
		t.Fatalf("after the reload the served serial is %v, want 101", serial)
	}
	hc.CloseIdleConnections()
	if got := tlsMetric(t, hc, n.Endpoint()); got != float64(renewedUntil.Unix()) {
		t.Errorf("after the reload fedgate_tls_cert_not_after_seconds = %v, want %d", got, renewedUntil.Unix())
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("no log of the reload:\n%s", logs.String())
	}

	// A broken certificate file: the old certificate stays, an ERROR names the file.
	if err := os.WriteFile(f.cert, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = n.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), "--cert-file "+f.cert) {
		t.Fatalf("reload of a broken certificate: %v, want an error naming --cert-file %s", err, f.cert)
	}
	if serial, _ := f.servedSerial(t, addr); serial.Int64() != 101 {
		t.Fatalf("after a failed reload the served serial is %v, want 101 still", serial)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "TLS certificate reload failed") || !strings.Contains(l, f.cert) {
		t.Errorf("the failed reload logged no ERROR naming %s:\n%s", f.cert, l)
	}
	// A certificate whose key is another's: refused, naming the key file.
	other := newTLSFiles(t)
	data, _ := os.ReadFile(other.cert)
	if err := os.WriteFile(f.cert, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "--key-file "+f.key+" is not the key") {
		t.Fatalf("reload with a key of another certificate: %v", err)
	}
	if serial, _ := f.servedSerial(t, addr); serial.Int64() != 101 {
		t.Fatalf("after a failed reload the served serial is %v, want 101 still", serial)
	}
	// Requests still work after all that.
	putGet(t, ctx, c, c, "tls", "after/reloads", "still here")
}

// tlsMetric reads fedgate_tls_cert_not_after_seconds over https.
func tlsMetric(t *testing.T, hc *http.Client, endpoint string) float64 {
	t.Helper()
	resp, err := hc.Get(endpoint + "/_fedgate/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fedgate_tls_cert_not_after_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no fedgate_tls_cert_not_after_seconds in /_fedgate/metrics")
	return 0
}

// TestS3PortTLSStartErrors: one of the two flags alone, an unreadable or
// broken file, or a key that is not the certificate's fails Open before
// it touches anything, naming the flag and file.
func TestS3PortTLSStartErrors(t *testing.T) {
	f := newTLSFiles(t)
	other := newTLSFiles(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"cert only", f.cert, "", "--cert-file is given without --key-file"},
		{"key only", "", f.key, "--key-file is given without --cert-file"},
		{"mismatched key", f.cert, other.key, "--key-file " + other.key + " is not the key of the certificate in --cert-file " + f.cert},
		{"garbage certificate", garbage, f.key, "--cert-file " + garbage + ": no PEM certificate"},
		{"garbage key", f.cert, garbage, "--key-file " + garbage + ": no PEM private key"},
		{"key as certificate", f.key, f.key, "--cert-file " + f.key + ": no PEM certificate"},
		{"missing certificate", missing, f.key, "--cert-file " + missing + ": open " + missing},
		{"missing key", f.cert, missing, "--key-file " + missing + ": open " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			cfg := testConfig(t, "n1", func(c *node.Config) { c.CertFile, c.KeyFile, c.DataDir = tc.cert, tc.key, dataDir })
			n, err := node.Open(testCtx(t, time.Minute), cfg)
			if err == nil {
				n.Close()
				t.Fatalf("Open succeeded, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v\nwant it to say %q", err, tc.want)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed start created its data dir (%v)", err)
			}
		})
	}
}

// TestS3PortTLSRegion: the nodes of a region with TLS on their S3 ports
// find each other through --join addresses given without a scheme (https,
// trusted through CAFile), advertise https addresses, forward writes and
// stage write-back copies between them.
func TestS3PortTLSRegion(t *testing.T) {
	f := newTLSFiles(t)
	r := nodetest.MakeRegion(t, 2, nodetest.Options{Config: func(i int, c *node.Config) {
		c.CertFile, c.KeyFile, c.CAFile = f.cert, f.key, f.caFile
	}})
	ctx := testCtx(t, 2*time.Minute)
	for i := range r.Len() {
		n := r.Node(i)
		if !strings.HasPrefix(n.Endpoint(), "https://") {
			t.Errorf("node %d: Endpoint() = %s", i, n.Endpoint())
		}
		for j := range r.Len() {
			// Each node registers its address through Raft as it starts;
			// another node knows it once it has applied that entry.
			id := r.Node(j).ID()
			wait.For(t, 10*time.Second, fmt.Sprintf("node %d to know %s's S3 address as %s", i, id, r.Node(j).Endpoint()), func() bool {
				v, _ := n.Raft().State().Setting(peerapi.MemberKey(id))
				return v == r.Node(j).Endpoint()
			})
		}
	}
	leader := r.Leader()
	follower := 1 - leader
	// Through the follower: the write is forwarded to the leader and
	// staged on it; both read it.
	putGet(t, ctx, r.Client(follower, f.withCA), r.Client(leader, f.withCA), "ckpt", "tls/ckpt", strings.Repeat("c", 1<<20))
	putGet(t, ctx, r.Client(leader, f.withCA), r.Client(follower, f.withCA), "datasets", "tls/data", "d")
}
