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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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

func (n *Node) open(ctx context.Context) error {
	cfg, log := &n.cfg, n.log
	var fileData []byte
	if cfg.PolicyFile != "" {
		// Validate before touching any state: a bad file changes nothing.
		var err error
		if fileData, err = os.ReadFile(cfg.PolicyFile); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if _, err := policies.Parse(cfg.PolicyFile, fileData, ServedFeatures()); err != nil {
			return err
		}
	}
	if cfg.tls() {
		// A certificate that cannot be served fails the start, before
		// anything is touched, naming the file at fault.
		var err error
		if n.cert, err = newS3Cert(cfg.CertFile, cfg.KeyFile, log.With("component", "tls")); err != nil {
			return err
		}
	}
	for _, d := range []string{cfg.DataDir, cfg.CacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	// One process per data dir (and cache dir), refused at once with the
	// holder's PID; one node id per data dir for ever (datadir.go).
	dirs := []struct{ dir, flag string }{{cfg.DataDir, "--data-dir"}}
	if rel, err := filepath.Rel(cfg.DataDir, cfg.CacheDir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		dirs = append(dirs, struct{ dir, flag string }{cfg.CacheDir, "--cache-dir"})
	}
	for _, d := range dirs {
		f, err := lockDir(d.dir, d.flag, cfg.Now())
		if err != nil {
			return err
		}
		n.locks = append(n.locks, f)
	}
	newIdentity, ierr := checkIdentity(cfg.DataDir, cfg.NodeID, cfg.Region, cfg.Now())
	if ierr != nil {
		return ierr
	}
	if n.ln == nil {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		n.ln = ln
	}

	rcfg := regionstate.Config{NodeID: cfg.NodeID, Dir: filepath.Join(cfg.DataDir, "raft"), Logger: log.With("component", "raft"),
		SnapshotThreshold: cfg.RaftSnapshotThreshold, TrailingLogs: cfg.RaftTrailingLogs, ElectionTimeout: cfg.RaftElectionTimeout,
		LogStore: cfg.RaftLogStore}
	cl := &cluster{id: cfg.NodeID, log: log, tcp: cfg.clustered(), now: cfg.Now, clocks: newClockWatch(), s3URL: cfg.s3URL, dial: cfg.Dial}
	n.cl = cl
	var s3TLS *tls.Config
	if cfg.clustered() {
		if cfg.joins() && fileData != nil {
			if p, _ := policies.Parse(cfg.PolicyFile, fileData, ServedFeatures()); p == nil || len(p.Stores) == 0 {
				return errors.New(SharedStoreMsg)
			}
		}
		cl.httpAddr, cl.join, cl.expect = advertisedURL(cfg.s3Scheme(), n.ln.Addr(), cfg.RaftAddr), cfg.Join, cfg.BootstrapExpect
		cl.log = log.With("component", "cluster")
		rcfg.BindAddr = cfg.RaftAddr
		rcfg.Forward = cl.forward
		rcfg.Dial = cfg.Dial
		switch {
		case cfg.BootstrapExpect > 1:
			rcfg.BootstrapExpect = cfg.BootstrapExpect
		case len(cfg.Join) > 0 && !cfg.Bootstrap:
			rcfg.BootstrapExpect = 2 // never bootstrap alone: wait to be added
		default:
			rcfg.Bootstrap = true // --bootstrap, or a one-node region over TCP
		}
		if cfg.PeerCertFile != "" {
			var err error
			if rcfg.TLS, err = regionstate.PeerTLSConfig(cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerCAFile, cfg.PeerServerName); err != nil {
				return err
			}
		}
		// The Raft transport opens later; check its port first, so that a
		// collision with another node's internal API names both flags.
		if err := checkRaftAddrFree(cfg.RaftAddr); err != nil {
			return err
		}
		iln, err := listenInternal(cfg, rcfg.TLS)
		if err != nil {
			return err
		}
		n.iln = iln
		cl.internal = advertisedInternal(iln.Addr(), cfg.RaftAddr, rcfg.TLS != nil)
		// Other nodes' S3 ports (their discovery answers) may serve https.
		pool, err := s3CAPool(cfg)
		if err != nil {
			return err
		}
		s3TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cl.client = peerapi.NewClient(peerapi.ClientConfig{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
		SigningRegion: cfg.SigningRegion, Self: cl.httpAddr, SelfInternal: cl.internal, Join: cfg.Join, TLS: rcfg.TLS, S3TLS: s3TLS, Dial: cfg.Dial})

	// The cache and staging open before any server starts: the internal
	// API's info reports their use.
	var peers cachetier.PeerClient
	if cfg.clustered() {
		peers = cl
	}
	var err error
	if n.cache, err = openCache(cfg, log, peers, statfs); err != nil {
		return err
	}
	if n.stage, err = openStaging(cfg, log, statfs); err != nil {
		return err
	}
	cl.cache, cl.stage = n.cache, n.stage

	var internal http.Handler
	if cfg.clustered() {
		// Serve the internal API on its own port (mutual TLS with the peer
		// certificates), and the discovery answer (info) plus 503 for the
		// rest on the S3 port, while the region forms.
		n.peer = peerapi.NewServer(peerapi.ServerConfig{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
			SigningRegion: cfg.SigningRegion, Logger: cl.log})
		internal = n.peer.Discovery()
		n.ihs = &http.Server{Handler: n.peer.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() { n.errc <- n.ihs.Serve(n.iln) }()
	}
	n.front = newFrontHandler(internal, cfg.Domain)
	limit := cfg.UnauthenticatedConns
	if limit == 0 {
		limit = gateway.DefaultUnauthenticatedConns
	}
	n.conns = gateway.NewConnLimiter(limit)
	n.hs = &http.Server{
		Handler:           n.front,
		ConnContext:       gateway.ConnContext,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n.cert != nil {
		// HTTPS only, HTTP/1.1 only: AWS S3 speaks HTTP/1.1, and S3
		// clients (whose transports would try h2) behave as they do there.
		n.hs.TLSConfig = n.cert.serverConfig()
		n.hs.Protocols = new(http.Protocols)
		n.hs.Protocols.SetHTTP1(true)
		n.hs.ErrorLog = quietHandshakes(log)
	}
	if cfg.clustered() {
		n.serve()
	}

	openCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	rn, err := regionstate.Open(openCtx, rcfg)
	cancel()
	if err != nil {
		return fmt.Errorf("open region state: %w", err)
	}
	n.rn, cl.raft = rn, rn
	if newIdentity {
		// A data dir from before the identity record: its Raft state
		// says whose it is.
		if m, err := rn.Members(); err == nil {
			ids, addrs := make([]string, len(m)), make([]string, len(m))
			for i, x := range m {
				ids[i], addrs[i] = x.ID, x.Address
			}
			if err := checkMembership(cfg.DataDir, cfg.NodeID, rn.Addr(), ids, addrs); err != nil {
				return err
			}
		}
	}
	if cfg.clustered() {
		n.peer.Start(cl)
		m, err := rn.Members()
		if err != nil {
			return fmt.Errorf("read the region's members: %w", err)
		}
		switch {
		case len(m) > 0 && cfg.joins():
			log.Info("this node already has Raft state: --bootstrap-expect and --join are ignored; rejoining", "members", len(m))
		case len(m) == 0 && cfg.joins() && fileData == nil:
			return errors.New(SharedStoreMsg + ", and start every new node with it (--config FILE)")
		}
		if err := cl.form(ctx); err != nil {
			return err
		}
		if err := cl.register(ctx); err != nil {
			return err
		}
	}

	_, hadPolicy := rn.State().Policy()
	pol, err := activePolicy(ctx, rn, cfg.PolicyFile, fileData, log)
	for try := 0; cfg.clustered() && try < 3 && (errors.Is(err, regionstate.ErrStalePolicy) || errors.Is(err, regionstate.ErrLeadershipLost)); try++ {
		// Another founding node seeded the policy first, or the leader
		// changed while this node's seed was in flight (it may have
		// landed): catch up and use what the region has.
		if err = cl.register(ctx); err == nil {
			pol, err = activePolicy(ctx, rn, cfg.PolicyFile, fileData, log)
		}
	}
	if err != nil {
		return err
	}
	if cfg.clustered() && cfg.joins() && (pol == nil || len(pol.Stores) == 0) {
		return errors.New(SharedStoreMsg)
	}
	if n.region, err = regionName(pol, cfg.Region); err != nil {
		return err
	}
	regionID, err := ensureRegionID(ctx, rn)
	if err != nil {
		return err
	}
	rcat, err := newRegionCatalog(pol, n.region, cfg, log.With("component", "catalog"))
	if err != nil {
		return err
	}
	n.rcat = rcat
	stores, defStore, err := openStores(ctx, cfg.DataDir, pol, n.region, cfg.LookupEnv)
	if err != nil {
		return err
	}
	if err := claimStore(ctx, stores[defStore], cfg.DataDir, regionMarker{RegionID: regionID, Region: n.region, Node: cfg.NodeID,
		Created: time.Now().UTC()}); err != nil {
		return err
	}
	n.defStore = defStore
	activeVersion := uint64(0)
	if pol != nil {
		if a, ok := rn.State().Policy(); ok {
			activeVersion = a.Version
		}
	}
	var fcat federation.Catalog
	if rcat != nil {
		fcat = rcat
	}
	ns, err := federation.New(federation.Config{State: rn, Stores: stores, DefaultStore: defStore, Policy: pol, PolicyVersion: activeVersion,
		Catalog: fcat,
		Cache:   n.cache, FillConcurrency: cfg.FillConcurrency, Logger: log.With("component", "federation"),
		Region:          cl,
		RegionLocation:  regionLocation(pol, cfg.Region),
		EgressRetention: cfg.EgressRetention,
		ReuseObjects:    reuseObjects(cfg.EgressReuseObjects),
		BudgetRefresh:   cfg.EgressBudgetRefresh,
		Lifecycle:       federation.LifecycleConfig{Every: cfg.LifecycleEvery, Rate: cfg.LifecycleRate, IsLeader: rn.IsLeader},
		WriteBack: federation.WriteBackConfig{Staging: n.stage, Copies: cfg.WriteBackCopies, Wait: cfg.StagingWait,
			PeerStall: peerStall(cfg.RaftElectionTimeout)}})
	if err != nil {
		return err
	}
	n.ns, cl.ns = ns, ns
	n.unsub = append(n.unsub, rn.Subscribe(ns.OnApply))
	if n.peer != nil {
		n.peer.ServeData(ns)
	}
	pm := newPolicyManager(rn, ns, cfg, pol, stores, activeVersion, log.With("component", "policy"))
	n.unsub = append(n.unsub, rn.Subscribe(pm.onApply))
	if !hadPolicy && pol != nil && activeVersion == 1 && fileData != nil {
		// This node seeded the region's policy: preload what it asks to.
		for _, line := range pm.preloadOnApply(ctx, nil, pol) {
			log.Info("policy seeded: " + line)
		}
	}
	ns.StartPins()
	n.startLoops(ctx, pm)
	ns.SetReady(func(context.Context) error {
		if cfg.clustered() {
			if id, _ := rn.Leader(); id == "" {
				return errors.New("the region has no Raft leader")
			}
			return nil
		}
		if !rn.IsLeader() {
			return errors.New("this node is not the region's Raft leader")
		}
		return nil
	})
	if n.creds, n.generated, err = rootCredentials(ctx, ns, cfg); err != nil {
		return err
	}
	if rcat != nil {
		if err := rcat.resolveCredential(cfg, n.creds); err != nil {
			return err
		}
		if err := rcat.open(cfg); err != nil {
			return err
		}
		rcat.registerExisting(rn.State(), filepath.Join(cfg.DataDir, "catalog"))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), n.conns.Collector())
	reg.MustRegister(raftMetrics(rn)...)
	if err := n.cache.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := reg.Register(n.cl.clocks.offsets); err != nil {
		return err
	}
	if n.cert != nil {
		if err := reg.Register(n.cert.notAfterGauge()); err != nil {
			return err
		}
	}
	if err := ns.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := pm.register(reg); err != nil {
		return err
	}
	n.gw, err = gateway.New(gateway.Config{Backend: ns.Backend(), Region: cfg.SigningRegion, Domain: cfg.Domain, Logger: log, Registry: reg,
		Version: cfg.Version, Cluster: regionErrCluster{cl}, Policy: regionErrPolicy{pm}, RegionName: n.region, Batch: cfg.Batch,
		LocalLease: cfg.LocalLease, Regions: regionsOf(rcat, ns), BodyTimeout: cfg.BodyTimeout,
		NodeID: cfg.NodeID, ChartInterval: cfg.ChartInterval})
	if err != nil {
		return err
	}
	n.front.setGateway(n.gw)
	chartsCtx, stopCharts := context.WithCancel(context.WithoutCancel(ctx))
	go n.gw.RunCharts(chartsCtx) // the console's charts sample the registry
	n.unsub = append(n.unsub, stopCharts)
	if cfg.LocalSocket != "" {
		if n.lln, err = listenLocal(cfg.LocalSocket, cfg.LocalSocketMode, cfg.LocalSocketGroup); err != nil {
			return err
		}
		n.lhs = &http.Server{Handler: n.front, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}

	if cfg.DebugListen != "" {
		if n.debug, err = serveDebug(cfg.DebugListen, log); err != nil {
			return err
		}
	}
	return nil
}

// startLoops starts the namespace's drainer, preloader, lifecycle
// runner and egress flusher, the policy manager and (multi-node) the cache ring's member
// sync; n.halt stops them.
func (n *Node) startLoops(ctx context.Context, pm *policyManager) {
	ns := n.ns
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	drainerDone, egressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drainerDone)
		ns.RunDrainer(loopCtx)
	}()
	go ns.RunPreloader(loopCtx)
	go ns.RunVersionCollector(loopCtx)
	go ns.CheckStoresEvery(loopCtx, federation.StoreCheckInterval)
	go ns.RunLifecycle(loopCtx) // passes only while this node leads the region
	go pm.run(loopCtx)
	go func() {
		defer close(egressDone)
		ns.RunEgress(loopCtx)
	}()
	pm.notify() // a newer policy may have been applied while this node was starting
	if n.cfg.clustered() {
		go n.cl.syncMembers(loopCtx)
		go n.cl.watchClocks(loopCtx)
	}
	n.halt = sync.OnceFunc(func() {
		stop()
		<-drainerDone
		<-egressDone // its last flush goes through Raft before the node closes
	})
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
		if n.cl != nil && n.cl.client != nil {
			n.cl.client.CloseIdle()
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
