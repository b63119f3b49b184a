package regionstate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedgate/fedgate/raft/transport"
)

// testPKI is a self-signed CA made for one test.
type testPKI struct {
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	der  []byte
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fedgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{ca: ca, key: key, pool: pool, der: der}
}

// cert issues a node certificate for 127.0.0.1, usable as server and client.
func (p *testPKI) cert(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *testPKI) config(t testing.TB, name string) *tls.Config {
	return transport.NewPeerTLSConfig(p.cert(t, name), p.pool, "")
}

func TestTLSTransportTwoNodes(t *testing.T) {
	pki := newTestPKI(t)
	base := func(id string) Config {
		return Config{NodeID: id, Dir: t.TempDir(), Logger: testLogger(t), ElectionTimeout: 50 * time.Millisecond,
			BindAddr: "127.0.0.1:0", TLS: pki.config(t, id), TransportTimeout: 5 * time.Second}
	}
	cfg1 := base("n1")
	cfg1.Bootstrap = true
	n1 := openNode(t, cfg1)
	cfg2 := base("n2")
	cfg2.BootstrapExpect = 2
	cfg2.Forward = func(ctx context.Context, id, addr string, data []byte) (uint64, error) {
		if id != n1.ID() || addr != n1.Addr() {
			t.Errorf("forward to %s at %s, want n1 at %s", id, addr, n1.Addr())
		}
		return n1.ApplyEncoded(ctx, data)
	}
	n2 := openNode(t, cfg2)
	if _, port, _ := net.SplitHostPort(n2.Addr()); port == "0" {
		t.Fatalf("Addr() = %s, want the chosen port", n2.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	apply(t, n1, sample(1)...)
	if err := n1.AddVoter(ctx, n2.ID(), n2.Addr()); err != nil {
		t.Fatalf("AddVoter over TLS: %v", err)
	}
	if err := n2.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	idx, err := n2.ApplyIndex(ctx, SetSetting{Key: "via", Value: "n2"})
	if err != nil {
		t.Fatalf("forwarded write: %v", err)
	}
	if err := n2.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	sameState(t, "n2 over TLS", dumpState(n2.State()), dumpState(n1.State()))

	// A peer without a certificate from the CA gets nothing.
	conn, err := tls.Dial("tcp", n1.Addr(), &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS13})
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Write([]byte{0})
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
		}
		conn.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate talked to the Raft port")
	}
}

func TestPeerTLSConfigFiles(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	c := pki.cert(t, "n1")
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key, ca := write("n1.crt", "CERTIFICATE", c.Certificate[0]), write("n1.key", "PRIVATE KEY", keyDER),
		write("ca.crt", "CERTIFICATE", pki.der)
	cfg, err := PeerTLSConfig(cert, key, ca, "fedgate-raft")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ServerName != "fedgate-raft" || len(cfg.Certificates) != 1 {
		t.Fatalf("PeerTLSConfig = %+v", cfg)
	}
	if _, err := PeerTLSConfig(cert, key, key, ""); err == nil {
		t.Fatal("PeerTLSConfig accepted a CA file without a certificate")
	}
	if _, err := PeerTLSConfig(cert, filepath.Join(dir, "missing"), ca, ""); err == nil {
		t.Fatal("PeerTLSConfig accepted a missing key")
	}
}
