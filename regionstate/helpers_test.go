package regionstate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/internal/wait"
)

// testLogger writes Warn and above to the test log, and nothing once the
// test's cleanups have run (raft goroutines may outlive a failed test).
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs after nodes close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

func testConfig(t testing.TB, dir string) Config {
	return Config{NodeID: "n1", Dir: dir, Logger: testLogger(t), ElectionTimeout: 20 * time.Millisecond}
}

// openNode opens a node and closes it at the end of the test.
func openNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func closeNode(t testing.TB, n *Node) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func apply(t testing.TB, n *Node, cmds ...Command) {
	t.Helper()
	for _, c := range cmds {
		if err := n.Apply(context.Background(), c); err != nil {
			t.Fatalf("Apply(%T %+v): %v", c, c, err)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	wait.For(t, 10*time.Second, what, cond)
}

// rawCommand lets tests write any type byte and body.
type rawCommand struct {
	t    CommandType
	body string
}

func (r rawCommand) Type() CommandType            { return r.t }
func (r rawCommand) MarshalJSON() ([]byte, error) { return []byte(r.body), nil }

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sample is a state with a row in every table.
func sample(i int) []Command {
	s := func(f string) string { return fmt.Sprintf(f, i) }
	return []Command{
		PutUser{User: User{Name: s("root%d"), AccessKey: s("AKROOT%d"), SecretKey: "s", Root: true}},
		PutUser{User: User{Name: s("alice%d"), AccessKey: s("AKALICE%d"), SecretKey: "s", Created: t0}},
		PutUser{User: User{Name: s("bob%d"), AccessKey: s("AKBOB%d"), SecretKey: "s"}},
		CreateBucket{Bucket: Bucket{Name: s("data%d"), Owner: s("alice%d"), Store: "posix", Prefix: s("data%d/")}},
		CreateBucket{Bucket: Bucket{Name: s("logs%d"), Owner: s("bob%d"), Store: "posix", Prefix: s("logs%d/")}},
		Grant{User: s("bob%d"), Bucket: s("data%d"), Perm: PermRead},
		Grant{User: s("alice%d"), Bucket: "imagenet", Perm: PermWrite},
		CreateUpload{Upload: MultipartUpload{ID: s("up%d"), Bucket: s("data%d"), Key: "a/b", Store: "posix",
			StoreUploadID: "x", Initiator: s("alice%d"),
			Meta: ObjectMeta{ContentType: "text/plain", User: map[string]string{"run": "7"}}}},
		PutPart{UploadID: s("up%d"), Part: Part{Number: 1, Size: 5 << 20, ETag: "e1", Checksums: map[string]string{"crc32c": "x"}}},
		PutPart{UploadID: s("up%d"), Part: Part{Number: 2, Size: 10, ETag: "e2"}},
		SetPolicy{YAML: []byte(s("regions: [] # %d")), Version: uint64(i + 1)},
		SetSetting{Key: "region", Value: s("r%d")},
		StageObject{Entry: JournalEntry{Bucket: s("data%d"), Key: "ckpt/1", Store: "posix", StoreKey: s("data%d/ckpt/1"),
			Size: 7, ETag: "e", Meta: ObjectMeta{ContentType: "application/octet-stream"},
			Segments: []Segment{{ID: s("seg%d"), Size: 7, Nodes: []string{"n1", "n2"}}}}},
		StageObject{Entry: JournalEntry{Bucket: s("data%d"), Key: "ckpt/gone", Tombstone: true, Store: "posix"}},
		SetPin{Pin: Pin{Bucket: s("data%d"), Prefix: "hot/"}},
		PutJob{Job: PreloadJob{ID: s("job%d"), Bucket: s("data%d"), Prefix: "hot/", Pin: true}},
		JobProgressUpdate{ID: s("job%d"), Node: "n1", Progress: JobProgress{After: "hot/3", Objects: 3, Bytes: 300}, TotalObjects: 9},
		AddEgress{Rows: []EgressRow{{Hour: 490000 + int64(i), Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: s("data%d"), Store: "s3", Direction: "read", Bytes: 100, Served: 50}}},
		AddEgress{Rows: []EgressRow{{Hour: 490000 + int64(i), Src: "aws:us-east-1", Dst: "gcp:us-central1", Bucket: s("data%d"), Store: "s3", Direction: "read", Bytes: 11}}},
		SetBucketConfig{Bucket: s("data%d"), Kind: BucketConfPolicy, Value: s(`{"Version":"2012-10-17","Statement":[] %d}`)},
		SetBucketConfig{Bucket: "imagenet", Kind: BucketConfACL, Value: "public-read"},
		SetBucketConfig{Bucket: s("data%d"), Kind: BucketConfVersioning, Value: "Enabled"},
		PutVersion{Version: ObjectVersion{Bucket: s("data%d"), Key: "ckpt/latest.pt", ID: s("v1-%d"), Store: "posix", StoreKey: s("v/ckpt/latest.pt/v1-%d"), Size: 3, ETag: "e1"}},
		PutVersion{Version: ObjectVersion{Bucket: s("data%d"), Key: "ckpt/latest.pt", ID: s("v2-%d"), Store: "posix", StoreKey: s("v/ckpt/latest.pt/v2-%d"), Size: 4, ETag: "e2",
			Meta: ObjectMeta{User: map[string]string{"step": "200"}}}},
		PutVersion{Version: ObjectVersion{Bucket: s("data%d"), Key: "ckpt/old.pt", ID: s("v3-%d"), Store: "posix", StoreKey: s("v/ckpt/old.pt/v3-%d"), Size: 1}},
		DeleteVersion{Bucket: s("data%d"), Key: "ckpt/old.pt", ID: s("v3-%d")},
		PutVersion{Version: ObjectVersion{Bucket: s("data%d"), Key: "ckpt/gone.pt", ID: s("dm-%d"), DeleteMarker: true}},
	}
}

// dump is everything a State shows, for comparisons.
type dump struct {
	Buckets  []Bucket
	Users    []User
	Grants   map[string]map[string]Perm
	Uploads  []MultipartUpload
	Policy   Policy
	Settings map[string]string
	Journal  []JournalEntry
	Pins     []Pin
	Jobs     []PreloadJob
	Egress   []EgressRow
	BConf    map[string]map[string]string
	Versions []ObjectVersion
	Garbage  []VersionGarbage
}

func dumpState(s *State) dump {
	d := dump{Buckets: s.Buckets(), Users: s.Users(), Grants: map[string]map[string]Perm{}, Settings: s.Settings()}
	for _, u := range d.Users {
		if g := s.Grants(u.Name); g != nil {
			d.Grants[u.Name] = g
		}
	}
	for _, u := range s.Uploads("", "") {
		full, _ := s.Upload(u.ID)
		d.Uploads = append(d.Uploads, full)
	}
	d.Policy, _ = s.Policy()
	d.Journal, d.Pins, d.Jobs = s.Journal("", ""), s.Pins(), s.Jobs()
	d.Egress = s.Egress(0, 1<<40)
	d.BConf = s.BucketConfigs()
	for _, b := range d.Buckets {
		s.ListVersions(b.Name, "", "", 0, func(v ObjectVersion) bool { d.Versions = append(d.Versions, v); return true })
	}
	d.Garbage = s.PendingVersionGarbage()
	slices.SortFunc(d.Garbage, func(a, b VersionGarbage) int { return strings.Compare(a.key(), b.key()) })
	// Members announce their log features on their own (group.go), at a
	// moment no test chooses: compared states leave them out.
	for k := range d.Settings {
		if strings.HasPrefix(k, "member.") && strings.HasSuffix(k, ".raft-features") {
			delete(d.Settings, k)
		}
	}
	return d
}

func sameState(t testing.TB, what string, got, want dump) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("%s: state differs\n got: %s\nwant: %s", what, g, w)
	}
}

// newTestFSM opens an FSM file in a temporary directory (no Raft).
func newTestFSM(t testing.TB, dir string) *fsm {
	t.Helper()
	f, err := openFSM(dir+"/fsm.db", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.close() })
	return f
}

// logsOf encodes cmds as consecutive log entries starting at index first.
func logsOf(t testing.TB, first uint64, cmds ...Command) []*raft.Log {
	t.Helper()
	var logs []*raft.Log
	for i, c := range cmds {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand,
			Data: data, AppendedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	return logs
}

func applyFSM(t testing.TB, f *fsm, first uint64, cmds ...Command) []any {
	t.Helper()
	return f.ApplyBatch(logsOf(t, first, cmds...))
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.canceled = true; return nil }
func (s *memSink) Close() error  { return nil }
