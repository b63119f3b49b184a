// Package nodetest runs a fedgate region inside one test process, for
// tests of what only a region does: write-back copies, draining, reads
// through any node, leader changes and partitions. Each node is a real
// node.Node on loopback: Raft over TCP, the internal API and the S3 port,
// every one on a 127.0.0.1:0 port. The nodes share one posix directory as
// the region's store ("nas" in DefaultPolicy), so write-back and
// write-through buckets work across nodes and a test can look at what was
// drained.
//
//	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
//	c := r.Client(r.Followers()[0])
//	// ... PUT through c, then r.WaitForReplication()
//
// # Partitions
//
// Partition cuts nodes off for real and Heal reconnects them, without a
// restart: every node dials its peers (Raft and the internal API) through
// node.Config.Dial, which the harness sets to a dialer that knows which
// node owns each address. A dial across the cut fails as a closed port
// does (ECONNREFUSED), and Partition closes the connections already open
// across it. Both directions are covered because every connection between
// two nodes is dialed by one of them. The S3 ports stay reachable from the
// test, so a test sees what a client of a cut-off node sees. (Closing the
// cut node's Raft transport and internal API instead would be one-way, and
// hashicorp/raft's transport cannot be reopened, so Heal would have to be
// a restart.)
//
// # Restarts
//
// Stop closes a node (as Run does when its context ends) and keeps its
// directories; Restart opens it again on the same data directory and the
// same addresses: the region's Raft configuration and settings name them.
// The ports were picked by the system when the region was made; they are
// bound again at once, so another process rarely takes one in between.
package nodetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node"
)

// The root credentials every node of a region is started with.
const (
	AccessKey = "NODETESTROOTKEY12345"
	SecretKey = "nodetest-root-secret-0123456789abcdefgh"
)

// Timeout bounds every wait of the harness.
const Timeout = 30 * time.Second

// Options adjust a region.
type Options struct {
	// Config adjusts node i's configuration (0-based) after the harness
	// filled it in (see MakeRegion).
	Config func(i int, c *node.Config)
	// Policy returns the policy file for a shared store directory
	// (nil: DefaultPolicy).
	Policy func(storeDir string) string
}

// DefaultPolicy declares the posix store "nas" on storeDir, the default
// store, and two buckets on it: "ckpt" (write-back) and "datasets"
// (write-through).
func DefaultPolicy(storeDir string) string {
	return `stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: ` + storeDir + `
buckets:
  - name: ckpt
    placement: {single: nas}
    write: write-back
  - name: datasets
    placement: {single: nas}
defaults: {store: nas}
`
}

// Region is a region of in-process nodes.
type Region struct {
	t        testing.TB
	storeDir string
	net      *network
	members  []*member
}

// member is one node: its configuration, and the running node (nil while
// stopped).
type member struct {
	cfg                   node.Config
	n                     *node.Node
	cancel                context.CancelFunc
	done                  chan error // Run's result
	s3, raftAddr, intAddr string
}

// MakeRegion starts n nodes (n1, n2, ...) that form one region, waits for
// a leader every node knows, and stops them when the test ends. Each node
// starts from node.DefaultConfig with its own temporary directories, the
// root credentials above, small cache and staging sizes, a 250ms Raft
// election timeout, BootstrapExpect n with every other node in Join (n = 1:
// Bootstrap), the policy of opts, warnings logged to the test; then
// opts.Config adjusts it.
func MakeRegion(t testing.TB, n int, opts Options) *Region {
	t.Helper()
	if n < 1 {
		t.Fatalf("nodetest: a region of %d nodes", n)
	}
	var quiet atomic.Bool // no t.Log once the test is over
	t.Cleanup(func() { quiet.Store(true) })
	r := &Region{t: t, storeDir: t.TempDir(), net: newNetwork()}
	policy := opts.Policy
	if policy == nil {
		policy = DefaultPolicy
	}
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy(r.storeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The S3 listeners are bound first, so each node's Join names the
	// others' ports; Raft and the internal API pick their own.
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		r.net.own(i, ln.Addr().String())
	}
	for i := range n {
		cfg := node.DefaultConfig()
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.Listener = lns[i]
		cfg.DataDir = t.TempDir()
		cfg.AccessKey, cfg.SecretKey = AccessKey, SecretKey
		cfg.CacheSize, cfg.StagingSize = 256<<20, 64<<20
		cfg.StagingWait = 5 * time.Second
		cfg.ShutdownTimeout = 5 * time.Second
		cfg.RaftElectionTimeout = 250 * time.Millisecond
		cfg.RaftAddr, cfg.InternalAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.PolicyFile = policyFile
		cfg.Dial = r.net.dialer(i)
		cfg.Logger = slog.New(slog.NewTextHandler(logWriter{t, &quiet, cfg.NodeID}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if n == 1 {
			cfg.Bootstrap = true
		} else {
			cfg.BootstrapExpect = n
			for j, ln := range lns {
				if j != i {
					cfg.Join = append(cfg.Join, ln.Addr().String())
				}
			}
		}
		if opts.Config != nil {
			opts.Config(i, &cfg)
		}
		r.members = append(r.members, &member{cfg: cfg})
	}
	t.Cleanup(r.stopAll)

	errs := make(chan error, n)
	for i := range r.members {
		go func() { errs <- r.open(i) }()
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	r.WaitForLeader()
	return r
}

// open opens member i's node on its configuration and runs it.
func (r *Region) open(i int) error {
	m := r.members[i]
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	n, err := node.Open(ctx, m.cfg)
	if err != nil {
		return fmt.Errorf("open node %d (%s): %w", i, m.cfg.NodeID, err)
	}
	m.s3, m.raftAddr, m.intAddr = n.Addr().String(), n.Raft().Addr(), n.InternalAddr().String()
	for _, a := range []string{m.s3, m.raftAddr, m.intAddr} {
		r.net.own(i, a)
	}
	runCtx, stop := context.WithCancel(context.Background())
	m.n, m.cancel, m.done = n, stop, make(chan error, 1)
	go func() { m.done <- n.Run(runCtx) }()
	return nil
}

// stopAll stops every running node (the test's cleanup).
func (r *Region) stopAll() {
	for i, m := range r.members {
		if m.n != nil {
			if err := r.stop(i); err != nil {
				r.t.Errorf("nodetest: stop %s: %v", m.cfg.NodeID, err)
			}
		}
	}
}

// stop ends node i's Run and closes it.
func (r *Region) stop(i int) error {
	m := r.members[i]
	m.cancel()
	var err error
	select {
	case err = <-m.done:
	case <-time.After(Timeout):
		err = fmt.Errorf("node.Run did not return within %s of its context ending", Timeout)
	}
	err = errors.Join(err, m.n.Close())
	m.n = nil
	return err
}

// Stop stops node i as a shutdown does (Run drains and returns, then
// Close), keeping its directories for Restart.
func (r *Region) Stop(i int) {
	r.t.Helper()
	if r.members[i].n == nil {
		r.t.Fatalf("nodetest: Stop(%d): node %d is not running", i, i)
	}
	if err := r.stop(i); err != nil {
		r.t.Fatalf("nodetest: Stop(%d): %v", i, err)
	}
}

// Restart opens a stopped node i again on its data directory and its
// addresses, and waits until it knows the region's leader.
func (r *Region) Restart(i int) {
	r.t.Helper()
	m := r.members[i]
	if m.n != nil {
		r.t.Fatalf("nodetest: Restart(%d): node %d is running; Stop it first", i, i)
	}
	ln, err := net.Listen("tcp", m.s3)
	if err != nil {
		r.t.Fatalf("nodetest: Restart(%d): bind its S3 address again: %v", i, err)
	}
	m.cfg.Listener = ln
	m.cfg.RaftAddr, m.cfg.InternalAddr = m.raftAddr, m.intAddr
	if err := r.open(i); err != nil {
		r.t.Fatalf("nodetest: Restart(%d): %v", i, err)
	}
	r.WaitForLeader()
}

// Len is the number of nodes, running or stopped.
func (r *Region) Len() int { return len(r.members) }

// Node is node i (0-based); nil while it is stopped.
func (r *Region) Node(i int) *node.Node { return r.members[i].n }

// StoreDir is the directory of the region's shared posix store.
func (r *Region) StoreDir() string { return r.storeDir }

// Client is an S3 client of node i with the root credentials (path-style,
// us-east-1); opts adjust it (for example RetryMaxAttempts, or an
// HTTPClient that trusts the CA of a node with CertFile: it is then
// https).
func (r *Region) Client(i int, opts ...func(*s3.Options)) *s3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")}
	scheme := "http://"
	if r.members[i].cfg.CertFile != "" {
		scheme = "https://"
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(scheme + r.members[i].s3)
		o.UsePathStyle = true
	}}, opts...)...)
}

// reachable are the running nodes on the leader's side of any partition:
// the nodes not cut off, or, when every running node is cut off, all.
func (r *Region) reachable() []int {
	var in, all []int
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	for i, m := range r.members {
		if m.n == nil {
			continue
		}
		all = append(all, i)
		if !r.net.far[i] {
			in = append(in, i)
		}
	}
	if len(in) == 0 {
		return all
	}
	return in
}

// WaitForLeader waits until one running node, not cut off, leads and every
// running node not cut off knows it, and returns its index.
func (r *Region) WaitForLeader() int {
	r.t.Helper()
	leader := -1
	wait.For(r.t, Timeout, "a leader every reachable node knows", func() bool {
		leader = -1
		nodes := r.reachable()
		for _, i := range nodes {
			if r.members[i].n.Raft().IsLeader() {
				leader = i
			}
		}
		if leader < 0 {
			return false
		}
		for _, i := range nodes {
			if id, _ := r.members[i].n.Raft().Leader(); id != r.members[leader].cfg.NodeID {
				return false
			}
		}
		return true
	})
	return leader
}

// Leader is the leader's index (WaitForLeader).
func (r *Region) Leader() int {
	r.t.Helper()
	return r.WaitForLeader()
}

// Followers are the other running nodes not cut off.
func (r *Region) Followers() []int {
	r.t.Helper()
	leader := r.WaitForLeader()
	var out []int
	for _, i := range r.reachable() {
		if i != leader {
			out = append(out, i)
		}
	}
	return out
}

// WaitForReplication waits until every running node not cut off has
// applied every command the leader had applied when it was called.
func (r *Region) WaitForReplication() {
	r.t.Helper()
	want := r.members[r.WaitForLeader()].n.Raft().State().AppliedIndex()
	wait.For(r.t, Timeout, fmt.Sprintf("every reachable node to apply index %d", want), func() bool {
		for _, i := range r.reachable() {
			if r.members[i].n.Raft().State().AppliedIndex() < want {
				return false
			}
		}
		return true
	})
}

// Partition cuts the nodes far off from the others: no connection between
// the two sides succeeds (the far nodes still reach each other), and the
// ones open are closed. It replaces an earlier partition.
func (r *Region) Partition(far ...int) { r.net.partition(far) }

// Heal ends the partition. hashicorp/raft backs off from a peer it could
// not reach (up to about 10 s), so a node cut off for seconds may catch up
// that much later: wait with WaitForReplication.
func (r *Region) Heal() { r.net.partition(nil) }

// Freeze makes node i look, to the others, like a stopped process (a GC
// pause, a hung disk, a SIGSTOPped VM): their connections to it open but
// get no answer, and what it sends does not arrive, until Thaw. (The node
// itself keeps running; only the network is frozen: a frozen leader
// notices no follower answers and steps down, as a stopped one would be
// replaced.) One node at a time.
func (r *Region) Freeze(i int) { r.net.freeze(i) }

// Thaw ends Freeze.
func (r *Region) Thaw() { r.net.thaw() }

// logWriter hands a node's log lines to the test log while the test runs.
type logWriter struct {
	t     testing.TB
	quiet *atomic.Bool
	id    string
}

func (w logWriter) Write(p []byte) (int, error) {
	if !w.quiet.Load() {
		w.t.Logf("%s: %s", w.id, bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}
