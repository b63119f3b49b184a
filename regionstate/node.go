// Package regionstate is a region's replicated state, kept by hashicorp/raft:
// buckets created through S3, users and their grants, multipart sessions,
// the write-back journal (objects staged on the region's nodes and not yet
// drained to their stores, with their tombstones; journal.go), cache pins
// and preload jobs with each node's progress, the active policy file,
// region settings (members' addresses) and the egress ledger (bytes moved
// per hour, bucket, prefix and location pair; egress.go).
//
// Writes are typed Commands (one type byte, then a JSON body: a
// raft/envelope table, command.go) applied with Node.Apply. Reads go through State, an
// in-memory view that never touches disk or Raft. The FSM also keeps its
// state in a bbolt file with the last applied index, so a restart loads the
// file instead of replaying the log (see fsm.go).
//
// A region is one node that bootstraps itself (the default), or 3-5 nodes:
// each opens with BootstrapExpect set, and once the members are known
// (discovery is the caller's: see docs/operations.md) every node calls
// BootstrapCluster with the same list. Membership changes go through the
// leader (AddVoter, AddNonVoter, RemoveServer). Apply on a follower
// forwards the write through Config.Forward, whose other end calls the
// leader's ApplyEncoded; without Forward it returns a *NotLeaderError.
//
// The transport, the log store, the snapshot store and the logging of
// hashicorp/raft are raft/'s (raft/transport, raft/logstore, raft/rlog),
// shared with the catalog's Raft group.
package regionstate

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/logstore"
	"github.com/fedgate/fedgate/raft/rlog"
	"github.com/fedgate/fedgate/raft/transport"
)

// Config configures a Node.
type Config struct {
	// NodeID names this node in the Raft configuration; it must not change.
	NodeID string
	// Dir holds the Raft log and stable store (raft.db, or wal/ for
	// raft-wal), fsm.db (the FSM's file) and snapshots/. It is created with mode 0700: it holds secret keys.
	Dir string
	// BindAddr is the TCP address Raft listens on ("127.0.0.1:0" picks a
	// port). Empty uses an in-memory transport ("inmem:"+NodeID), enough
	// for a one-node region (and in-process clusters in this package's
	// tests).
	BindAddr string
	// AdvertiseAddr is the address peers dial, when BindAddr is not one
	// (for example "0.0.0.0:7000"). It is the address recorded in the Raft
	// configuration for this node.
	AdvertiseAddr string
	// TLS, when set, runs the TCP transport over TLS (tls.Listen, and
	// tls.Dialer to peers) with this config on both sides: give it this
	// node's certificate, the CA as RootCAs and ClientCAs, and
	// ClientAuth: tls.RequireAndVerifyClientCert (PeerTLSConfig builds
	// one from PEM files). It needs BindAddr.
	TLS *tls.Config
	// TransportTimeout bounds each transport RPC and dial (0: 10s).
	TransportTimeout time.Duration
	// TransportMaxPool is how many idle connections are kept per peer
	// (0: 3).
	TransportMaxPool int
	// Dial, when set, opens the TCP connections to peers (under TLS too:
	// the handshake runs over what it returns) instead of a net.Dialer.
	// Tests cut nodes off from each other with it (see node/nodetest).
	Dial transport.DialFunc

	// Bootstrap starts a new one-node cluster when Dir holds no Raft
	// state. It is the default when BootstrapExpect is 0 or 1.
	Bootstrap bool
	// BootstrapExpect > 1: Open does not bootstrap and does not wait for a
	// leader; the caller discovers the members and calls BootstrapCluster
	// (with at least this many) on every node, or the node is added by an
	// existing cluster's leader. It cannot be combined with Bootstrap. A
	// node whose Dir holds Raft state ignores Bootstrap and
	// BootstrapExpect and rejoins with the configuration it has (one that
	// holds only this node is a one-node region: Open waits to lead, and
	// its leader may then AddVoter new nodes).
	BootstrapExpect int

	// Forward, when set, carries a write from a follower to the leader:
	// it must deliver data to the leader's ApplyEncoded and return its
	// result (the index, or the error rebuilt with WireError.Err, so
	// errors.Is still works). Apply and ApplyIndex on a follower call it;
	// without it they return a *NotLeaderError. A *NotLeaderError from
	// the hook means "not appended" and is retried; any other error is
	// returned as is (after a transport failure the write's outcome is
	// unknown, and the hook must not retry it blindly either).
	Forward func(ctx context.Context, leaderID, leaderAddr string, data []byte) (uint64, error)
	// LeaderWait bounds how long a follower's write waits for a leader to
	// be known before it fails with ErrNoLeader (0: 5s; ctx may end it
	// sooner).
	LeaderWait time.Duration
	// Logger receives this package's and hashicorp/raft's logs (nil: none).
	Logger *slog.Logger
	// SnapshotThreshold is how many log entries trigger a snapshot
	// (0: hashicorp/raft's default, 8192).
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log
	// (0: hashicorp/raft's default, 10240).
	TrailingLogs uint64
	// LogStore is the Raft log store: LogStoreBoltDB or LogStoreWAL; "" is
	// DefaultLogStore, or raft-wal for a data dir that has it (see
	// raft/logstore).
	LogStore string
	// ElectionTimeout sets Raft's heartbeat and election timeouts
	// (0: 1s; at least 10ms). Tests make it small so Open is quick.
	ElectionTimeout time.Duration
}

// Node is one member of a region's Raft group.
type Node struct {
	id      string
	expect  int
	forward func(ctx context.Context, leaderID, leaderAddr string, data []byte) (uint64, error)
	wait    time.Duration
	// election is Raft's election timeout: how long WhileLeader lets a
	// replaced leader answer before giving it up.
	election time.Duration
	// markedTerm is the term whose LeaderMark this node, as leader, has
	// committed: from then on its CommitIndex covers every entry the
	// previous leaders committed (ReadIndex).
	markedTerm atomic.Uint64
	// announced is closed when announce has returned (its feature is in
	// the region's state, or the node closed).
	announced chan struct{}
	log       *slog.Logger
	logStore  string // the kind opened
	raft      *raft.Raft
	trans     transport.Transport
	fsm       *fsm
	group     *committer     // the leader's group commit (group.go)
	acked     atomic.Uint64  // the highest index ApplyAcked returned on this follower
	closers   []func() error // run in reverse by Close
	done      chan struct{}  // closed by Close: pending waits end with ErrClosed
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the Raft state under cfg.Dir. For a one-node
// region (the default: BootstrapExpect 0 or 1, or a Dir whose
// configuration is this node alone) it bootstraps when there is no state
// and waits, as long as ctx allows, until this node is the leader and has
// applied every entry of its log, so State right after Open shows all
// committed state. Otherwise it returns once Raft runs: use WaitForLeader,
// and WaitApplied for read-after-write. It fails when cfg is incomplete or
// contradictory, a file cannot be opened (or is locked by another process for
// more than a second), fsm.db holds state while Raft holds none, or ctx
// ends first.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	n := &Node{id: cfg.NodeID, expect: cfg.BootstrapExpect, forward: cfg.Forward,
		wait: cmp.Or(cfg.LeaderWait, 5*time.Second), log: log, done: make(chan struct{}),
		election: cmp.Or(cfg.ElectionTimeout, raft.DefaultConfig().ElectionTimeout)}
	n.group = &committer{n: n}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	hl := rlog.New(log, "raft").TrackPeers(time.Now)
	st, err := n.openStorage(cfg, hl)
	if err != nil {
		return nil, err
	}
	hasState, err := raft.HasExistingState(st.logs, st.store, st.snaps)
	if err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	applied := n.fsm.state.AppliedIndex()
	if !hasState && applied > 0 {
		return nil, fmt.Errorf("raft: %s holds FSM state up to index %d but there is no Raft state; "+
			"refusing to bootstrap over it (move fsm.db away to start empty)", filepath.Join(cfg.Dir, "fsm.db"), applied)
	}
	// The file is normally at or past the newest snapshot (Raft snapshots
	// what the FSM applied), and then Raft need not restore the snapshot
	// into it; if the file is behind (lost, or an old copy), it must.
	snapApplied, hasSnap, err := snapshotApplied(st.snaps)
	if err != nil {
		return nil, fmt.Errorf("raft: read newest snapshot: %w", err)
	}
	rc := raftConfig(cfg, hl)
	rc.NoSnapshotRestoreOnStart = hasSnap && applied >= snapApplied
	leaderCh := make(chan bool, 8)
	rc.NotifyCh = leaderCh
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, st.logs, st.store, st.snaps, n.trans); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	n.closers = append(n.closers, func() error { return n.raft.Shutdown().Error() })
	n.raft.RegisterObserver(hl.Observer())
	go n.markLeadership(leaderCh)
	n.announced = make(chan struct{})
	go func() {
		defer close(n.announced)
		n.announce()
	}()
	if err := n.form(ctx, hasState, cfg.Bootstrap || cfg.BootstrapExpect <= 1, rc.LocalID); err != nil {
		return nil, err
	}
	log.Info("raft: ready", "node", cfg.NodeID, "addr", n.trans.LocalAddr(),
		"applied", n.fsm.state.AppliedIndex(), "restored_snapshot", hasSnap && !rc.NoSnapshotRestoreOnStart)
	return n, nil
}

// validate checks the fields Open needs and the combinations it refuses.
func (cfg *Config) validate() error {
	switch {
	case cfg.NodeID == "" || cfg.Dir == "":
		return errors.New("raft: Config.NodeID and Config.Dir are required")
	case cfg.ElectionTimeout != 0 && cfg.ElectionTimeout < 10*time.Millisecond:
		return errors.New("raft: Config.ElectionTimeout must be at least 10ms")
	case cfg.BootstrapExpect < 0 || (cfg.Bootstrap && cfg.BootstrapExpect > 1):
		return errors.New("raft: Config.Bootstrap and a BootstrapExpect above 1 exclude each other")
	case cfg.TLS != nil && cfg.BindAddr == "":
		return errors.New("raft: Config.TLS needs a BindAddr")
	}
	return nil
}

// storage is what Raft runs on: the log (behind a cache), the stable
// store and the snapshots.
type storage struct {
	logs  raft.LogStore
	store logstore.Store
	snaps raft.SnapshotStore
}

// openStorage opens the FSM's file, the log store, the snapshots and the
// transport (raft/), each closed by Close.
func (n *Node) openStorage(cfg Config, hl *rlog.Logger) (st storage, err error) {
	if n.fsm, err = openFSM(filepath.Join(cfg.Dir, "fsm.db"), n.log); err != nil {
		return st, err
	}
	n.closers = append(n.closers, n.fsm.close)
	if st.store, n.logStore, err = logstore.Open(cfg.Dir, cfg.LogStore, n.log); err != nil {
		return st, err
	}
	n.closers = append(n.closers, st.store.Close)
	if st.logs, err = raft.NewLogCache(512, st.store); err != nil {
		return st, fmt.Errorf("raft: %w", err)
	}
	if st.snaps, err = logstore.Snapshots(cfg.Dir, hl.Named("snapshot")); err != nil {
		return st, err
	}
	n.trans, err = transport.New(transport.Config{Bind: cfg.BindAddr, Advertise: cfg.AdvertiseAddr, LocalID: cfg.NodeID,
		TLS: cfg.TLS, Dial: cfg.Dial, Timeout: cfg.TransportTimeout, MaxPool: cfg.TransportMaxPool, Logger: hl.Named("transport")})
	if err != nil {
		return st, err
	}
	n.closers = append(n.closers, n.trans.Close)
	return st, nil
}

// form bootstraps a one-node region without Raft state (alone), and waits
// to lead one (new, or a Dir whose configuration is this node alone).
func (n *Node) form(ctx context.Context, hasState, alone bool, self raft.ServerID) error {
	wait := !hasState && alone
	if wait {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: self, Address: n.trans.LocalAddr(),
		}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
			return fmt.Errorf("raft: bootstrap: %w", err)
		}
	} else if hasState {
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return fmt.Errorf("raft: %w", err)
		}
		s := f.Configuration().Servers
		wait = len(s) == 1 && s[0].ID == self
	}
	if !wait {
		return nil
	}
	return n.waitReady(ctx)
}

func raftConfig(cfg Config, hl *rlog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hl
	rc.BatchApplyCh = true
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	// A follower learns that an entry committed with the leader's next
	// AppendEntries; with nothing else to send, the leader sends one after
	// CommitTimeout (50-100 ms by default). Forwarded writes wait for the
	// follower to apply them, so keep that short.
	rc.CommitTimeout = 1 * time.Millisecond
	if et := cfg.ElectionTimeout; et > 0 {
		rc.HeartbeatTimeout, rc.ElectionTimeout = et, et
		rc.LeaderLeaseTimeout = et / 2
		// Followers learn the commit index at most CommitTimeout late.
		rc.CommitTimeout = min(rc.CommitTimeout, et/4)
	}
	return rc
}

// waitReady waits until this node leads and has applied its whole log.
func (n *Node) waitReady(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n.raft.State() != raft.Leader {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: waiting for leadership: %w", ctx.Err())
		case <-tick.C:
		}
	}
	if err := n.await(ctx, n.raft.Barrier(enqueueTimeout(ctx))); err != nil {
		return fmt.Errorf("raft: waiting to apply the log: %w", err)
	}
	n.mark() // the barrier is an entry the FSM never sees: see LeaderMark
	return nil
}

// State returns the read view. It stays valid (frozen) after Close.
func (n *Node) State() *State { return n.fsm.state }

// IsLeader reports whether this node is the region's leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Snapshot takes a Raft snapshot now and compacts the log. Having nothing
// new to snapshot is not an error. It returns ErrClosed or ctx's error.
func (n *Node) Snapshot(ctx context.Context) error {
	err := n.await(ctx, n.raft.Snapshot())
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// Close shuts Raft down and closes every file; a later Open on the same
// Dir restores all state. Calls after the first return the first's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		for i := len(n.closers) - 1; i >= 0; i-- {
			if err := n.closers[i](); err != nil {
				errs = append(errs, err)
			}
		}
		close(n.done)
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func enqueueTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Nanosecond)
	}
	return 0
}

// await waits for f, for ctx, or for Close, and maps hashicorp/raft's
// errors to ours. Close must end the wait: with BatchApplyCh, Raft may
// accept an Apply into its buffer after shutdown and never answer it.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return n.raftErr(err)
	case <-n.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("raft: outcome unknown: %w", ctx.Err())
	}
}

func (n *Node) raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Rejected before it was appended: safe to retry on the leader.
		addr, id := n.raft.LeaderWithID()
		return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrLeadershipLost
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raft: %w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("raft: %w", err)
}
