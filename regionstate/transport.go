package regionstate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

type transport interface {
	raft.Transport
	Close() error
}

// newTransport returns the in-memory transport (empty BindAddr), Raft's
// plain TCP transport, or, with cfg.TLS, the TCP transport over TLS.
func newTransport(cfg Config, hl *hclogAdapter) (transport, error) {
	if cfg.BindAddr == "" {
		_, t := raft.NewInmemTransport(raft.ServerAddress("inmem:" + cfg.NodeID))
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
	if cfg.TLS == nil && cfg.Dial == nil {
		t, err := raft.NewTCPTransportWithConfig(cfg.BindAddr, adv, &raft.NetworkTransportConfig{
			MaxPool: pool, Timeout: timeout, Logger: hl.Named("transport"), MaxRPCsInFlight: NoPipelining})
		if err != nil {
			return nil, fmt.Errorf("raft: transport: %w", err)
		}
		return t, nil
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
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
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	stream := &streamLayer{Listener: ln, adv: adv, tls: cfg.TLS, dial: cfg.Dial}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: pool, Timeout: timeout, Logger: hl.Named("transport"),
		MaxRPCsInFlight: NoPipelining,
	}), nil
}

// NoPipelining is the NetworkTransportConfig.MaxRPCsInFlight that turns
// hashicorp/raft's pipelined replication off: the leader sends a
// follower's entries in synchronous AppendEntries calls (batched, up to
// MaxAppendEntries each). With pipelining (v1.7.3, default 2 in flight, so
// unbuffered channels) a follower that answers one AppendEntries with
// failure (its disk was full, say) ends the pipeline's decoder while the
// send loop, woken every CommitTimeout (1 ms here), can still send once
// more and block for ever on the pipeline's channel: the follower then
// gets heartbeats but never another entry, so it neither catches up nor
// holds an election. e2e TestChaos hit this after a full disk on a
// follower (the node stayed "behind the region's log" until the test
// timed out; goroutine dumps showed the leader's replicate goroutine
// parked in netPipeline.AppendEntries and its decoder in
// decodeResponses).
const NoPipelining = 1

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// streamLayer is a raft.StreamLayer for TLS or a Config.Dial: it
// accepts on its listener (a TLS one with Config.TLS) and dials with
// Config.Dial (or a net.Dialer), adding the TLS handshake with Config.TLS,
// so every node is both a TLS server and a TLS client to its peers.
type streamLayer struct {
	net.Listener
	adv  net.Addr
	tls  *tls.Config // nil: plain TCP
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Addr() net.Addr { return s.adv }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dial := s.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	raw, err := dial(ctx, "tcp", string(addr))
	if err != nil || s.tls == nil {
		return raw, err
	}
	cfg := s.tls
	if cfg.ServerName == "" { // as tls.Dialer does: verify the host dialed
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(string(addr))
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
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
