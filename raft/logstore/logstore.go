// Package logstore opens the Raft log and stable store of a data dir
// (hashicorp/raft-boltdb or hashicorp/raft-wal, with a one-way migration
// from the first to the second) and its snapshot store. The region's Raft
// group and the catalog's both use it.
package logstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	bolt "go.etcd.io/bbolt"
)

// Raft log stores (the kind argument of Open).
const (
	// WAL is hashicorp/raft-wal: segment files under Dir/wal, an
	// fsync per appended batch.
	WAL = "wal"
	// BoltDB is hashicorp/raft-boltdb/v2: one bbolt file,
	// Dir/raft.db, an fsync per appended batch. Regions made before
	// fedgate shipped raft-wal have it.
	BoltDB = "boltdb"
	// Default is what a data dir gets when the kind is empty. raft-wal commits twice as fast here (docs/benchmarks.md), but
	// a node killed with kill -9 after Raft truncated its log's tail failed
	// to restart with raft-wal v0.4.0 ("sealed segment has no index block",
	// e2e TestClusterWriteBackSurvivesKill), so raft-boltdb stays the
	// default and raft-wal is opt-in (WAL) until that is resolved.
	Default = BoltDB
)

// Stable-store keys hashicorp/raft keeps (raft/raft.go): the current term
// and the last vote. A migration copies them: the terms as numbers
// (raft-boltdb writes them big-endian, raft-wal little-endian: copied as
// bytes they read as another term), the candidate as bytes.
var (
	uint64Keys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	bytesKeys  = [][]byte{[]byte("LastVoteCand")}
)

// Store is a Raft log and stable store that must be closed.
type Store interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// Open opens the Raft log and stable store of dir and returns the kind it
// opened. kind "" is Default, or raft-wal where dir already holds a wal directory;
// kind "wal" migrates a raft-boltdb file into raft-wal once; a wal
// directory opened with kind "boltdb" is refused (the log would be lost).
func Open(dir, kind string, log *slog.Logger) (Store, string, error) {
	boltPath := filepath.Join(dir, "raft.db")
	walDir := filepath.Join(dir, "wal")
	hasBolt := exists(boltPath)
	hasWAL := exists(walDir)
	switch kind {
	case "":
		if Default == WAL && hasBolt && !hasWAL {
			if err := migrateToWAL(dir, log); err != nil {
				return nil, "", err
			}
			hasBolt, hasWAL = false, true
		}
		if Default == WAL || hasWAL {
			kind = WAL
		} else {
			kind = BoltDB
		}
	case WAL:
		if hasBolt && !hasWAL {
			if err := migrateToWAL(dir, log); err != nil {
				return nil, "", err
			}
			hasBolt, hasWAL = false, true
		}
	case BoltDB:
		if hasWAL {
			return nil, "", fmt.Errorf("raft: %s holds a raft-wal log; it cannot be opened as %q", walDir, BoltDB)
		}
	default:
		return nil, "", fmt.Errorf("raft: unknown log store %q (want %q or %q)", kind, WAL, BoltDB)
	}
	if kind == WAL && hasBolt {
		// A migration that ended before its last rename: the wal directory
		// is complete (it was renamed into place), the old file is spare.
		if err := os.Rename(boltPath, boltPath+".migrated"); err != nil {
			return nil, "", fmt.Errorf("raft: %w", err)
		}
	}
	s, err := openKind(dir, kind)
	if err != nil {
		return nil, "", err
	}
	return s, kind, nil
}

func openKind(dir, kind string) (Store, error) {
	if kind == BoltDB {
		s, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, "raft.db"),
			BoltOptions: &bolt.Options{Timeout: time.Second},
		})
		if err != nil {
			return nil, fmt.Errorf("raft: open log store: %w", err)
		}
		return s, nil
	}
	w, err := openWAL(filepath.Join(dir, "wal"))
	if err != nil {
		return nil, err // not a Store holding a nil *walStore
	}
	return w, nil
}

// walStore is a raft-wal log whose meta database closes with it
// (wal.WAL.Close leaves its default one open, and locked: the directory
// could not be opened again by this process).
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

// GetLog refuses entries below the first index: raft-wal truncates its
// head logically and still reads such entries from its open tail segment,
// which made a leader send a lagging follower the whole log instead of
// the snapshot that replaced it.
func (w *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}

func openWAL(dir string) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("raft: open log store: %w", err)
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// migrateToWAL copies dir's raft-boltdb log and stable keys into a new
// raft-wal directory: built as wal.tmp, renamed to wal when complete, then
// raft.db is renamed raft.db.migrated (kept: remove it once the region
// runs). A crash at any point leaves either the old file alone in use, or
// the complete new directory.
func migrateToWAL(dir string, log *slog.Logger) error {
	tmp := filepath.Join(dir, "wal.tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("raft: migrate log store: %w", err)
	}
	old, err := openKind(dir, BoltDB)
	if err != nil {
		return err
	}
	defer old.Close()
	w, err := openWAL(tmp)
	if err != nil {
		return err
	}
	first, err := old.FirstIndex()
	if err == nil {
		var last uint64
		if last, err = old.LastIndex(); err == nil && last > 0 {
			err = copyLogs(old, w, first, last)
		}
	}
	if err == nil {
		err = copyStable(old, w)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("raft: migrate log store to %s: %w", WAL, err)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "wal")); err != nil {
		return fmt.Errorf("raft: migrate log store: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	old.Close()
	if err := os.Rename(filepath.Join(dir, "raft.db"), filepath.Join(dir, "raft.db.migrated")); err != nil {
		return fmt.Errorf("raft: migrate log store: %w", err)
	}
	log.Info("raft: migrated the Raft log from raft-boltdb to raft-wal", "dir", dir, "kept", "raft.db.migrated")
	return nil
}

// copyStable copies hashicorp/raft's stable keys that from holds.
func copyStable(from, to raft.StableStore) error {
	for _, k := range uint64Keys {
		v, err := from.GetUint64(k)
		if notFound(err) {
			continue
		}
		if err == nil {
			err = to.SetUint64(k, v)
		}
		if err != nil {
			return err
		}
	}
	for _, k := range bytesKeys {
		v, err := from.Get(k)
		if notFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err == nil {
			err = to.Set(k, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// notFound is raft-boltdb's ErrKeyNotFound (an unexported error "not
// found").
func notFound(err error) bool { return err != nil && err.Error() == "not found" }

// copyLogs copies entries first..last in batches.
func copyLogs(from raft.LogStore, to raft.LogStore, first, last uint64) error {
	const batch = 1024
	logs := make([]*raft.Log, 0, batch)
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := from.GetLog(i, l); err != nil {
			return fmt.Errorf("read entry %d: %w", i, err)
		}
		logs = append(logs, l)
		if len(logs) == batch || i == last {
			if err := to.StoreLogs(logs); err != nil {
				return fmt.Errorf("write entries up to %d: %w", i, err)
			}
			logs = logs[:0]
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("raft: sync %s: %w", dir, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Snapshots opens the file snapshot store under dir (dir/snapshots),
// keeping the newest two.
func Snapshots(dir string, log hclog.Logger) (*raft.FileSnapshotStore, error) {
	s, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, log)
	if err != nil {
		return nil, fmt.Errorf("raft: open snapshot store: %w", err)
	}
	return s, nil
}
