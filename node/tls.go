package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// s3Cert is the S3 port's certificate (--cert-file, --key-file): the TLS
// server hands out whatever cur holds (tls.Config.GetCertificate), and
// reload swaps in what the files hold now, so a renewed certificate is
// served by every new handshake without a restart (SIGHUP; docs/tls.md).
// Connections already open keep the certificate they were made with.
type s3Cert struct {
	certFile, keyFile string
	log               *slog.Logger

	mu  sync.Mutex // one reload at a time
	cur atomic.Pointer[tls.Certificate]
}

// newS3Cert loads the pair; an error names the file at fault.
func newS3Cert(certFile, keyFile string, log *slog.Logger) (*s3Cert, error) {
	c := &s3Cert{certFile: certFile, keyFile: keyFile, log: log}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.cur.Store(cert)
	c.warnExpiry(cert.Leaf)
	return c, nil
}

// reload reads both files again and serves them from the next handshake;
// if they cannot be used, the certificate in use stays and the error
// (naming the file) is logged and returned.
func (c *s3Cert) reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cert, err := loadKeyPair(c.certFile, c.keyFile)
	if err != nil {
		old := c.cur.Load().Leaf
		c.log.Error("TLS certificate reload failed; still serving the previous certificate", "error", err,
			"cert_file", c.certFile, "key_file", c.keyFile, "serving_serial", serialHex(old), "serving_not_after", old.NotAfter.UTC())
		return err
	}
	c.cur.Store(cert)
	c.log.Info("TLS certificate reloaded", "cert_file", c.certFile, "subject", cert.Leaf.Subject.String(),
		"serial", serialHex(cert.Leaf), "not_after", cert.Leaf.NotAfter.UTC())
	c.warnExpiry(cert.Leaf)
	return nil
}

func (c *s3Cert) warnExpiry(leaf *x509.Certificate) {
	switch now := time.Now(); {
	case now.After(leaf.NotAfter):
		c.log.Warn("the S3 port's TLS certificate has expired: clients will refuse it", "cert_file", c.certFile, "not_after", leaf.NotAfter.UTC())
	case now.Before(leaf.NotBefore):
		c.log.Warn("the S3 port's TLS certificate is not valid yet: clients will refuse it", "cert_file", c.certFile, "not_before", leaf.NotBefore.UTC())
	}
}

// leaf is the certificate served now.
func (c *s3Cert) leaf() *x509.Certificate { return c.cur.Load().Leaf }

// getCertificate is tls.Config.GetCertificate.
func (c *s3Cert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// serverConfig is the S3 port's TLS configuration: HTTP/1.1 (as AWS S3
// speaks), TLS 1.2 or newer.
func (c *s3Cert) serverConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.getCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// notAfterGauge is fedgate_tls_cert_not_after_seconds.
func (c *s3Cert) notAfterGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fedgate_tls_cert_not_after_seconds",
		Help: "When the S3 port's TLS certificate (--cert-file) expires, in Unix seconds; the one served now (reloaded on SIGHUP).",
	}, func() float64 { return float64(c.leaf().NotAfter.Unix()) })
}

// loadKeyPair reads a PEM certificate (chain) and its private key; every
// error names the flag and file it is about.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("--cert-file %s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key-file %s: %w", keyFile, err)
	}
	if !hasPEM(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return nil, fmt.Errorf("--cert-file %s: no PEM certificate in it (want -----BEGIN CERTIFICATE-----)", certFile)
	}
	if !hasPEM(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return nil, fmt.Errorf("--key-file %s: no PEM private key in it (want -----BEGIN PRIVATE KEY----- or an RSA/EC one)", keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		switch msg := err.Error(); {
		case strings.Contains(msg, "does not match"):
			return nil, fmt.Errorf("--key-file %s is not the key of the certificate in --cert-file %s: %w", keyFile, certFile, err)
		case strings.Contains(msg, "private key") || strings.Contains(msg, "key input"):
			return nil, fmt.Errorf("--key-file %s: %w", keyFile, err)
		default:
			return nil, fmt.Errorf("--cert-file %s: %w", certFile, err)
		}
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--cert-file %s: %w", certFile, err)
		}
	}
	return &cert, nil
}

// hasPEM reports whether data holds a PEM block whose type ok accepts.
func hasPEM(data []byte, ok func(string) bool) bool {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return false
		}
		if ok(b.Type) {
			return true
		}
	}
}

func serialHex(c *x509.Certificate) string {
	if c == nil || c.SerialNumber == nil {
		return ""
	}
	return fmt.Sprintf("%X", c.SerialNumber)
}

// ErrNoTLS is ReloadTLS's answer on a node whose S3 port serves plain HTTP.
var ErrNoTLS = errors.New("the S3 port serves plain HTTP (no --cert-file): no certificate to reload")

// ReloadTLS reads --cert-file and --key-file again and serves them from
// the next TLS handshake on; `fedgate server` calls it on SIGHUP. When
// they cannot be used, the node keeps serving the certificate it has, logs
// the error (naming the file) and returns it. A node without TLS returns
// ErrNoTLS.
func (n *Node) ReloadTLS() error {
	if n.cert == nil {
		return ErrNoTLS
	}
	return n.cert.reload()
}

// TLSCertificate is the certificate the S3 port serves now (nil: plain
// HTTP).
func (n *Node) TLSCertificate() *x509.Certificate {
	if n.cert == nil {
		return nil
	}
	return n.cert.leaf()
}

// s3CAPool is what a node trusts on other nodes' https S3 ports (their
// discovery answers): the system's roots plus CAFile and the peer CA.
func s3CAPool(cfg *Config) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, f := range []struct{ flag, file string }{{"--ca-file", cfg.CAFile}, {"--peer-ca-file", cfg.PeerCAFile}} {
		if f.file == "" {
			continue
		}
		data, err := os.ReadFile(f.file)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.flag, f.file, err)
		}
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", f.flag, f.file)
		}
	}
	return pool, nil
}

// quietHandshakes is the S3 port's server error log with TLS: a failed
// handshake (a port scan, a TCP health check, plain HTTP, a client that
// does not trust the certificate and says so) is logged at DEBUG, not
// WARN: the client sees what went wrong, and a busy port would fill the
// log. Everything else is a WARN, as without TLS.
func quietHandshakes(l *slog.Logger) *stdlog.Logger {
	return stdlog.New(handshakeQuiet{slog.NewLogLogger(l.Handler(), slog.LevelWarn).Writer(), l}, "", 0)
}

type handshakeQuiet struct {
	w   io.Writer
	log *slog.Logger
}

func (h handshakeQuiet) Write(p []byte) (int, error) {
	if msg, ok := strings.CutPrefix(string(p), "http: TLS handshake error"); ok {
		h.log.Debug("TLS handshake failed"+strings.TrimRight(msg, "\n"), "component", "tls")
		return len(p), nil
	}
	return h.w.Write(p)
}
