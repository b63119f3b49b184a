package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/fedgate/fedgate/store"
)

// open starts the node in phases (docs/architecture.md, "The node"). Each
// phase takes what it needs and returns what it built, and what it opened
// even when it fails; open records each result on n at once, so that Close
// (which Open calls on error) releases everything opened before the
// failure.
func (n *Node) open(ctx context.Context) error {
	cfg, log := &n.cfg, n.log
	pre, err := checkStart(cfg, log)
	if err != nil {
		return err
	}
	n.cert = pre.cert
	locks, newIdentity, err := claimDirs(cfg)
	if n.locks = locks; err != nil {
		return err
	}
	l, err := listen(cfg, n.ln, pre.policy)
	if n.ln, n.iln, n.client = l.ln, l.iln, l.client; err != nil {
		return err
	}
	var discovery http.Handler // nil: no internal API (a one-node region)
	if cfg.clustered() {
		n.peer, n.ihs = startInternalAPI(cfg, log, l.iln, &n.late, n.errc)
		discovery = n.peer.Discovery()
	}
	n.front = newFrontHandler(discovery, cfg.Domain, n.late.gw.Load)
	n.hs, n.conns = newS3Server(cfg, log, n.cert, n.front)
	if cfg.clustered() {
		n.serve() // discovery while the region forms; 503 for the rest
	}
	if n.rn, n.cl, err = openRaft(ctx, cfg, log, l, newIdentity); err != nil {
		return err
	}
	if n.cache, n.stage, err = openCacheStaging(cfg, log, cachePeers(cfg, n.cl)); err != nil {
		return err
	}
	self := &member{n.cl, nodeUsage{n.cache, n.stage, n.late.ns.Load}}
	n.late.member.Store(self) // the internal API answers for this node from here on
	if cfg.clustered() {
		if err := joinRegion(ctx, cfg, log, n.cl, pre.policy); err != nil {
			return err
		}
	}
	reg, err := settlePolicy(ctx, cfg, log, n.cl, pre.policy)
	if err != nil {
		return err
	}
	n.region = reg.name
	built, err := buildNamespace(ctx, cfg, log, nsInputs{n.rn, n.cl, n.cache, n.stage, reg})
	if n.rcat, n.unsub = built.rcat, append(n.unsub, built.unsub...); err != nil {
		return err
	}
	n.ns, n.defStore = built.ns, built.defStore
	n.late.ns.Store(n.ns) // the internal API's staging and chunk routes serve from here on
	pm, unsub := startPolicy(ctx, cfg, log, n.rn, built, reg)
	n.unsub = append(n.unsub, unsub)
	n.halt = startLoops(ctx, cfg, n.ns, pm, n.cl, n.cache)
	if n.creds, n.generated, err = rootCredentials(ctx, n.ns, cfg); err != nil {
		return err
	}
	if err := openCatalog(cfg, n.rcat, n.creds, n.rn); err != nil {
		return err
	}
	metrics, err := registerMetrics(metricSources{n.conns, n.rn, n.cache, n.cl.clocks, n.cert, n.ns, pm, n.rcat})
	if err != nil {
		return err
	}
	admin := regionErrCluster{&regionAdmin{self, n.ns}}
	gw, stopCharts, err := buildGateway(ctx, cfg, log, gatewayInputs{n.ns, metrics, admin, pm, reg.name, n.rcat})
	if err != nil {
		return err
	}
	n.gw, n.unsub = gw, append(n.unsub, stopCharts)
	n.late.gw.Store(gw) // the S3 port serves S3 from here on
	n.lln, n.lhs, n.debug, err = openExtras(cfg, log, n.front)
	return err
}

// handoff carries what a later phase builds to the handlers an earlier one
// started serving (the S3 port and the internal API serve while the
// region forms). Each is stored once, when built, and read with Load (nil:
// not yet). With regionstate's Forward (openRaft) these are the node's
// only late bindings.
type handoff struct {
	member atomic.Pointer[member]               // the internal API's Backend
	ns     atomic.Pointer[federation.Namespace] // the internal API's Data; the degraded data in this node's info
	gw     atomic.Pointer[gateway.Server]       // the S3 port's handler (frontHandler)
}

func (h *handoff) backend() peerapi.Backend {
	if m := h.member.Load(); m != nil {
		return m
	}
	return nil
}

func (h *handoff) data() peerapi.Data {
	if ns := h.ns.Load(); ns != nil {
		return ns
	}
	return nil
}

// startChecks is what the first phase reads and checks.
type startChecks struct {
	policy []byte  // the --config file (nil: none)
	cert   *s3Cert // the S3 port's certificate (nil: plain HTTP)
}

// checkStart reads and checks the policy file and the S3 port's
// certificate before anything is touched: a bad one fails the start,
// naming the file, and changes nothing.
func checkStart(cfg *Config, log *slog.Logger) (startChecks, error) {
	var c startChecks
	if cfg.PolicyFile != "" {
		var err error
		if c.policy, err = os.ReadFile(cfg.PolicyFile); err != nil {
			return c, fmt.Errorf("--config: %w", err)
		}
		if _, err := policies.Parse(cfg.PolicyFile, c.policy, ServedFeatures()); err != nil {
			return c, err
		}
	}
	if cfg.tls() {
		var err error
		if c.cert, err = newS3Cert(cfg.CertFile, cfg.KeyFile, log.With("component", "tls")); err != nil {
			return c, err
		}
	}
	return c, nil
}

// claimDirs creates the data and cache dirs and locks them: one process
// per dir, refused at once with the holder's PID; one node id per data dir
// for ever (datadir.go). It returns the locks taken (also on error) and
// whether the data dir's identity record was created now.
func claimDirs(cfg *Config) (locks []*os.File, newIdentity bool, err error) {
	for _, d := range []string{cfg.DataDir, cfg.CacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, false, fmt.Errorf("create %s: %w", d, err)
		}
	}
	dirs := []struct{ dir, flag string }{{cfg.DataDir, "--data-dir"}}
	if rel, err := filepath.Rel(cfg.DataDir, cfg.CacheDir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		dirs = append(dirs, struct{ dir, flag string }{cfg.CacheDir, "--cache-dir"})
	}
	for _, d := range dirs {
		f, err := lockDir(d.dir, d.flag, cfg.Now())
		if err != nil {
			return locks, false, err
		}
		locks = append(locks, f)
	}
	newIdentity, err = checkIdentity(cfg.DataDir, cfg.NodeID, cfg.Region, cfg.Now())
	return locks, newIdentity, err
}

// links are what the listen phase opens and works out.
type links struct {
	ln, iln  net.Listener    // the S3 port; the internal API's (nil: a one-node region)
	httpAddr string          // this node's S3 URL as peers reach it ("": a one-node region)
	internal string          // the internal API's URL ("": none)
	peerTLS  *tls.Config     // Raft's and the internal API's mutual TLS (nil: plain)
	client   *peerapi.Client // for the other nodes' internal APIs and S3 ports
}

// listen opens the S3 port (unless ln is given) and, on a multi-node node,
// the internal API's port (listenPeers), and builds the client for the
// other nodes. It returns the listeners it has also on error.
func listen(cfg *Config, ln net.Listener, policy []byte) (links, error) {
	l := links{ln: ln}
	if l.ln == nil {
		var err error
		if l.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return l, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
	}
	var s3TLS *tls.Config
	if cfg.clustered() {
		var err error
		if l, s3TLS, err = listenPeers(cfg, l, policy); err != nil {
			return l, err
		}
	}
	l.client = peerapi.NewClient(peerapi.ClientConfig{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
		SigningRegion: cfg.SigningRegion, Self: l.httpAddr, SelfInternal: l.internal, Join: cfg.Join, TLS: l.peerTLS,
		S3TLS: s3TLS, Dial: cfg.Dial})
	return l, nil
}

// listenPeers is listen's part on a multi-node node: the peers' TLS, the
// internal API's listener and the TLS for other nodes' S3 ports.
func listenPeers(cfg *Config, l links, policy []byte) (links, *tls.Config, error) {
	if cfg.joins() && policy != nil {
		if p, _ := policies.Parse(cfg.PolicyFile, policy, ServedFeatures()); p == nil || len(p.Stores) == 0 {
			return l, nil, errors.New(SharedStoreMsg)
		}
	}
	l.httpAddr = advertisedURL(cfg.s3Scheme(), l.ln.Addr(), cfg.RaftAddr)
	if cfg.PeerCertFile != "" {
		var err error
		if l.peerTLS, err = regionstate.PeerTLSConfig(cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerCAFile, cfg.PeerServerName); err != nil {
			return l, nil, err
		}
	}
	// The Raft transport opens later; check its port first, so that a
	// collision with another node's internal API names both flags.
	if err := checkRaftAddrFree(cfg.RaftAddr); err != nil {
		return l, nil, err
	}
	iln, err := listenInternal(cfg, l.peerTLS)
	if err != nil {
		return l, nil, err
	}
	l.iln, l.internal = iln, advertisedInternal(iln.Addr(), cfg.RaftAddr, l.peerTLS != nil)
	// Other nodes' S3 ports (their discovery answers) may serve https.
	pool, err := s3CAPool(cfg)
	if err != nil {
		return l, nil, err
	}
	return l, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// startInternalAPI serves the internal API on iln (mutual TLS with the
// peer certificates). It answers 503 until late holds this node's member
// (openRaft, openCacheStaging) and its staging and chunk routes until late
// holds the namespace; serving errors go to errc.
func startInternalAPI(cfg *Config, log *slog.Logger, iln net.Listener, late *handoff, errc chan<- error) (*peerapi.Server, *http.Server) {
	peer := peerapi.NewServer(peerapi.ServerConfig{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
		SigningRegion: cfg.SigningRegion, Logger: clusterLog(log), Backend: late.backend, Data: late.data})
	hs := &http.Server{Handler: peer.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { errc <- hs.Serve(iln) }()
	return peer, hs
}

// newS3Server builds the S3 port's server for front (HTTPS only, HTTP/1.1
// only, with a certificate) and the limiter of its unauthenticated
// connections; Node.serve starts it.
func newS3Server(cfg *Config, log *slog.Logger, cert *s3Cert, front http.Handler) (*http.Server, *gateway.ConnLimiter) {
	limit := cfg.UnauthenticatedConns
	if limit == 0 {
		limit = gateway.DefaultUnauthenticatedConns
	}
	hs := &http.Server{
		Handler:           front,
		ConnContext:       gateway.ConnContext,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if cert != nil {
		// AWS S3 speaks HTTP/1.1, and S3 clients (whose transports would
		// try h2) behave as they do there.
		hs.TLSConfig = cert.serverConfig()
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetHTTP1(true)
		hs.ErrorLog = quietHandshakes(log)
	}
	return hs, gateway.NewConnLimiter(limit)
}

// openRaft opens the region's Raft state over what listen opened and
// builds the cluster on it. regionstate's Forward is bound late: the
// cluster forwards for the Raft state it is built on, so Forward reaches
// it through a pointer stored once the state is open (before that a write
// is not sent, and raft retries). On error it returns what it opened.
func openRaft(ctx context.Context, cfg *Config, log *slog.Logger, l links, newIdentity bool) (*regionstate.Node, *cluster, error) {
	rcfg := raftConfig(cfg, log, l.peerTLS)
	var self atomic.Pointer[cluster]
	if cfg.clustered() {
		rcfg.Forward = func(ctx context.Context, leaderID, leaderAddr string, data []byte) (uint64, error) {
			c := self.Load()
			if c == nil {
				return 0, &regionstate.NotLeaderError{}
			}
			return c.forward(ctx, leaderID, leaderAddr, data)
		}
	}
	openCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	rn, err := regionstate.Open(openCtx, rcfg)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("open region state: %w", err)
	}
	cl := newCluster(cfg, log, l, rn)
	self.Store(cl)
	if !newIdentity {
		return rn, cl, nil
	}
	// A data dir from before the identity record: its Raft state says
	// whose it is.
	if m, err := rn.Members(); err == nil {
		ids, addrs := make([]string, len(m)), make([]string, len(m))
		for i, x := range m {
			ids[i], addrs[i] = x.ID, x.Address
		}
		return rn, cl, checkMembership(cfg.DataDir, cfg.NodeID, rn.Addr(), ids, addrs)
	}
	return rn, cl, nil
}

// raftConfig is the region state's configuration: in memory on a
// one-node region, over TCP (TLS with peerTLS) on a multi-node one, where
// --bootstrap-expect, --join and --bootstrap say how the region forms.
func raftConfig(cfg *Config, log *slog.Logger, peerTLS *tls.Config) regionstate.Config {
	rcfg := regionstate.Config{NodeID: cfg.NodeID, Dir: filepath.Join(cfg.DataDir, "raft"), Logger: log.With("component", "raft"),
		SnapshotThreshold: cfg.RaftSnapshotThreshold, TrailingLogs: cfg.RaftTrailingLogs, ElectionTimeout: cfg.RaftElectionTimeout,
		LogStore: cfg.RaftLogStore}
	if !cfg.clustered() {
		return rcfg
	}
	rcfg.BindAddr, rcfg.Dial, rcfg.TLS = cfg.RaftAddr, cfg.Dial, peerTLS
	switch {
	case cfg.BootstrapExpect > 1:
		rcfg.BootstrapExpect = cfg.BootstrapExpect
	case len(cfg.Join) > 0 && !cfg.Bootstrap:
		rcfg.BootstrapExpect = 2 // never bootstrap alone: wait to be added
	default:
		rcfg.Bootstrap = true // --bootstrap, or a one-node region over TCP
	}
	return rcfg
}

// cachePeers is the cache's cachetier.PeerClient: the cluster on a
// multi-node node, none on a one-node region.
func cachePeers(cfg *Config, cl *cluster) cachetier.PeerClient {
	if cfg.clustered() {
		return cl
	}
	return nil
}

// openCacheStaging opens the chunk cache (peers: where the chunks other
// nodes own are read) and the write-back staging area. It returns the
// cache also when staging fails.
func openCacheStaging(cfg *Config, log *slog.Logger, peers cachetier.PeerClient) (*cachetier.Cache, *staging.Area, error) {
	cache, err := openCache(cfg, log, peers, statfs)
	if err != nil {
		return nil, nil, err
	}
	stage, err := openStaging(cfg, log, statfs)
	return cache, stage, err
}

// joinRegion makes a multi-node node a member of its region (forming it
// with its peers, or joining it) and registers its S3 address, which
// also brings its state up to date with the region's.
func joinRegion(ctx context.Context, cfg *Config, log *slog.Logger, cl *cluster, policy []byte) error {
	m, err := cl.raft.Members()
	if err != nil {
		return fmt.Errorf("read the region's members: %w", err)
	}
	switch {
	case len(m) > 0 && cfg.joins():
		log.Info("this node already has Raft state: --bootstrap-expect and --join are ignored; rejoining", "members", len(m))
	case len(m) == 0 && cfg.joins() && policy == nil:
		return errors.New(SharedStoreMsg + ", and start every new node with it (--config FILE)")
	}
	if err := cl.form(ctx); err != nil {
		return err
	}
	return cl.register(ctx)
}

// regionPolicy is what settlePolicy settles: the policy in force and the
// region this node serves.
type regionPolicy struct {
	pol     *policies.Policy // nil: embedded defaults
	version uint64           // pol's Raft version (0: embedded defaults)
	seeded  bool             // this start seeded the region's policy from its file
	name    string           // the region this node serves
	id      string           // the region's id (identity.go)
}

// settlePolicy puts the region's policy in force (seeding it from the
// policy file on a region that has none) and names the region.
func settlePolicy(ctx context.Context, cfg *Config, log *slog.Logger, cl *cluster, policy []byte) (regionPolicy, error) {
	rn := cl.raft
	_, hadPolicy := rn.State().Policy()
	pol, err := activePolicy(ctx, rn, cfg.PolicyFile, policy, log)
	for try := 0; cfg.clustered() && try < 3 && (errors.Is(err, regionstate.ErrStalePolicy) || errors.Is(err, regionstate.ErrLeadershipLost)); try++ {
		// Another founding node seeded the policy first, or the leader
		// changed while this node's seed was in flight (it may have
		// landed): catch up and use what the region has.
		if err = cl.register(ctx); err == nil {
			pol, err = activePolicy(ctx, rn, cfg.PolicyFile, policy, log)
		}
	}
	if err != nil {
		return regionPolicy{}, err
	}
	if cfg.clustered() && cfg.joins() && (pol == nil || len(pol.Stores) == 0) {
		return regionPolicy{}, errors.New(SharedStoreMsg)
	}
	r := regionPolicy{pol: pol}
	if pol != nil {
		if a, ok := rn.State().Policy(); ok {
			r.version = a.Version
		}
	}
	r.seeded = !hadPolicy && pol != nil && r.version == 1 && policy != nil
	if r.name, err = regionName(pol, cfg.Region); err != nil {
		return r, err
	}
	r.id, err = ensureRegionID(ctx, rn)
	return r, err
}

// nsInputs is what buildNamespace builds on.
type nsInputs struct {
	rn    *regionstate.Node
	cl    *cluster
	cache *cachetier.Cache
	stage *staging.Area
	reg   regionPolicy
}

// builtNS is what buildNamespace builds.
type builtNS struct {
	ns       *federation.Namespace
	rcat     *regionCatalog // nil: the policy peers no regions
	stores   map[string]store.Store
	defStore string
	unsub    []func()
}

// buildNamespace opens the policy's stores, claims the default one for
// this region, and builds the namespace over them, the Raft state, the
// cache, staging and (peered regions) the global catalog; the namespace
// follows the Raft log from here on. It returns the catalog also on error.
func buildNamespace(ctx context.Context, cfg *Config, log *slog.Logger, in nsInputs) (builtNS, error) {
	var b builtNS
	var err error
	if b.rcat, err = newRegionCatalog(in.reg.pol, in.reg.name, cfg, log.With("component", "catalog")); err != nil {
		return b, err
	}
	if b.stores, b.defStore, err = openStores(ctx, cfg.DataDir, in.reg.pol, in.reg.name, cfg.LookupEnv); err != nil {
		return b, err
	}
	if err := claimStore(ctx, b.stores[b.defStore], cfg.DataDir, regionMarker{RegionID: in.reg.id, Region: in.reg.name,
		Node: cfg.NodeID, Created: time.Now().UTC()}); err != nil {
		return b, err
	}
	var fcat federation.Catalog
	if b.rcat != nil {
		fcat = b.rcat
	}
	rn := in.rn
	b.ns, err = federation.New(federation.Config{State: rn, Stores: b.stores, DefaultStore: b.defStore, Policy: in.reg.pol,
		PolicyVersion: in.reg.version, Catalog: fcat, Cache: in.cache, FillConcurrency: cfg.FillConcurrency,
		Logger: log.With("component", "federation"), Region: in.cl, RegionLocation: regionLocation(in.reg.pol, cfg.Region),
		EgressRetention: cfg.EgressRetention, ReuseObjects: reuseObjects(cfg.EgressReuseObjects), BudgetRefresh: cfg.EgressBudgetRefresh,
		Lifecycle: federation.LifecycleConfig{Every: cfg.LifecycleEvery, Rate: cfg.LifecycleRate, IsLeader: rn.IsLeader},
		WriteBack: federation.WriteBackConfig{Staging: in.stage, Copies: cfg.WriteBackCopies, Wait: cfg.StagingWait,
			PeerStall: peerStall(cfg.RaftElectionTimeout)},
		Ready: readiness(cfg, rn)})
	if err != nil {
		return b, err
	}
	b.unsub = append(b.unsub, rn.Subscribe(b.ns.OnApply))
	return b, nil
}

// readiness is the namespace's readiness check: a multi-node node is ready
// while its region has a leader, a one-node region while it leads.
func readiness(cfg *Config, rn *regionstate.Node) func(context.Context) error {
	return func(context.Context) error {
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
	}
}

// startPolicy builds the policy manager, which follows the Raft log from
// here on (unsub stops it), and preloads what the policy asks for when
// this start seeded it.
func startPolicy(ctx context.Context, cfg *Config, log *slog.Logger, rn *regionstate.Node, b builtNS, reg regionPolicy) (pm *policyManager, unsub func()) {
	pm = newPolicyManager(rn, b.ns, cfg, reg.pol, b.stores, reg.version, log.With("component", "policy"))
	unsub = rn.Subscribe(pm.onApply)
	if reg.seeded {
		for _, line := range pm.preloadOnApply(ctx, nil, reg.pol) {
			log.Info("policy seeded: " + line)
		}
	}
	return pm, unsub
}

// startLoops installs the cache's pins and starts the namespace's
// drainer, preloader, version collector, store checks, lifecycle runner
// and egress flusher, the policy manager and (multi-node) the cache ring's
// member sync and the clock watch. The func it returns stops them (once)
// and waits for the drainer and the egress flusher.
func startLoops(ctx context.Context, cfg *Config, ns *federation.Namespace, pm *policyManager, cl *cluster, cache *cachetier.Cache) func() {
	ns.StartPins()
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
	if cfg.clustered() {
		go cl.syncMembers(loopCtx, cache)
		go cl.watchClocks(loopCtx)
	}
	return sync.OnceFunc(func() {
		stop()
		<-drainerDone
		<-egressDone // its last flush goes through Raft before the node closes
	})
}

// openCatalog joins a peered region's global catalog with the root
// credentials and registers the buckets the region has.
func openCatalog(cfg *Config, rcat *regionCatalog, creds federation.Credentials, rn *regionstate.Node) error {
	if rcat == nil {
		return nil
	}
	if err := rcat.resolveCredential(cfg, creds); err != nil {
		return err
	}
	if err := rcat.open(cfg); err != nil {
		return err
	}
	rcat.registerExisting(rn.State(), filepath.Join(cfg.DataDir, "catalog"))
	return nil
}

// metricSources are the node's parts that export metrics.
type metricSources struct {
	conns  *gateway.ConnLimiter
	rn     *regionstate.Node
	cache  *cachetier.Cache
	clocks *clockWatch
	cert   *s3Cert // nil: plain HTTP
	ns     *federation.Namespace
	pm     *policyManager
	rcat   *regionCatalog // nil: the policy peers no regions
}

// registerMetrics builds the node's Prometheus registry: Go and process
// metrics and every part's.
func registerMetrics(m metricSources) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.conns.Collector())
	reg.MustRegister(raftMetrics(m.rn)...)
	if m.rcat != nil {
		reg.MustRegister(m.rcat.metrics()...)
	}
	if err := m.cache.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	if err := reg.Register(m.clocks.offsets); err != nil {
		return nil, err
	}
	if m.cert != nil {
		if err := reg.Register(m.cert.notAfterGauge()); err != nil {
			return nil, err
		}
	}
	if err := m.ns.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	if err := m.pm.register(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// gatewayInputs is what buildGateway builds on.
type gatewayInputs struct {
	ns      *federation.Namespace
	metrics *prometheus.Registry
	cluster gateway.Cluster
	pm      *policyManager
	region  string
	rcat    *regionCatalog // nil: not peered
}

// buildGateway builds the S3 gateway (and admin API and console) over the
// namespace and starts the console's charts, which sample the registry;
// stopCharts stops them.
func buildGateway(ctx context.Context, cfg *Config, log *slog.Logger, in gatewayInputs) (gw *gateway.Server, stopCharts func(), err error) {
	gw, err = gateway.New(gateway.Config{Backend: in.ns.Backend(), Region: cfg.SigningRegion, Domain: cfg.Domain, Logger: log,
		Registry: in.metrics, Version: cfg.Version, Cluster: in.cluster, Policy: regionErrPolicy{in.pm}, RegionName: in.region,
		Batch: cfg.Batch, LocalLease: cfg.LocalLease, Regions: regionsOf(in.rcat, in.ns), BodyTimeout: cfg.BodyTimeout,
		NodeID: cfg.NodeID, ChartInterval: cfg.ChartInterval})
	if err != nil {
		return nil, nil, err
	}
	chartsCtx, stopCharts := context.WithCancel(context.WithoutCancel(ctx))
	go gw.RunCharts(chartsCtx)
	return gw, stopCharts, nil
}

// openExtras opens the local socket (served by Run; lhs is nil without
// --local-socket) and serves pprof on --debug-listen (debug is nil
// without). It returns what it opened also on error.
func openExtras(cfg *Config, log *slog.Logger, front http.Handler) (lln net.Listener, lhs, debug *http.Server, err error) {
	if cfg.LocalSocket != "" {
		if lln, err = listenLocal(cfg.LocalSocket, cfg.LocalSocketMode, cfg.LocalSocketGroup); err != nil {
			return nil, nil, nil, err
		}
		lhs = &http.Server{Handler: front, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	if cfg.DebugListen != "" {
		if debug, err = serveDebug(cfg.DebugListen, log); err != nil {
			return lln, lhs, nil, err
		}
	}
	return lln, lhs, debug, nil
}
