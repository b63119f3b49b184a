package node_test

import (
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node/nodetest"
)

// The Raft gauges: exactly one node reports itself leader, every node
// knows a leader and the same term, and followers have applied what they
// know committed once the region is idle.
func TestRaftMetrics(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	leader := r.WaitForLeader()
	r.WaitForReplication()
	var term float64
	for i := range r.Len() {
		ep := r.Node(i).Endpoint()
		want := 0.0
		if i == leader {
			want = 1
		}
		if v, ok := metric(t, ep, "fedgate_raft_leader"); !ok || v != want {
			t.Fatalf("node %d: fedgate_raft_leader %v (present %v); want %v", i, v, ok, want)
		}
		if v, _ := metric(t, ep, "fedgate_raft_has_leader"); v != 1 {
			t.Fatalf("node %d: fedgate_raft_has_leader %v", i, v)
		}
		v, _ := metric(t, ep, "fedgate_raft_term")
		if i > 0 && v != term || v == 0 {
			t.Fatalf("node %d: term %v, node 0's %v", i, v, term)
		}
		term = v
		wait.For(t, 10*time.Second, "applied to catch up with commit", func() bool {
			c, _ := metric(t, ep, "fedgate_raft_commit_index")
			a, _ := metric(t, ep, "fedgate_raft_applied_index")
			return c > 0 && a == c
		})
	}
}
