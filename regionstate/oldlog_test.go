package regionstate

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// TestOldLog opens a region whose Raft log (raft-boltdb, no fsm.db) was
// written before the Raft plumbing moved to raft/: the commands encoded by
// that build (testdata/oldlog-raft.db.gz, made by testdata/mkoldlog.go.txt
// at f8d7403) are decoded by this one, and the log migrates to raft-wal.
func TestOldLog(t *testing.T) {
	gz, err := os.ReadFile("testdata/oldlog-raft.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var db bytes.Buffer
	if _, err := db.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{LogStoreBoltDB, LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "raft.db"), db.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t, dir)
			cfg.LogStore = kind
			n := openNode(t, cfg)
			defer closeNode(t, n)
			s := n.State()
			if b, ok := s.Bucket("old-bucket"); !ok || b.Owner != "alice" {
				t.Errorf("bucket of the old log: %+v %v", b, ok)
			}
			if u, ok := s.User("alice"); !ok || u.AccessKey != "AKOLD" {
				t.Errorf("user of the old log: %+v %v", u, ok)
			}
			if p := s.Grants("alice")["old-bucket"]; p != PermWrite {
				t.Errorf("grant of the old log: %q", p)
			}
			if v, _ := s.Setting("written-by"); v != "the old encoding" {
				t.Errorf("setting of the old log: %q", v)
			}
			apply(t, n, SetSetting{Key: "written-by", Value: "this build"})
		})
	}
}
