package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/raft"
)

type serverFlags struct {
	listen, dataDir, cacheDir, config, s3Region, domain string
	accessKey, secretKey, nodeID, logLevel, debugListen string
	cacheSize, region                                   string
	fillConcurrency                                     int
	stagingSize                                         string
	writeBackCopies                                     int
	stagingWait                                         time.Duration
	egressRetention                                     string
	retention                                           time.Duration // parsed egressRetention
	raftSnapshotThreshold, raftTrailingLogs             uint64
	internalAddr                                        string
	shutdownTimeout                                     time.Duration

	// A multi-node region (see docs/operations.md).
	raftAddr                  string
	bootstrapExpect           int
	join                      []string
	bootstrap                 bool
	peerCert, peerKey, peerCA string
	peerServerName            string
}

// clustered reports whether the node runs Raft over TCP (--raft-addr).
func (f serverFlags) clustered() bool { return f.raftAddr != "" }

// checkCluster validates the cluster flags before anything is touched.
func (f serverFlags) checkCluster() error {
	if !f.clustered() {
		if f.bootstrapExpect > 0 || len(f.join) > 0 || f.bootstrap || f.peerCert != "" || f.peerKey != "" || f.peerCA != "" {
			return errors.New("--bootstrap-expect, --join, --bootstrap and --peer-* need --raft-addr HOST:PORT (the address Raft peers dial)")
		}
		return nil
	}
	if f.accessKey == "" || f.secretKey == "" {
		return errors.New("a node of a multi-node region (--raft-addr) needs the root credentials on every node: " +
			"give the same --access-key/--secret-key (or FEDGATE_ACCESS_KEY/FEDGATE_SECRET_KEY) to each node; " +
			"nodes sign their internal API calls with them")
	}
	if f.bootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must be 1 or more")
	}
	if f.bootstrap && f.bootstrapExpect > 1 {
		return errors.New("--bootstrap (start a new cluster alone) and --bootstrap-expect above 1 exclude each other")
	}
	if f.bootstrapExpect > 1 && len(f.join) == 0 {
		return errors.New("--bootstrap-expect needs --join with the other nodes' --listen addresses")
	}
	if f.bootstrapExpect > 1 && len(f.join) < f.bootstrapExpect-1 {
		return fmt.Errorf("--bootstrap-expect %d needs at least %d --join addresses (the other nodes), got %d", f.bootstrapExpect, f.bootstrapExpect-1, len(f.join))
	}
	if (f.peerCert != "" || f.peerKey != "" || f.peerCA != "") && (f.peerCert == "" || f.peerKey == "" || f.peerCA == "") {
		return errors.New("peer TLS needs all three of --peer-cert-file, --peer-key-file and --peer-ca-file")
	}
	return nil
}

// joins reports whether this node forms or joins a multi-node region (as
// opposed to a one-node region over TCP).
func (f serverFlags) joins() bool { return f.bootstrapExpect > 1 || len(f.join) > 0 || f.bootstrap }

const sharedStoreMsg = "a multi-node region needs a shared default store: declare one in the policy file (a NAS path or a cloud bucket)"

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a gateway node (a one-node region on embedded defaults)",
		Long: `Run a fedgate gateway node: the S3 API, health and metrics under /_fedgate/, and
the admin API that 'fedgate user' talks to.

With no --config, the node is a one-node region named "local" with one on-prem store
(a directory under --data-dir); buckets created through S3 live there.

Root credentials come from --access-key/--secret-key (or FEDGATE_ACCESS_KEY and
FEDGATE_SECRET_KEY). If neither is given, a key pair is generated on first start,
kept in the region's state and in DATA-DIR/root-credentials.json, and printed once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.accessKey == "" {
				f.accessKey = os.Getenv("FEDGATE_ACCESS_KEY")
			}
			if f.secretKey == "" {
				f.secretKey = os.Getenv("FEDGATE_SECRET_KEY")
			}
			return runServer(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:9000", "address of the S3 port (also serves /_fedgate/)")
	fl.StringVar(&f.dataDir, "data-dir", "./var", "directory for Raft state and the embedded on-prem store (a persistent disk)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "directory for the chunk cache and write-back staging (NVMe); default DATA-DIR/cache")
	fl.StringVar(&f.config, "config", "", "policy file seeding this region (see docs/policies.md)")
	fl.StringVar(&f.region, "region", "", "which region of the policy file this node serves (not needed when the file declares one)")
	fl.StringVar(&f.s3Region, "s3-region", "us-east-1", "S3 signing region clients must use")
	fl.StringVar(&f.domain, "domain", "", "enable virtual-hosted-style requests for BUCKET.DOMAIN")
	fl.StringVar(&f.accessKey, "access-key", "", "root access key (default $FEDGATE_ACCESS_KEY)")
	fl.StringVar(&f.secretKey, "secret-key", "", "root secret key (default $FEDGATE_SECRET_KEY)")
	fl.StringVar(&f.nodeID, "node-id", "node-1", "this node's Raft id")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.cacheSize, "cache-size", "", "bytes the chunk cache may use, e.g. 2TiB (default: 80% of the cache dir's filesystem)")
	fl.IntVar(&f.fillConcurrency, "fill-concurrency", 8, "parallel ranged reads that fill one large object's chunks from its store")
	fl.StringVar(&f.stagingSize, "staging-size", "", "bytes of --cache-dir that write-back staging may use, e.g. 1TiB (default: 10% of the cache dir's filesystem)")
	fl.IntVar(&f.writeBackCopies, "write-back-copies", 2, "nodes that must hold a write-back write (fsynced) before it is acknowledged")
	fl.Uint64Var(&f.raftSnapshotThreshold, "raft-snapshot-threshold", 8192, "Raft log entries between automatic snapshots")
	fl.Uint64Var(&f.raftTrailingLogs, "raft-trailing-logs", 10240, "Raft log entries a snapshot keeps, so a briefly absent node catches up from the log, not a snapshot")
	fl.DurationVar(&f.stagingWait, "staging-wait", 30*time.Second, "how long a write-back write waits for staging room before it gets 503 SlowDown")
	fl.StringVar(&f.egressRetention, "egress-retention", "400d", "how long the egress ledger keeps its hourly rows, like 90d or 400d (0: for ever)")
	fl.StringVar(&f.debugListen, "debug-listen", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off by default")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 60*time.Second, "how long SIGTERM waits for in-flight requests")
	fl.StringVar(&f.raftAddr, "raft-addr", "", "HOST:PORT of this node's Raft transport (TCP), the address peers dial; enables a multi-node region")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "form a new region once this many nodes (this one included) have met through --join")
	fl.StringSliceVar(&f.join, "join", nil, "other nodes' --listen addresses (ADDR,ADDR,..., with or without http://) to bootstrap with or to join")
	fl.BoolVar(&f.bootstrap, "bootstrap", false, "start a new multi-node region with this node alone; others --join it")
	fl.StringVar(&f.internalAddr, "internal-addr", "", "HOST:PORT of the node-to-node API (forwarded writes, staged copies, chunk reads); default: the --raft-addr host, its port + 1")
	fl.StringVar(&f.peerCert, "peer-cert-file", "", "PEM certificate of this node for the Raft transport's mutual TLS")
	fl.StringVar(&f.peerKey, "peer-key-file", "", "PEM key of --peer-cert-file")
	fl.StringVar(&f.peerCA, "peer-ca-file", "", "PEM CA that signed every node's peer certificate")
	fl.StringVar(&f.peerServerName, "peer-server-name", "", "name every peer certificate carries as a DNS SAN (default: verify the host of each peer's --raft-addr)")
	return cmd
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runServer(ctx context.Context, f serverFlags, out io.Writer) error {
	log, err := newLogger(f.logLevel, os.Stderr)
	if err != nil {
		return err
	}
	if (f.accessKey == "") != (f.secretKey == "") {
		return errors.New("give both --access-key and --secret-key (or FEDGATE_ACCESS_KEY and FEDGATE_SECRET_KEY), or neither")
	}
	if err := f.checkCluster(); err != nil {
		return err
	}
	if f.egressRetention != "0" {
		if f.retention, err = policies.ParseDuration(f.egressRetention); err != nil {
			return fmt.Errorf("--egress-retention %q: %v", f.egressRetention, err)
		}
	}
	for i, j := range f.join {
		f.join[i] = normalizeHTTP(j)
	}
	if f.cacheDir == "" {
		f.cacheDir = filepath.Join(f.dataDir, "cache")
	}
	var fileData []byte
	if f.config != "" {
		// Validate before touching any state: a bad file changes nothing.
		if fileData, err = os.ReadFile(f.config); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if _, err := policies.Parse(f.config, fileData, servedFeatures()); err != nil {
			return err
		}
	}
	for _, d := range []string{f.dataDir, f.cacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	defer ln.Close()

	var nsRef atomic.Pointer[federation.Namespace]
	var pmRef atomic.Pointer[policyManager]
	rcfg := raft.Config{NodeID: f.nodeID, Dir: filepath.Join(f.dataDir, "raft"), Logger: log.With("component", "raft"),
		SnapshotThreshold: f.raftSnapshotThreshold, TrailingLogs: f.raftTrailingLogs,
		OnApply: func(cmd raft.Command) {
			if ns := nsRef.Load(); ns != nil {
				ns.OnApply(cmd)
			}
			if _, ok := cmd.(*raft.SetPolicy); ok || cmd == nil {
				if pm := pmRef.Load(); pm != nil {
					pm.notify()
				}
			}
		}}
	var cl *cluster
	front := &frontHandler{}
	hs := &http.Server{
		Handler:           front,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	if f.clustered() {
		if f.joins() && fileData != nil {
			if p, _ := policies.Parse(f.config, fileData, servedFeatures()); p == nil || len(p.Stores) == 0 {
				return errors.New(sharedStoreMsg)
			}
		}
		cl = &cluster{id: f.nodeID, httpAddr: advertisedHTTP(ln.Addr(), f.raftAddr), join: f.join, expect: f.bootstrapExpect,
			tcp: true, ak: f.accessKey, sk: f.secretKey, region: f.s3Region, log: log.With("component", "cluster"),
			client: newCallClient(), stream: newStreamClient(), peers: map[string]string{}}
		rcfg.BindAddr = f.raftAddr
		rcfg.Forward = cl.forward
		switch {
		case f.bootstrapExpect > 1:
			rcfg.BootstrapExpect = f.bootstrapExpect
		case len(f.join) > 0 && !f.bootstrap:
			rcfg.BootstrapExpect = 2 // never bootstrap alone: wait to be added
		default:
			rcfg.Bootstrap = true // --bootstrap, or a one-node region over TCP
		}
		if f.peerCert != "" {
			if rcfg.TLS, err = raft.PeerTLSConfig(f.peerCert, f.peerKey, f.peerCA, f.peerServerName); err != nil {
				return err
			}
		}
		// Serve the internal API on its own port (mutual TLS with --peer-*),
		// and the discovery answer (info) plus 503 for the rest on the S3
		// port, while the region forms.
		iln, err := listenInternal(f, rcfg.TLS)
		if err != nil {
			return err
		}
		defer iln.Close()
		cl.internalURL = advertisedInternal(iln.Addr(), f.raftAddr, rcfg.TLS != nil)
		cl.setTLS(rcfg.TLS)
		ihs := &http.Server{Handler: cl.internalHandler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() { errc <- ihs.Serve(iln) }()
		defer ihs.Close()
		front.internal = cl.discoveryHandler()
		front.domain = strings.ToLower(strings.TrimSuffix(f.domain, "."))
		go func() { errc <- hs.Serve(ln) }()
	}

	openCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	node, err := raft.Open(openCtx, rcfg)
	cancel()
	if err != nil {
		return fmt.Errorf("open region state: %w", err)
	}
	defer node.Close()
	if cl != nil {
		cl.node = node
		cl.started.Store(true)
		m, err := node.Members()
		if err != nil {
			return fmt.Errorf("read the region's members: %w", err)
		}
		switch {
		case len(m) > 0 && f.joins():
			log.Info("this node already has Raft state: --bootstrap-expect and --join are ignored; rejoining", "members", len(m))
		case len(m) == 0 && f.joins() && fileData == nil:
			return errors.New(sharedStoreMsg + ", and start every new node with it (--config FILE)")
		}
		if err := cl.form(ctx); err != nil {
			return err
		}
		if err := cl.register(ctx); err != nil {
			return err
		}
	} else {
		cl = &cluster{node: node, id: f.nodeID, log: log, stream: newStreamClient()}
	}

	hadPolicy := false
	if _, ok := node.State().Policy(); ok {
		hadPolicy = true
	}
	pol, err := activePolicy(ctx, node, f.config, fileData, log)
	if errors.Is(err, raft.ErrStalePolicy) && f.clustered() {
		// Another founding node seeded the policy first: catch up and use it.
		if err = cl.register(ctx); err == nil {
			pol, err = activePolicy(ctx, node, f.config, fileData, log)
		}
	}
	if err != nil {
		return err
	}
	if f.clustered() && f.joins() && (pol == nil || len(pol.Stores) == 0) {
		return errors.New(sharedStoreMsg)
	}
	region, err := regionName(pol, f.region)
	if err != nil {
		return err
	}
	stores, defStore, err := openStores(ctx, f.dataDir, pol)
	if err != nil {
		return err
	}
	var peers cachetier.PeerClient
	if f.clustered() {
		peers = cl
	}
	cache, err := openCache(f, log, peers)
	if err != nil {
		return err
	}
	defer cache.Close()
	stage, err := openStaging(f)
	if err != nil {
		return err
	}
	activeVersion := uint64(0)
	if pol != nil {
		if a, ok := node.State().Policy(); ok {
			activeVersion = a.Version
		}
	}
	ns, err := federation.New(federation.Config{Journal: node, Stores: stores, DefaultStore: defStore, Policy: pol, PolicyVersion: activeVersion,
		Cache: cache, FillConcurrency: f.fillConcurrency, Logger: log.With("component", "federation"),
		Region:          cl,
		RegionLocation:  regionLocation(pol, f.region),
		EgressRetention: f.retention,
		WriteBack:       federation.WriteBackConfig{Staging: stage, Copies: f.writeBackCopies, Wait: f.stagingWait}})
	if err != nil {
		return err
	}
	nsRef.Store(ns)
	cl.ns.Store(ns)
	pm := newPolicyManager(node, ns, f.dataDir, f.clustered(), pol, stores, activeVersion, log.With("component", "policy"))
	pmRef.Store(pm)
	if !hadPolicy && pol != nil && activeVersion == 1 && fileData != nil {
		// This node seeded the region's policy: preload what it asks to.
		for _, line := range pm.preloadOnApply(ctx, nil, pol) {
			log.Info("policy seeded: " + line)
		}
	}
	ns.StartPins()
	usage := func() gateway.NodeUsage {
		cs, ss := cache.Stats(), stage.Stats()
		return gateway.NodeUsage{CacheUsed: cs.Used, CacheCapacity: cs.Capacity, StagingUsed: ss.Used + ss.Reserved, StagingCapacity: ss.Capacity}
	}
	cl.usage.Store(&usage)
	drainCtx, stopDrainer := context.WithCancel(context.WithoutCancel(ctx))
	drainerDone := make(chan struct{})
	go func() {
		defer close(drainerDone)
		ns.RunDrainer(drainCtx)
	}()
	go ns.RunPreloader(drainCtx)
	go pm.run(drainCtx)
	egressDone := make(chan struct{})
	go func() {
		defer close(egressDone)
		ns.RunEgress(drainCtx)
	}()
	pm.notify() // a newer policy may have been applied while this node was starting
	if f.clustered() {
		go cl.syncMembers(drainCtx, cache)
	}
	haltDrainer := sync.OnceFunc(func() {
		stopDrainer()
		<-drainerDone
		<-egressDone // its last flush goes through Raft before the node closes
	})
	defer haltDrainer()
	ns.SetReady(func(context.Context) error {
		if f.clustered() {
			if id, _ := node.Leader(); id == "" {
				return errors.New("the region has no Raft leader")
			}
			return nil
		}
		if !node.IsLeader() {
			return errors.New("this node is not the region's Raft leader")
		}
		return nil
	})
	creds, generated, err := rootCredentials(ctx, ns, f)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := cache.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := ns.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := pm.register(reg); err != nil {
		return err
	}
	srv, err := gateway.New(gateway.Config{Backend: ns.Backend(), Region: f.s3Region, Domain: f.domain, Logger: log, Registry: reg, Version: version,
		Cluster: regionErrCluster{cl}, Policy: regionErrPolicy{pm}, RegionName: region})
	if err != nil {
		return err
	}
	front.gw.Store(srv)

	if f.debugListen != "" {
		if err := serveDebug(f.debugListen, log); err != nil {
			return err
		}
	}

	endpoint := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "fedgate %s: S3 endpoint %s (region %q, signing region %s)\n", version, endpoint, region, f.s3Region)
	if generated {
		fmt.Fprintf(out, "Generated root credentials (shown once; also in %s):\n  AccessKey: %s\n  SecretKey: %s\n",
			credsFile(f.dataDir), creds.AccessKey, creds.SecretKey)
	}
	if f.clustered() {
		lid, _ := node.Leader()
		fmt.Fprintf(out, "Node %s: Raft %s, leader %s\n", f.nodeID, node.Addr(), lid)
	}
	log.Info("server started", "endpoint", endpoint, "node", f.nodeID, "raft_addr", f.raftAddr, "data_dir", f.dataDir, "cache_dir", f.cacheDir, "default_store", defStore, "version", version)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if !f.clustered() {
		go func() { errc <- hs.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case sig := <-sigs:
		log.Info("shutting down: draining in-flight requests", "signal", sig.String(), "timeout", f.shutdownTimeout.String())
	case <-ctx.Done():
	}
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown did not finish in time; closing connections", "error", err)
		_ = hs.Close()
	}
	haltDrainer() // drains in flight give their claims back or finish first
	if err := node.Close(); err != nil {
		return fmt.Errorf("close region state: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
}

// regionName is the region this node serves: "local" on embedded defaults
// or a policy without regions, else the one --region names (or the only one).
func regionName(p *policies.Policy, flag string) (string, error) {
	if p == nil || len(p.Regions) == 0 {
		if flag != "" && flag != "local" {
			return "", fmt.Errorf("--region %q: the policy declares no regions", flag)
		}
		return "local", nil
	}
	r, err := p.Region(flag)
	if err != nil {
		return "", fmt.Errorf("--region: %w", err)
	}
	return r.Name, nil
}

// regionLocation is the region's "cloud:region" for egress accounting:
// the policy's region entry, or onprem:local on embedded defaults.
func regionLocation(p *policies.Policy, flag string) string {
	if p == nil || len(p.Regions) == 0 {
		return "onprem:local"
	}
	r, err := p.Region(flag)
	if err != nil {
		return "onprem:local"
	}
	return r.Location.String()
}

func credsFile(dataDir string) string { return filepath.Join(dataDir, "root-credentials.json") }

// rootCredentials installs the root key pair: from flags/env, else the one
// already in the region's state, else a new one (generated reports that).
func rootCredentials(ctx context.Context, ns *federation.Namespace, f serverFlags) (federation.Credentials, bool, error) {
	if f.accessKey != "" {
		c := federation.Credentials{AccessKey: f.accessKey, SecretKey: f.secretKey}
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
	if err := os.WriteFile(credsFile(f.dataDir), append(data, '\n'), 0o600); err != nil {
		return c, false, fmt.Errorf("save root credentials: %w", err)
	}
	return c, true, nil
}

// serveDebug serves net/http/pprof on its own listener, never on the S3 port.
func serveDebug(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	log.Info("pprof listening", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// activePolicy returns the region's policy. A --config file seeds a region
// that has none; after that the policy in Raft is the active one, and a file
// that differs only earns a warning.
func activePolicy(ctx context.Context, node *raft.Node, file string, data []byte, log *slog.Logger) (*policies.Policy, error) {
	active, ok := node.State().Policy()
	switch {
	case !ok && data == nil:
		return nil, nil
	case !ok:
		if err := node.Apply(ctx, raft.SetPolicy{YAML: data, Version: 1}); err != nil {
			return nil, fmt.Errorf("seed the region's policy from %s: %w", file, err)
		}
		log.Info("region policy seeded from file", "file", file)
		return policies.Parse(file, data, servedFeatures())
	case data != nil && !bytes.Equal(data, active.YAML):
		log.Warn("the --config file differs from the region's active policy; the active policy stays in force (see `fedgate policy diff`)",
			"file", file, "active_version", active.Version)
	}
	return policies.Parse("active policy (version "+strconv.FormatUint(active.Version, 10)+")", active.YAML, servedFeatures())
}

// openCache opens the region's chunk cache under --cache-dir.
func openCache(f serverFlags, log *slog.Logger, peers cachetier.PeerClient) (*cachetier.Cache, error) {
	size := int64(0)
	if f.cacheSize != "" {
		n, err := policies.ParseSize(f.cacheSize)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--cache-size %q: want a size like 500GiB", f.cacheSize)
		}
		size = n
	} else {
		var st syscall.Statfs_t
		if err := syscall.Statfs(f.cacheDir, &st); err != nil {
			return nil, fmt.Errorf("--cache-dir %s: %w", f.cacheDir, err)
		}
		size = int64(st.Blocks) * st.Bsize / 10 * 8
	}
	cfg := cachetier.Config{Dir: filepath.Join(f.cacheDir, "chunks"), Capacity: size, Logger: log.With("component", "cache")}
	if peers != nil {
		cfg.Self, cfg.Peers = f.nodeID, peers
	}
	c, err := cachetier.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open the chunk cache: %w", err)
	}
	return c, nil
}

// listenInternal opens the internal API's listener: --internal-addr, or
// the --raft-addr host with the next port; TLS when the peers use it.
func listenInternal(f serverFlags, tlsCfg *tls.Config) (net.Listener, error) {
	addr := f.internalAddr
	if addr == "" {
		host, port, err := net.SplitHostPort(f.raftAddr)
		if err != nil {
			return nil, fmt.Errorf("--raft-addr %q: %w", f.raftAddr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p == 0 || p >= 65535 {
			return nil, fmt.Errorf("--raft-addr %q: give --internal-addr too (the default is its port + 1)", f.raftAddr)
		}
		addr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the internal API on %s (--internal-addr): %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// advertisedInternal is the URL peers reach the internal API at.
func advertisedInternal(ln net.Addr, raftAddr string, useTLS bool) string {
	u := advertisedHTTP(ln, raftAddr)
	if useTLS {
		u = "https://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// openStaging opens the write-back staging area in --cache-dir.
func openStaging(f serverFlags) (*staging.Area, error) {
	var size int64
	if f.stagingSize != "" {
		n, err := policies.ParseSize(f.stagingSize)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--staging-size %q: want a size like 1TiB", f.stagingSize)
		}
		size = n
	} else {
		var st syscall.Statfs_t
		if err := syscall.Statfs(f.cacheDir, &st); err != nil {
			return nil, fmt.Errorf("--cache-dir %s: %w", f.cacheDir, err)
		}
		size = int64(st.Blocks) * st.Bsize / 10
	}
	if f.writeBackCopies < 1 {
		return nil, fmt.Errorf("--write-back-copies %d: want at least 1", f.writeBackCopies)
	}
	a, err := staging.Open(staging.Config{Dir: filepath.Join(f.cacheDir, "staging"), Capacity: size})
	if err != nil {
		return nil, fmt.Errorf("open the write-back staging area: %w", err)
	}
	return a, nil
}

// frontHandler serves the internal API (on a multi-node node) and, once the
// node is ready, the gateway; until then every other request gets 503.
type frontHandler struct {
	internal http.Handler // nil: no internal API
	domain   string
	gw       atomic.Pointer[gateway.Server]
}

func (h *frontHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.internal != nil && strings.HasPrefix(r.URL.Path, internalPrefix) && !h.virtualHost(r) {
		h.internal.ServeHTTP(w, r)
		return
	}
	if gw := h.gw.Load(); gw != nil {
		gw.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	if r.URL.Path == gateway.ReservedPrefix+"healthz" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok (starting)\n")
		return
	}
	if r.URL.Path == gateway.ReservedPrefix+"readyz" {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "starting: forming or joining the region's cluster\n")
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>ServiceUnavailable</Code><Message>This node is starting (forming or joining its region's cluster); retry shortly or on another node.</Message></Error>`)
}

func (h *frontHandler) virtualHost(r *http.Request) bool {
	if h.domain == "" {
		return false
	}
	host := strings.ToLower(r.Host)
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	return strings.HasSuffix(host, "."+h.domain)
}
