package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/internal/backoff"
	"github.com/fedgate/fedgate/regionstate"
)

// The cluster as the namespace's federation.Region (staged copies of
// write-back writes and read barriers over the internal API) and as the
// cache's cachetier.PeerClient.

// Self implements federation.Region.
func (c *cluster) Self() string { return c.id }

// membersTTL bounds how stale the cached member list may be.
const membersTTL = time.Second

type memberCache struct {
	mu  sync.Mutex
	ids []string
	at  time.Time
}

// Members implements federation.Region: the ids in the Raft configuration
// (cached for a second; a change of membership is rare).
func (c *cluster) Members() []string {
	c.members.mu.Lock()
	defer c.members.mu.Unlock()
	if c.members.ids != nil && time.Since(c.members.at) < membersTTL {
		return c.members.ids
	}
	ms, err := c.raft.Members()
	if err != nil || len(ms) == 0 {
		if c.members.ids == nil {
			return []string{c.id}
		}
		return c.members.ids
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	c.members.ids, c.members.at = ids, time.Now()
	return ids
}

// baseOf is node's S3 address, or an error naming node.
func (c *cluster) baseOf(ctx context.Context, node string) (string, error) {
	base := c.httpOf(ctx, node)
	if base == "" {
		return "", fmt.Errorf("the HTTP address of node %s is not known", node)
	}
	return base, nil
}

// StageTo implements federation.Region.
func (c *cluster) StageTo(ctx context.Context, node, id string, r io.Reader, n int64) error {
	base, err := c.baseOf(ctx, node)
	if err != nil {
		return err
	}
	return c.client.StageTo(ctx, base, id, r, n)
}

// ReadStaged implements federation.Region.
func (c *cluster) ReadStaged(ctx context.Context, node, id string, off, n int64) (io.ReadCloser, error) {
	base, err := c.baseOf(ctx, node)
	if err != nil {
		return nil, err
	}
	return c.client.ReadStaged(ctx, base, id, off, n)
}

// HoldStaged implements federation.Region.
func (c *cluster) HoldStaged(ctx context.Context, node string, ids []string, d time.Duration) error {
	base, err := c.baseOf(ctx, node)
	if err != nil {
		return err
	}
	return c.client.HoldStaged(ctx, base, ids, d)
}

// ReadChunk implements cachetier.PeerClient: [off, off+n) of chunk k from
// node's cache.
func (c *cluster) ReadChunk(ctx context.Context, node string, k cachetier.ChunkKey, off, n int64) (io.ReadCloser, error) {
	base, err := c.baseOf(ctx, node)
	if err != nil {
		return nil, err
	}
	return c.client.ReadChunk(ctx, base, k, off, n)
}

// ReadBarrier implements federation.Region: it waits until this node has
// applied the leader's commit index, asked now, so a read here sees every
// write acknowledged anywhere before it.
func (c *cluster) ReadBarrier(ctx context.Context) error {
	if c.raft.IsLeader() {
		if idx, err := c.raft.ReadIndex(ctx); err == nil {
			return c.raft.WaitApplied(ctx, idx)
		}
		// Not the leader any more: ask the one there is, below.
	}
	if !c.tcp {
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, barrierWait)
	defer cancel()
	for attempt := 0; ; attempt++ {
		idx, err := c.leaderCommit(ctx)
		if err == nil {
			if err := c.raft.WaitApplied(ctx, idx); err != nil && ctx.Err() != nil && parent.Err() == nil {
				return fmt.Errorf("%w: applied %d of the leader's %d within %v", federation.ErrBehind, c.raft.State().AppliedIndex(), idx, barrierWait)
			} else if err != nil {
				return err
			}
			return nil
		}
		if errors.Is(err, errLeaderChanged) {
			continue // ask the new leader at once
		}
		if ctx.Err() != nil || barrierRetry.Sleep(ctx, attempt+1) != nil {
			return fmt.Errorf("%w: no leader answered a read barrier: %v", regionstate.ErrNoLeader, err)
		}
	}
}

// barrierWait bounds a follower's read barrier: asking the leader and
// applying the log up to its commit index.
const barrierWait = 10 * time.Second

// barrierRetry paces a read barrier's tries: 20ms, 40ms ... up to 200ms.
var barrierRetry = backoff.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// leaderCommit asks the leader for its commit index.
func (c *cluster) leaderCommit(ctx context.Context) (uint64, error) {
	lid, _ := c.raft.Leader()
	if lid == "" {
		return 0, regionstate.ErrNoLeader
	}
	if lid == c.id {
		return c.raft.ReadIndex(ctx)
	}
	base := c.httpOf(ctx, lid)
	if base == "" {
		return 0, fmt.Errorf("the leader's HTTP address is not known")
	}
	// A leader that froze is not waited on past the election that
	// replaces it.
	lctx, stop := c.raft.WhileLeaderNoGrace(ctx, lid)
	defer stop()
	idx, err := c.client.ReadIndex(lctx, base)
	if err != nil && lctx.Err() != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("%w: %s", errLeaderChanged, lid)
	}
	return idx, err
}

// errLeaderChanged: the leader asked for its commit index was replaced
// while the question was pending.
var errLeaderChanged = errors.New("the leader changed while it was asked for its commit index")

// syncMembers keeps cache's ring in step with the Raft membership.
func (c *cluster) syncMembers(ctx context.Context, cache *cachetier.Cache) {
	var last string
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		ids := slices.Clone(c.Members())
		slices.Sort(ids)
		if key := strings.Join(ids, ","); key != last {
			cache.SetMembers(ids)
			c.log.Info("cache ring members", "members", ids)
			last = key
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
