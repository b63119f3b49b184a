package testserver

import (
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

// CA is a throwaway certificate authority for tests of TLS (the S3 port's
// --cert-file, the peers' --peer-*): it issues certificates for 127.0.0.1.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a CA valid for a day.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fedgate-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// PEM is the CA's certificate.
func (ca *CA) PEM() []byte { return ca.pem }

// Pool is a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA's certificate to file.
func (ca *CA) WriteCA(tb testing.TB, file string) {
	tb.Helper()
	if err := os.WriteFile(file, ca.pem, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Issue writes a new key and a certificate for it to keyFile and certFile:
// serial, IP SAN 127.0.0.1, valid from an hour ago until notAfter, for
// TLS servers and clients, signed by the CA.
func (ca *CA) Issue(tb testing.TB, certFile, keyFile string, serial int64, notAfter time.Time) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "fedgate-test-node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// PeerTLS issues a certificate named name in a temporary directory and
// returns the mutual-TLS configuration of Raft and catalog links built
// from the files (transport.PeerTLSConfig), as a node started with
// --peer-* would.
func (ca *CA) PeerTLS(tb testing.TB, name string) *tls.Config {
	tb.Helper()
	dir := tb.TempDir()
	cert, key, caFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key"), filepath.Join(dir, name+"-ca.pem")
	ca.Issue(tb, cert, key, time.Now().UnixNano(), time.Now().Add(time.Hour))
	ca.WriteCA(tb, caFile)
	c, err := transport.PeerTLSConfig(cert, key, caFile, "")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
