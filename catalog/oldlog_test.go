package catalog

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/logstore"
)

// TestOldLog opens a catalog member whose Raft log was written before the
// envelope: its commands are JSON with an "op" (TypeJSON). The log
// (testdata/oldlog-raft.db.gz, made at f8d7403 by
// ../regionstate/testdata/mkoldlog.go.txt) replays into the same catalog,
// from raft-boltdb and after the migration to raft-wal, and new commands
// follow it.
func TestOldLog(t *testing.T) {
	for _, kind := range []string{logstore.BoltDB, logstore.WAL} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			unzip(t, "testdata/oldlog-raft.db.gz", filepath.Join(dir, "raft.db"))
			store, _, err := logstore.Open(dir, kind, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			snaps, err := logstore.Snapshots(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			_, trans := raft.NewInmemTransport("a")
			n, err := Open(Config{Region: "a", Transport: trans, Logs: store, Stable: store, Snapshots: snaps, RTT: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			waitFor(t, func() bool { _, ok := n.State().UserNamed("alice"); return ok })
			if b, ok := n.State().Bucket("old-bucket"); !ok || b.Configs["acl"] != "<acl/>" || b.Store != "s3" {
				t.Fatalf("bucket of the old log: %+v %v", b, ok)
			}
			if _, ok := n.State().Bucket("gone"); ok {
				t.Fatal("a bucket the old log deleted is there")
			}
			waitFor(t, func() bool { return n.Leader() == "a" })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := n.Create(ctx, Bucket{Name: "new-bucket", Owner: "bob", Home: "a"}); err != nil {
				t.Fatalf("create after the old log: %v", err)
			}
		})
	}
}

func unzip(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
}
