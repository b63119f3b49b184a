package catalog

import (
	"context"
	"errors"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/envelope"
)

// openVoters opens one voter per region on TCP, each with its own data
// dir, dialing through dial (nil: a net.Dialer).
func openVoters(t *testing.T, regions []string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (map[string]*Member, map[string]MemberConfig) {
	t.Helper()
	voters := map[string]string{}
	for _, r := range regions {
		voters[r] = freeAddr(t)
	}
	ms, cfgs := map[string]*Member{}, map[string]MemberConfig{}
	for _, r := range regions {
		cfgs[r] = MemberConfig{Region: r, NodeID: "n1", Bind: voters[r], Voters: voters, Dir: t.TempDir(),
			Secret: []byte("peering-secret"), RTT: 20 * time.Millisecond, Dial: dial}
		m, err := OpenMember(cfgs[r])
		if err != nil {
			t.Fatal(err)
		}
		ms[r] = m
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.Close()
		}
	})
	return ms, cfgs
}

// leaderOf waits for a leader among ms and returns it.
func leaderOf(t *testing.T, ms map[string]*Member) *Member {
	t.Helper()
	var l *Member
	waitFor(t, func() bool {
		for _, m := range ms {
			if m.Node.raft.State() == raft.Leader {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

// TestUpgradePastUnknownCommand is a rolling upgrade: a member of a newer
// build appends catalog commands this build does not know, one of a type
// marked ignore-unknown and one not. The leader (this build) skips the
// first without an error, refuses the second, and every member keeps
// applying the commands after them, also after a restart that replays
// the log.
func TestUpgradePastUnknownCommand(t *testing.T) {
	ms, cfgs := openVoters(t, []string{"a", "b", "c"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ms["a"].Create(ctx, Bucket{Name: "before", Owner: "alice", Home: "a"}); err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(t, ms)
	// A newer build's command, of a type (0x40) this build does not list.
	newer, err := envelope.Encode(0x40|envelope.IgnoreUnknown, map[string]string{"hint": "from a newer build"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.ApplyLocal(ctx, newer); err != nil {
		t.Fatalf("an ignorable command of a newer build: %v, want it skipped", err)
	}
	strict, _ := envelope.Encode(0x41, map[string]string{"x": "y"})
	if _, err := leader.ApplyLocal(ctx, strict); !errors.Is(err, envelope.ErrUnknownType) {
		t.Fatalf("an unknown command not marked ignorable: %v, want ErrUnknownType", err)
	}
	for _, r := range []string{"a", "b", "c"} {
		if err := ms[r].Create(ctx, Bucket{Name: "after-" + r, Owner: "alice", Home: r}); err != nil {
			t.Fatalf("create in %s after the unknown commands: %v", r, err)
		}
	}
	converged := func() bool {
		want := ms["a"].State().Buckets()
		return len(want) == 4 && reflect.DeepEqual(ms["b"].State().Buckets(), want) && reflect.DeepEqual(ms["c"].State().Buckets(), want)
	}
	waitFor(t, converged)

	// b restarts and replays its log, unknown entries included.
	ms["b"].Close()
	b, err := OpenMember(cfgs["b"])
	if err != nil {
		t.Fatal(err)
	}
	ms["b"] = b
	waitFor(t, converged)
	if err := b.Create(ctx, Bucket{Name: "after-restart", Owner: "bob", Home: "b"}); err != nil {
		t.Fatalf("create in b after its restart: %v", err)
	}
	waitFor(t, func() bool { _, ok := ms["c"].State().Bucket("after-restart"); return ok })
}

// TestMemberDial: a member's Raft links go through MemberConfig.Dial, so
// tests can cut members off (it was ignored before the catalog used
// raft/transport).
func TestMemberDial(t *testing.T) {
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	ms, _ := openVoters(t, []string{"a", "b"}, dial)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ms["b"].Create(ctx, Bucket{Name: "data", Owner: "bob", Home: "b"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := ms["a"].State().Bucket("data"); return ok })
	if dials.Load() == 0 {
		t.Fatal("no Raft connection went through MemberConfig.Dial")
	}
}
