package rlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
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

// hclog.Fmt values (raft's configuration) are logged as the text they
// format to, and the caller's arguments are left as they were.
func TestFormattedArgs(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	args := []any{"index", 3, "servers", hclog.Fmt("%+v", []string{"a", "b"})}
	l.Info("initial configuration", args...)
	if got := buf.String(); !strings.Contains(got, `servers="[a b]"`) || !strings.Contains(got, "logger=raft") {
		t.Fatalf("logged %q", got)
	}
	if _, ok := args[3].(hclog.Format); !ok {
		t.Fatal("the caller's arguments were changed")
	}
}
