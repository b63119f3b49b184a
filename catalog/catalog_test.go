package catalog

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/envelope"
)

func newFSM() fsm { return fsm{s: newState(), log: slog.New(slog.DiscardHandler)} }

func applyCmd(t *testing.T, f fsm, i uint64, c Command) error {
	t.Helper()
	b, err := encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return applyData(f, i, b)
}

func applyData(f fsm, i uint64, data []byte) error {
	r, _ := f.Apply(&raft.Log{Index: i, Data: data}).(error)
	return r
}

// Only a bucket's home region changes or deletes it; a taken name answers
// who holds it; a snapshot restores the same catalog.
func TestStateMachine(t *testing.T) {
	f := newFSM()
	if err := applyCmd(t, f, 1, Command{Op: "create", Bucket: &Bucket{Name: "data", Owner: "alice", Home: "east", Store: "s3"}}); err != nil {
		t.Fatal(err)
	}
	var exists *BucketExistsError
	err := applyCmd(t, f, 2, Command{Op: "create", Bucket: &Bucket{Name: "data", Owner: "alice", Home: "west"}})
	if !errors.As(err, &exists) || !exists.OwnedByCaller || exists.Existing.Home != "east" || !errors.Is(err, ErrBucketExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := applyCmd(t, f, 3, Command{Op: "update", Region: "west", Bucket: &Bucket{Name: "data", Versioning: "Enabled"}}); !errors.Is(err, ErrNotHome) {
		t.Fatalf("update from another region: %v", err)
	}
	if err := applyCmd(t, f, 4, Command{Op: "update", Region: "east", Bucket: &Bucket{Name: "data", Versioning: "Enabled", Owner: "mallory", Home: "west"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.s.Bucket("data"); b.Versioning != "Enabled" || b.Owner != "alice" || b.Home != "east" || b.Store != "s3" {
		t.Fatalf("after update: %+v (owner, home and store are not the update's to change)", b)
	}
	if err := applyCmd(t, f, 5, Command{Op: "delete", Region: "west", Name: "data"}); !errors.Is(err, ErrNotHome) {
		t.Fatalf("delete from another region: %v", err)
	}
	if err := applyCmd(t, f, 6, Command{Op: "put-user", User: &User{Name: "alice", AccessKey: "AK1", SecretKey: "s", Home: "east"}}); err != nil {
		t.Fatal(err)
	}
	if err := applyCmd(t, f, 6, Command{Op: "put-user", User: &User{Name: "alice", AccessKey: "AK9", SecretKey: "s", Home: "west"}}); !errors.Is(err, ErrNotHome) {
		t.Fatalf("put-user of east's user from west: %v", err)
	}
	if err := applyCmd(t, f, 6, Command{Op: "put-user", User: &User{Name: "bob", AccessKey: "AK1", SecretKey: "s", Home: "west"}}); !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("put-user with alice's key: %v", err)
	}
	if err := applyCmd(t, f, 6, Command{Op: "delete-user", Name: "alice", Region: "west"}); !errors.Is(err, ErrNotHome) {
		t.Fatalf("delete-user of east's user from west: %v", err)
	}
	if u, ok := f.s.User("AK1"); !ok || u.Name != "alice" {
		t.Fatalf("user by key: %+v %v", u, ok)
	}
	if f.s.Applied() != 6 {
		t.Fatalf("applied %d", f.s.Applied())
	}

	sn, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sn.(snapshot).Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	g := newFSM()
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if b, ok := g.s.Bucket("data"); !ok || b.Versioning != "Enabled" {
		t.Fatalf("restored: %+v", b)
	}
	if err := applyCmd(t, f, 7, Command{Op: "delete", Region: "east", Name: "data"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.s.Bucket("data"); ok {
		t.Fatal("deleted bucket still there")
	}
	if _, err := encode(Command{Op: "frobnicate"}); err == nil {
		t.Fatal("an unknown command encoded")
	}
	// An unknown type is refused, one marked ignorable skipped; both are
	// consumed.
	if err := applyData(f, 8, []byte("\x7e{}")); !errors.Is(err, envelope.ErrUnknownType) {
		t.Fatalf("unknown command type: %v, want ErrUnknownType", err)
	}
	if err := applyData(f, 9, []byte("\xfe{}")); err != nil {
		t.Fatalf("unknown ignorable command type: %v", err)
	}
	if f.s.Applied() != 9 {
		t.Fatalf("applied %d after unknown commands, want 9", f.s.Applied())
	}
}

type sink struct{ *bytes.Buffer }

func (sink) ID() string    { return "test" }
func (sink) Cancel() error { return nil }
func (sink) Close() error  { return nil }
