package regionstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestGroupEncoding(t *testing.T) {
	cmds := [][]byte{{byte(TypePutUser), '{', '}'}, bytes.Repeat([]byte{byte(TypeTouch)}, 300), {byte(TypeGrant)}}
	got, err := decodeGroup(encodeGroup(cmds))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cmds) {
		t.Fatalf("decoded %d commands, want %d", len(got), len(cmds))
	}
	for i := range cmds {
		if !bytes.Equal(got[i], cmds[i]) {
			t.Errorf("command %d: %q, want %q", i, got[i], cmds[i])
		}
	}
	good := encodeGroup(cmds)
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"other type":     append([]byte{byte(TypePutUser)}, good[1:]...),
		"no count":       {byte(TypeBatch)},
		"zero count":     {byte(TypeBatch), 0},
		"count too high": {byte(TypeBatch), 5, 1, byte(TypeTouch)},
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"empty command":  {byte(TypeBatch), 1, 0},
	} {
		if _, err := decodeGroup(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzDecodeGroup(f *testing.F) {
	f.Add(encodeGroup([][]byte{{byte(TypePutUser), '{', '}'}, {byte(TypeTouch)}}))
	f.Add([]byte{byte(TypeBatch), 2, 1, 7, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, err := decodeGroup(data)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes, and every command
		// lies inside the entry.
		if again := encodeGroup(cmds); !bytes.Equal(again, data) {
			t.Fatalf("re-encoded %x, was %x", again, data)
		}
	})
}

// A group entry applies its commands in order, each with its own error,
// and one that cannot be grouped is refused alone.
func TestFSMGroup(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	var seen []CommandType
	f.subs.add(func(c Command) { seen = append(seen, c.Type()) })
	enc := func(c Command) []byte {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	entry := encodeGroup([][]byte{
		enc(PutUser{User: User{Name: "alice", AccessKey: "AKA"}}),
		enc(PutUser{User: User{Name: "alice", AccessKey: "AKB"}}), // taken
		enc(Grant{User: "alice", Bucket: "b", Perm: PermWrite}),
		enc(Grant{User: "bob", Bucket: "b", Perm: PermRead}), // no such user
		enc(CreateBucket{Bucket: Bucket{Name: "b"}}),         // needs an entry of its own
		enc(PutUser{User: User{Name: "bob", AccessKey: "AKB"}}),
	})
	resp := f.ApplyBatch([]*raft.Log{{Index: 7, Term: 1, Type: raft.LogCommand, Data: entry, AppendedAt: t0}})
	res, ok := resp[0].(groupResult)
	if !ok {
		t.Fatalf("response %T, want groupResult", resp[0])
	}
	want := []error{nil, ErrUserExists, nil, ErrNoSuchUser, ErrInvalid, nil}
	for i, w := range want {
		if err := res.at(i); (w == nil) != (err == nil) || (w != nil && !errors.Is(err, w)) {
			t.Errorf("command %d: err %v, want %v", i, err, w)
		}
	}
	if u, ok := f.state.User("alice"); !ok || u.AccessKey != "AKA" {
		t.Errorf("alice = %+v, %v", u, ok)
	}
	if _, ok := f.state.User("bob"); !ok {
		t.Error("bob was not added")
	}
	if _, ok := f.state.Bucket("b"); ok {
		t.Error("a CreateBucket inside a group was applied")
	}
	if f.state.AppliedIndex() != 7 {
		t.Errorf("applied index %d, want 7", f.state.AppliedIndex())
	}
	if fmt.Sprint(seen) != fmt.Sprint([]CommandType{TypePutUser, TypeGrant, TypePutUser}) {
		t.Errorf("subscribers saw %v", seen)
	}
	// A malformed group fails as a whole and changes nothing.
	resp = f.ApplyBatch([]*raft.Log{{Index: 8, Term: 1, Type: raft.LogCommand, Data: entry[:len(entry)-2], AppendedAt: t0}})
	if err := resp[0].(groupResult).at(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("truncated group: %v", err)
	}
}

// Concurrent writes through every node of a 3-node region commit in
// groups once every member has announced that it applies them, each
// write with its own result, and every node ends with the same state.
func TestGroupCommit(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	waitFor(t, "every member to announce groups", func() bool {
		for _, id := range c.ids {
			if v, _ := l.State().Setting(FeatureKey(id)); v != featureGroup {
				return false
			}
		}
		return true
	})
	l.group.forgetMembers() // the leader's cached answer, a second old at most
	const writers, each = 48, 12
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	nodes := c.live()
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				name := fmt.Sprintf("u%d-%d", w, k)
				n := nodes[(w+k)%len(nodes)]
				_, err := n.ApplyIndex(ctx, PutUser{User: User{Name: name, AccessKey: "AK" + name}})
				// Every writer also tries a name another writer took
				// (ErrUserExists for all but the first).
				_, dup := n.ApplyIndex(ctx, PutUser{User: User{Name: fmt.Sprintf("shared-%d", k), AccessKey: fmt.Sprintf("AKS%d-%d", w, k)}})
				mu.Lock()
				errs[name] = err
				errs[fmt.Sprintf("dup %d %d", w, k)] = dup
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	exists := 0
	for what, err := range errs {
		switch {
		case errors.Is(err, ErrUserExists) && what[:3] == "dup":
			exists++
		case err != nil:
			t.Errorf("%s: %v", what, err)
		}
	}
	if exists != writers*each-each {
		t.Errorf("%d writes found the shared name taken, want %d", exists, writers*each-each)
	}
	groups, grouped := l.GroupStats()
	t.Logf("%d writes, %d group entries holding %d of them", 2*writers*each, groups, grouped)
	if groups == 0 || grouped < 2*groups {
		t.Errorf("no writes were grouped (%d entries, %d commands)", groups, grouped)
	}
	st := c.converge()
	_ = st
	for _, n := range c.live() {
		if got := len(n.State().Users()); got != writers*each+each {
			t.Errorf("%s holds %d users, want %d", n.ID(), got, writers*each+each)
		}
	}
}

// The leader does not group while a member has not said it can apply
// groups (a node of an older version, during a rolling upgrade).
func TestGroupWaitsForEveryMember(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	// Every member announced (newCluster waits for it) and its announcing
	// goroutine ended; take one member's word back, as if it were of a
	// version that never gave it.
	for _, n := range c.live() {
		select {
		case <-n.announced:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still announcing its log features", n.ID())
		}
	}
	var old string
	for _, id := range c.ids {
		if id != l.ID() {
			old = id
		}
	}
	applyVia(t, l, SetSetting{Key: FeatureKey(old), Delete: true})
	l.group.forgetMembers()
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for k := range 5 {
				if err := l.Apply(context.Background(), Touch{}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				_ = k
			}
		})
	}
	wg.Wait()
	if groups, _ := l.GroupStats(); groups != 0 {
		t.Errorf("%d group entries while %s did not announce groups", groups, old)
	}
	c.converge()
}

// ApplyAcked through a follower returns once the leader has applied the
// write, before the follower has; AwaitAcked then waits for the follower
// to apply it, and Apply keeps waiting for it as before.
func TestApplyAckedThenAwait(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0]
	// The leader stops replicating to f; writes still reach the leader
	// through f's forwarder, and commit with the other follower.
	lt := l.trans.(*raft.InmemTransport)
	lt.Disconnect(raft.ServerAddress(clusterAddr(f.ID())))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.ApplyAcked(ctx, SetSetting{Key: "acked", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.State().Setting("acked"); ok {
		t.Fatal("the follower applied the write although the leader cannot reach it")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err := f.AwaitAcked(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitAcked while cut off from the leader's replication: %v, want a deadline", err)
	}
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	err = f.Apply(short, SetSetting{Key: "waited", Value: "1"})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply through the follower returned %v before it applied the write", err)
	}
	lt.Connect(raft.ServerAddress(clusterAddr(f.ID())), f.trans)
	if err := f.AwaitAcked(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.State().Setting("acked"); v != "1" {
		t.Fatalf("after AwaitAcked the follower reads %q", v)
	}
	c.converge()
}

// forgetMembers drops the leader's cached answer to "does every member
// apply groups?" (kept a second), so that the next write asks again.
func (c *committer) forgetMembers() {
	c.mu.Lock()
	c.okAt = time.Time{}
	c.mu.Unlock()
}
