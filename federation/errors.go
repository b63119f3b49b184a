package federation

import (
	"context"
	"errors"
	"fmt"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/regionstate"
)

// Errors of the region's replicated state, as the namespace reports them.
// RegionError turns the Raft node's errors into these; the original error
// stays in the chain for logs.
var (
	ErrNoLeader       = backend.ErrNoLeader
	ErrOutcomeUnknown = backend.ErrOutcomeUnknown
	ErrClosed         = backend.ErrClosed
	ErrBehind         = backend.ErrBehind
	ErrStalePolicy    = backend.ErrStalePolicy
)

// RegionError translates an error of the region's Raft node (package
// raft) into the backend sentinels the gateway knows: a write that found no
// leader, or reached a node that is not the leader and could not be
// forwarded, is ErrNoLeader (it was not applied: retrying is safe);
// leadership lost in flight is ErrOutcomeUnknown; a closed node is
// ErrClosed; a stale policy version is ErrStalePolicy. Other errors are
// returned as they are.
func RegionError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrClosed), errors.Is(err, ErrStalePolicy), errors.Is(err, ErrBehind),
		errors.Is(err, backend.ErrObjectLocked), errors.Is(err, backend.ErrInvalidBucketState):
		return err // already translated
	case errors.Is(err, regionstate.ErrLeadershipLost): // before ErrNotLeader, which it matches
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	case errors.Is(err, regionstate.ErrNoLeader), errors.Is(err, regionstate.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	case errors.Is(err, regionstate.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, regionstate.ErrStalePolicy):
		return fmt.Errorf("%w: %w", ErrStalePolicy, err)
	case errors.Is(err, regionstate.ErrObjectLocked):
		return fmt.Errorf("%w: %w", backend.ErrObjectLocked, err)
	case errors.Is(err, regionstate.ErrBucketState):
		return fmt.Errorf("%w: %w", backend.ErrInvalidBucketState, err)
	}
	return err
}

// regionState is the RegionState the namespace uses: every write's error
// goes through RegionError.
type regionState struct{ RegionState }

func (j regionState) Apply(ctx context.Context, cmd regionstate.Command) error {
	return RegionError(j.RegionState.Apply(ctx, cmd))
}

func (j regionState) ApplyIndex(ctx context.Context, cmd regionstate.Command) (uint64, error) {
	i, err := j.RegionState.ApplyIndex(ctx, cmd)
	return i, RegionError(err)
}

// ackedState is what regionstate.Node adds to RegionState for writes whose
// caller reads nothing back before it answers (regionstate.Node.ApplyAcked).
type ackedState interface {
	ApplyAcked(ctx context.Context, cmd regionstate.Command) error
	AwaitAcked(ctx context.Context) error
}

// applyAcked commits cmd without waiting for this node to apply it when
// the region state allows (ApplyAcked; else Apply). Use it only where the
// caller answers from what it wrote, not from State: requests on this node
// see the write through AwaitAcked, which the gateway calls first.
func (n *Namespace) applyAcked(ctx context.Context, cmd regionstate.Command) error {
	if a := n.ackedState(); a != nil {
		return RegionError(a.ApplyAcked(ctx, cmd))
	}
	return n.rs.Apply(ctx, cmd)
}

// AwaitAcked waits until this node has applied every write it acknowledged
// without applying it (applyAcked), so a request served after it reads
// them; it costs an atomic load when the node has caught up.
func (n *Namespace) AwaitAcked(ctx context.Context) error {
	a := n.ackedState()
	if a == nil {
		return nil
	}
	err := a.AwaitAcked(ctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: this node has not applied the writes it acknowledged: %v", ErrBehind, err)
	}
	return RegionError(err)
}

func (n *Namespace) ackedState() ackedState {
	if j, ok := n.rs.(regionState); ok {
		if a, ok := j.RegionState.(ackedState); ok {
			return a
		}
	}
	return nil
}
