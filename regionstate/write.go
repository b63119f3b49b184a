package regionstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fedgate/fedgate/internal/backoff"
)

// Apply commits cmd and applies it; it is ApplyIndex without the index.
func (n *Node) Apply(ctx context.Context, cmd Command) error {
	_, err := n.ApplyIndex(ctx, cmd)
	return err
}

// ApplyIndex commits cmd to the Raft log, applies it, and returns the log
// index it committed at (0 with an error); WaitApplied on any node with
// that index makes the write visible there.
//
// On the leader, the command is applied here. On a follower with
// Config.Forward set, the encoded command is forwarded to the leader: the
// follower waits (with jitter, at most Config.LeaderWait and ctx) for a
// leader to be known and retries while the write is rejected by a node
// that is no longer the leader; it fails with ErrNoLeader when no leader
// takes it in time. Without Forward, a follower returns a *NotLeaderError.
//
// It returns the command's own error (ErrBucketExists, ErrNoSuchUser, ...;
// see each command), ErrUnknownCommand, ErrNotLeader (a *NotLeaderError:
// not applied), ErrLeadershipLost, ErrNoLeader, ErrClosed, the Forward
// hook's error, or ctx's error. After ErrLeadershipLost, ErrClosed, ctx's
// error or a Forward transport failure the command may or may not have
// been applied.
func (n *Node) ApplyIndex(ctx context.Context, cmd Command) (uint64, error) {
	data, err := Encode(cmd)
	if err != nil {
		return 0, err
	}
	return n.write(ctx, data, true)
}

// ApplyAcked commits cmd like Apply, for a caller that reads nothing of
// it back from this node's State before answering: on a follower it
// returns as soon as the leader has applied the write, without waiting
// (up to a CommitTimeout and a round trip) for the leader's next message
// to tell this node the entry committed. The index is remembered, and
// AwaitAcked, called before serving a request, makes this node apply
// everything it acknowledged so before it reads: a client's next request
// on this node sees its write, and when the node has caught up (the
// usual case by the time that request arrives) AwaitAcked costs nothing.
func (n *Node) ApplyAcked(ctx context.Context, cmd Command) error {
	data, err := Encode(cmd)
	if err != nil {
		return err
	}
	_, err = n.write(ctx, data, false)
	return err
}

// AwaitAcked waits until this node has applied every write it
// acknowledged through ApplyAcked (see there), at most twice
// Config.LeaderWait. It returns ErrClosed, or an error wrapping
// context.DeadlineExceeded (or ctx's error) when the node is that far
// behind.
func (n *Node) AwaitAcked(ctx context.Context) error {
	idx := n.acked.Load()
	if n.fsm.state.AppliedIndex() >= idx {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*n.wait)
	defer cancel()
	return n.WaitApplied(ctx, idx)
}

// noteAcked raises the index AwaitAcked waits for to idx.
func (n *Node) noteAcked(idx uint64) {
	for {
		cur := n.acked.Load()
		if idx <= cur || n.acked.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// ApplyEncoded applies data, a command made by Encode, on this node, which
// must be the leader: it is the receiving end of Config.Forward and never
// forwards itself. It returns what ApplyIndex does; on a follower a
// *NotLeaderError naming the leader it knows.
func (n *Node) ApplyEncoded(ctx context.Context, data []byte) (uint64, error) {
	if len(data) == 0 {
		return 0, invalid("empty command")
	}
	return n.applyLocal(ctx, data)
}

// applyLocal appends data on this node (see ApplyEncoded): a batchable
// command through the group committer (group.go) when this node leads.
func (n *Node) applyLocal(ctx context.Context, data []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	select {
	case <-n.done:
		return 0, ErrClosed
	default:
	}
	if batchable(data) && n.IsLeader() {
		return n.group.submit(ctx, data)
	}
	return n.applyOne(ctx, data)
}

// applyOne appends data as a log entry of its own and waits for its result.
func (n *Node) applyOne(ctx context.Context, data []byte) (uint64, error) {
	f := n.raft.Apply(data, enqueueTimeout(ctx))
	if err := n.await(ctx, f); err != nil {
		return 0, err
	}
	if err, ok := f.Response().(error); ok {
		return 0, err
	}
	return f.Index(), nil
}

// write applies data here or forwards it to the leader (see ApplyIndex).
// A forwarded write is applied here too before write returns when wait is
// set; otherwise its index is noted for AwaitAcked (ApplyAcked).
func (n *Node) write(ctx context.Context, data []byte, wait bool) (uint64, error) {
	idx, err := n.applyLocal(ctx, data)
	var nl *NotLeaderError
	if n.forward == nil || !errors.As(err, &nl) {
		return idx, err
	}
	idx, err = n.forwardWrite(ctx, data, nl)
	if err != nil || idx == 0 {
		return idx, err
	}
	if !wait {
		n.noteAcked(idx)
		return idx, nil
	}
	if err := n.WaitApplied(ctx, idx); err != nil {
		return 0, err
	}
	return idx, nil
}

// forwardWrite sends data to the leader (the one nl names first) until one
// takes it or the wait for a leader ends.
func (n *Node) forwardWrite(ctx context.Context, data []byte, nl *NotLeaderError) (idx uint64, err error) {
	wctx, cancel := context.WithTimeout(ctx, n.wait)
	defer cancel()
	for attempt := 0; ; attempt++ {
		id, addr := nl.LeaderID, nl.LeaderAddr
		if id == "" || attempt > 0 {
			if id, addr, err = n.leaderWithin(wctx); err != nil {
				return 0, err
			}
		}
		if id == n.id {
			idx, err = n.applyLocal(ctx, data)
		} else {
			idx, err = n.forward(ctx, id, addr, data)
		}
		if !errors.As(err, &nl) {
			return idx, err
		}
		// Rejected, not appended: the leader moved. Retry after a pause.
		if err := leaderRetry.Sleep(wctx, attempt+1); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
	}
}

// leaderWithin waits, with jitter, until a leader is known or ctx ends.
func (n *Node) leaderWithin(ctx context.Context) (id, addr string, err error) {
	for attempt := 0; ; attempt++ {
		if id, addr = n.Leader(); id != "" {
			return id, addr, nil
		}
		if err := leaderRetry.Sleep(ctx, attempt+1); err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
		select {
		case <-n.done:
			return "", "", ErrClosed
		default:
		}
	}
}

// WhileLeader returns a context derived from ctx that is cancelled once
// this node has known a leader other than id for twice the election
// timeout (at least a second): a forwarded write to id is then abandoned
// instead of waiting on a leader that froze or was cut off, however long
// its own timeout. A replaced leader that is alive answers within that
// time (with "not the leader", or the result), so only a silent one is
// given up; abandoning a write leaves its outcome unknown, hence the grace.
// stop releases the watch; call it when the call returns.
func (n *Node) WhileLeader(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	return n.whileLeader(ctx, id, max(2*n.election, time.Second))
}

// WhileLeaderNoGrace is WhileLeader for a question whose answer only the
// current leader may give (a read index): the call is abandoned as soon as
// this node knows another leader, which is asked instead.
func (n *Node) WhileLeaderNoGrace(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	return n.whileLeader(ctx, id, 0)
}

func (n *Node) whileLeader(ctx context.Context, id string, grace time.Duration) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(leaderWatchTick)
		defer t.Stop()
		var since time.Time // when another leader was first seen
		for {
			select {
			case <-wctx.Done():
				return
			case <-n.done:
				cancel()
				return
			case <-t.C:
				switch l, _ := n.Leader(); {
				case l == "" || l == id:
					since = time.Time{}
				case since.IsZero() && grace > 0:
					since = time.Now()
				case time.Since(since) >= grace:
					cancel()
					return
				}
			}
		}
	}()
	return wctx, cancel
}

// leaderWatchTick is how often WhileLeader looks at who leads.
const leaderWatchTick = 20 * time.Millisecond

// leaderRetry spaces out the waits for a leader: 1ms, 2ms, 4ms ... up to
// 50ms, plus up to half again at random.
var leaderRetry = backoff.Policy{Initial: time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.Up}

// Barrier waits until every entry committed before the call is applied on
// this node, which must be the leader (else a *NotLeaderError), and
// returns this node's applied index then. A follower serves a linearizable
// read by getting that index from the leader and calling WaitApplied.
func (n *Node) Barrier(ctx context.Context) (uint64, error) {
	if err := n.await(ctx, n.raft.Barrier(enqueueTimeout(ctx))); err != nil {
		return 0, err
	}
	idx := n.fsm.state.AppliedIndex()
	go n.mark() // the barrier is an entry the FSM never sees: see LeaderMark
	return idx, nil
}

// WaitApplied waits until this node's State has applied index (an index
// from ApplyIndex, Barrier or another node's State().AppliedIndex()). It
// returns ErrClosed, or ctx's error when ctx ends first.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	s := n.fsm.state
	for {
		ch := s.appliedChanged()
		if s.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-n.done:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("raft: waiting to apply index %d (at %d): %w", index, s.AppliedIndex(), ctx.Err())
		}
	}
}

// LeaderMark is applied by a node as it becomes leader (and after it
// waited on a Raft barrier). It changes no state: it exists so that the
// last committed entry is one the state machine sees. A new term starts
// with a no-op entry, and barriers are entries too, that hashicorp/raft
// never hands to the FSM; without a command after them the applied index
// of State would stay below CommitIndex, and read barriers (which wait for
// the leader's CommitIndex) would wait for the next write.
type LeaderMark struct{ Node string }

// Type implements Command.
func (LeaderMark) Type() CommandType { return TypeLeaderMark }

func (c *LeaderMark) apply(*batch) error { return nil }

// markLeadership applies a LeaderMark each time this node becomes leader.
func (n *Node) markLeadership(ch <-chan bool) {
	for {
		select {
		case <-n.done:
			return
		case leader := <-ch:
			if leader {
				go n.mark()
			}
		}
	}
}

// mark applies a LeaderMark (retrying while this node stays leader).
func (n *Node) mark() {
	for attempt := 0; attempt < 10 && n.IsLeader(); attempt++ {
		term := n.raft.CurrentTerm()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		data, _ := Encode(LeaderMark{Node: n.id})
		_, err := n.applyLocal(ctx, data)
		cancel()
		if err == nil {
			if n.raft.CurrentTerm() == term {
				n.markedTerm.Store(term)
			}
			return
		}
		select {
		case <-n.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CommitIndex is the last log index this node knows to be committed.
// It is not a read index: a new leader's is behind until it commits an
// entry of its own term, and a leader cut off from the others does not
// know it was replaced. Use ReadIndex.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// ReadIndex returns, on the leader, an index at or above every write
// acknowledged anywhere in the region before the call: a node that
// waits (WaitApplied) for it reads its own earlier writes and everyone
// else's. It is the leader's commit index taken once an entry of its own
// term is committed (the LeaderMark: before that, entries the previous
// leader committed may be above it), then confirmed by a round of
// heartbeats to a quorum (so a leader that was replaced without knowing
// it cannot hand out a stale index). On a follower it fails with a
// *NotLeaderError.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	for {
		if !n.IsLeader() {
			addr, id := n.raft.LeaderWithID()
			return 0, &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
		}
		if n.markedTerm.Load() == n.raft.CurrentTerm() {
			break
		}
		select {
		case <-n.done:
			return 0, ErrClosed
		case <-ctx.Done():
			return 0, fmt.Errorf("raft: this new leader has not committed an entry of its term yet: %w", ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	idx := n.raft.CommitIndex()
	if err := n.await(ctx, n.raft.VerifyLeader()); err != nil {
		return 0, err
	}
	return idx, nil
}
