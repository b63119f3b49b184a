package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testserver"
)

// TestMembersTLS: with the peering certificates every catalog link is
// mutual TLS: two regions agree on a bucket, and a client holding a
// certificate of another CA cannot forward a change.
func TestMembersTLS(t *testing.T) {
	ca := testserver.NewCA(t)
	voters := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	open := func(region string) *Member {
		m, err := OpenMember(MemberConfig{Region: region, NodeID: "n1", Bind: voters[region], Voters: voters, Dir: t.TempDir(),
			TLS: ca.PeerTLS(t, region), RTT: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a, b := open("a"), open("b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Create(ctx, Bucket{Name: "data", Owner: "bob", Home: "b"}); err != nil {
		t.Fatalf("create over mutual TLS: %v", err)
	}
	waitFor(t, func() bool { _, ok := a.State().Bucket("data"); return ok })
	var ex *BucketExistsError
	if err := a.Create(ctx, Bucket{Name: "data", Owner: "alice", Home: "a"}); !errors.As(err, &ex) {
		t.Fatalf("create of a taken name over TLS: %v", err)
	}

	// A stranger's certificate (trusting the regions' CA, so only the
	// server's check of the client certificate can stop it): the handshake
	// fails, nothing changes.
	stranger := testserver.NewCA(t).PeerTLS(t, "stranger")
	stranger.RootCAs = a.cfg.TLS.RootCAs
	forged := &Member{cfg: MemberConfig{TLS: stranger}, client: newClient(stranger)}
	leader := voters[a.Leader()]
	if _, err := forged.post(ctx, "https", leader, "/catalog/v1/apply", []byte(`{"op":"delete","name":"data","region":"b"}`)); err == nil {
		t.Fatal("a change from a certificate of another CA was accepted")
	}
	if _, ok := a.State().Bucket("data"); !ok {
		t.Fatal("the stranger's delete removed the bucket")
	}
}
