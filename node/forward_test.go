package node_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fedgate/fedgate/node/nodetest"
	"github.com/fedgate/fedgate/regionstate"
)

// A command the leader refuses comes back through a follower with the
// leader's own error, not as a lost leader. The write-back drain tells "claimed
// by another node" and "superseded" apart from an outage by that error:
// while every refusal forwarded from a follower read as ErrLeadershipLost,
// its entries were retried for ever and e2e TestChaos's backlog never
// drained.
func TestForwardedRefusalKeepsItsError(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	l := r.WaitForLeader()
	u := regionstate.PutUser{User: regionstate.User{Name: "dup", AccessKey: "AKDUPLICATE", SecretKey: "secret"}}
	if err := r.Node(l).Raft().Apply(ctx, u); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Followers() {
		err := r.Node(f).Raft().Apply(ctx, u)
		if !errors.Is(err, regionstate.ErrUserExists) || errors.Is(err, regionstate.ErrLeadershipLost) {
			t.Errorf("the same user again through follower %d: %v, want the leader's ErrUserExists", f, err)
		}
	}
}
