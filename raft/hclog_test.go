package raft

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

// The first election of a node that never knew a leader is not a warning;
// later ones are. hashicorp/raft passes typed ids, not strings.
func TestStartupElection(t *testing.T) {
	const msg = "heartbeat timeout reached, starting election"
	if !startupElection(msg, []any{"last-leader-addr", hraft.ServerAddress(""), "last-leader-id", hraft.ServerID("")}) {
		t.Error("first election reported as a warning")
	}
	if startupElection(msg, []any{"last-leader-addr", hraft.ServerAddress("10.0.0.1:7000"), "last-leader-id", hraft.ServerID("n2")}) {
		t.Error("losing a known leader not reported")
	}
}
