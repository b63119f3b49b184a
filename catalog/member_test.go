package catalog

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMembers runs the catalog on real TCP: region a's voter and one
// non-voter, region b's voter. A change made on the non-voter is
// forwarded to the leader and seen everywhere; b cannot take the name; a
// forged change is refused; a restarted member keeps its state.
func TestMembers(t *testing.T) {
	voters := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	secret := []byte("peering-secret")
	open := func(region, node, addr, dir string) *Member {
		t.Helper()
		m, err := OpenMember(MemberConfig{Region: region, NodeID: node, Bind: addr, Voters: voters, Dir: dir,
			Secret: secret, RTT: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dirB := t.TempDir()
	a := open("a", "n1", voters["a"], t.TempDir())
	b := open("b", "n1", voters["b"], dirB)
	a2 := open("a", "n2", freeAddr(t), t.TempDir())
	t.Cleanup(func() { a2.Close(); a.Close() })
	if !a.Voter() || a2.Voter() || a2.ID() != "a/n2" {
		t.Fatalf("voter roles: a %v (%s), a2 %v (%s)", a.Voter(), a.ID(), a2.Voter(), a2.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a2.Create(ctx, Bucket{Name: "data", Owner: "alice", Home: "a", Store: "nas"}); err != nil {
		t.Fatalf("create on a non-voter: %v", err)
	}
	if _, ok := a2.State().Bucket("data"); !ok {
		t.Fatal("the creating member does not see its bucket after Create returned")
	}
	err := b.Create(ctx, Bucket{Name: "data", Owner: "bob", Home: "b"})
	var ex *BucketExistsError
	if !errors.As(err, &ex) || ex.Existing.Home != "a" || ex.OwnedByCaller {
		t.Fatalf("create of a taken name in b: %v", err)
	}
	if err := b.Delete(ctx, "data"); !errors.Is(err, ErrNotHome) {
		t.Fatalf("delete from b of a's bucket: %v", err)
	}
	if err := a2.Update(ctx, Bucket{Name: "data", Policy: `{"Version":"2012-10-17"}`}); err != nil {
		t.Fatalf("update from a's non-voter (its home region): %v", err)
	}
	waitFor(t, func() bool { bk, _ := b.State().Bucket("data"); return bk.Policy != "" })
	if err := a2.SetConfig(ctx, "data", "acl", "<acl/>"); err != nil {
		t.Fatalf("set-config from the home region: %v", err)
	}
	waitFor(t, func() bool {
		bk, _ := b.State().Bucket("data")
		return bk.Configs["acl"] == "<acl/>" && bk.Policy != ""
	})
	if err := b.SetConfig(ctx, "data", "acl", ""); !errors.Is(err, ErrNotHome) {
		t.Fatalf("set-config from another region: %v", err)
	}

	// A change not signed with the peering secret is refused.
	forged := &Member{cfg: MemberConfig{Secret: []byte("wrong")}, client: a2.client}
	if _, err := forged.post(ctx, "http", voters["a"], "/catalog/v1/apply", []byte(`{"op":"delete","name":"data","region":"a"}`)); err == nil {
		t.Fatal("a change signed with the wrong secret was accepted")
	}
	if _, ok := a.State().Bucket("data"); !ok {
		t.Fatal("the forged delete removed the bucket")
	}

	// b restarts from its data dir and catches up on what it missed.
	b.Close()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if err := a.Create(short, Bucket{Name: "later", Owner: "alice", Home: "a"}); !errors.Is(err, ErrNoMajority) {
		t.Fatalf("create with b down (no majority of 2 voters): %v", err)
	}
	b = open("b", "n1", voters["b"], dirB)
	t.Cleanup(func() { b.Close() })
	if _, ok := b.State().Bucket("data"); !ok {
		waitFor(t, func() bool { _, ok := b.State().Bucket("data"); return ok })
	}
	if err := b.Create(ctx, Bucket{Name: "bdata", Owner: "bob", Home: "b"}); err != nil {
		t.Fatalf("create in b after its restart: %v", err)
	}
	waitFor(t, func() bool { _, ok := a2.State().Bucket("bdata"); return ok })
	if st := a2.Status(); st.Leader == "" || len(st.Voters) != 2 || st.Voter {
		t.Fatalf("status of a's non-voter: %+v", st)
	}
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	wait.For(t, 15*time.Second, "the catalog's condition", f)
}
