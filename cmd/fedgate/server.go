package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/console"
	"github.com/fedgate/fedgate/internal/flagfile"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/policies"
)

type serverFlags struct {
	listen, dataDir, cacheDir, config, s3Region, domain string
	accessKey, secretKey, nodeID, logLevel, debugListen string
	logFormat, serverConfig                             string
	cacheSize, region                                   string
	fillConcurrency                                     int
	stagingSize                                         string
	writeBackCopies                                     int
	stagingWait, budgetRefresh, lifecycleEvery          time.Duration
	lifecycleRate                                       int
	egressRetention                                     string
	egressReuseObjects                                  int
	raftSnapshotThreshold, raftTrailingLogs             uint64
	raftLogStore                                        string
	internalAddr                                        string
	shutdownTimeout                                     time.Duration
	batchMaxEntries, batchPrefetch                      int
	batchMaxBytes, batchPrefetchBytes, batchIndexCache  string
	certFile, keyFile, caFile                           string // TLS on the S3 port (docs/tls.md)
	localSocket, localSocketMode, localSocketGroup      string // docs/gpu-data-path.md
	localLease                                          time.Duration
	bodyTimeout                                         time.Duration
	chartInterval                                       time.Duration
	unauthConns                                         int

	// A multi-node region (see docs/operations.md).
	raftAddr                  string
	catalogAddr               string
	catalogAdvertise          string
	catalogRTT                time.Duration
	bootstrapExpect           int
	join                      []string
	bootstrap                 bool
	peerCert, peerKey, peerCA string
	peerServerName            string

	// What the server config file did, logged once the logger exists.
	fileRes flagfile.Result
	fileMsg []any // slog attributes of a warning about the file; nil: none

	check bool // --check: validate and exit, start nothing
}

// nodeConfig is the node.Config the flags describe; the sizes and the
// egress retention are parsed here, after the checks Validate makes.
func (f serverFlags) nodeConfig(log *slog.Logger) (node.Config, error) {
	cfg := node.Config{
		Listen: f.listen, CertFile: f.certFile, KeyFile: f.keyFile, CAFile: f.caFile, DataDir: f.dataDir, CacheDir: f.cacheDir, PolicyFile: f.config, Region: f.region,
		SigningRegion: f.s3Region, Domain: f.domain, AccessKey: f.accessKey, SecretKey: f.secretKey, NodeID: f.nodeID,
		Logger: log, Version: version, FillConcurrency: f.fillConcurrency, WriteBackCopies: f.writeBackCopies,
		StagingWait: f.stagingWait, EgressBudgetRefresh: f.budgetRefresh, LifecycleEvery: f.lifecycleEvery, LifecycleRate: float64(f.lifecycleRate), RaftSnapshotThreshold: f.raftSnapshotThreshold, RaftTrailingLogs: f.raftTrailingLogs, RaftLogStore: f.raftLogStore,
		DebugListen: f.debugListen, ShutdownTimeout: f.shutdownTimeout, RaftAddr: f.raftAddr, InternalAddr: f.internalAddr,
		CatalogAddr: f.catalogAddr, CatalogAdvertise: f.catalogAdvertise, CatalogRTT: f.catalogRTT,
		BootstrapExpect: f.bootstrapExpect, Join: f.join, Bootstrap: f.bootstrap,
		PeerCertFile: f.peerCert, PeerKeyFile: f.peerKey, PeerCAFile: f.peerCA, PeerServerName: f.peerServerName,
		EgressReuseObjects: f.egressReuseObjects, BodyTimeout: f.bodyTimeout, ChartInterval: f.chartInterval, UnauthenticatedConns: f.unauthConns,
		LookupEnv: os.LookupEnv,
		Batch:     gateway.BatchConfig{MaxEntries: f.batchMaxEntries, Prefetch: f.batchPrefetch},
	}
	if f.localSocket != "" {
		mode, err := strconv.ParseUint(f.localSocketMode, 8, 32)
		if err != nil || mode == 0 || mode > 0o777 {
			return cfg, fmt.Errorf("--local-socket-mode %q: want an octal file mode like 0660", f.localSocketMode)
		}
		cfg.LocalSocket, cfg.LocalSocketMode, cfg.LocalSocketGroup, cfg.LocalLease = f.localSocket, os.FileMode(mode), f.localSocketGroup, f.localLease
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if f.egressRetention != "0" {
		var err error
		if cfg.EgressRetention, err = policies.ParseDuration(f.egressRetention); err != nil {
			return cfg, fmt.Errorf("--egress-retention %q: %v", f.egressRetention, err)
		}
	}
	if f.cacheSize != "" {
		n, err := parseSizeFlag("cache-size", f.cacheSize, "500GiB")
		if err != nil {
			return cfg, err
		}
		cfg.CacheSize = n
	}
	for _, sz := range []struct {
		flag, value string
		to          *int64
	}{{"batch-max-bytes", f.batchMaxBytes, &cfg.Batch.MaxBytes}, {"batch-prefetch-bytes", f.batchPrefetchBytes, &cfg.Batch.PrefetchBytes},
		{"batch-index-cache", f.batchIndexCache, &cfg.Batch.IndexCacheBytes}} {
		if sz.value == "" {
			continue
		}
		n, err := parseSizeFlag(sz.flag, sz.value, "256MiB")
		if err != nil {
			return cfg, err
		}
		*sz.to = n
	}
	if f.stagingSize != "" {
		n, err := parseSizeFlag("staging-size", f.stagingSize, "1TiB")
		if err != nil {
			return cfg, err
		}
		cfg.StagingSize = n
	}
	return cfg, nil
}

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
FEDGATE_SECRET_KEY). If neither is given, a key pair is generated on first start and
kept in the region's state and in DATA-DIR/root-credentials.json (mode 0600); the
first start prints the access key id and that file's path, never the secret key.

Every flag can also be set in a YAML file given with --server-config (or
FEDGATE_SERVER_CONFIG), its keys the long flag names (listen: 10.0.0.1:9000,
join: [a, b]); a flag on the command line wins over the file, the file over the
environment. See docs/server-config.md.

--check parses the flags, the server config file and the policy file, runs the
checks a start makes before it opens anything (flags, policy, certificates and
keys), prints what it checked and exits: 0 when a start would get past them,
1 with the error. It opens no port and writes nothing (docs/server-config.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyServerConfig(cmd, &f, os.Getenv); err != nil {
				return err
			}
			if f.check {
				return checkServer(f, cmd.OutOrStdout())
			}
			return runServer(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.check, "check", false, "check the flags, the server config file, the policy file and the TLS files as a start would, print what was checked, and exit (0: valid); opens no port, writes nothing")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:9000", "address of the S3 port (also serves /_fedgate/)")
	fl.StringVar(&f.certFile, "cert-file", "", "PEM certificate (chain) of the S3 port: it then serves HTTPS only; read again on SIGHUP (docs/tls.md)")
	fl.StringVar(&f.keyFile, "key-file", "", "PEM private key of --cert-file (both or neither)")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM CA bundle trusted, besides the system's, on other nodes' https S3 ports (--join, cluster add)")
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
	fl.StringVar(&f.logFormat, "log-format", "", "text or json (default: text when stderr is a terminal, json otherwise)")
	fl.StringVar(&f.serverConfig, serverConfigFlag, "", "YAML file setting any of these flags, keys the long flag names (default $FEDGATE_SERVER_CONFIG); flags given here win")
	fl.StringVar(&f.cacheSize, "cache-size", "", "bytes the chunk cache may use, e.g. 2TiB (default: 80% of the space free on the cache dir's file system plus what the cache holds, at least 1GiB; docs/cache.md)")
	fl.IntVar(&f.fillConcurrency, "fill-concurrency", 8, "parallel ranged reads that fill one large object's chunks from its store")
	fl.StringVar(&f.stagingSize, "staging-size", "", "bytes of --cache-dir that write-back staging may use, e.g. 1TiB (default: 10% of the space free there plus what is staged, at least 256MiB)")
	fl.IntVar(&f.writeBackCopies, "write-back-copies", 2, "nodes that must hold a write-back write (fsynced) before it is acknowledged")
	fl.Uint64Var(&f.raftSnapshotThreshold, "raft-snapshot-threshold", 8192, "Raft log entries between automatic snapshots")
	fl.StringVar(&f.raftLogStore, "raft-log-store", "", "Raft log store: boltdb (raft-boltdb, the default) or wal (raft-wal; migrates a boltdb log once; see docs/operations.md before using it)")
	fl.Uint64Var(&f.raftTrailingLogs, "raft-trailing-logs", 10240, "Raft log entries a snapshot keeps, so a briefly absent node catches up from the log, not a snapshot")
	fl.DurationVar(&f.lifecycleEvery, "lifecycle-every", federation.DefaultLifecycleEvery, "time between the region leader's lifecycle passes (expiring objects, aborting stale multipart uploads; docs/lifecycle.md)")
	fl.IntVar(&f.lifecycleRate, "lifecycle-rate", federation.DefaultLifecycleRate, "at most this many lifecycle deletions and upload aborts per second (negative: no bound)")
	fl.DurationVar(&f.budgetRefresh, "egress-budget-refresh", federation.DefaultBudgetRefresh, "how often a node re-adds the month's egress cost to check budgets (cold reads see a spent budget at most this late)")
	fl.DurationVar(&f.stagingWait, "staging-wait", 30*time.Second, "how long a write-back write waits for staging room before it gets 503 SlowDown")
	fl.StringVar(&f.egressRetention, "egress-retention", "400d", "how long the egress ledger keeps its hourly rows, like 90d or 400d (0: for ever)")
	fl.IntVar(&f.egressReuseObjects, "egress-reuse-objects", federation.DefaultReuseObjects, "objects whose last read the node remembers, to record reuse distances in the egress ledger for advice (16 bytes each; 0: off)")
	fl.StringVar(&f.debugListen, "debug-listen", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off by default")
	fl.IntVar(&f.batchMaxEntries, "batch-max-entries", gateway.DefaultBatchMaxEntries, "most entries one batch GET (POST /_fedgate/v1/batch) may name; more get 400 BatchTooLarge")
	fl.StringVar(&f.batchMaxBytes, "batch-max-bytes", "16GiB", "most entry bytes one batch GET sends; more get 400 BatchTooLarge (docs/training.md)")
	fl.IntVar(&f.batchPrefetch, "batch-prefetch", gateway.DefaultBatchPrefetch, "entries a batch GET fetches ahead of the one it sends, in parallel (from the cache, peers or origins)")
	fl.StringVar(&f.batchPrefetchBytes, "batch-prefetch-bytes", "256KiB", "bytes of each entry fetched ahead that a batch GET holds in memory (the rest streams when it is sent); a batch holds at most batch-prefetch x this")
	fl.StringVar(&f.batchIndexCache, "batch-index-cache", "256MiB", "memory for the member indexes of tar/zip shards that batch GETs read members of (archpath)")
	fl.StringVar(&f.localSocket, "local-socket", "", "serve S3 and short-circuit reads (open chunk files passed to the client) on this Unix socket for processes on this machine; off by default (docs/gpu-data-path.md)")
	fl.StringVar(&f.localSocketMode, "local-socket-mode", "0660", "file mode of the --local-socket (octal): who may connect; requests are then signed as any S3 request")
	fl.StringVar(&f.localSocketGroup, "local-socket-group", "", "group (name or id) of the --local-socket; default the server's")
	fl.DurationVar(&f.localLease, "local-lease", gateway.DefaultLocalLease, "how long the node keeps a short-circuit read's descriptors at most when the client does not let go of them first")
	fl.DurationVar(&f.chartInterval, "console-chart-interval", console.DefaultChartInterval, "how often the console's charts sample this node's metrics; the charts keep 360 points (an hour at 10s) and 288 points of 30 samples (a day) (docs/console.md)")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", gateway.DefaultBodyTimeout, "how long a request body may stall (no byte arriving) before the request fails with 400 RequestTimeout and what it staged is removed (docs/security.md)")
	fl.IntVar(&f.unauthConns, "unauthenticated-conns", gateway.DefaultUnauthenticatedConns, "connections one client address may hold open on the S3 port before a signed request uses them; more are closed on accept (-1: no bound; docs/security.md)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 60*time.Second, "how long SIGTERM waits for in-flight requests")
	fl.StringVar(&f.raftAddr, "raft-addr", "", "HOST:PORT of this node's Raft transport (TCP), the address peers dial; enables a multi-node region")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "form a new region once this many nodes (this one included) have met through --join")
	fl.StringSliceVar(&f.join, "join", nil, "other nodes' --listen addresses (ADDR,ADDR,..., with or without http://) to bootstrap with or to join")
	fl.BoolVar(&f.bootstrap, "bootstrap", false, "start a new multi-node region with this node alone; others --join it")
	fl.StringVar(&f.internalAddr, "internal-addr", "", "HOST:PORT of the node-to-node API (forwarded writes, staged copies, chunk reads); default: the --raft-addr host, its port + 1")
	fl.StringVar(&f.catalogAddr, "catalog-addr", "", "HOST:PORT of this node's member of the global bucket catalog, when the policy peers regions (regions[].catalog names each region's voter; docs/regions.md)")
	fl.StringVar(&f.catalogAdvertise, "catalog-advertise", "", "address other regions dial for this node's catalog member (default --catalog-addr)")
	fl.DurationVar(&f.catalogRTT, "catalog-rtt", 200*time.Millisecond, "longest round trip expected between regions; the catalog's Raft timeouts are several of it")
	fl.StringVar(&f.peerCert, "peer-cert-file", "", "PEM certificate of this node for the Raft transport's mutual TLS")
	fl.StringVar(&f.peerKey, "peer-key-file", "", "PEM key of --peer-cert-file")
	fl.StringVar(&f.peerCA, "peer-ca-file", "", "PEM CA that signed every node's peer certificate")
	fl.StringVar(&f.peerServerName, "peer-server-name", "", "name every peer certificate carries as a DNS SAN (default: verify the host of each peer's --raft-addr)")
	return cmd
}

// parseSizeFlag reads a size flag's value: SI or IEC units (10GB is 10^9
// bytes ten times, 10GiB 2^30 ten times: docs/units.md), above 0.
func parseSizeFlag(flag, value, example string) (int64, error) {
	n, err := policies.ParseSize(value)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--%s %q: %v; want a size like %s (KiB, MiB, GiB, TiB: powers of 1024; KB, MB, GB, TB: powers of 1000)",
			flag, value, err, example)
	case n <= 0:
		return 0, fmt.Errorf("--%s %q: want a size above 0, like %s", flag, value, example)
	}
	return n, nil
}

const serverConfigFlag = "server-config"

// applyServerConfig sets the flags the server config file names (from
// --server-config, else $FEDGATE_SERVER_CONFIG) that the command line did
// not set; the root keys then fall back to the environment. It notes a
// file that holds the secret key and is readable by others, for a warning
// once the logger exists.
func applyServerConfig(cmd *cobra.Command, f *serverFlags, getenv func(string) string) error {
	path := f.serverConfig
	if path == "" {
		path = getenv("FEDGATE_SERVER_CONFIG")
	}
	if path != "" {
		res, err := flagfile.Load(path, cmd.Flags(), flagfile.Options{Exclude: []string{serverConfigFlag, "check", "help"}})
		if err != nil {
			var l flagfile.ErrorList
			if errors.As(err, &l) {
				return fmt.Errorf("server config file (--server-config) is invalid; its keys are the flags of 'fedgate server --help' without dashes:\n%w", err)
			}
			return fmt.Errorf("--server-config: %w", err)
		}
		f.serverConfig, f.fileRes = path, res
		if slices.Contains(res.Set, "secret-key") {
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
				f.fileMsg = []any{"file", path, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()),
					"fix", "chmod 600 " + path + " (owned by the user fedgate runs as), or pass the key in FEDGATE_SECRET_KEY"}
			}
		}
	}
	if f.accessKey == "" {
		f.accessKey = getenv("FEDGATE_ACCESS_KEY")
	}
	if f.secretKey == "" {
		f.secretKey = getenv("FEDGATE_SECRET_KEY")
	}
	return nil
}

// newLogger builds the process's logger: --log-level and --log-format
// ("": text when w is a terminal, JSON otherwise).
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if format == "" {
		format = "json"
		if fd, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(fd.Fd())) {
			format = "text"
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json (default: text on a terminal, json otherwise)", format)
}

// checkServer is `fedgate server --check`: node.Check over the node
// configuration the flags describe; nothing is opened or written.
func checkServer(f serverFlags, out io.Writer) error {
	if _, err := newLogger(f.logLevel, f.logFormat, io.Discard); err != nil {
		return err
	}
	if f.serverConfig != "" {
		fmt.Fprintf(out, "server config: %s: valid (%d keys set, %d overridden by flags)\n", f.serverConfig, len(f.fileRes.Set), len(f.fileRes.Overridden))
	}
	cfg, err := f.nodeConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	lines, err := node.Check(cfg)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "fedgate server --check: OK (not checked without starting: ports free, peers reachable, store credentials and buckets)")
	return nil
}

// runServer runs `fedgate server`: a node built from the flags, serving
// until ctx ends or SIGTERM/SIGINT asks it to drain and stop.
func runServer(ctx context.Context, f serverFlags, out io.Writer) error {
	log, err := newLogger(f.logLevel, f.logFormat, os.Stderr)
	if err != nil {
		return err
	}
	if f.serverConfig != "" {
		log.Info("server config file read", "file", f.serverConfig, "set", f.fileRes.Set, "overridden_by_flags", f.fileRes.Overridden)
	}
	if f.fileMsg != nil {
		log.Warn("the server config file holds --secret-key and is readable by group or others", f.fileMsg...)
	}
	cfg, err := f.nodeConfig(log)
	if err != nil {
		return err
	}
	// SIGHUP reloads the S3 port's certificate; caught from here on, so
	// one sent while the node starts does not end it.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()

	endpoint := n.Endpoint()
	fmt.Fprintf(out, "fedgate %s: S3 endpoint %s (region %q, signing region %s)\n", version, endpoint, n.RegionName(), f.s3Region)
	if creds, generated := n.RootCredentials(); generated {
		// The secret goes only to the 0600 file: standard output ends up in
		// journald and CI logs.
		file := node.CredentialsFile(f.dataDir)
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		fmt.Fprintf(out, "Generated root credentials: access key %s; the secret key is in %s (mode 0600, readable only by this user)\n",
			creds.AccessKey, file)
	}
	if f.raftAddr != "" {
		lid, _ := n.Raft().Leader()
		fmt.Fprintf(out, "Node %s: Raft %s, leader %s\n", f.nodeID, n.Raft().Addr(), lid)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			select {
			case sig := <-sigs:
				log.Info("shutting down: draining in-flight requests", "signal", sig.String(), "timeout", f.shutdownTimeout.String())
				stop()
				return
			case <-hups:
				reloadOnHUP(n, log)
			case <-runCtx.Done():
				return
			}
		}
	}()
	return n.Run(runCtx)
}

// reloadOnHUP is what SIGHUP does: the S3 port's certificate is read
// again (node.ReloadTLS logs how that went).
func reloadOnHUP(n *node.Node, log *slog.Logger) {
	if err := n.ReloadTLS(); errors.Is(err, node.ErrNoTLS) {
		log.Info("SIGHUP: nothing to reload (the S3 port serves plain HTTP; no --cert-file)")
	}
}
