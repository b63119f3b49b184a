package regionstate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

func snapshotBytes(t *testing.T, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || sink.canceled {
		t.Fatalf("Persist: %v (canceled %v)", err, sink.canceled)
	}
	snap.Release()
	return sink.Bytes()
}

func noErrors(t *testing.T, resp []any) {
	t.Helper()
	for i, r := range resp {
		if r != nil {
			t.Fatalf("response %d: %v", i, r)
		}
	}
}

func TestFSMBatchResponses(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	logs := logsOf(t, 1,
		PutUser{User: User{Name: "a", AccessKey: "AK"}},
		PutUser{User: User{Name: "a", AccessKey: "AK2"}},
		DeleteBucket{Name: "x"},
		SetSetting{Key: "k", Value: "v"})
	logs = append(logs, &raft.Log{Index: 5, Type: raft.LogConfiguration, Data: []byte("not ours")})
	resp := f.ApplyBatch(logs)
	if len(resp) != 5 || resp[0] != nil || !errors.Is(resp[1].(error), ErrUserExists) ||
		!errors.Is(resp[2].(error), ErrNoSuchBucket) || resp[3] != nil || resp[4] != nil {
		t.Fatalf("responses = %v", resp)
	}
	if f.state.AppliedIndex() != 5 {
		t.Fatalf("applied = %d, want 5", f.state.AppliedIndex())
	}
	if u, _ := f.state.User("a"); u.Created != t0 {
		t.Fatalf("Created = %v, want the entry's AppendedAt %v", u.Created, t0)
	}
}

func TestFSMFileSkipsReplay(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	cmds := sample(1)
	noErrors(t, applyFSM(t, f, 1, cmds...))
	want := dumpState(f.state)
	f.close()

	f = newTestFSM(t, dir)
	sameState(t, "reloaded file", dumpState(f.state), want)
	if f.state.AppliedIndex() != uint64(len(cmds)) {
		t.Fatalf("applied = %d, want %d", f.state.AppliedIndex(), len(cmds))
	}
	// Raft replays the log from its snapshot; entries the file holds are
	// skipped (applied again, CreateBucket would fail).
	noErrors(t, applyFSM(t, f, 1, cmds...))
	if got := f.executed.Load(); got != 0 {
		t.Fatalf("%d replayed commands executed, want 0", got)
	}
	sameState(t, "after replay", dumpState(f.state), want)
	noErrors(t, applyFSM(t, f, uint64(len(cmds))+1, SetSetting{Key: "new", Value: "1"}))
	if f.executed.Load() != 1 {
		t.Fatal("a new entry after the replayed ones was not executed")
	}
}

func TestFSMSnapshotIsPointInTime(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	noErrors(t, applyFSM(t, f, 1, sample(1)...))
	want := dumpState(f.state)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Change every table after the capture, including the in-place one.
	noErrors(t, applyFSM(t, f, 100,
		PutPart{UploadID: "up1", Part: Part{Number: 3, ETag: "late"}},
		PutPart{UploadID: "up1", Part: Part{Number: 1, ETag: "changed"}},
		DeleteBucket{Name: "data1"},
		DeleteUser{Name: "bob1"},
		SetPolicy{YAML: []byte("late"), Version: 99},
		SetSetting{Key: "region", Value: "late"},
		SetSetting{Key: "other", Value: "late"},
		Grant{User: "alice1", Bucket: "logs1", Perm: PermRead},
		Revoke{User: "alice1", Bucket: "imagenet"},
		SetBucketConfig{Bucket: "imagenet", Kind: BucketConfACL, Value: "private"},
		SetBucketConfig{Bucket: "data1", Kind: BucketConfTagging, Value: "late"},
		SetPin{Pin: Pin{Bucket: "data1", Prefix: "hot/"}, Delete: true},
		SetPin{Pin: Pin{Bucket: "logs1", Prefix: "late/"}},
		JobProgressUpdate{ID: "job1", Node: "n2", Progress: JobProgress{Objects: 1}},
		PutJob{Job: PreloadJob{ID: "late", Bucket: "logs1"}},
		CreateBucket{Bucket: Bucket{Name: "late", Owner: "alice1", Store: "posix", Prefix: "late/"}},
		AbortUpload{UploadID: "up1"}))
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := newTestFSM(t, t.TempDir())
	if err := g.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored snapshot", dumpState(g.state), want)
}

func TestFSMRestoreReplacesState(t *testing.T) {
	src := newTestFSM(t, t.TempDir())
	noErrors(t, applyFSM(t, src, 1, sample(1)...))
	want := dumpState(src.state)
	data := snapshotBytes(t, src)

	dir := t.TempDir()
	dst := newTestFSM(t, dir)
	noErrors(t, applyFSM(t, dst, 1, sample(2)...))
	noErrors(t, applyFSM(t, dst, 50, SetSetting{Key: "only-in-dst", Value: "x"}))
	old := dst.state // readers hold this pointer across the swap
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", dumpState(old), want)
	if _, ok := old.User("alice2"); ok {
		t.Fatal("a user of the old state survived Restore")
	}
	if _, ok := old.Upload("up2"); ok {
		t.Fatal("an upload of the old state survived Restore")
	}
	if got, want := dst.state.AppliedIndex(), src.state.AppliedIndex(); got != want {
		t.Fatalf("applied after restore = %d, want %d", got, want)
	}
	// The file was rewritten too.
	dst.close()
	reopened := newTestFSM(t, dir)
	sameState(t, "reopened after restore", dumpState(reopened.state), want)
}

func TestFSMRestoreBadStreamChangesNothing(t *testing.T) {
	src := newTestFSM(t, t.TempDir())
	noErrors(t, applyFSM(t, src, 1, sample(1)...))
	data := snapshotBytes(t, src)

	dir := t.TempDir()
	dst := newTestFSM(t, dir)
	noErrors(t, applyFSM(t, dst, 1, sample(2)...))
	want := dumpState(dst.state)
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)-1],
		"half":      data[:len(data)/2],
		"not ours":  []byte("PK\x03\x04garbage"),
		"empty":     nil,
	} {
		if err := dst.Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
			t.Fatalf("%s: Restore succeeded", name)
		}
		sameState(t, name, dumpState(dst.state), want)
	}
	dst.close()
	sameState(t, "file after failed restores", dumpState(newTestFSM(t, dir).state), want)
}

func TestFSMSnapshotUnknownTags(t *testing.T) {
	stream := func(tag table) []byte {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		s := &fsmSnapshot{cat: newCatalog(), applied: 7}
		s.cat.settings = s.cat.settings.set("k", "v")
		if err := s.writeTo(w); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		// Insert an extra record just before the end tag.
		extra := append([]byte{byte(tag), 1, 'x', 2}, "yz"...)
		return append(append(data[:len(data)-1:len(data)-1], extra...), byte(tEnd))
	}
	f := newTestFSM(t, t.TempDir())
	if err := f.Restore(io.NopCloser(bytes.NewReader(stream(tagIgnorable | 0x33)))); err != nil {
		t.Fatalf("ignorable unknown record: %v", err)
	}
	if v, _ := f.state.Setting("k"); v != "v" || f.state.AppliedIndex() != 7 {
		t.Fatalf("restore with an ignorable record: setting %q, applied %d", v, f.state.AppliedIndex())
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(stream(0x33)))); err == nil {
		t.Fatal("unknown non-ignorable record accepted")
	}
}
