// Package transport is the network side of fedgate's Raft groups (the
// region's and the catalog's): hashicorp/raft's network transport over TCP,
// TLS or a test dialer, without pipelined replication; the mutual-TLS
// configuration of peer links; and a port mux that shares one listener
// between Raft and an HTTP API (the catalog's port).
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Transport is a raft.Transport that must be closed.
type Transport interface {
	raft.Transport
	Close() error
}

// DialFunc opens a TCP connection to a peer (tests cut nodes off from
// each other with one; see node/nodetest).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config configures New.
type Config struct {
	// Bind is the TCP address to listen on ("127.0.0.1:0" picks a port).
	// Empty gives an in-memory transport at "inmem:"+LocalID. A host name
	// (not an IP) is resolved to listen, and kept as the advertised
	// address when Advertise is empty: peers then dial the name, so a node
	// whose IP changes (a Kubernetes pod rescheduled, a stable DNS name)
	// stays reachable at the address its peers recorded.
	Bind string
	// Advertise is the address peers dial when Bind is not one (for
	// example "0.0.0.0:7000").
	Advertise string
	// LocalID names the in-memory transport's address.
	LocalID string
	// TLS, when set, runs every link over TLS with this config on both
	// sides (see PeerTLSConfig).
	TLS *tls.Config
	// Dial, when set, opens the TCP connections to peers (under TLS too:
	// the handshake runs over what it returns) instead of a net.Dialer.
	Dial DialFunc
	// Timeout bounds each RPC and dial (0: 10s); MaxPool is how many idle
	// connections are kept per peer (0: 3).
	Timeout time.Duration
	MaxPool int
	// Logger receives the transport's logs (nil: none).
	Logger hclog.Logger
}

func (c *Config) defaults() {
	c.Timeout = cmpOr(c.Timeout, 10*time.Second)
	c.MaxPool = cmpOr(c.MaxPool, 3)
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// New returns the in-memory transport (empty Bind), Raft's plain TCP
// transport, or, with TLS or Dial, the network transport over a Stream.
func New(cfg Config) (Transport, error) {
	if cfg.Bind == "" {
		_, t := raft.NewInmemTransport(raft.ServerAddress("inmem:" + cfg.LocalID))
		return t, nil
	}
	cfg.defaults()
	var adv net.Addr
	if cfg.Advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("raft: advertise address: %w", err)
		}
		adv = a
	}
	named := adv == nil && bindsName(cfg.Bind)
	if cfg.TLS == nil && cfg.Dial == nil && !named {
		t, err := raft.NewTCPTransportWithConfig(cfg.Bind, adv, &raft.NetworkTransportConfig{
			MaxPool: cfg.MaxPool, Timeout: cfg.Timeout, Logger: cfg.Logger, MaxRPCsInFlight: NoPipelining})
		if err != nil {
			return nil, fmt.Errorf("raft: transport: %w", err)
		}
		return t, nil
	}
	ln, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("raft: transport: %w", err)
	}
	if named {
		// The name, with the port actually bound (Bind's may be 0).
		host, _, _ := net.SplitHostPort(cfg.Bind)
		adv = NameAddr(net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
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
	return NewNetwork(NewStream(ln, adv, cfg.TLS, cfg.Dial), cfg), nil
}

// bindsName reports whether bind's host is a DNS name rather than an IP
// literal (or empty, or a wildcard).
func bindsName(bind string) bool {
	host, _, err := net.SplitHostPort(bind)
	return err == nil && host != "" && net.ParseIP(host) == nil
}

// NameAddr is an advertised TCP address that is a host name and port:
// hashicorp/raft records its String() as the member's address, and peers
// resolve it each time they dial.
type NameAddr string

// Network implements net.Addr.
func (NameAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a NameAddr) String() string { return string(a) }

// NewNetwork is the network transport over stream, without pipelining.
func NewNetwork(stream *Stream, cfg Config) *raft.NetworkTransport {
	cfg.defaults()
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: cfg.MaxPool, Timeout: cfg.Timeout, Logger: cfg.Logger,
		MaxRPCsInFlight: NoPipelining,
	})
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

// Stream is a raft.StreamLayer for TLS or a DialFunc: it accepts on its
// listener (a TLS one for TLS links) and dials with its DialFunc (or a
// net.Dialer), adding the TLS handshake, so every node is both a TLS
// server and a TLS client to its peers. It keeps the connections it
// accepted until their handlers close them, so that Drain can wait for
// the handlers to end.
type Stream struct {
	ln   net.Listener
	adv  net.Addr
	tls  *tls.Config // nil: plain TCP
	dial DialFunc

	mu    sync.Mutex
	conns map[*acceptedConn]struct{}
	wg    sync.WaitGroup
}

var _ raft.StreamLayer = (*Stream)(nil)

// NewStream is a Stream accepting on ln (already TLS for TLS links) and
// advertising adv; cfg (nil: plain TCP) is used to dial, dial (nil: a
// net.Dialer) opens the connections.
func NewStream(ln net.Listener, adv net.Addr, cfg *tls.Config, dial DialFunc) *Stream {
	return &Stream{ln: ln, adv: adv, tls: cfg, dial: dial, conns: map[*acceptedConn]struct{}{}}
}

// Addr implements net.Listener: the advertised address.
func (s *Stream) Addr() net.Addr { return s.adv }

// Close implements net.Listener.
func (s *Stream) Close() error { return s.ln.Close() }

// Accept implements net.Listener.
func (s *Stream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	ac := &acceptedConn{Conn: c, s: s}
	s.mu.Lock()
	s.conns[ac] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return ac, nil
}

// Drain closes the accepted connections and waits, at most d, until their
// handlers have closed them too. A heartbeat that came in just before
// Raft shut down may still be handled: it writes the term to the stable
// store, and hashicorp/raft panics if that store is closed by then; call
// Drain after closing the transport and before closing the store.
func (s *Stream) Drain(d time.Duration) {
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Conn.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// acceptedConn is a connection Stream accepted; its first Close lets go.
type acceptedConn struct {
	net.Conn
	s    *Stream
	once sync.Once
}

func (c *acceptedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.s.wg.Done()
	})
	return err
}

// Dial implements raft.StreamLayer.
func (s *Stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
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

// PeerTLSConfig builds the TLS configuration of peer links from PEM
// files: certFile and keyFile are this node's certificate (its SANs must
// cover the name peers verify: the host of its advertised address, or
// serverName) and caFile holds the CA that signed every node's
// certificate. The result requires and verifies certificates in both
// directions (mutual TLS) and TLS 1.3. A non-empty serverName is the name
// verified on every peer (all certificates then carry it as a DNS SAN);
// empty verifies the host of each peer's address.
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
