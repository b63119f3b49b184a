package bench

// The raw hashicorp/raft peer of BenchmarkRegionCommits: three nodes in
// this process, built the way regionstate/node.go builds fedgate's (same log
// store, same Raft settings, same TCP transport on loopback), with an FSM
// that does nothing (fsmTrivial) or one that writes every batch to a bbolt
// file, fsynced, as fedgate's FSM does (fsmBolt).

import (
	encbin "encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	bolt "go.etcd.io/bbolt"

	"github.com/fedgate/fedgate/internal/wait"
	fgraft "github.com/fedgate/fedgate/regionstate"
)

type fsmKind int

const (
	fsmTrivial fsmKind = iota // counts entries, no I/O
	fsmBolt                   // one fsynced bbolt transaction per batch
)

// logKind is a raw cluster's Raft log store: the one regionstate ships
// (regionstate.DefaultLogStore) and the other, for comparison.
type logKind string

// openRawLogStore opens a log and stable store of kind in dir, as
// regionstate/logstore.go does (fsync on, the default of both).
func openRawLogStore(b *testing.B, kind logKind, dir string) (hraft.LogStore, hraft.StableStore) {
	switch kind {
	case "boltdb":
		store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"), BoltOptions: &bolt.Options{Timeout: time.Second}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { store.Close() })
		return store, store
	case "wal":
		wdir := filepath.Join(dir, "wal")
		if err := os.MkdirAll(wdir, 0o700); err != nil {
			b.Fatal(err)
		}
		meta := &metadb.BoltMetaDB{}
		w, err := wal.Open(wdir, wal.WithMetaStore(meta))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close(); meta.Close() })
		return w, w
	}
	b.Fatalf("unknown log store %q", kind)
	return nil, nil
}

type rawCluster struct {
	nodes []*hraft.Raft
}

// startRawRaft starts three nodes on TCP loopback, bootstraps them and
// waits for a leader.
func startRawRaft(b *testing.B, kind fsmKind, lk logKind) *rawCluster {
	b.Helper()
	const n = 3
	logger := hclog.NewNullLogger()
	type member struct {
		dir   string
		trans *hraft.NetworkTransport
	}
	var ms []member
	var servers []hraft.Server
	for i := range n {
		dir := b.TempDir()
		// regionstate/transport.go: a TCP transport, pool 3, timeout 10s,
		// no pipelined replication.
		trans, err := hraft.NewTCPTransportWithConfig("127.0.0.1:0", nil, &hraft.NetworkTransportConfig{
			MaxPool: 3, Timeout: 10 * time.Second, Logger: logger, MaxRPCsInFlight: fgraft.NoPipelining})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { trans.Close() })
		ms = append(ms, member{dir: dir, trans: trans})
		servers = append(servers, hraft.Server{Suffrage: hraft.Voter, ID: hraft.ServerID(fmt.Sprintf("r%d", i+1)), Address: trans.LocalAddr()})
	}
	c := &rawCluster{}
	for i, m := range ms {
		// regionstate/node.go: the log store behind a 512-entry log cache,
		// a file snapshot store keeping 2.
		store, stable := openRawLogStore(b, lk, m.dir)
		logs, err := hraft.NewLogCache(512, store)
		if err != nil {
			b.Fatal(err)
		}
		snaps, err := hraft.NewFileSnapshotStoreWithLogger(m.dir, 2, logger)
		if err != nil {
			b.Fatal(err)
		}
		// regionstate/node.go raftConfig with fedgate server's defaults:
		// DefaultConfig, BatchApplyCh, no election-timeout override.
		rc := hraft.DefaultConfig()
		rc.LocalID = servers[i].ID
		rc.Logger = logger
		rc.BatchApplyCh = true
		var fsm hraft.FSM = &trivialFSM{}
		if kind == fsmBolt {
			db, err := bolt.Open(filepath.Join(m.dir, "fsm.db"), 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("e")); return err }); err != nil {
				b.Fatal(err)
			}
			fsm = &boltFSM{db: db}
		}
		r, err := hraft.NewRaft(rc, fsm, logs, stable, snaps, m.trans)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Shutdown().Error() })
		if err := r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil {
			b.Fatal(err)
		}
		c.nodes = append(c.nodes, r)
	}
	wait.For(b, 30*time.Second, "raw raft: a leader", func() bool { return c.leader() != nil })
	return c
}

func (c *rawCluster) leader() *hraft.Raft {
	for _, r := range c.nodes {
		if r.State() == hraft.Leader {
			return r
		}
	}
	return nil
}

// trivialFSM applies nothing.
type trivialFSM struct{ n uint64 }

func (f *trivialFSM) Apply(*hraft.Log) any { f.n++; return nil }
func (f *trivialFSM) Snapshot() (hraft.FSMSnapshot, error) {
	return emptySnapshot{}, nil
}
func (f *trivialFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

// boltFSM writes each batch of entries to a bbolt file in one transaction
// (bbolt fsyncs every commit), keyed by index: what fedgate's FSM does per
// batch (regionstate/fsm.go persist), without decoding the commands.
type boltFSM struct{ db *bolt.DB }

func (f *boltFSM) Apply(l *hraft.Log) any { return f.ApplyBatch([]*hraft.Log{l})[0] }

func (f *boltFSM) ApplyBatch(logs []*hraft.Log) []any {
	_ = f.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("e"))
		for _, l := range logs {
			if l.Type != hraft.LogCommand {
				continue
			}
			var k [8]byte
			encbin.BigEndian.PutUint64(k[:], l.Index)
			if err := bk.Put(k[:], l.Data); err != nil {
				return err
			}
		}
		return nil
	})
	return make([]any, len(logs))
}

func (f *boltFSM) Snapshot() (hraft.FSMSnapshot, error) { return emptySnapshot{}, nil }
func (f *boltFSM) Restore(rc io.ReadCloser) error       { return rc.Close() }

var _ hraft.BatchingFSM = (*boltFSM)(nil)

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink hraft.SnapshotSink) error { return sink.Close() }
func (emptySnapshot) Release()                              {}
