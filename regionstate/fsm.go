package regionstate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// fsm is the region's state machine. Its state lives twice: in memory (the
// State read view, which serves every read) and in a bbolt file, written
// in one transaction per applied batch together with the last applied
// index. On restart the file is loaded and Raft's replay of the log skips
// every entry at or below that index, so a restart costs a file read, not a
// replay; Raft's snapshot is restored only when the file is older than the
// snapshot (see Open).
//
// The file is not fsynced per batch: the Raft log already made every entry
// durable, and the file is only a shortcut for restarts. Nor is it written
// per batch: the batches' writes queue in memory and go to the file in one
// transaction every persistEvery (or persistMaxOps writes), from a timer
// or the FSM goroutine, in order; a killed process leaves the file a few
// milliseconds behind memory, at a whole transaction and its own applied
// index, and the restart's replay of the log applies the rest (the log
// keeps far more entries than that after a snapshot: TrailingLogs). It is trusted at
// the next start when it was closed cleanly (closeClean syncs it and marks
// it), or when the machine has not rebooted since it was last written (its
// writes are then all in the page cache: a killed process loses nothing,
// and bbolt's copy-on-write commit leaves the file at the last complete
// transaction). Otherwise — the machine crashed or lost power while the
// node ran — its tables are emptied at open and the state is rebuilt from
// Raft's snapshot and log, which were fsynced.
type fsm struct {
	log   *slog.Logger
	state *State
	db    *bolt.DB
	// diskErr (under pmu) stops writes to the file after a failed
	// transaction: memory (the truth Raft committed) keeps serving, and the
	// next start rebuilds the file from the Raft log.
	diskErr error
	// pending are the writes applied batches queued for the file, up to
	// index pendingApplied (under pmu); armed: a flush timer is set.
	// flushMu orders the transactions that write them.
	pmu            sync.Mutex
	pending        []diskOp
	pendingApplied uint64
	armed          bool
	flushMu        sync.Mutex
	executed       atomic.Uint64 // commands run, replays excluded (for tests)
	subs           subscribers   // Node.Subscribe
	// rebuilt: the file was not trusted at open and was emptied.
	rebuilt bool
	closed  bool
	// crashAt, set by tests only, is asked before each batch; when it
	// returns true the batch and every later one are dropped unapplied, as
	// by a process that died after Raft appended them and before the FSM
	// applied them.
	crashAt func([]*raft.Log) bool
	crashed bool
}

// Keys of the meta table besides appliedKey: cleanKey holds "1" while the
// file is closed cleanly (synced), bootKey the boot id of the machine that
// last opened it for writing.
const (
	cleanKey = "clean"
	bootKey  = "boot"
)

// bootID identifies this boot of the machine (Linux's
// /proc/sys/kernel/random/boot_id; "" elsewhere, where only a clean close
// makes the file trusted). Tests replace it.
var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

var (
	_ raft.BatchingFSM = (*fsm)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)

func openFSM(path string, log *slog.Logger) (*fsm, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("raft: open FSM file: %w", err)
	}
	f := &fsm{log: log, state: &State{}, db: db}
	cat, applied := newCatalog(), uint64(0)
	boot := bootID()
	// One synced transaction at open: check whether the file can be
	// trusted (emptying it if not), and mark it open on this boot, so that
	// the unsynced writes that follow are trusted only on this boot.
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(tableNames[tMeta])
		if err != nil {
			return err
		}
		v := meta.Get([]byte(appliedKey))
		trusted := len(v) != 8 || string(meta.Get([]byte(cleanKey))) == "1" ||
			(boot != "" && string(meta.Get([]byte(bootKey))) == boot)
		if !trusted {
			log.Warn("raft: the FSM file was not closed cleanly before the machine restarted; rebuilding it from the Raft snapshot and log",
				"file", path, "applied", binary.BigEndian.Uint64(v))
			for t := tMeta; t <= tLast; t++ {
				if tx.Bucket(tableNames[t]) != nil {
					if err := tx.DeleteBucket(tableNames[t]); err != nil {
						return err
					}
				}
			}
			if meta, err = tx.CreateBucket(tableNames[tMeta]); err != nil {
				return err
			}
			f.rebuilt = true
		}
		for t := tMeta + 1; t <= tLast; t++ {
			bk, err := tx.CreateBucketIfNotExists(tableNames[t])
			if err != nil {
				return err
			}
			if err := bk.ForEach(func(k, v []byte) error {
				_, err := cat.load(t, k, v)
				return err
			}); err != nil {
				return err
			}
		}
		if v := meta.Get([]byte(appliedKey)); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		if err := meta.Put([]byte(bootKey), []byte(boot)); err != nil {
			return err
		}
		return meta.Delete([]byte(cleanKey))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raft: load FSM file: %w", err)
	}
	db.NoSync = true // from now on: see the type's comment
	f.state.cur.Store(cat)
	f.state.applied.Store(applied)
	return f, nil
}

// close syncs the file and marks it closed cleanly (unless a write to it
// failed: then the next start rebuilds it), then closes it.
func (f *fsm) close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.flush()
	f.pmu.Lock()
	diskErr := f.diskErr
	f.pmu.Unlock()
	if diskErr == nil {
		err := f.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(tableNames[tMeta]).Put([]byte(cleanKey), []byte("1"))
		})
		if err == nil {
			err = f.db.Sync()
		}
		if err != nil {
			f.log.Warn("raft: marking the FSM file clean failed; the next start may rebuild it", "err", err)
		}
	}
	return f.db.Close()
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. Each response is nil or the
// command's error.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	if f.crashAt != nil && (f.crashed || f.crashAt(logs)) {
		f.crashed = true
		return resp
	}
	applied := f.state.applied.Load()
	last := applied
	b := newBatch(f.state.load())
	var done []Command // applied without error, for onApply
	for i, l := range logs {
		if l.Index <= applied {
			continue // replay of an entry the file already holds
		}
		last = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		b.now, b.index = l.AppendedAt, l.Index
		if len(l.Data) > 0 && CommandType(l.Data[0]) == TypeBatch {
			var errs groupResult
			done, errs = f.applyGroup(b, l, done)
			resp[i] = errs
			continue
		}
		cmd, err := f.apply(b, l.Index, l.Data)
		if err != nil {
			resp[i] = err
		} else if cmd != nil {
			done = append(done, cmd)
		}
	}
	if last == applied {
		return resp
	}
	f.persist(b.ops, last)
	if b.dirty != 0 {
		next := b.cat
		f.state.cur.Store(&next)
	}
	f.state.setApplied(last)
	f.notify(done)
	return resp
}

// applyGroup applies the commands of a TypeBatch entry in order, each as
// if it were an entry of its own at l's index (each command of the group
// is of a type that needs no index of its own: batchable), and returns
// each one's error.
func (f *fsm) applyGroup(b *batch, l *raft.Log, done []Command) ([]Command, groupResult) {
	cmds, err := decodeGroup(l.Data)
	if err != nil {
		f.log.Warn("raft: command group rejected", "index", l.Index, "err", err)
		return done, groupResult{err: err}
	}
	errs := groupResult{errs: make([]error, len(cmds))}
	for j, data := range cmds {
		if !batchable(data) {
			errs.errs[j] = invalid("a command of type %d cannot be part of a group", data[0])
			continue
		}
		cmd, err := f.apply(b, l.Index, data)
		if err != nil {
			errs.errs[j] = err
		} else if cmd != nil {
			done = append(done, cmd)
		}
	}
	return done, errs
}

func (f *fsm) apply(b *batch, index uint64, data []byte) (Command, error) {
	cmd, err := Decode(data)
	if err != nil {
		f.log.Warn("raft: command rejected", "index", index, "err", err)
		return nil, err
	}
	if cmd == nil {
		f.log.Debug("raft: skipped unknown ignorable command", "index", index, "type", data[0])
		return nil, nil
	}
	if _, mark := cmd.(*LeaderMark); !mark {
		f.executed.Add(1)
	}
	return cmd, cmd.(applier).apply(b)
}

// persistEvery and persistMaxOps pace the file's transactions (see fsm).
const (
	persistEvery  = 10 * time.Millisecond
	persistMaxOps = 4096
)

// persist queues ops, applied up to index applied, for the file.
func (f *fsm) persist(ops []diskOp, applied uint64) {
	f.pmu.Lock()
	if f.diskErr != nil {
		f.pmu.Unlock()
		return
	}
	f.pending = append(f.pending, ops...)
	f.pendingApplied = applied
	full := len(f.pending) >= persistMaxOps
	arm := !full && !f.armed
	if arm {
		f.armed = true
	}
	f.pmu.Unlock()
	switch {
	case full:
		f.flush()
	case arm:
		time.AfterFunc(persistEvery, func() { f.flush() })
	}
}

// flush writes the queued ops and their applied index in one transaction.
func (f *fsm) flush() {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.pmu.Lock()
	ops, applied := f.pending, f.pendingApplied
	f.pending, f.pendingApplied, f.armed = nil, 0, false
	failed := f.diskErr != nil
	f.pmu.Unlock()
	if failed || applied == 0 || f.db == nil {
		return
	}
	err := f.db.Update(func(tx *bolt.Tx) error {
		for _, op := range ops {
			bk := tx.Bucket(tableNames[op.t])
			var err error
			if op.val == nil {
				err = bk.Delete([]byte(op.key))
			} else {
				err = bk.Put([]byte(op.key), op.val)
			}
			if err != nil {
				return err
			}
		}
		return tx.Bucket(tableNames[tMeta]).Put([]byte(appliedKey), u64(applied))
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return // a timer that fired after close: close flushed first
	}
	if err != nil {
		f.pmu.Lock()
		f.diskErr = err
		f.pending = nil
		f.pmu.Unlock()
		f.log.Error("raft: FSM file write failed; serving from memory, the file is rebuilt from the Raft log on restart",
			"index", applied, "err", err)
	}
}

// Snapshot implements raft.FSM. It runs on the FSM goroutine and only
// captures (a pointer and a copy of the session table); Persist streams.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return capture(f.state.load(), f.state.applied.Load()), nil
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.writeTo(bufio.NewWriterSize(sink, 64<<10)); err != nil {
		sink.Cancel()
		return fmt.Errorf("raft: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// Restore implements raft.FSM. It builds a fresh catalog and rewrites the
// file in one transaction from the stream; only when both are complete are
// they swapped in (one commit, one atomic store). A bad stream changes
// nothing.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	// The queued writes go first, then the file is rewritten; no flush
	// runs in between.
	f.flush()
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	cat, applied := newCatalog(), uint64(0)
	err := f.db.Update(func(tx *bolt.Tx) error {
		for t := tMeta; t <= tLast; t++ {
			if tx.Bucket(tableNames[t]) != nil {
				if err := tx.DeleteBucket(tableNames[t]); err != nil {
					return err
				}
			}
			if _, err := tx.CreateBucket(tableNames[t]); err != nil {
				return err
			}
		}
		err := readSnapshot(bufio.NewReaderSize(rc, 64<<10), func(t table, key, val []byte) error {
			if t == tMeta {
				if string(key) == appliedKey && len(val) == 8 {
					applied = binary.BigEndian.Uint64(val)
				}
				return nil
			}
			known, err := cat.load(t, key, val)
			if err != nil || !known {
				return err
			}
			return tx.Bucket(tableNames[t]).Put(key, val)
		})
		if err != nil {
			return err
		}
		meta := tx.Bucket(tableNames[tMeta])
		if err := meta.Put([]byte(bootKey), []byte(bootID())); err != nil {
			return err
		}
		return meta.Put([]byte(appliedKey), u64(applied))
	})
	if err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	f.pmu.Lock()
	f.diskErr = nil // the file is whole again
	f.pmu.Unlock()
	f.state.cur.Store(cat)
	f.state.setApplied(applied)
	f.notify([]Command{nil})
	f.log.Info("raft: FSM restored from snapshot", "applied", applied)
	return nil
}

// snapshotApplied returns the FSM applied index recorded in the newest
// snapshot of store (ok false when there is none).
func snapshotApplied(store raft.SnapshotStore) (index uint64, ok bool, err error) {
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		return 0, false, err
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		return 0, false, err
	}
	defer rc.Close()
	errStop := fmt.Errorf("stop")
	err = readSnapshot(bufio.NewReader(rc), func(t table, key, val []byte) error {
		if t == tMeta && string(key) == appliedKey && len(val) == 8 {
			index, ok = binary.BigEndian.Uint64(val), true
		}
		return errStop // the applied record comes first
	})
	if err != nil && err != errStop {
		return 0, false, err
	}
	if !ok {
		return 0, false, fmt.Errorf("raft: snapshot %s has no applied index", metas[0].ID)
	}
	return index, true, nil
}
