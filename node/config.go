package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/node/peerapi"
	"github.com/fedgate/fedgate/policies"
)

// Config is everything one gateway node is started with: what the flags of
// `fedgate server` set. Nothing in this package reads flags or environment
// variables; LookupEnv is how the caller hands over the environment the
// policy file's credentials name.
type Config struct {
	// Listen is the S3 port's address (it also serves /_fedgate/); a port
	// of 0 picks one (see Node.Endpoint). Listener, when set, is a
	// listener already bound for it, and Listen is ignored; the node
	// closes it.
	Listen   string
	Listener net.Listener
	// CertFile and KeyFile (both or neither) make the S3 port serve HTTPS
	// only, with this PEM certificate (chain) and key, read again by
	// Node.ReloadTLS (SIGHUP). CAFile is a PEM CA bundle trusted, besides
	// the system's roots and PeerCAFile, on other nodes' https S3 ports
	// (--join discovery, cluster add).
	CertFile, KeyFile, CAFile string
	// DataDir holds Raft state and the embedded on-prem store; CacheDir
	// the chunk cache and write-back staging ("": DATA-DIR/cache).
	DataDir, CacheDir string
	// PolicyFile seeds a region that has no policy yet ("": none).
	PolicyFile string
	// Region is the policy file's region this node serves ("": the only
	// one, or "local" without regions).
	Region string
	// SigningRegion is the S3 signing region clients must use.
	SigningRegion string
	// Domain turns on virtual-hosted-style requests for BUCKET.Domain.
	Domain string
	// AccessKey and SecretKey are the root credentials (both or neither;
	// neither: kept in the region's state, generated on first start).
	AccessKey, SecretKey string
	// NodeID is this node's Raft id.
	NodeID string
	// Logger receives the node's logs (nil: none).
	Logger *slog.Logger
	// Version is reported by the admin API and logged.
	Version string

	// CacheSize is the bytes the chunk cache may use (0: 80% of the
	// space free on the cache dir's file system plus what the cache holds,
	// at least 1 GiB: cacheArea); StagingSize those write-back staging may
	// use (0: 10% of free plus staged, at least 256 MiB).
	CacheSize, StagingSize int64
	// FillConcurrency is how many ranged reads fill one large object's
	// chunks from its store.
	FillConcurrency int
	// WriteBackCopies is how many nodes hold a write-back write before it
	// is acknowledged; StagingWait how long one waits for staging room.
	WriteBackCopies int
	StagingWait     time.Duration
	// EgressRetention is how long the egress ledger keeps hourly rows
	// (0: for ever).
	EgressRetention time.Duration
	// EgressBudgetRefresh bounds how stale the budget statuses a cold read
	// is checked against may be (default federation.DefaultBudgetRefresh).
	EgressBudgetRefresh time.Duration
	// EgressReuseObjects is how many objects' last reads the node
	// remembers to count reuse distances in the egress ledger (16 bytes
	// each; DefaultConfig: federation.DefaultReuseObjects); 0 records
	// none.
	EgressReuseObjects int
	// LifecycleEvery is the time between the region leader's lifecycle
	// passes (default federation.DefaultLifecycleEvery); LifecycleRate
	// bounds their deletions and aborts per second (0: the default,
	// negative: no bound).
	LifecycleEvery time.Duration
	LifecycleRate  float64
	// RaftSnapshotThreshold and RaftTrailingLogs tune Raft snapshots.
	RaftSnapshotThreshold, RaftTrailingLogs uint64
	// RaftLogStore is regionstate.Config.LogStore: "boltdb", "wal", or ""
	// (regionstate.DefaultLogStore).
	RaftLogStore string
	// RaftElectionTimeout is Raft's heartbeat and election timeout (0:
	// Raft's default); tests make it small.
	RaftElectionTimeout time.Duration
	// DebugListen serves Go's pprof profiles on this address ("": off).
	DebugListen string
	// LocalSocket, when set, is the path of a Unix socket serving the S3
	// API and the short-circuit read (POST /_fedgate/v1/local) to
	// processes on this machine (docs/gpu-data-path.md).
	LocalSocket string
	// LocalSocketMode is the socket's file mode (0: 0660); LocalSocketGroup
	// its group ("": the server's).
	LocalSocketMode  os.FileMode
	LocalSocketGroup string
	// LocalLease bounds how long a short-circuit read's descriptors are
	// kept (0: gateway.DefaultLocalLease).
	LocalLease time.Duration
	// ShutdownTimeout is how long Run waits for in-flight requests.
	ShutdownTimeout time.Duration
	// BodyTimeout is how long a request body may stall before the request
	// fails (0: gateway.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// ChartInterval is how often the console's charts sample the node's
	// metrics (0: gateway/console.DefaultChartInterval).
	ChartInterval time.Duration
	// UnauthenticatedConns bounds the S3 port's connections per client
	// address that no signed request has used yet (0:
	// gateway.DefaultUnauthenticatedConns; negative: no bound).
	UnauthenticatedConns int

	// RaftAddr is the TCP address of this node's Raft transport, the one
	// peers dial; it makes the node a member of a multi-node region
	// ("": a one-node region with Raft in memory).
	RaftAddr string
	// InternalAddr is the internal API's address ("": the RaftAddr host,
	// its port + 1). A port of 0 picks one.
	InternalAddr string
	// BootstrapExpect forms a new region once this many nodes have met
	// through Join (other nodes' S3 addresses); Bootstrap starts a new
	// multi-node region with this node alone.
	BootstrapExpect int
	Join            []string
	Bootstrap       bool
	// PeerCertFile, PeerKeyFile and PeerCAFile turn on mutual TLS between
	// the nodes; PeerServerName is the DNS SAN every peer certificate
	// carries ("": verify each peer's Raft host).
	PeerCertFile, PeerKeyFile, PeerCAFile, PeerServerName string
	// CatalogAddr is where this node's member of the global bucket
	// catalog listens (peered regions, docs/regions.md); CatalogAdvertise
	// the address other members dial (default CatalogAddr), which for the
	// region's voter is the policy's regions[].catalog. CatalogRTT is the
	// longest round trip expected between regions (default 200ms).
	CatalogAddr, CatalogAdvertise string
	CatalogRTT                    time.Duration
	// Dial, when set, opens this node's connections to its peers (Raft
	// and the internal API) instead of a net.Dialer; node/nodetest cuts
	// nodes off from each other with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// LookupEnv reads the environment variables the policy's store
	// credentials name (nil: none is set).
	LookupEnv func(name string) (string, bool)

	// Batch tunes the batch GET endpoint (zero values: its defaults).
	Batch gateway.BatchConfig

	// Now is the wall clock this node tells its peers when they measure
	// clock skew (nil: time.Now); tests skew it.
	Now func() time.Time
}

// DefaultConfig is the configuration `fedgate server` runs with when no
// flag is given.
func DefaultConfig() Config {
	return Config{
		Listen:                "127.0.0.1:9000",
		DataDir:               "./var",
		SigningRegion:         "us-east-1",
		NodeID:                "node-1",
		FillConcurrency:       8,
		WriteBackCopies:       2,
		StagingWait:           30 * time.Second,
		EgressRetention:       400 * 24 * time.Hour,
		EgressBudgetRefresh:   federation.DefaultBudgetRefresh,
		EgressReuseObjects:    federation.DefaultReuseObjects,
		LifecycleEvery:        federation.DefaultLifecycleEvery,
		LifecycleRate:         federation.DefaultLifecycleRate,
		RaftSnapshotThreshold: 8192,
		RaftTrailingLogs:      10240,
		ShutdownTimeout:       60 * time.Second,
	}
}

// MaxEgressReuseObjects bounds Config.EgressReuseObjects (16 GiB of
// memory): a larger number is taken for a typo.
const MaxEgressReuseObjects = 1 << 30

// SharedStoreMsg is the refusal of a multi-node region on the embedded,
// node-local default store.
const SharedStoreMsg = "a multi-node region needs a shared default store: declare one in the policy file (a NAS path or a cloud bucket)"

// Validate checks the configuration without touching anything. Open calls
// it; a caller may call it first to report errors before other work.
func (c *Config) Validate() error {
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("give both --access-key and --secret-key (or FEDGATE_ACCESS_KEY and FEDGATE_SECRET_KEY), or neither")
	}
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		return errors.New("--cert-file is given without --key-file: TLS on the S3 port needs both (the certificate and its private key)")
	case c.KeyFile != "" && c.CertFile == "":
		return errors.New("--key-file is given without --cert-file: TLS on the S3 port needs both (the certificate and its private key)")
	}
	if err := c.checkCluster(); err != nil {
		return err
	}
	switch {
	case c.NodeID == "":
		return errors.New("--node-id: a node needs an id")
	case c.DataDir == "":
		return errors.New("--data-dir: a node needs a data directory")
	case c.Listen == "" && c.Listener == nil:
		return errors.New("--listen: a node needs an S3 address")
	case c.CacheSize < 0:
		return fmt.Errorf("--cache-size %d: want a size like 500GiB", c.CacheSize)
	case c.StagingSize < 0:
		return fmt.Errorf("--staging-size %d: want a size like 1TiB", c.StagingSize)
	case c.WriteBackCopies < 1:
		return fmt.Errorf("--write-back-copies %d: want at least 1", c.WriteBackCopies)
	case c.EgressRetention < 0:
		return errors.New("--egress-retention: want a duration like 90d, or 0")
	case c.EgressReuseObjects < 0 || c.EgressReuseObjects > MaxEgressReuseObjects:
		return fmt.Errorf("--egress-reuse-objects %d: want 0 (off) to %d", c.EgressReuseObjects, MaxEgressReuseObjects)
	case c.EgressBudgetRefresh < 0:
		return errors.New("--egress-budget-refresh: want a positive duration like 5s")
	case c.LifecycleEvery < 0:
		return errors.New("--lifecycle-every: want a positive duration like 1h")
	case c.ShutdownTimeout < 0:
		return errors.New("--shutdown-timeout must not be negative")
	case c.ChartInterval < 0 || c.ChartInterval > 0 && c.ChartInterval < 10*time.Millisecond:
		return fmt.Errorf("--console-chart-interval %s: want a duration of at least 10ms, like 10s", c.ChartInterval)
	case c.Batch.MaxEntries < 0:
		return fmt.Errorf("--batch-max-entries %d: want a positive number", c.Batch.MaxEntries)
	case c.Batch.Prefetch < 0:
		return fmt.Errorf("--batch-prefetch %d: want a positive number", c.Batch.Prefetch)
	case c.Batch.MaxBytes < 0, c.Batch.PrefetchBytes < 0, c.Batch.IndexCacheBytes < 0:
		return errors.New("--batch-max-bytes, --batch-prefetch-bytes and --batch-index-cache: want sizes like 256MiB")
	}
	return nil
}

// clustered reports whether the node runs Raft over TCP (RaftAddr).
func (c *Config) clustered() bool { return c.RaftAddr != "" }

// joins reports whether this node forms or joins a multi-node region (as
// opposed to a one-node region over TCP).
func (c *Config) joins() bool { return c.BootstrapExpect > 1 || len(c.Join) > 0 || c.Bootstrap }

// checkCluster validates the cluster settings.
func (c *Config) checkCluster() error {
	if !c.clustered() {
		if c.BootstrapExpect > 0 || len(c.Join) > 0 || c.Bootstrap || c.PeerCertFile != "" || c.PeerKeyFile != "" || c.PeerCAFile != "" {
			return errors.New("--bootstrap-expect, --join, --bootstrap and --peer-* need --raft-addr HOST:PORT (the address Raft peers dial)")
		}
		return nil
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return errors.New("a node of a multi-node region (--raft-addr) needs the root credentials on every node: " +
			"give the same --access-key/--secret-key (or FEDGATE_ACCESS_KEY/FEDGATE_SECRET_KEY) to each node; " +
			"nodes sign their internal API calls with them")
	}
	if c.BootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must be 1 or more")
	}
	if c.Bootstrap && c.BootstrapExpect > 1 {
		return errors.New("--bootstrap (start a new cluster alone) and --bootstrap-expect above 1 exclude each other")
	}
	if c.BootstrapExpect > 1 && len(c.Join) == 0 {
		return errors.New("--bootstrap-expect needs --join with the other nodes' --listen addresses")
	}
	if c.BootstrapExpect > 1 && len(c.Join) < c.BootstrapExpect-1 {
		return fmt.Errorf("--bootstrap-expect %d needs at least %d --join addresses (the other nodes), got %d", c.BootstrapExpect, c.BootstrapExpect-1, len(c.Join))
	}
	if (c.PeerCertFile != "" || c.PeerKeyFile != "" || c.PeerCAFile != "") && (c.PeerCertFile == "" || c.PeerKeyFile == "" || c.PeerCAFile == "") {
		return errors.New("peer TLS needs all three of --peer-cert-file, --peer-key-file and --peer-ca-file")
	}
	return c.checkPorts()
}

// checkPorts refuses the port collisions visible in the configuration
// alone: the internal API on the Raft or S3 port, or on a --join peer's
// address (a node on this host whose S3 port is this node's Raft port + 1).
func (c *Config) checkPorts() error {
	internal, flag := c.InternalAddr, "--internal-addr "+c.InternalAddr
	if internal == "" {
		var err error
		if internal, err = defaultInternalAddr(c.RaftAddr); err != nil {
			return err
		}
		flag = "--internal-addr " + internal + " (default: --raft-addr's port + 1)"
	}
	if strings.HasSuffix(internal, ":0") {
		return nil
	}
	if internal == c.RaftAddr {
		return fmt.Errorf("%s is also --raft-addr: give the internal API its own port", flag)
	}
	if internal == c.Listen {
		return fmt.Errorf("%s is also --listen: give the internal API its own port", flag)
	}
	for _, j := range c.Join {
		if strings.TrimPrefix(strings.TrimPrefix(j, "http://"), "https://") == internal {
			return fmt.Errorf("%s is the --join address %s, another node's S3 port: give this node its own --internal-addr", flag, j)
		}
	}
	return nil
}

// defaultInternalAddr is the internal API's default address: the Raft
// host, its port + 1.
func defaultInternalAddr(raftAddr string) (string, error) {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return "", fmt.Errorf("--raft-addr %q: %w", raftAddr, err)
	}
	if port == "0" {
		return net.JoinHostPort(host, "0"), nil // tests: both ports picked by the kernel
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p >= 65535 {
		return "", fmt.Errorf("--raft-addr %q: give --internal-addr too (the default is its port + 1)", raftAddr)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1)), nil
}

// withDefaults is c validated, with its derived values filled in.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	c.Join = append([]string(nil), c.Join...)
	for i, j := range c.Join {
		c.Join[i] = c.s3URL(j)
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(c.DataDir, "cache")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LookupEnv == nil {
		c.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FillConcurrency <= 0 {
		c.FillConcurrency = 8
	}
	return c, nil
}

// ServedFeatures is what this build serves of the policy file: all of it
// (every store kind, origins, cache rules with pins, prefetch and
// priority, write-back, replicate and erasure placements, routing, egress
// prices and budgets).
func ServedFeatures() policies.Features {
	return policies.AllFeatures()
}

// CredentialsFile is where a node keeps root credentials it generated.
func CredentialsFile(dataDir string) string { return filepath.Join(dataDir, "root-credentials.json") }

// tls reports whether the S3 port serves HTTPS.
func (c *Config) tls() bool { return c.CertFile != "" }

// s3Scheme is the scheme of this node's S3 port, which a --join or
// `cluster add` address without one is taken to use too (every node of a
// region serves its S3 port the same way).
func (c *Config) s3Scheme() string {
	if c.tls() {
		return "https"
	}
	return "http"
}

// s3URL is addr ("host:port" or a URL) as an S3 port's URL, with this
// node's scheme when addr gives none.
func (c *Config) s3URL(addr string) string { return peerapi.NormalizeURL(addr, c.s3Scheme()) }
