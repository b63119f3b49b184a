package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/rlog"
	"github.com/fedgate/fedgate/raft/rmetrics"
)

// ErrNoMajority: the catalog could not commit the change in time (no
// leader, or this region is cut off from the majority of regions). Nothing
// a region does with its existing buckets depends on it.
var ErrNoMajority = errors.New("catalog: no majority of regions reachable")

// Config is one region's catalog member.
type Config struct {
	// Region is this member's region; ID its Raft server id (default
	// Region: the region's voter; a non-voter is REGION/NODE).
	Region, ID string
	// Transport, Logs, Stable and Snapshots are Raft's; node wiring gives
	// TCP and bbolt, the simulation in-memory ones with WAN delays.
	Transport raft.Transport
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// RTT is the longest round trip expected between regions; Raft's
	// timeouts are set from it (default 200ms).
	RTT time.Duration
	// Logger receives the member's and Raft's logs (default: none); give it
	// the node's logger with the component "catalog".
	Logger *slog.Logger
	// Forward reaches the leading region's member (see Forward).
	Forward Forward
}

// Node is one region's member of the catalog group.
type Node struct {
	cfg   Config
	raft  *raft.Raft
	state *State
}

// WANConfig is Raft's configuration for voters RTT apart: heartbeats and
// elections several round trips long, so that a slow link is not taken for
// a dead leader.
func WANConfig(region string, rtt time.Duration) *raft.Config {
	if rtt <= 0 {
		rtt = 200 * time.Millisecond
	}
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(region)
	c.HeartbeatTimeout = 5 * rtt
	c.ElectionTimeout = 5 * rtt
	c.LeaderLeaseTimeout = 5 * rtt / 2
	c.CommitTimeout = rtt / 4
	c.SnapshotThreshold = 1024
	c.TrailingLogs = 1024
	return c
}

// Open starts the member. A new catalog is formed by Bootstrap on one
// member with every region listed.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" {
		cfg.ID = cfg.Region
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hl := rlog.New(cfg.Logger, "raft").TrackPeers(time.Now)
	rc := WANConfig(cfg.ID, cfg.RTT)
	rc.Logger = hl
	st := newState()
	r, err := raft.NewRaft(rc, fsm{s: st, log: cfg.Logger}, cfg.Logs, cfg.Stable, cfg.Snapshots, cfg.Transport)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	r.RegisterObserver(hl.Observer())
	return &Node{cfg: cfg, raft: r, state: st}, nil
}

// Bootstrap forms the catalog with one voter per region (name -> Raft
// address).
func (n *Node) Bootstrap(members map[string]raft.ServerAddress) error {
	var c raft.Configuration
	for id, addr := range members {
		c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(id), Address: addr, Suffrage: raft.Voter})
	}
	return n.raft.BootstrapCluster(c).Error()
}

// State is this region's applied copy of the catalog.
func (n *Node) State() *State { return n.state }

// Close stops the member.
func (n *Node) Close() error { return n.raft.Shutdown().Error() }

// Leader names the region leading the catalog ("" when none is known).
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// RaftView is this member's view of the catalog's Raft group, for its
// metrics (raft/rmetrics).
func (n *Node) RaftView() rmetrics.View { return rmetrics.Of(n.raft, n.state.Applied()) }

// Lag is how many committed entries this member has not applied yet as
// far as it knows (its Raft commit index minus its applied index).
func (n *Node) Lag() uint64 {
	c, a := n.raft.CommitIndex(), n.raft.AppliedIndex()
	if c < a {
		return 0
	}
	return c - a
}

// Forward sends an encoded command to the member of region leader and
// returns the index it was committed at, or the command's error. The wired
// build sends it to the leader region's gateway; the simulation calls the
// member through its WAN model.
type Forward func(ctx context.Context, leader string, data []byte) (uint64, error)

// ApplyLocal commits an encoded command on this member, which must lead:
// the other side of a Forward.
func (n *Node) ApplyLocal(ctx context.Context, data []byte) (uint64, error) {
	f := n.raft.Apply(data, time.Until(deadline(ctx)))
	if err := f.Error(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoMajority, err)
	}
	if resp, _ := f.Response().(error); resp != nil {
		return f.Index(), resp
	}
	return f.Index(), nil
}

// commit commits c, here when this member leads, else through the
// leader's region, retrying while no leader is known until ctx ends, and
// waits until this member has applied it (so this region reads its own
// change at once).
func (n *Node) commit(ctx context.Context, c Command) error {
	data, err := encode(c)
	if err != nil {
		return err
	}
	leaderless := time.Time{}
	for {
		var idx uint64
		var err error
		leader := n.Leader()
		if leader != "" {
			leaderless = time.Time{}
		} else if leaderless.IsZero() {
			leaderless = time.Now()
		} else if time.Since(leaderless) > max(10*n.rtt(), 2*time.Second) {
			// No leader for two election timeouts (and 2 s, a member's
			// start): this member is cut off from a majority; say so now
			// rather than at ctx's end.
			return fmt.Errorf("%w: no leader known for %v", ErrNoMajority, time.Since(leaderless).Round(time.Millisecond))
		}
		switch {
		case leader == n.cfg.ID:
			idx, err = n.ApplyLocal(ctx, data)
		case leader != "" && n.cfg.Forward != nil:
			idx, err = n.cfg.Forward(ctx, leader, data)
		default:
			err = ErrNoMajority
		}
		if err == nil {
			return n.waitApplied(ctx, idx)
		}
		if !errors.Is(err, ErrNoMajority) {
			return err // the command's answer (a taken name, ...)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(n.rtt()):
		}
	}
}

func (n *Node) rtt() time.Duration {
	if n.cfg.RTT > 0 {
		return n.cfg.RTT
	}
	return 200 * time.Millisecond
}

// Create records a new bucket; a taken name is a *BucketExistsError.
func (n *Node) Create(ctx context.Context, b Bucket) error {
	return n.commit(ctx, Command{Op: "create", Bucket: &b})
}

// Update changes a bucket's policy, ACL or versioning; only its home
// region may.
func (n *Node) Update(ctx context.Context, b Bucket) error {
	return n.commit(ctx, Command{Op: "update", Bucket: &b, Region: n.cfg.Region})
}

// SetConfig sets (value "": removes) one S3 configuration document of a
// bucket; only its home region may.
func (n *Node) SetConfig(ctx context.Context, bucket, kind, value string) error {
	return n.commit(ctx, Command{Op: "set-config", Name: bucket, Kind: kind, Value: value, Region: n.cfg.Region})
}

// Delete removes a bucket; only its home region may.
func (n *Node) Delete(ctx context.Context, name string) error {
	return n.commit(ctx, Command{Op: "delete", Name: name, Region: n.cfg.Region})
}

// PutUser creates or replaces a user of this region (its key works in
// every region).
func (n *Node) PutUser(ctx context.Context, u User) error {
	u.Home = n.cfg.Region
	return n.commit(ctx, Command{Op: "put-user", User: &u})
}

// DeleteUser removes a user of this region.
func (n *Node) DeleteUser(ctx context.Context, name string) error {
	return n.commit(ctx, Command{Op: "delete-user", Name: name, Region: n.cfg.Region})
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(30 * time.Second)
}

// waitApplied waits for this member to apply index.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		n.state.mu.RLock()
		applied, ch := n.state.applied, n.state.changed
		n.state.mu.RUnlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: applying index %d here: %v", ErrNoMajority, index, ctx.Err())
		}
	}
}
