package peerapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

const (
	testAK     = "AKIDPEERAPITEST"
	testSK     = "peerapi-test-secret-key"
	testRegion = "us-east-1"
)

// fakeBackend is a node's Raft side: leader or follower of a fake region.
type fakeBackend struct {
	mu      sync.Mutex
	id      string
	info    Info
	leader  bool
	known   map[string]string // id -> S3 address
	applied [][]byte
	joined  []JoinRequest
	removed []string
	applyFn func([]byte) (uint64, error)
}

// what the backend recorded so far.
type recorded struct {
	applied [][]byte
	joined  []JoinRequest
	removed []string
}

func (b *fakeBackend) snapshot() recorded {
	b.mu.Lock()
	defer b.mu.Unlock()
	return recorded{applied: b.applied, joined: b.joined, removed: b.removed}
}

func (b *fakeBackend) Info() Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.info
}

func (b *fakeBackend) notLeader() error {
	for id := range b.known {
		if id != b.id {
			return &regionstate.NotLeaderError{LeaderID: id, LeaderAddr: "raft-" + id}
		}
	}
	return &regionstate.NotLeaderError{}
}

func (b *fakeBackend) AddVoter(_ context.Context, j JoinRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leader {
		return b.notLeader()
	}
	b.joined = append(b.joined, j)
	return nil
}

func (b *fakeBackend) RemoveServer(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leader {
		return b.notLeader()
	}
	b.removed = append(b.removed, id)
	return nil
}

func (b *fakeBackend) ApplyEncoded(_ context.Context, data []byte) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.applyFn != nil {
		return b.applyFn(data)
	}
	if !b.leader {
		return 0, b.notLeader()
	}
	b.applied = append(b.applied, data)
	return uint64(len(b.applied)) + 10, nil
}

func (b *fakeBackend) IsLeader() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leader
}

func (b *fakeBackend) ReadIndex(context.Context) (uint64, error) { return 42, nil }

func (b *fakeBackend) KnownHTTP(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[id]
}

// fakeData is a staging area and a cache of chunks in memory.
type fakeData struct {
	mu     sync.Mutex
	staged map[string][]byte
	chunks map[cachetier.ChunkKey][]byte
	held   map[string]time.Duration
}

func (d *fakeData) HoldStaged(ids []string, dur time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		d.held = map[string]time.Duration{}
	}
	for _, id := range ids {
		d.held[id] = dur
	}
}

func (d *fakeData) StageHere(_ context.Context, id string, body io.Reader, size int64) error {
	if strings.Contains(id, "..") {
		return staging.ErrInvalidID
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if int64(len(data)) != size {
		return staging.ErrShortBody
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.staged[id] = data
	return nil
}

func (d *fakeData) OpenStaged(id string, off, n int64) (io.ReadCloser, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.staged[id]
	if !ok {
		return nil, 0, staging.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data[off : off+n])), int64(len(data)), nil
}

func (d *fakeData) ServeChunk(_ context.Context, k cachetier.ChunkKey, off, n int64) (io.ReadCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.chunks[k]
	if !ok {
		return nil, store.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data[off : off+n])), nil
}

// peer is one fake node: its S3 port (discovery only) and internal port.
type peer struct {
	srv              *Server
	b                *fakeBackend
	d                *fakeData
	s3, intl         *httptest.Server
	started, hasData atomic.Bool // what the server's late-bound Backend and Data see
}

// start makes the server answer for p.b (its Backend func returns it).
func (p *peer) start() { p.started.Store(true) }

// serveData makes the staging and chunk routes serve p.d.
func (p *peer) serveData() { p.hasData.Store(true) }

func (p *peer) base() string { return p.s3.URL }

func newPeer(t *testing.T, id string) *peer {
	t.Helper()
	p := &peer{}
	p.srv = NewServer(ServerConfig{AccessKey: testAK, SecretKey: testSK, SigningRegion: testRegion,
		Backend: func() Backend {
			if p.started.Load() {
				return p.b
			}
			return nil
		},
		Data: func() Data {
			if p.hasData.Load() {
				return p.d
			}
			return nil
		}})
	p.s3 = httptest.NewServer(p.srv.Discovery())
	p.intl = httptest.NewServer(p.srv.Handler())
	t.Cleanup(p.s3.Close)
	t.Cleanup(p.intl.Close)
	p.b = &fakeBackend{id: id, known: map[string]string{id: p.s3.URL},
		info: Info{ID: id, RaftAddr: "raft-" + id, HTTPAddr: p.s3.URL, State: "Follower", InternalURL: p.intl.URL}}
	p.d = &fakeData{staged: map[string][]byte{}, chunks: map[cachetier.ChunkKey][]byte{}}
	return p
}

func newClient() *Client {
	return NewClient(ClientConfig{AccessKey: testAK, SecretKey: testSK, SigningRegion: testRegion})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBeforeStartEverythingIsUnavailable(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	c := newClient()
	_, err := c.Info(ctx, p.base())
	se := (*StatusError)(nil)
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || !errors.Is(err, regionstate.ErrClosed) {
		t.Fatalf("Info before there is a Backend: %v, want a 503 StatusError that is regionstate.ErrClosed", err)
	}
	// The internal port answers the same; a client that knows it skips
	// discovery.
	c.learnInternal(p.base(), p.intl.URL)
	if _, err := c.ReadIndex(ctx, p.base()); !errors.Is(err, regionstate.ErrClosed) {
		t.Fatalf("ReadIndex before there is a Backend: %v, want regionstate.ErrClosed", err)
	}
}

func TestInfoAndForward(t *testing.T) {
	ctx := ctxT(t)
	leader, follower := newPeer(t, "b"), newPeer(t, "a")
	leader.b.leader = true
	leader.start()
	follower.start()
	c := newClient()

	in, err := c.Info(ctx, leader.base())
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != "b" || in.InternalURL != leader.intl.URL || in.RaftAddr != "raft-b" {
		t.Fatalf("info = %+v", in)
	}
	idx, err := c.Forward(ctx, "b", leader.base(), []byte("cmd-1"))
	if err != nil || idx != 11 {
		t.Fatalf("Forward = %d, %v; want 11, nil", idx, err)
	}
	if got := string(leader.b.snapshot().applied[0]); got != "cmd-1" {
		t.Fatalf("leader applied %q, want cmd-1", got)
	}

	// A follower answers "not the leader", rebuilt on this side.
	follower.b.mu.Lock()
	follower.b.known["b"] = leader.base()
	follower.b.mu.Unlock()
	_, err = c.Forward(ctx, "a", follower.base(), []byte("cmd-2"))
	var nle *regionstate.NotLeaderError
	if !errors.As(err, &nle) || nle.LeaderID != "b" {
		t.Fatalf("Forward to a follower: %v, want a *regionstate.NotLeaderError naming b", err)
	}

	// A command's own error keeps its kind.
	leader.b.mu.Lock()
	leader.b.applyFn = func([]byte) (uint64, error) { return 0, regionstate.ErrInvalid }
	leader.b.mu.Unlock()
	if _, err := c.Forward(ctx, "b", leader.base(), []byte("bad")); !errors.Is(err, regionstate.ErrInvalid) {
		t.Fatalf("Forward of a bad command: %v, want regionstate.ErrInvalid", err)
	}

	if i, err := c.ReadIndex(ctx, leader.base()); err != nil || i != 42 {
		t.Fatalf("ReadIndex on the leader = %d, %v", i, err)
	}
	if _, err := c.ReadIndex(ctx, follower.base()); !errors.Is(err, regionstate.ErrNotLeader) {
		t.Fatalf("ReadIndex on a follower: %v, want regionstate.ErrNotLeader", err)
	}
}

func TestForwardToAClosedPortIsNotSent(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	p.b.leader = true
	p.start()
	c := newClient()
	if _, err := c.Info(ctx, p.base()); err != nil { // learn its internal URL
		t.Fatal(err)
	}
	p.intl.Close()
	_, err := c.Forward(ctx, "a", p.base(), []byte("cmd"))
	if !errors.Is(err, regionstate.ErrNotLeader) {
		t.Fatalf("Forward to a closed port: %v, want a *regionstate.NotLeaderError (not sent)", err)
	}
}

func TestJoinFollowsTheLeader(t *testing.T) {
	ctx := ctxT(t)
	leader, follower := newPeer(t, "b"), newPeer(t, "a")
	leader.b.leader = true
	follower.b.known["b"] = leader.base()
	leader.start()
	follower.start()
	c := newClient()

	j := JoinRequest{ID: "c", RaftAddr: "raft-c", HTTPAddr: "http://c:9000"}
	if err := c.Join(ctx, follower.base(), j); err != nil {
		t.Fatal(err)
	}
	if got := leader.b.snapshot().joined; len(got) != 1 || got[0] != j {
		t.Fatalf("leader added %+v, want [%+v]", got, j)
	}
	if err := c.Remove(ctx, leader.base(), "c"); err != nil {
		t.Fatal(err)
	}
	if got := leader.b.snapshot().removed; len(got) != 1 || got[0] != "c" {
		t.Fatalf("leader removed %q, want [c]", got)
	}
	// A malformed join is the caller's mistake.
	c.learnInternal(leader.base(), leader.intl.URL)
	err := c.do(ctx, leader.base(), http.MethodPost, "join", []byte("{"), nil)
	se := (*StatusError)(nil)
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !errors.Is(err, regionstate.ErrInvalid) {
		t.Fatalf("malformed join: %v, want a 400 that is regionstate.ErrInvalid", err)
	}
}

func TestStagingAndChunks(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	p.start()
	c := newClient()

	body := []byte("staged bytes of a write-back write")
	if err := c.StageTo(ctx, p.base(), "obj1", bytes.NewReader(body), int64(len(body))); err == nil {
		t.Fatal("StageTo before there is Data succeeded")
	}
	p.serveData()
	if err := c.StageTo(ctx, p.base(), "obj1", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ReadStaged(ctx, p.base(), "obj1", 7, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "bytes" {
		t.Fatalf("ReadStaged = %q, %v; want \"bytes\"", got, err)
	}
	if _, err := c.ReadStaged(ctx, p.base(), "missing", 0, 1); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("ReadStaged of a missing file: %v, want a 404", err)
	}
	// A hold reaches the data; a bad id or duration is refused.
	id := "0123456789abcdef0123456789abcdef"
	if err := c.HoldStaged(ctx, p.base(), []string{id}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p.d.mu.Lock()
	held := p.d.held[id]
	p.d.mu.Unlock()
	if held != 30*time.Second {
		t.Fatalf("held %v; want 30s", held)
	}
	if err := c.HoldStaged(ctx, p.base(), []string{"../x"}, time.Second); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a hold of a bad id: %v; want a 400", err)
	}
	if err := c.HoldStaged(ctx, p.base(), []string{id}, time.Hour); err == nil {
		t.Fatal("a one-hour hold was accepted")
	}
	if err := c.StageTo(ctx, p.base(), "short", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}

	k := cachetier.ChunkKey{ObjectID: cachetier.ObjectID{Store: "s", Key: "dir/key with space", Validator: "v1", Size: 100}, Index: 2}
	p.d.mu.Lock()
	p.d.chunks[k] = []byte("0123456789")
	p.d.mu.Unlock()
	rc, err = c.ReadChunk(ctx, p.base(), k, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "3456" {
		t.Fatalf("ReadChunk = %q, %v; want 3456", got, err)
	}
	k.Index = 3
	if _, err := c.ReadChunk(ctx, p.base(), k, 0, 1); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("ReadChunk of a missing chunk: %v, want a 404", err)
	}
}

func TestRefusesOtherCredentials(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	p.start()
	bad := NewClient(ClientConfig{AccessKey: testAK, SecretKey: "another-secret", SigningRegion: testRegion})
	_, err := bad.Info(ctx, p.base())
	se := (*StatusError)(nil)
	if !errors.As(err, &se) || se.Status != http.StatusForbidden || se.Body.Code != "access_denied" {
		t.Fatalf("Info with another secret: %v, want 403 access_denied", err)
	}
	bad.learnInternal(p.base(), p.intl.URL)
	if _, err := bad.ReadIndex(ctx, p.base()); !errors.As(err, &se) || se.Status != http.StatusForbidden {
		t.Fatalf("ReadIndex with another secret: %v, want 403", err)
	}
	// Unsigned requests are refused too.
	resp, err := http.Get(p.intl.URL + Prefix + "info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned info: %s, want 403", resp.Status)
	}
}

func TestDiscoveryAnswersOnlyInfo(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	p.b.leader = true
	p.start()
	c := newClient()
	// The S3 port is asked directly (as if it were the internal API).
	c.learnInternal(p.base(), p.base())
	err := c.do(ctx, p.base(), http.MethodPost, "apply", []byte("cmd"), nil)
	se := (*StatusError)(nil)
	if !errors.As(err, &se) || se.Status != http.StatusNotFound || se.Body.Code != "not_found" {
		t.Fatalf("apply on the S3 port: %v, want 404 not_found", err)
	}
	if len(p.b.snapshot().applied) != 0 {
		t.Fatal("the S3 port applied a command")
	}
}

func TestAskPeersRemembers(t *testing.T) {
	ctx := ctxT(t)
	a, b := newPeer(t, "a"), newPeer(t, "b")
	a.start()
	// b has not started: it does not answer, and is not remembered.
	c := NewClient(ClientConfig{AccessKey: testAK, SecretKey: testSK, SigningRegion: testRegion,
		Join: []string{a.base(), b.base()}})
	var asked []string
	c.AskPeers(ctx, func(peer string, in Info) { asked = append(asked, peer+"="+in.ID) })
	if len(asked) != 1 || asked[0] != a.base()+"=a" {
		t.Fatalf("AskPeers answered %q, want only a", asked)
	}
	if c.Learned("a") != a.base() || c.Learned("b") != "" {
		t.Fatalf("learned a=%q b=%q", c.Learned("a"), c.Learned("b"))
	}
}

func TestNormalizeHTTP(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"10.0.0.1:9000":        "http://10.0.0.1:9000",
		" http://h:9000/ ":     "http://h:9000",
		"https://h:9443":       "https://h:9443",
		"node-2.example:9000/": "http://node-2.example:9000",
	} {
		if got := NormalizeHTTP(in); got != want {
			t.Errorf("NormalizeHTTP(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWireFormat pins the JSON names every version of a region shares.
func TestWireFormat(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Info{ID: "n1", RaftAddr: "r", HTTPAddr: "h", State: "Leader", LeaderID: "n1", LeaderHTTP: "lh", Term: 2, Applied: 3, Commit: 4,
			Members: 3, InternalURL: "https://i"},
			`{"id":"n1","raft_addr":"r","http_addr":"h","state":"Leader","leader_id":"n1","leader_http":"lh","term":2,"applied_index":3,"commit_index":4,"members":3,"internal_url":"https://i","cache_used_bytes":0,"cache_capacity_bytes":0,"staging_used_bytes":0,"staging_capacity_bytes":0}`},
		{Info{ID: "n1", Time: time.Date(2026, 12, 3, 14, 0, 0, 5e6, time.UTC)},
			`{"id":"n1","raft_addr":"","http_addr":"","state":"","term":0,"applied_index":0,"commit_index":0,"members":0,"time":"2026-12-03T14:00:00.005Z","cache_used_bytes":0,"cache_capacity_bytes":0,"staging_used_bytes":0,"staging_capacity_bytes":0}`},
		{HoldRequest{IDs: []string{"ab"}, Millis: 30000}, `{"ids":["ab"],"millis":30000}`},
		{JoinRequest{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2"}, `{"id":"n2","raft_addr":"r2","http_addr":"h2"}`},
		{RemoveRequest{ID: "n2"}, `{"id":"n2"}`},
		{indexAnswer{Index: 7}, `{"index":7}`},
		{ErrorBody{WireError: regionstate.WireError{Code: regionstate.CodeNotLeader, Message: "m", LeaderID: "n1"}, LeaderHTTP: "http://h"},
			`{"code":"not_leader","message":"m","leader_id":"n1","leader_http":"http://h"}`},
	} {
		if got := string(jsonBody(c.v)); got != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.v, got, c.want)
		}
	}
}

// A forward the leader took but never answered (it died, or the
// connection broke after the write was sent) has an unknown outcome: it is
// ErrLeadershipLost, which the gateway answers 503 ("may or may not have
// taken effect"), not an internal error; here the leader had applied it.
func TestForwardWithoutAnAnswerHasAnUnknownOutcome(t *testing.T) {
	ctx := ctxT(t)
	p := newPeer(t, "a")
	p.b.leader = true
	applied := false
	p.b.applyFn = func([]byte) (uint64, error) {
		applied = true
		panic(http.ErrAbortHandler) // the connection breaks before the answer
	}
	p.start()
	c := newClient()
	_, err := c.Forward(ctx, "a", p.base(), []byte("cmd"))
	if !errors.Is(err, regionstate.ErrLeadershipLost) {
		t.Fatalf("Forward with no answer: %v, want regionstate.ErrLeadershipLost (outcome unknown)", err)
	}
	p.b.mu.Lock()
	got := applied
	p.b.mu.Unlock()
	if !got {
		t.Fatal("the fake leader never got the write")
	}
}
