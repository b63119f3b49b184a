package logstore

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func open(t *testing.T, dir, kind string) (Store, string) {
	t.Helper()
	s, got, err := Open(dir, kind, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Open(%q): %v", kind, err)
	}
	return s, got
}

// A raft-boltdb log opened as "wal" moves into raft-wal once, entries and
// term with it (a leftover wal.tmp of a crashed migration is redone);
// "" then opens the wal; "boltdb" over it and an unknown kind are refused.
func TestMigration(t *testing.T) {
	dir := t.TempDir()
	s, kind := open(t, dir, "")
	if kind != Default {
		t.Fatalf("a new dir opened as %q, want %q", kind, Default)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 2500; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte{byte(i), 1, 2}})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("LastVoteTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "wal.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}

	s, kind = open(t, dir, WAL)
	if kind != WAL {
		t.Fatalf("opened as %q after migration", kind)
	}
	last, err := s.LastIndex()
	if err != nil || last != 2500 {
		t.Fatalf("last index %d (%v), want 2500", last, err)
	}
	var l raft.Log
	if err := s.GetLog(2000, &l); err != nil || l.Data[0] != byte(2000%256) {
		t.Fatalf("entry 2000: %+v %v", l, err)
	}
	// The terms as numbers (the two stores encode them differently).
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("term %d (%v), want 3", term, err)
	}
	if term, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || term != 2 {
		t.Fatalf("last vote term %d (%v), want 2", term, err)
	}
	if cand, err := s.Get([]byte("LastVoteCand")); err != nil || string(cand) != "n2" {
		t.Fatalf("last vote candidate %q (%v), want n2", cand, err)
	}
	s.Close()
	for p, want := range map[string]bool{"raft.db.migrated": true, "wal": true, "raft.db": false, "wal.tmp": false} {
		if _, err := os.Stat(filepath.Join(dir, p)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", p, err == nil, want)
		}
	}
	s, kind = open(t, dir, "")
	s.Close()
	if kind != WAL {
		t.Fatalf("a dir with wal/ opened as %q", kind)
	}
	if _, _, err := Open(dir, BoltDB, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a wal dir opened as boltdb")
	}
	if _, _, err := Open(t.TempDir(), "rocks", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("an unknown kind opened")
	}
}

// GetLog refuses entries below the first index after the head is
// truncated (raft-wal would still read them from its open segment).
func TestWALRefusesTruncatedHead(t *testing.T) {
	s, _ := open(t, t.TempDir(), WAL)
	defer s.Close()
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte("x")})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(3, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog below the first index: %v, want ErrLogNotFound", err)
	}
	if err := s.GetLog(6, &l); err != nil {
		t.Fatal(err)
	}
}

// A store that cannot be opened is returned as a nil Store, which a
// caller's "if store != nil { store.Close() }" may skip.
func TestOpenErrorIsNil(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wal"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := Open(dir, WAL, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("a wal that is a file opened")
	}
	if s != nil {
		t.Fatalf("Open failed with a non-nil Store %#v", s)
	}
}
