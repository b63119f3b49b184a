package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
)

// peerPKI writes a CA and one node certificate for 127.0.0.1 (server and
// client use) and returns the file names.
func peerPKI(t *testing.T) (certFile, keyFile, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca := testserver.NewCA(t)
	certFile, keyFile, caFile = filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.pem")
	ca.Issue(t, certFile, keyFile, 2, time.Now().Add(24*time.Hour))
	ca.WriteCA(t, caFile)
	return certFile, keyFile, caFile
}

// TestClusterPeerTLS: with --peer-* files, Raft and the internal API run
// over mutual TLS: the region forms, a write-back PUT through a follower
// (forwarded and staged on a peer) is read through a third node, and the
// internal port refuses plain HTTP and TLS clients without a certificate.
func TestClusterPeerTLS(t *testing.T) {
	cert, key, ca := peerPKI(t)
	r := startRegion(t, 3, "--peer-cert-file", cert, "--peer-key-file", key, "--peer-ca-file", ca)
	st := r.settle(3)
	var follower, other *server
	for id, s := range r.byID {
		if id == st.Leader {
			continue
		}
		if follower == nil {
			follower = s
		} else {
			other = s
		}
	}
	data := payload("tls", 3<<20)
	put(t, follower.root(), "ckpt", "over-tls", data)
	if got, _ := getBytes(t, other.root(), "ckpt", "over-tls"); string(got) != string(data) {
		t.Fatal("a write-back object staged over peer TLS reads back wrong")
	}
	_, err := follower.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("made-over-tls")})
	mustOK(t, err)

	addr := r.internal[0]
	// Plain HTTP to the internal port meets a TLS server.
	resp, err := http.Get("http://" + addr + "/_fedgate/internal/info")
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Fatalf("plain HTTP to the internal port: %s %s; want the TLS server's refusal", resp.Status, body)
	}
	// A TLS client that trusts the CA but shows no certificate is refused.
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := c.Get("https://" + addr + "/_fedgate/internal/info"); err == nil {
		resp.Body.Close()
		t.Fatalf("the internal port served a TLS client without a certificate: %s", resp.Status)
	}
	// The S3 port answers only the discovery call of the internal API.
	resp, err = http.Post(r.nodes[0].Endpoint+"/_fedgate/internal/apply", "application/octet-stream", nil)
	mustOK(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the S3 port answered internal/apply with %s", resp.Status)
	}
}
