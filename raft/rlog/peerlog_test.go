package rlog

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// records keeps what the adapter logs, at every level.
type records struct {
	mu   sync.Mutex
	recs []string // "LEVEL msg"
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// take returns the records and empties the list.
func (r *records) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs = nil
	return out
}

func only(recs []string, level string) []string {
	var out []string
	for _, s := range recs {
		if strings.HasPrefix(s, level+" ") {
			out = append(out, s)
		}
	}
	return out
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestAdapter() (*Logger, *records, *fakeClock) {
	r := &records{}
	clk := &fakeClock{t: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	hl := New(slog.New(r), "raft")
	hl.peers = newPeerLog(clk.now)
	return hl, r, clk
}

// The failures hashicorp/raft v1.7.3 logs while a member is down, with the
// arguments it passes (replication.go, raft.go), make one WARN; the rest
// are DEBUG until the peer answers again: one INFO.
func TestPeerLogOncePerOutage(t *testing.T) {
	hl, r, clk := newTestAdapter()
	n2 := raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "10.0.0.2:7000"}
	observe := func(v any) { hl.peers.observe(hl.l, &raft.Observation{Data: v}) }
	// What the leader sees as it starts replicating to n2.
	observe(raft.PeerObservation{Peer: n2})
	// The named copy raft's replication uses shares the peer log.
	rl := hl.Named("replication").With("x", 1)
	refused := errors.New("dial tcp 10.0.0.2:7000: connect: connection refused")
	for range 40 {
		rl.Error("failed to heartbeat to", "peer", n2.Address, "backoff time", 10*time.Millisecond, "error", refused)
		rl.Error("failed to appendEntries to", "peer", n2, "error", refused)
	}
	rl.Error("failed to pipeline appendEntries", "peer", n2, "error", refused)
	rl.Error("failed to start pipeline replication to", "peer", n2, "error", refused)
	rl.Warn("failed to contact", "server-id", n2.ID, "time", 1200*time.Millisecond)
	rl.Error("failed to make requestVote RPC", "target", n2, "error", refused, "term", uint64(3))
	got := r.take()
	if w := only(got, "WARN"); len(w) != 1 || !strings.Contains(w[0], "raft: peer n2 unreachable") {
		t.Errorf("WARN records: %q", w)
	}
	if e := only(got, "ERROR"); len(e) != 0 {
		t.Errorf("ERROR records for an absent peer: %q", e)
	}
	if d := only(got, "DEBUG"); len(d) != 83 {
		t.Errorf("%d DEBUG records, want 83 (every failure after the first)", len(d))
	}

	clk.t = clk.t.Add(12 * time.Second)
	observe(raft.ResumedHeartbeatObservation{PeerID: "n2"})
	observe(raft.ResumedHeartbeatObservation{PeerID: "n2"}) // once only
	got = r.take()
	if len(got) != 1 || got[0] != "INFO raft: peer n2 reachable again after 12s" {
		t.Errorf("after the peer answered: %q", got)
	}

	// The next outage is reported again.
	rl.Error("failed to heartbeat to", "peer", n2.Address, "backoff time", 10*time.Millisecond, "error", refused)
	if w := only(r.take(), "WARN"); len(w) != 1 {
		t.Errorf("second outage: WARN records %q", w)
	}
}

// A peer first seen by its address (raft's heartbeat names only that) is
// the same peer once a message gives its id; a successful AppendEntries
// ("pipelining replication") ends the outage.
func TestPeerLogAddressThenID(t *testing.T) {
	hl, r, clk := newTestAdapter()
	n3 := raft.Server{Suffrage: raft.Voter, ID: "n3", Address: "10.0.0.3:7000"}
	hl.Error("failed to heartbeat to", "peer", n3.Address, "backoff time", time.Millisecond, "error", errors.New("EOF"))
	hl.Error("failed to appendEntries to", "peer", n3, "error", errors.New("EOF"))
	hl.Warn("failed to contact", "server-id", n3.ID, "time", time.Second)
	got := r.take()
	if w := only(got, "WARN"); len(w) != 1 || !strings.Contains(w[0], "peer 10.0.0.3:7000 unreachable") {
		t.Errorf("WARN records: %q", w)
	}
	clk.t = clk.t.Add(1500 * time.Millisecond)
	hl.Info("pipelining replication", "peer", n3)
	got = r.take()
	if i := only(got, "INFO"); len(i) != 1 || i[0] != "INFO raft: peer n3 reachable again after 2s" {
		t.Errorf("INFO records: %q (all: %q)", i, got)
	}
	// raft's own Info is our Debug, and still logged.
	if d := only(got, "DEBUG"); len(d) != 1 || d[0] != "DEBUG pipelining replication" {
		t.Errorf("DEBUG records: %q", d)
	}
}

// A follower learns that the leader is back from a LeaderObservation; a
// peer removed from the configuration is forgotten without a message;
// other raft errors are untouched.
func TestPeerLogLeaderAndRemoval(t *testing.T) {
	hl, r, _ := newTestAdapter()
	filter := func(o *raft.Observation) { hl.peers.observe(hl.l, o) }
	n1 := raft.Server{ID: "n1", Address: "10.0.0.1:7000"}
	hl.Error("failed to make requestVote RPC", "target", n1, "error", errors.New("i/o timeout"), "term", uint64(4))
	filter(&raft.Observation{Data: raft.LeaderObservation{LeaderAddr: n1.Address, LeaderID: n1.ID}})
	got := r.take()
	if len(got) != 2 || !strings.HasPrefix(got[1], "INFO raft: peer n1 reachable again after") {
		t.Errorf("records: %q", got)
	}
	n4 := raft.Server{ID: "n4", Address: "10.0.0.4:7000"}
	hl.Error("failed to heartbeat to", "peer", n4.Address, "backoff time", time.Millisecond, "error", errors.New("EOF"))
	filter(&raft.Observation{Data: raft.PeerObservation{Peer: n4, Removed: true}})
	hl.Error("failed to commit logs", "error", errors.New("disk full"))
	got = r.take()
	if len(got) != 2 || got[1] != "ERROR failed to commit logs" {
		t.Errorf("records: %q", got)
	}
	hl.Error("failed to heartbeat to", "peer", n4.Address, "backoff time", time.Millisecond, "error", errors.New("EOF"))
	if w := only(r.take(), "WARN"); len(w) != 1 {
		t.Errorf("a removed peer is still suppressed: %q", w)
	}
}
