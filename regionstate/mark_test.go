package regionstate

import (
	"context"
	"testing"
	"time"
)

// TestCommitIndexReachableAfterRestart: a restarted node's last committed
// entries (a new term's no-op, the start-up barrier) are never handed to
// the FSM; the LeaderMark it applies makes its State reach CommitIndex,
// so a read barrier does not wait for the next write.
func TestCommitIndexReachableAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	apply(t, n, sample(1)...)
	closeNode(t, n)
	n = openNode(t, testConfig(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.WaitApplied(ctx, n.CommitIndex()); err != nil {
		t.Fatalf("State never reached the commit index after a restart: %v", err)
	}
}
