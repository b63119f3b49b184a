package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/node/peerapi"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
)

// Node is one running gateway node. Open builds it, Run serves until its
// context ends, Close releases what Open took (after Run, or instead).
type Node struct {
	cfg Config
	log *slog.Logger

	locks     []*os.File   // the data dir's (and cache dir's) lock files, held until Close
	ln, iln   net.Listener // the S3 port; the internal API's (nil: none)
	hs, ihs   *http.Server
	debug     *http.Server // nil: no --debug-listen
	lhs       *http.Server // nil: no --local-socket
	lln       net.Listener
	cert      *s3Cert        // the S3 port's certificate (nil: plain HTTP)
	rcat      *regionCatalog // nil: the policy peers no regions
	front     *frontHandler
	conns     *gateway.ConnLimiter // the S3 port's unauthenticated connections per address
	serving   bool                 // hs serves ln (a multi-node node serves before Raft opens)
	errc      chan error
	client    *peerapi.Client
	cl        *cluster
	peer      *peerapi.Server // nil: no internal API
	rn        *regionstate.Node
	cache     *cachetier.Cache
	stage     *staging.Area
	ns        *federation.Namespace
	gw        *gateway.Server
	unsub     []func()
	halt      func() // stops the background loops (once)
	region    string
	defStore  string
	creds     federation.Credentials
	generated bool

	late handoff // what serves before it is built gets it here (open.go)

	closeOnce sync.Once
	closeErr  error
}

// Open starts a node: it validates cfg, opens the listeners (a multi-node
// node serves discovery on them at once), the cache, staging and the
// Raft state, forms or joins the region, puts the region's policy in force
// and builds the gateway. It returns once the node is ready to serve S3;
// Run serves it. On error everything opened is closed again.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, errc: make(chan error, 2), halt: func() {}}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if cfg.Listener != nil {
		n.ln = cfg.Listener
	}
	if err := n.open(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// peerStall is how long a write-back copy or a staged read waits on a peer
// that does nothing: 1.5 x the election timeout (hashicorp/raft's 1 s when
// not set), at least 1 s, so a frozen peer costs a request on a healthy
// node about as long as a frozen leader does.
func peerStall(election time.Duration) time.Duration {
	if election <= 0 {
		election = time.Second
	}
	return max(3*election/2, time.Second)
}

// serve starts serving the S3 port (HTTPS with a certificate).
func (n *Node) serve() {
	n.serving = true
	if n.cert != nil {
		go func() { n.errc <- n.hs.ServeTLS(n.conns.Listener(n.ln), "", "") }()
		return
	}
	go func() { n.errc <- n.hs.Serve(n.conns.Listener(n.ln)) }()
}

// Run serves S3 until ctx ends, then drains: in-flight requests get
// ShutdownTimeout to finish, background drains give their claims back or
// finish, and the Raft state is closed. A server that fails ends Run with
// its error.
func (n *Node) Run(ctx context.Context) error {
	cfg := &n.cfg
	attrs := []any{"endpoint", n.Endpoint(), "node", cfg.NodeID, "raft_addr", cfg.RaftAddr, "data_dir", cfg.DataDir,
		"cache_dir", cfg.CacheDir, "default_store", n.defStore, "version", cfg.Version}
	if n.cert != nil {
		leaf := n.cert.leaf()
		attrs = append(attrs, "tls_cert_file", cfg.CertFile, "tls_serial", serialHex(leaf), "tls_not_after", leaf.NotAfter.UTC())
	}
	n.log.Info("server started", attrs...)
	if !n.serving {
		n.serve()
	}
	if n.lhs != nil {
		n.log.Info("local socket serving S3 and short-circuit reads", "path", cfg.LocalSocket)
		go func() { n.errc <- n.lhs.Serve(n.lln) }()
	}
	select {
	case err := <-n.errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	n.gw.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := n.hs.Shutdown(sctx); err != nil {
		n.log.Warn("shutdown did not finish in time; closing connections", "error", err)
		_ = n.hs.Close()
	}
	if n.lhs != nil {
		if err := n.lhs.Shutdown(sctx); err != nil {
			_ = n.lhs.Close()
		}
	}
	n.halt() // drains in flight give their claims back or finish first
	if err := n.rn.Close(); err != nil {
		return fmt.Errorf("close region state: %w", err)
	}
	n.log.Info("stopped cleanly")
	return nil
}

// Close stops the node's servers and loops and closes its Raft state,
// cache and listeners. It may be called more than once, after Run or
// instead of it.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.halt()
		if n.hs != nil {
			_ = n.hs.Close()
		}
		if n.ihs != nil {
			_ = n.ihs.Close()
		}
		if n.lhs != nil {
			_ = n.lhs.Close()
		} else if n.lln != nil {
			_ = n.lln.Close()
		}
		if n.debug != nil {
			_ = n.debug.Close()
		}
		for _, f := range n.unsub {
			f()
		}
		if n.rcat != nil {
			n.rcat.close()
		}
		if n.rn != nil {
			if err := n.rn.Close(); err != nil {
				n.closeErr = fmt.Errorf("close region state: %w", err)
			}
		}
		if n.cache != nil {
			_ = n.cache.Close()
		}
		if n.client != nil {
			n.client.CloseIdle()
		}
		for _, ln := range []net.Listener{n.ln, n.iln} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		for _, f := range n.locks {
			_ = f.Close() // last: everything in the dirs is closed
		}
	})
	return n.closeErr
}

// ID is the node's Raft id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Endpoint is the S3 endpoint: "http://" ("https://" with --cert-file)
// and the address the S3 port is bound to.
func (n *Node) Endpoint() string { return n.cfg.s3Scheme() + "://" + n.ln.Addr().String() }

// Addr is the address the S3 port is bound to.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// InternalAddr is the address the internal API is bound to (nil: a
// one-node region has none).
func (n *Node) InternalAddr() net.Addr {
	if n.iln == nil {
		return nil
	}
	return n.iln.Addr()
}

// RegionName is the region this node serves.
func (n *Node) RegionName() string { return n.region }

// Raft is the node's Raft member.
func (n *Node) Raft() *regionstate.Node { return n.rn }

// Namespace is the node's namespace.
func (n *Node) Namespace() *federation.Namespace { return n.ns }

// Cache is the node's chunk cache.
func (n *Node) Cache() *cachetier.Cache { return n.cache }

// Staging is the node's write-back staging area.
func (n *Node) Staging() *staging.Area { return n.stage }

// RootCredentials are the region's root credentials as this node knows
// them (the secret only when it was given or generated here); generated
// reports that this start generated them (and saved them to
// CredentialsFile).
func (n *Node) RootCredentials() (c federation.Credentials, generated bool) {
	return n.creds, n.generated
}

// regionName is the region this node serves: "local" on embedded defaults
// or a policy without regions, else the one region names (or the only one).
func regionName(p *policies.Policy, region string) (string, error) {
	if p == nil || len(p.Regions) == 0 {
		if region != "" && region != "local" {
			return "", fmt.Errorf("--region %q: the policy declares no regions", region)
		}
		return "local", nil
	}
	r, err := p.Region(region)
	if err != nil {
		return "", fmt.Errorf("--region: %w", err)
	}
	return r.Name, nil
}

// regionLocation is the region's "cloud:region" for egress accounting:
// the policy's region entry, or onprem:local on embedded defaults.
func regionLocation(p *policies.Policy, region string) string {
	if p == nil || len(p.Regions) == 0 {
		return "onprem:local"
	}
	r, err := p.Region(region)
	if err != nil {
		return "onprem:local"
	}
	return r.Location.String()
}

// rootCredentials installs the root key pair: from the config, else the
// one already in the region's state, else a new one (generated reports
// that).
func rootCredentials(ctx context.Context, ns *federation.Namespace, cfg *Config) (federation.Credentials, bool, error) {
	if cfg.AccessKey != "" {
		c := federation.Credentials{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey}
		return c, false, ns.Users().EnsureRoot(ctx, c)
	}
	for _, u := range ns.Users().List() {
		if u.Root {
			return federation.Credentials{AccessKey: u.AccessKey}, false, nil
		}
	}
	c := federation.NewCredentials()
	if err := ns.Users().EnsureRoot(ctx, c); err != nil {
		return c, false, err
	}
	data, _ := json.MarshalIndent(c, "", "  ")
	if err := writePrivate(CredentialsFile(cfg.DataDir), append(data, '\n')); err != nil {
		return c, false, fmt.Errorf("save root credentials: %w", err)
	}
	return c, true, nil
}

// writePrivate writes data to file, readable and writable only by this
// user (0600) even when the file was there before with a wider mode.
func writePrivate(file string, data []byte) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serveDebug serves net/http/pprof on its own listener, never on the S3 port.
func serveDebug(addr string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	log.Info("pprof listening", "addr", ln.Addr().String())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return hs, nil
}

// activePolicy returns the region's policy. A policy file seeds a region
// that has none; after that the policy in Raft is the active one, and a
// file that differs only earns a warning.
func activePolicy(ctx context.Context, rn *regionstate.Node, file string, data []byte, log *slog.Logger) (*policies.Policy, error) {
	active, ok := rn.State().Policy()
	switch {
	case !ok && data == nil:
		return nil, nil
	case !ok:
		if err := rn.Apply(ctx, regionstate.SetPolicy{YAML: data, Version: 1}); err != nil {
			return nil, fmt.Errorf("seed the region's policy from %s: %w", file, err)
		}
		log.Info("region policy seeded from file", "file", file)
		return policies.Parse(file, data, ServedFeatures())
	case data != nil && !bytes.Equal(data, active.YAML):
		log.Warn("the --config file differs from the region's active policy; the active policy stays in force (see `fedgate policy diff`)",
			"file", file, "active_version", active.Version)
	}
	return policies.Parse("active policy (version "+strconv.FormatUint(active.Version, 10)+")", active.YAML, ServedFeatures())
}

// openCache opens the region's chunk cache under CacheDir, sized by
// CacheSize or, when that is 0, from the space free there (cacheArea).
func openCache(cfg *Config, log *slog.Logger, peers cachetier.PeerClient, stat statFS) (*cachetier.Cache, error) {
	dir := filepath.Join(cfg.CacheDir, "chunks")
	ccfg := cachetier.Config{Dir: dir, Capacity: cfg.CacheSize, Logger: log.With("component", "cache")}
	if cfg.CacheSize == 0 {
		ccfg.CapacityFor = func(held int64) (int64, error) { return cacheArea.fromFree(stat, log, dir, held) }
	}
	if peers != nil {
		ccfg.Self, ccfg.Peers = cfg.NodeID, peers
	}
	c, err := cachetier.Open(ccfg)
	if err != nil {
		return nil, fmt.Errorf("open the chunk cache: %w", err)
	}
	if cfg.CacheSize != 0 {
		cacheArea.checkGiven(stat, log, dir, cfg.CacheSize, c.Stats().Used)
	}
	return c, nil
}

// openStaging opens the write-back staging area in CacheDir, sized by
// StagingSize or, when that is 0, from the space free there (stagingArea).
func openStaging(cfg *Config, log *slog.Logger, stat statFS) (*staging.Area, error) {
	dir := filepath.Join(cfg.CacheDir, "staging")
	scfg := staging.Config{Dir: dir, Capacity: cfg.StagingSize}
	if cfg.StagingSize == 0 {
		scfg.CapacityFor = func(held int64) (int64, error) { return stagingArea.fromFree(stat, log, dir, held) }
	}
	a, err := staging.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("open the write-back staging area: %w", err)
	}
	if cfg.StagingSize != 0 {
		stagingArea.checkGiven(stat, log, dir, cfg.StagingSize, a.Stats().Used)
	}
	return a, nil
}

// checkRaftAddrFree reports a --raft-addr another process listens on,
// naming the usual culprit: another node on this host whose internal API
// took the port by default (its --raft-addr port + 1).
func checkRaftAddrFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln.Close()
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--raft-addr %s is already in use — by another node's internal API? --internal-addr defaults to "+
			"--raft-addr's port + 1, so nodes on one host with consecutive Raft ports collide: space their Raft ports 2 apart "+
			"(7000, 7002, 7004) or give each node its own --internal-addr", addr)
	}
	return fmt.Errorf("--raft-addr %s: %w", addr, err)
}

// listenInternal opens the internal API's listener: InternalAddr, or the
// RaftAddr host with the next port; TLS when the peers use it.
func listenInternal(cfg *Config, tlsCfg *tls.Config) (net.Listener, error) {
	addr := cfg.InternalAddr
	if addr == "" {
		host, port, err := net.SplitHostPort(cfg.RaftAddr)
		if err != nil {
			return nil, fmt.Errorf("--raft-addr %q: %w", cfg.RaftAddr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p == 0 || p >= 65535 {
			return nil, fmt.Errorf("--raft-addr %q: give --internal-addr too (the default is its port + 1)", cfg.RaftAddr)
		}
		addr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EADDRINUSE) && cfg.InternalAddr == "":
		return nil, fmt.Errorf("--internal-addr %s (default: --raft-addr's port + 1) is already in use — by another node's --raft-addr? "+
			"Give each node its own --internal-addr, or space the Raft ports of the nodes on one host 2 apart (7000, 7002, 7004)", addr)
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("--internal-addr %s is already in use — by another node's --raft-addr or --internal-addr? Give each node its own --internal-addr", addr)
	default:
		return nil, fmt.Errorf("listen for the internal API on %s (--internal-addr): %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// reuseObjects is federation.Config.ReuseObjects for
// Config.EgressReuseObjects, where 0 means off.
func reuseObjects(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
