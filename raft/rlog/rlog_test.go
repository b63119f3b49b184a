package rlog

import (
	"testing"

	"github.com/hashicorp/raft"
)

// The first election of a node that never knew a leader is not a warning;
// later ones are. hashicorp/raft passes typed ids, not strings.
func TestStartupElection(t *testing.T) {
	const msg = "heartbeat timeout reached, starting election"
	if !startupElection(msg, []any{"last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID("")}) {
		t.Error("first election reported as a warning")
	}
	if startupElection(msg, []any{"last-leader-addr", raft.ServerAddress("10.0.0.1:7000"), "last-leader-id", raft.ServerID("n2")}) {
		t.Error("losing a known leader not reported")
	}
}
