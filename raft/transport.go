package raft

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	hraft "github.com/hashicorp/raft"
)

type transport interface {
	hraft.Transport
	Close() error
}

// newTransport returns the in-memory transport (empty BindAddr), Raft's
// plain TCP transport, or, with cfg.TLS, the TCP transport over TLS.
func newTransport(cfg Config, hl *hclogAdapter) (transport, error) {
	if cfg.BindAddr == "" {
		_, t := hraft.NewInmemTransport(hraft.ServerAddress("inmem:" + cfg.NodeID))
		return t, nil
	}
	var adv net.Addr
	if cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("raft: advertise address: %w", err)
		}
		adv = a
	}
	timeout := cmpOr(cfg.TransportTimeout, 10*time.Second)
	pool := cmpOr(cfg.TransportMaxPool, 3)
	if cfg.TLS == nil {
		t, err := hraft.NewTCPTransportWithLogger(cfg.BindAddr, adv, pool, timeout, hl.Named("transport"))
		if err != nil {
			return nil, fmt.Errorf("raft: transport: %w", err)
		}
		return t, nil
	}
	ln, err := tls.Listen("tcp", cfg.BindAddr, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("raft: transport: %w", err)
	}
	if adv == nil {
		adv = ln.Addr()
		if a, ok := adv.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("raft: transport: %s is not an address peers can dial; set AdvertiseAddr", a)
		}
	}
	stream := &tlsStream{Listener: ln, adv: adv, cfg: cfg.TLS}
	return hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: stream, MaxPool: pool, Timeout: timeout, Logger: hl.Named("transport"),
	}), nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// tlsStream is a hraft.StreamLayer over TLS: it accepts with tls.Listen's
// listener and dials with tls.Dialer, both with the same *tls.Config, so
// every node is both a TLS server and a TLS client to its peers.
type tlsStream struct {
	net.Listener
	adv net.Addr
	cfg *tls.Config
}

var _ hraft.StreamLayer = (*tlsStream)(nil)

func (s *tlsStream) Addr() net.Addr { return s.adv }

func (s *tlsStream) Dial(addr hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.cfg}
	return d.Dial("tcp", string(addr))
}

// PeerTLSConfig builds Config.TLS from PEM files: certFile and keyFile are
// this node's certificate (its SANs must cover the name peers verify: the
// host of its AdvertiseAddr, or serverName) and caFile holds the CA that
// signed every node's certificate. The result requires and verifies
// certificates in both directions (mutual TLS) and TLS 1.3. A non-empty
// serverName is the name verified on every peer (all certificates then
// carry it as a DNS SAN); empty verifies the host of each peer's address.
func PeerTLSConfig(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft: peer certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft: peer CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("raft: peer CA: no certificate in " + caFile)
	}
	return NewPeerTLSConfig(cert, pool, serverName), nil
}

// NewPeerTLSConfig is PeerTLSConfig for a certificate and CA pool already
// loaded.
func NewPeerTLSConfig(cert tls.Certificate, ca *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca,
		ClientCAs:    ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS13,
	}
}
