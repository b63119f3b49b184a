// Package raft is a region's replicated state: buckets created through S3,
// users and their grants, multipart sessions, the active policy file and
// region settings, kept by hashicorp/raft.
//
// Writes are typed Commands (one type byte, then a JSON body; see
// command.go) applied with Node.Apply. Reads go through State, an
// in-memory view that never touches disk or Raft. The FSM also keeps its
// state in a bbolt file with the last applied index, so a restart loads the
// file instead of replaying the log (see fsm.go).
//
// Today a region is one node that bootstraps itself. Membership, joining
// and forwarding writes to the leader are to come; Apply on a node that is
// not the leader returns ErrNotLeader.
package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// Config configures a Node.
type Config struct {
	// NodeID names this node in the Raft configuration; it must not change.
	NodeID string
	// Dir holds raft.db (log and stable store), fsm.db (the FSM's file) and
	// snapshots/. It is created with mode 0700: it holds secret keys.
	Dir string
	// BindAddr is the TCP address Raft listens on ("127.0.0.1:0" picks a
	// port). Empty uses an in-memory transport, enough for a one-node
	// region.
	BindAddr string
	// AdvertiseAddr is the address peers dial, when BindAddr is not one
	// (for example "0.0.0.0:7000").
	AdvertiseAddr string
	// Logger receives this package's and hashicorp/raft's logs (nil: none).
	Logger *slog.Logger
	// SnapshotThreshold is how many log entries trigger a snapshot
	// (0: hashicorp/raft's default, 8192).
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log
	// (0: hashicorp/raft's default, 10240).
	TrailingLogs uint64
	// ElectionTimeout sets Raft's heartbeat and election timeouts
	// (0: 1s; at least 10ms). Tests make it small so Open is quick.
	ElectionTimeout time.Duration
}

// Node is one member of a region's Raft group.
type Node struct {
	log       *slog.Logger
	raft      *hraft.Raft
	fsm       *fsm
	closers   []func() error // run in reverse by Close
	done      chan struct{}  // closed by Close: pending waits end with ErrClosed
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the Raft state under cfg.Dir, bootstraps a
// one-node region when there is none, and waits, as long as ctx allows,
// until this node is the leader and has applied every entry of its log, so
// State right after Open shows all committed state. It fails when cfg is
// incomplete, a file cannot be opened (or is locked by another process for
// more than a second), fsm.db holds state while Raft holds none, or ctx
// ends first.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg.NodeID == "" || cfg.Dir == "" {
		return nil, errors.New("raft: Config.NodeID and Config.Dir are required")
	}
	if cfg.ElectionTimeout != 0 && cfg.ElectionTimeout < 10*time.Millisecond {
		return nil, errors.New("raft: Config.ElectionTimeout must be at least 10ms")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	n := &Node{log: log, done: make(chan struct{})}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	if n.fsm, err = openFSM(filepath.Join(cfg.Dir, "fsm.db"), log); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.fsm.close)
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.Dir, "raft.db"),
		BoltOptions: &bolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("raft: open log store: %w", err)
	}
	n.closers = append(n.closers, store.Close)
	logs, err := hraft.NewLogCache(512, store)
	if err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	hl := newHCLog(log, "raft")
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hl.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raft: open snapshot store: %w", err)
	}
	trans, err := newTransport(cfg, hl)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, trans.Close)

	hasState, err := hraft.HasExistingState(logs, store, snaps)
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
	snapApplied, hasSnap, err := snapshotApplied(snaps)
	if err != nil {
		return nil, fmt.Errorf("raft: read newest snapshot: %w", err)
	}
	rc := raftConfig(cfg, hl)
	rc.NoSnapshotRestoreOnStart = hasSnap && applied >= snapApplied
	if err := hraft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	if n.raft, err = hraft.NewRaft(rc, n.fsm, logs, store, snaps, trans); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	n.closers = append(n.closers, func() error { return n.raft.Shutdown().Error() })
	if !hasState {
		boot := hraft.Configuration{Servers: []hraft.Server{{
			Suffrage: hraft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
		}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	log.Info("raft: ready", "node", cfg.NodeID, "addr", trans.LocalAddr(),
		"applied", n.fsm.state.AppliedIndex(), "restored_snapshot", hasSnap && !rc.NoSnapshotRestoreOnStart)
	return n, nil
}

type transport interface {
	hraft.Transport
	Close() error
}

func newTransport(cfg Config, hl *hclogAdapter) (transport, error) {
	if cfg.BindAddr == "" {
		_, t := hraft.NewInmemTransport(hraft.ServerAddress("inmem:" + cfg.NodeID))
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
	t, err := hraft.NewTCPTransportWithLogger(cfg.BindAddr, adv, 3, 10*time.Second, hl.Named("transport"))
	if err != nil {
		return nil, fmt.Errorf("raft: transport: %w", err)
	}
	return t, nil
}

func raftConfig(cfg Config, hl *hclogAdapter) *hraft.Config {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.NodeID)
	rc.Logger = hl
	rc.BatchApplyCh = true
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if et := cfg.ElectionTimeout; et > 0 {
		rc.HeartbeatTimeout, rc.ElectionTimeout = et, et
		rc.LeaderLeaseTimeout = et / 2
		rc.CommitTimeout = min(rc.CommitTimeout, et)
	}
	return rc
}

// waitReady waits until this node leads and has applied its whole log.
func (n *Node) waitReady(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n.raft.State() != hraft.Leader {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: waiting for leadership: %w", ctx.Err())
		case <-tick.C:
		}
	}
	if err := n.await(ctx, n.raft.Barrier(enqueueTimeout(ctx))); err != nil {
		return fmt.Errorf("raft: waiting to apply the log: %w", err)
	}
	return nil
}

// Apply commits cmd to the Raft log and applies it. It returns the
// command's own error (ErrBucketExists, ErrNoSuchUser, ...; see each
// command), ErrUnknownCommand, ErrNotLeader, ErrClosed, or ctx's error when
// ctx ends first. After ctx's error, ErrClosed or ErrNotLeader the command
// may or may not have been applied (a later Open shows which).
func (n *Node) Apply(ctx context.Context, cmd Command) error {
	data, err := Encode(cmd)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-n.done:
		return ErrClosed
	default:
	}
	f := n.raft.Apply(data, enqueueTimeout(ctx))
	if err := n.await(ctx, f); err != nil {
		return err
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// State returns the read view. It stays valid (frozen) after Close.
func (n *Node) State() *State { return n.fsm.state }

// IsLeader reports whether this node is the region's leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == hraft.Leader }

// Snapshot takes a Raft snapshot now and compacts the log. Having nothing
// new to snapshot is not an error. It returns ErrClosed or ctx's error.
func (n *Node) Snapshot(ctx context.Context) error {
	err := n.await(ctx, n.raft.Snapshot())
	if errors.Is(err, hraft.ErrNothingNewToSnapshot) {
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
func (n *Node) await(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return raftErr(err)
	case <-n.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("raft: outcome unknown: %w", ctx.Err())
	}
}

func raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrLeadershipLost),
		errors.Is(err, hraft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, hraft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, hraft.ErrEnqueueTimeout):
		return fmt.Errorf("raft: %w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("raft: %w", err)
}
