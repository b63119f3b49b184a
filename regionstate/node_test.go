package regionstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRestartRestoresState(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	apply(t, n, sample(1)...)
	apply(t, n, sample(2)...)
	want := dumpState(n.State())
	closeNode(t, n)
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	n = openNode(t, testConfig(t, dir))
	sameState(t, "after restart", dumpState(n.State()), want)
	if got := n.fsm.executed.Load(); got != 0 {
		t.Fatalf("restart executed %d commands; the FSM file should have covered them", got)
	}
	apply(t, n, SetSetting{Key: "after", Value: "restart"})
}

func TestSnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SnapshotThreshold, cfg.TrailingLogs = 4, 2
	n := openNode(t, cfg)
	apply(t, n, sample(1)...)
	if err := n.Snapshot(context.Background()); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := n.Snapshot(context.Background()); err != nil {
		t.Fatalf("Snapshot with nothing new: %v", err)
	}
	tail := sample(2)
	apply(t, n, tail...)
	apply(t, n, DeleteBucket{Name: "data1"}, AbortUpload{UploadID: "up1"})
	want := dumpState(n.State())
	closeNode(t, n)

	snaps, err := raft.NewFileSnapshotStore(dir, 2, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if metas, err := snaps.List(); err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot on disk: %v %v", metas, err)
	}

	// With the FSM file: nothing is replayed.
	n = openNode(t, cfg)
	sameState(t, "restart after snapshot", dumpState(n.State()), want)
	if got := n.fsm.executed.Load(); got != 0 {
		t.Fatalf("restart executed %d commands, want 0", got)
	}
	closeNode(t, n)

	// Without it: restore the snapshot, replay only the log after it.
	if err := os.Remove(filepath.Join(dir, "fsm.db")); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, cfg)
	sameState(t, "restart from snapshot and log", dumpState(n.State()), want)
	if got, max := n.fsm.executed.Load(), uint64(len(tail)+2); got == 0 || got > max {
		t.Fatalf("replay executed %d commands, want 1..%d (the entries after the snapshot)", got, max)
	}
}

func TestOpenRefusesFSMWithoutRaftState(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	apply(t, n, SetSetting{Key: "k", Value: "v"})
	closeNode(t, n)
	if err := os.Remove(filepath.Join(dir, "raft.db")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := Open(ctx, testConfig(t, dir)); err == nil {
		n.Close()
		t.Fatal("Open bootstrapped over an FSM file without Raft state")
	}
}

func TestOpenConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{{Dir: t.TempDir()}, {NodeID: "n"}, {NodeID: "n", Dir: t.TempDir(), ElectionTimeout: time.Millisecond}} {
		if n, err := Open(ctx, cfg); err == nil {
			n.Close()
			t.Fatalf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestTCPTransport(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.BindAddr = "127.0.0.1:0"
	n := openNode(t, cfg)
	apply(t, n, sample(1)...)
	want := dumpState(n.State())
	closeNode(t, n)
	n = openNode(t, cfg) // another port this time; a one-node region does not care
	sameState(t, "after TCP restart", dumpState(n.State()), want)
	if !n.IsLeader() {
		t.Fatal("not leader after Open")
	}
}

func TestApplyContextAndClose(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Apply(ctx, SetSetting{Key: "k", Value: "v"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a canceled ctx = %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Apply(ctx, SetSetting{Key: "k", Value: "v"}); err != nil {
		t.Fatalf("Apply with a deadline: %v", err)
	}
	closeNode(t, n)
	if err := n.Apply(ctx, SetSetting{Key: "k", Value: "w"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}
	if v, _ := n.State().Setting("k"); v != "v" {
		t.Fatal("State unreadable after Close")
	}
}

func TestApplyConcurrent(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	const workers, each = 32, 5
	var wg sync.WaitGroup
	var won, lost atomic.Int32
	errs := make(chan error, workers*(each+1))
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range each {
				name := fmt.Sprintf("u%d-%d", w, i)
				if err := n.Apply(ctx, PutUser{User: User{Name: name, AccessKey: "AK" + name}}); err != nil {
					errs <- err
				}
			}
			switch err := n.Apply(ctx, CreateBucket{Bucket: Bucket{Name: "shared", Owner: fmt.Sprint(w)}}); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, ErrBucketExists):
				lost.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if won.Load() != 1 || lost.Load() != workers-1 {
		t.Fatalf("shared bucket: %d creates won, %d lost", won.Load(), lost.Load())
	}
	if got := len(n.State().Users()); got != workers*each {
		t.Fatalf("%d users, want %d", got, workers*each)
	}
}

func TestReadsDuringWrites(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	s := n.State()
	apply(t, n, sample(0)...)
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				if u, ok := s.UserByAccessKey("AKALICE0"); !ok || u.Name != "alice0" {
					t.Errorf("UserByAccessKey = %+v, %v", u, ok)
					return
				}
				if _, ok := s.Bucket("data0"); !ok || !s.CanRead("bob0", "data0") {
					t.Error("bucket data0 or bob0's grant vanished")
					return
				}
				for _, u := range s.Uploads("", "") {
					if full, ok := s.Upload(u.ID); ok && full.ID != u.ID {
						t.Error("Upload returned another session")
						return
					}
				}
				dumpState(s)
				reads.Add(1)
			}
		})
	}
	waitFor(t, "readers to start", func() bool { return reads.Load() > 0 })
	for i := 1; i <= 5; i++ {
		apply(t, n, sample(i)...)
		apply(t, n, PutPart{UploadID: "up0", Part: Part{Number: i + 2, ETag: "x"}})
		apply(t, n, AbortUpload{UploadID: fmt.Sprintf("up%d", i)})
	}
	stop.Store(true)
	wg.Wait()
}

func TestRaftLogsAreQuiet(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	cfg := testConfig(t, t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)) // Info
	n := openNode(t, cfg)
	apply(t, n, sample(1)...)
	closeNode(t, n)
	mu.Lock()
	defer mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "level=INFO") && strings.Contains(line, "logger=raft") {
			t.Errorf("raft Info line at Info level: %s", line)
		}
	}
	if !strings.Contains(buf.String(), `msg="raft: ready"`) {
		t.Errorf("no ready line in:\n%s", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// crash stops n as a crash would leave its files: Raft shut down, the FSM
// file closed without being synced or marked clean.
func crash(t *testing.T, n *Node) {
	t.Helper()
	n.fsm.closed = true // fsm.close: do not mark the file clean
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.fsm.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// withBootID makes the FSM see another boot of the machine.
// A node killed before its last applied batches reached the FSM file (it
// writes them every few milliseconds) restarts from the file's older
// index and applies the rest from the Raft log.
func TestRestartReplaysUnwrittenTail(t *testing.T) {
	withBootID(t, "b1")
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	apply(t, n, sample(1)...)
	n.fsm.flush()
	written := n.State().AppliedIndex()
	// From here on nothing reaches the file, and the node never closes it
	// cleanly: as a process killed before its next write.
	n.fsm.pmu.Lock()
	n.fsm.diskErr = errors.New("test: killed")
	n.fsm.pmu.Unlock()
	apply(t, n, sample(2)...)
	apply(t, n, DeleteBucket{Name: "data1"})
	want := dumpState(n.State())
	final := n.State().AppliedIndex()
	closeNode(t, n)

	f, err := openFSM(filepath.Join(dir, "fsm.db"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.state.AppliedIndex(); got != written || got >= final {
		t.Fatalf("the file holds index %d; want %d, the last one written (the node applied %d)", got, written, final)
	}
	f.close()
	n = openNode(t, testConfig(t, dir))
	sameState(t, "after the replay of the unwritten tail", dumpState(n.State()), want)
	if n.State().AppliedIndex() < final {
		t.Fatalf("applied %d after the restart, want %d", n.State().AppliedIndex(), final)
	}
}

func withBootID(t *testing.T, id string) {
	old := bootID
	bootID = func() string { return id }
	t.Cleanup(func() { bootID = old })
}

// TestCrashBetweenAppendAndApply: a node dies after Raft appended (and
// committed) an entry and before its FSM applied it. After a restart the
// entry is applied: on the same boot (the unsynced FSM file is trusted,
// the log replays the entry past it) and after a machine crash (the file
// is not trusted, the state is rebuilt from the snapshot and the log).
func TestCrashBetweenAppendAndApply(t *testing.T) {
	for _, reboot := range []bool{false, true} {
		t.Run(fmt.Sprintf("reboot=%v", reboot), func(t *testing.T) {
			withBootID(t, "boot-1")
			dir := t.TempDir()
			cfg := testConfig(t, dir)
			cfg.SnapshotThreshold, cfg.TrailingLogs = 4, 2
			n := openNode(t, cfg)
			apply(t, n, sample(1)...)
			if err := n.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			apply(t, n, sample(2)...)
			reached := make(chan struct{})
			var once sync.Once
			n.fsm.crashAt = func(logs []*raft.Log) bool {
				for _, l := range logs {
					if l.Type == raft.LogCommand && bytes.Contains(l.Data, []byte("lost-unless-replayed")) {
						once.Do(func() { close(reached) })
						return true
					}
				}
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			go n.Apply(ctx, SetSetting{Key: "lost-unless-replayed", Value: "1"})
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the entry never reached the FSM")
			}
			if _, ok := n.State().Setting("lost-unless-replayed"); ok {
				t.Fatal("the dropped entry was applied")
			}
			crash(t, n)
			if reboot {
				withBootID(t, "boot-2")
			}
			n = openNode(t, cfg)
			if v, ok := n.State().Setting("lost-unless-replayed"); !ok || v != "1" {
				t.Fatalf("after restart: setting = %q, %v; want the committed entry applied", v, ok)
			}
			if n.fsm.rebuilt != reboot {
				t.Fatalf("FSM file rebuilt = %v, want %v", n.fsm.rebuilt, reboot)
			}
			for _, c := range append(sample(1), sample(2)...) {
				if b, ok := c.(CreateBucket); ok {
					if _, ok := n.State().Bucket(b.Bucket.Name); !ok {
						t.Fatalf("bucket %s missing after restart", b.Bucket.Name)
					}
				}
			}
			apply(t, n, SetSetting{Key: "after", Value: "restart"})
		})
	}
}

// TestFSMFileTrust: a cleanly closed FSM file is loaded on any boot; an
// uncleanly closed one only on the boot that wrote it, else it is emptied.
func TestFSMFileTrust(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clean   bool
		boot    string
		trusted bool
	}{
		{"clean, same boot", true, "b1", true},
		{"clean, after a reboot", true, "b2", true},
		{"killed, same boot", false, "b1", true},
		{"killed, after a reboot", false, "b2", false},
		{"killed, no boot id", false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withBootID(t, "b1")
			if tc.boot == "" {
				bootID = func() string { return "" }
			}
			dir := t.TempDir()
			f := newTestFSM(t, dir)
			noErrors(t, applyFSM(t, f, 1, sample(1)...))
			want := dumpState(f.state)
			if tc.clean {
				f.close()
			} else {
				// Killed once its queued writes had reached the file (a
				// later tail is replayed from the log:
				// TestRestartReplaysUnwrittenTail).
				f.flush()
				f.closed = true
				f.db.Close()
			}
			bootID = func() string { return tc.boot }
			f = newTestFSM(t, dir)
			if tc.trusted {
				sameState(t, "reopened", dumpState(f.state), want)
				if f.rebuilt || f.state.AppliedIndex() == 0 {
					t.Fatalf("rebuilt %v, applied %d: want the file loaded", f.rebuilt, f.state.AppliedIndex())
				}
			} else if !f.rebuilt || f.state.AppliedIndex() != 0 {
				t.Fatalf("rebuilt %v, applied %d: want the file emptied", f.rebuilt, f.state.AppliedIndex())
			}
		})
	}
}

// TestLogStoreMigration: a data dir with a raft-boltdb log opened with
// LogStore "wal": the log and the vote move to raft-wal, the state survives, and raft.db is kept aside. A
// migration cut short (wal.tmp left) is redone; the wrong explicit kind is
// refused.
func TestLogStoreMigration(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.LogStore = LogStoreBoltDB
	n := openNode(t, cfg)
	apply(t, n, sample(1)...)
	want := dumpState(n.State())
	closeNode(t, n)
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err != nil {
		t.Fatalf("the boltdb store made no raft.db: %v", err)
	}
	// A crashed migration's leftovers.
	if err := os.MkdirAll(filepath.Join(dir, "wal.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.LogStore = LogStoreWAL
	n = openNode(t, cfg) // migrates
	sameState(t, "after migration", dumpState(n.State()), want)
	if n.logStore != LogStoreWAL {
		t.Fatalf("log store %q after migration", n.logStore)
	}
	apply(t, n, SetSetting{Key: "after", Value: "migration"})
	want = dumpState(n.State())
	closeNode(t, n)
	for _, p := range []string{"raft.db.migrated", "wal"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"raft.db", "wal.tmp"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s still there", p)
		}
	}
	// The FSM file out of the way: the state comes from the migrated log
	// alone (the entries and the term/vote copied).
	if err := os.Remove(filepath.Join(dir, "fsm.db")); err != nil {
		t.Fatal(err)
	}
	cfg.LogStore = "" // a wal directory is opened as such
	n = openNode(t, cfg)
	sameState(t, "from the migrated log", dumpState(n.State()), want)
	closeNode(t, n)
	old := testConfig(t, dir)
	old.LogStore = LogStoreBoltDB
	if n, err := Open(ctx, old); err == nil {
		n.Close()
		t.Fatal("Open with LogStore boltdb over a wal directory succeeded")
	}
}
