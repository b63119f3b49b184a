package cachetier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/store"
)

// region is the nodes of one region in one process: a Cache per node,
// wired to the others by fakePeers, which calls the owner's ReadChunk as
// the internal API does.
type region struct {
	t       testing.TB
	nodes   map[string]*Cache
	peers   map[string]*fakePeers
	origins map[store.Validator]*origin // the owner's fetch, by Validator
}

type fakePeers struct {
	r     *region
	self  string
	calls atomic.Int64
	mu    sync.Mutex
	// hook, when set, answers ReadChunk instead of the owner.
	hook func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error)
}

func (p *fakePeers) setHook(h func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error)) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

func (p *fakePeers) ReadChunk(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
	p.calls.Add(1)
	if node == p.self {
		p.r.t.Errorf("%s asked itself for chunk %d", node, k.Index)
		return nil, errors.New("asked itself")
	}
	p.mu.Lock()
	hook := p.hook
	p.mu.Unlock()
	if hook != nil {
		return hook(ctx, node, k, off, n)
	}
	return p.r.serve(ctx, node, k, off, n)
}

// serve is the owner's side of the internal API.
func (r *region) serve(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
	c := r.nodes[node]
	if c == nil {
		return nil, fmt.Errorf("no node %q", node)
	}
	return c.ReadChunk(ctx, k, r.origins[k.Validator].fetch, off, n, ReadOptions{})
}

func newRegion(t *testing.T, peerTimeout time.Duration, names ...string) *region {
	r := &region{t: t, nodes: make(map[string]*Cache), peers: make(map[string]*fakePeers),
		origins: make(map[store.Validator]*origin)}
	for _, name := range names {
		p := &fakePeers{r: r, self: name}
		cfg := testConfig(t.TempDir())
		cfg.Self, cfg.Peers, cfg.PeerTimeout = name, p, peerTimeout
		r.nodes[name], r.peers[name] = openCache(t, cfg), p
	}
	for _, c := range r.nodes {
		c.SetMembers(names)
	}
	return r
}

// object registers o's version v with the region and returns its id.
func (r *region) object(o *origin, v string) ObjectID {
	id := o.id(v)
	r.origins[id.Validator] = o
	return id
}

func (r *region) settle() {
	for _, c := range r.nodes {
		settle(r.t, c)
	}
}

func cached(c *Cache, id ObjectID, idx int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(idOf(id, idx)) != nil
}

// ownedBy returns the chunks of id that node owns by c's ring.
func ownedBy(c *Cache, id ObjectID, node string) []int64 {
	var out []int64
	for idx := range c.NumChunks(id.Size) {
		if c.Ring().Owner(ChunkKey{id, idx}) == node {
			out = append(out, idx)
		}
	}
	return out
}

func chunkBytes(o *origin, idx int64) []byte {
	return o.data[idx*testChunk : min(int64(len(o.data)), (idx+1)*testChunk)]
}

// A node reads the chunks another node owns through that node: each chunk
// is fetched from the origin once, and cached only by its owner.
func TestPeerReadsThroughOwner(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	a, b := r.nodes["a"], r.nodes["b"]
	o := newOrigin(16*testChunk+100, 70)
	id := r.object(o, "v")
	mine, theirs := ownedBy(a, id, "a"), ownedBy(a, id, "b")
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("a owns %v, b owns %v: want both to own some", mine, theirs)
	}
	if !slices.Equal(theirs, ownedBy(b, id, "b")) {
		t.Fatal("the nodes disagree on the owners")
	}
	sameBytes(t, "cold read through a", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
	r.settle()
	if calls, n, _ := o.stats(); calls != 17 || n != id.Size {
		t.Fatalf("%d fetches of %d bytes, want 17 of %d", calls, n, id.Size)
	}
	var theirBytes int64
	for _, idx := range theirs {
		theirBytes += int64(len(chunkBytes(o, idx)))
	}
	for idx := range a.NumChunks(id.Size) {
		aHas, bHas := cached(a, id, idx), cached(b, id, idx)
		if own := slices.Contains(mine, idx); aHas != own || bHas == own {
			t.Errorf("chunk %d (a owns it: %v): cached on a %v, on b %v", idx, own, aHas, bHas)
		}
	}
	s := a.Stats()
	if s.PeerReads != int64(len(theirs)) || s.PeerReadBytes != theirBytes || s.PeerFallbacks != 0 {
		t.Fatalf("a's stats %+v; b owns %d chunks, %d bytes", s, len(theirs), theirBytes)
	}
	if s.Chunks != len(mine) || b.Stats().Chunks != len(theirs) {
		t.Fatalf("a holds %d chunks, b %d; want %d, %d", s.Chunks, b.Stats().Chunks, len(mine), len(theirs))
	}

	// Warm: through either node, every byte comes from a cache.
	sameBytes(t, "warm read through a", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
	sameBytes(t, "warm read through b", readRange(t, b, o, id, 0, -1, ReadOptions{}), o.data)
	if calls, _, _ := o.stats(); calls != 17 {
		t.Fatalf("warm reads went to the origin: %d fetches", calls-17)
	}
	if got := b.Stats().Hits; got != int64(2*len(theirs)) {
		t.Fatalf("b: %d hits, want %d", got, 2*len(theirs))
	}
	// Ranges that start and end inside peer-owned chunks.
	for _, idx := range theirs[:1] {
		off := idx*testChunk + 123
		sameBytes(t, "mid-chunk range", readRange(t, a, o, id, off, 2*testChunk-200, ReadOptions{}),
			o.data[off:off+2*testChunk-200])
	}
	if a.Stats().Chunks != len(mine) {
		t.Fatal("a cached a chunk it does not own")
	}
}

// Chunk (the sendfile path) of a peer-owned chunk gives the exact bytes in
// a private file, without caching the chunk here; with Local it is cached.
func TestPeerChunkRef(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	a, b := r.nodes["a"], r.nodes["b"]
	o := newOrigin(8*testChunk, 72)
	id := r.object(o, "v")
	theirs := ownedBy(a, id, "b")
	if len(theirs) < 2 {
		t.Fatalf("b owns %v", theirs)
	}
	for range 2 {
		ref, err := a.Chunk(context.Background(), id, theirs[0], o.fetch, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, ref.Length)
		if _, err := ref.File.Seek(ref.Offset, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ref.File, got); err != nil {
			t.Fatal(err)
		}
		ref.Release()
		sameBytes(t, "peer chunk ref", got, chunkBytes(o, theirs[0]))
	}
	r.settle()
	if cached(a, id, theirs[0]) || !cached(b, id, theirs[0]) {
		t.Fatalf("chunk %d: cached on a %v, on b %v", theirs[0], cached(a, id, theirs[0]), cached(b, id, theirs[0]))
	}
	if left := files(t, a.cfg.Dir, "tmp"); len(left) != 0 {
		t.Fatalf("files left in a's tmp: %v", left)
	}
	if calls, _, _ := o.stats(); calls != 1 {
		t.Fatalf("%d fetches, want 1", calls)
	}
	chunkOK(t, a, o, id, theirs[1], ReadOptions{Local: true})
	if !cached(a, id, theirs[1]) || a.Stats().PeerReads != 2 {
		t.Fatalf("Local: cached on a %v, stats %+v", cached(a, id, theirs[1]), a.Stats())
	}
}

// hang blocks until ctx ends.
type hangBody struct{ ctx context.Context }

func (h hangBody) Read([]byte) (int, error) { <-h.ctx.Done(); return 0, h.ctx.Err() }
func (hangBody) Close() error               { return nil }

// cutBody passes on left bytes of rc, then fails with err (hang: blocks
// until ctx ends).
type cutBody struct {
	rc   io.ReadCloser
	ctx  context.Context
	left int64
	err  error
	hang bool
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if c.hang {
			<-c.ctx.Done()
			return 0, c.ctx.Err()
		}
		return 0, c.err
	}
	n, err := c.rc.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

var errPeer = errors.New("peer: connection refused")

// A peer that fails, never sends a byte, breaks off or stalls mid-chunk
// costs a fallback per chunk, and the reader still gets exactly the right
// bytes, the rest of each chunk from the origin.
func TestPeerFailuresFallBackToOrigin(t *testing.T) {
	const cut = 1000
	type hook = func(r *region) func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error)
	cutHook := func(err error, hang bool) hook {
		return func(r *region) func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
			return func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
				rc, err2 := r.serve(ctx, node, k, off, n)
				if err2 != nil {
					return nil, err2
				}
				return &cutBody{rc: rc, ctx: ctx, left: cut, err: err, hang: hang}, nil
			}
		}
	}
	for _, tc := range []struct {
		name     string
		hook     hook
		resumeAt int64 // > 0: each chunk's origin read starts here
		timeout  time.Duration
	}{
		{"error", func(*region) func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
			return func(context.Context, string, ChunkKey, int64, int64) (io.ReadCloser, error) { return nil, errPeer }
		}, 0, time.Minute},
		{"hangs before answering", func(*region) func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
			return func(ctx context.Context, _ string, _ ChunkKey, _, _ int64) (io.ReadCloser, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}, 0, 100 * time.Millisecond},
		{"no first byte", func(*region) func(ctx context.Context, node string, k ChunkKey, off, n int64) (io.ReadCloser, error) {
			return func(ctx context.Context, _ string, _ ChunkKey, _, _ int64) (io.ReadCloser, error) {
				return hangBody{ctx}, nil
			}
		}, 0, 100 * time.Millisecond},
		{"breaks mid-chunk", cutHook(errPeer, false), cut, time.Minute},
		{"ends early", cutHook(io.EOF, false), cut, time.Minute},
		{"stalls mid-chunk", cutHook(nil, true), 0, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegion(t, tc.timeout, "a", "b")
			a := r.nodes["a"]
			o := newOrigin(12*testChunk, 73)
			id := r.object(o, "v")
			mine, theirs := ownedBy(a, id, "a"), ownedBy(a, id, "b")
			if len(theirs) < 2 {
				t.Fatalf("b owns %v", theirs)
			}
			r.peers["a"].setHook(tc.hook(r))
			sameBytes(t, "read through a", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
			r.settle()
			s := a.Stats()
			if s.PeerFallbacks != int64(len(theirs)) || s.FetchErrors != 0 {
				t.Fatalf("stats %+v; want %d fallbacks", s, len(theirs))
			}
			if s.Chunks != len(mine) || s.Used != int64(len(mine))*testChunk {
				t.Fatalf("a cached chunks it does not own: %+v", s)
			}
			if tc.resumeAt > 0 {
				if s.PeerReadBytes != int64(len(theirs))*tc.resumeAt {
					t.Fatalf("%d bytes from the peer, want %d", s.PeerReadBytes, int64(len(theirs))*tc.resumeAt)
				}
				o.mu.Lock()
				ranges := slices.Clone(o.ranges)
				o.mu.Unlock()
				for _, idx := range theirs {
					want := [2]int64{idx*testChunk + tc.resumeAt, testChunk - tc.resumeAt}
					if !slices.Contains(ranges, want) {
						t.Errorf("chunk %d: no origin read of %v in %v", idx, want, ranges)
					}
				}
			}
			// Ranges inside peer-owned chunks, and the sendfile path.
			off := theirs[0]*testChunk + 17
			sameBytes(t, "mid-chunk range", readRange(t, a, o, id, off, testChunk+100, ReadOptions{}),
				o.data[off:off+testChunk+100])
			ref, err := a.Chunk(context.Background(), id, theirs[1], o.fetch, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, ref.Length)
			if _, err := ref.File.ReadAt(got, ref.Offset); err != nil {
				t.Fatal(err)
			}
			ref.Release()
			sameBytes(t, "chunk ref", got, chunkBytes(o, theirs[1]))
			r.settle()
			if a.Stats().Chunks != len(mine) {
				t.Fatal("a cached a chunk it does not own")
			}
		})
	}
}

// When the peer fails and the origin then refuses, the origin's error is
// what NewReader returns.
func TestPeerFallbackOriginError(t *testing.T) {
	r := newRegion(t, time.Minute, "a", "b")
	a := r.nodes["a"]
	o := newOrigin(6*testChunk, 74)
	id := r.object(o, "v")
	theirs := ownedBy(a, id, "b")
	if len(theirs) == 0 {
		t.Fatal("b owns nothing")
	}
	r.peers["a"].setHook(func(context.Context, string, ChunkKey, int64, int64) (io.ReadCloser, error) {
		return nil, errPeer
	})
	o.openErr = store.ErrPreconditionFailed
	_, err := a.NewReader(context.Background(), id, o.fetch, theirs[0]*testChunk, 10, ReadOptions{})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("NewReader: %v, want store.ErrPreconditionFailed", err)
	}
	if _, err := a.Chunk(context.Background(), id, theirs[0], o.fetch, ReadOptions{}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Chunk: %v, want store.ErrPreconditionFailed", err)
	}
	if s := a.Stats(); s.PeerFallbacks != 2 || s.FetchErrors != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A reader whose context ends while it waits for a peer gets the
// context's error, and no fallback is counted.
func TestPeerReadContextCancelled(t *testing.T) {
	r := newRegion(t, time.Minute, "a", "b")
	a := r.nodes["a"]
	o := newOrigin(4*testChunk, 75)
	id := r.object(o, "v")
	theirs := ownedBy(a, id, "b")
	if len(theirs) == 0 {
		t.Fatal("b owns nothing")
	}
	r.peers["a"].setHook(func(ctx context.Context, _ string, _ ChunkKey, _, _ int64) (io.ReadCloser, error) {
		return hangBody{ctx}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := a.NewReader(ctx, id, o.fetch, theirs[0]*testChunk, 10, ReadOptions{ReadAhead: -1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewReader: %v, want context.DeadlineExceeded", err)
	}
	if s := a.Stats(); s.PeerFallbacks != 0 || s.FetchErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
	if calls, _, _ := o.stats(); calls != 0 {
		t.Fatalf("%d origin fetches", calls)
	}
}

// A new ring moves ownership: a joining node takes chunks (and fills those
// no node had), chunks already cached where they were are served from
// there, and a node alone in its ring caches everything.
func TestSetMembersMovesOwnership(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b", "c")
	a, c := r.nodes["a"], r.nodes["c"]
	for _, n := range r.nodes {
		n.SetMembers([]string{"a", "b"})
	}
	o := newOrigin(24*testChunk, 76)
	ring2, ring3 := a.Ring(), NewRing([]string{"a", "b", "c"})
	// A version with chunks moving to c from both a and b.
	var id ObjectID
	for v := 0; v < 100 && id.Validator == ""; v++ {
		from := map[string]bool{}
		for idx := range int64(24) {
			k := ChunkKey{o.id(fmt.Sprint("v", v)), idx}
			if ring3.Owner(k) == "c" {
				from[ring2.Owner(k)] = true
			}
		}
		if from["a"] && from["b"] {
			id = r.object(o, fmt.Sprint("v", v))
		}
	}
	sameBytes(t, "read with a, b", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
	r.settle()
	if c.Stats().Chunks != 0 {
		t.Fatal("c cached chunks while outside the ring")
	}

	for _, n := range r.nodes {
		n.SetMembers([]string{"c", "b", "a"})
	}
	before, _, _ := o.stats()
	peerReads := a.Stats().PeerReads
	sameBytes(t, "read with a, b, c", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
	r.settle()
	moved, fromB := 0, 0
	var wantPeerReads int64
	for idx := range a.NumChunks(id.Size) {
		k := ChunkKey{id, idx}
		was, now := ring2.Owner(k), ring3.Owner(k)
		switch {
		case was == now:
			if !cached(r.nodes[now], id, idx) {
				t.Errorf("chunk %d: not on its owner %s", idx, now)
			}
			if now == "b" {
				wantPeerReads++
			}
		case now != "c":
			t.Fatalf("chunk %d moved from %s to %s when c joined", idx, was, now)
		case was == "a": // still cached on a: served from there
			moved++
			if !cached(a, id, idx) || cached(c, id, idx) {
				t.Errorf("chunk %d (a to c): on a %v, on c %v", idx, cached(a, id, idx), cached(c, id, idx))
			}
		default: // b to c: read through c, which fills it
			moved++
			fromB++
			wantPeerReads++
			if !cached(c, id, idx) || cached(a, id, idx) {
				t.Errorf("chunk %d (b to c): on c %v, on a %v", idx, cached(c, id, idx), cached(a, id, idx))
			}
		}
	}
	if moved == 0 || fromB == 0 {
		t.Fatalf("%d chunks moved to c, %d of them from b: pick another object", moved, fromB)
	}
	if after, _, _ := o.stats(); after-before != fromB {
		t.Fatalf("%d fetches, want %d (the chunks b handed to c)", after-before, fromB)
	}
	if got := a.Stats().PeerReads - peerReads; got != wantPeerReads {
		t.Fatalf("%d peer reads, want %d", got, wantPeerReads)
	}

	// a alone: every chunk is a's.
	a.SetMembers([]string{"a"})
	peerReads = a.Stats().PeerReads
	sameBytes(t, "read with a alone", readRange(t, a, o, id, 0, -1, ReadOptions{}), o.data)
	settle(t, a)
	if s := a.Stats(); s.Chunks != 24 || s.PeerReads != peerReads {
		t.Fatalf("a alone: %+v", s)
	}
	// A ring without a (a's view is behind): a caches everything too.
	a.SetMembers([]string{"b", "c"})
	if node, local := a.Owner(ChunkKey{id, 0}); !local || node != "a" {
		t.Fatalf("Owner with a outside the ring: %q, %v", node, local)
	}
}

// The owner serves a peer's read from its own cache and origin, even when
// its own ring names another owner, and never asks a peer.
func TestReadChunkServesLocally(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	b := r.nodes["b"]
	o := newOrigin(6*testChunk+50, 77)
	id := r.object(o, "v")
	aChunks := ownedBy(b, id, "a")
	if len(aChunks) == 0 {
		t.Fatal("a owns nothing")
	}
	idx := aChunks[0]
	k := ChunkKey{id, idx}
	rc, err := b.ReadChunk(context.Background(), k, o.fetch, 1000, -1, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "rest of a chunk", got, chunkBytes(o, idx)[1000:])
	settle(t, b)
	rc, err = b.ReadChunk(context.Background(), k, o.fetch, 100, 200, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "part of a chunk", got, o.data[idx*testChunk+100:idx*testChunk+300])
	if !cached(b, id, idx) || r.peers["b"].calls.Load() != 0 {
		t.Fatalf("cached on b %v; b asked peers %d times", cached(b, id, idx), r.peers["b"].calls.Load())
	}
	if calls, _, _ := o.stats(); calls != 1 {
		t.Fatalf("%d fetches, want 1 (the whole chunk)", calls)
	}
	last := ChunkKey{id, 6}
	for _, bad := range []struct {
		k      ChunkKey
		off, n int64
	}{{k, -1, 1}, {k, 0, testChunk + 1}, {k, testChunk + 1, -1}, {ChunkKey{id, 7}, 0, 1}, {last, 0, 51}} {
		if _, err := b.ReadChunk(context.Background(), bad.k, o.fetch, bad.off, bad.n, ReadOptions{}); !errors.Is(err, ErrInvalidRange) {
			t.Errorf("ReadChunk(%d, %d, %d): %v, want ErrInvalidRange", bad.k.Index, bad.off, bad.n, err)
		}
	}
}

// Warm fills a chunk this node owns and waits for it; a present chunk
// returns at once; a peer-owned chunk is filled on its owner.
func TestWarm(t *testing.T) {
	ctx := context.Background()
	c := openCache(t, testConfig(t.TempDir()))
	o := newOrigin(3*testChunk, 78)
	id := o.id("v")
	if err := c.Warm(ctx, id, 1, o.fetch, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls, _, _ := o.stats(); calls != 1 || !cached(c, id, 1) {
		t.Fatalf("%d fetches, cached %v", calls, cached(c, id, 1))
	}
	if err := c.Warm(ctx, id, 1, o.fetch, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls, _, _ := o.stats(); calls != 1 {
		t.Fatalf("Warm of a cached chunk fetched: %d", calls)
	}
	if err := c.Warm(ctx, id, 0, o.fetch, ReadOptions{Group: "tiny", GroupQuota: 100}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("Warm over quota: %v, want ErrNoRoom", err)
	}
	if err := c.Warm(ctx, id, 3, o.fetch, ReadOptions{}); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("Warm past the end: %v", err)
	}
	if err := c.Warm(ctx, o.id(""), 0, o.fetch, ReadOptions{}); !errors.Is(err, ErrNoValidator) {
		t.Fatalf("Warm without validator: %v", err)
	}
	o.openErr = store.ErrNotFound
	if err := c.Warm(ctx, id, 2, o.fetch, ReadOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Warm with origin error: %v", err)
	}

	r := newRegion(t, 2*time.Second, "a", "b")
	a, b := r.nodes["a"], r.nodes["b"]
	o2 := newOrigin(8*testChunk, 79)
	id2 := r.object(o2, "v")
	theirs := ownedBy(a, id2, "b")
	if len(theirs) < 2 {
		t.Fatalf("b owns %v", theirs)
	}
	if err := a.Warm(ctx, id2, theirs[0], o2.fetch, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, b)
	if cached(a, id2, theirs[0]) || !cached(b, id2, theirs[0]) {
		t.Fatalf("peer warm: on a %v, on b %v", cached(a, id2, theirs[0]), cached(b, id2, theirs[0]))
	}
	if err := a.Warm(ctx, id2, theirs[1], o2.fetch, ReadOptions{Local: true}); err != nil {
		t.Fatal(err)
	}
	if !cached(a, id2, theirs[1]) || cached(b, id2, theirs[1]) {
		t.Fatal("Local warm did not fill here")
	}
	r.peers["a"].setHook(func(context.Context, string, ChunkKey, int64, int64) (io.ReadCloser, error) {
		return nil, errPeer
	})
	if err := a.Warm(ctx, id2, theirs[0], o2.fetch, ReadOptions{}); !errors.Is(err, errPeer) {
		t.Fatalf("Warm with a failing peer: %v, want errPeer", err)
	}
	if err := a.Warm(ctx, id2, theirs[1], o2.fetch, ReadOptions{}); err != nil {
		t.Fatalf("Warm of a chunk cached here: %v", err) // no peer asked
	}
}

// A client reading with consecutive ranged GETs through one node gets the
// next chunks warmed on their owners.
func TestSequentialRangesWarmPeers(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	a := r.nodes["a"]
	o := newOrigin(12*testChunk, 80)
	id := r.object(o, "v")
	opts := ReadOptions{ReadAhead: 4}
	readRange(t, a, o, id, 0, testChunk, opts)
	readRange(t, a, o, id, testChunk, testChunk, opts) // sequential: chunks 2..5 are warmed
	err := wait.Until(context.Background(), 10*time.Second, func() bool {
		for idx := int64(2); idx <= 5; idx++ {
			node, _ := a.Owner(ChunkKey{id, idx})
			if !cached(r.nodes[node], id, idx) {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for idx := int64(2); idx <= 5; idx++ {
		if node, _ := a.Owner(ChunkKey{id, idx}); node == "b" && cached(a, id, idx) {
			t.Fatalf("chunk %d, b's, cached on a", idx)
		}
	}
	r.settle()
	before, _, _ := o.stats()
	sameBytes(t, "request 3", readRange(t, a, o, id, 2*testChunk, 4*testChunk, ReadOptions{ReadAhead: -1}),
		o.data[2*testChunk:6*testChunk])
	if after, _, _ := o.stats(); after != before {
		t.Fatalf("request 3 fetched %d chunks: the warmed ones were not used", after-before)
	}
}

// Many readers through three nodes, with peers that fail at random: every
// byte is right, each node caches only its own chunks, limits hold (run
// with -race).
func TestRegionConcurrentReadersWithFailingPeers(t *testing.T) {
	names := []string{"a", "b", "c"}
	r := newRegion(t, 50*time.Millisecond, names...)
	objs := make([]*origin, 3)
	ids := make([]ObjectID, 3)
	for i := range objs {
		objs[i] = newOrigin(9*testChunk+i*333, uint64(90+i))
		ids[i] = r.object(objs[i], fmt.Sprint("v", i))
		ids[i].Key = fmt.Sprint("key-", i)
	}
	var n atomic.Int64
	for _, name := range names {
		r.peers[name].setHook(func(ctx context.Context, node string, k ChunkKey, off, m int64) (io.ReadCloser, error) {
			switch n.Add(1) % 5 {
			case 0:
				return nil, errPeer
			case 1:
				rc, err := r.serve(ctx, node, k, off, m)
				if err != nil {
					return nil, err
				}
				return &cutBody{rc: rc, ctx: ctx, left: 777, err: errPeer}, nil
			}
			return r.serve(ctx, node, k, off, m)
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 24 {
		wg.Go(func() {
			c := r.nodes[names[i%3]]
			id := ids[(i+i/3)%3]
			o := r.origins[id.Validator]
			off := int64(i*1013) % id.Size
			rd, err := c.NewReader(context.Background(), id, o.fetch, off, -1, ReadOptions{Concurrency: 2})
			if err != nil {
				errs <- err
				return
			}
			defer rd.Close()
			got, err := io.ReadAll(rd)
			if err == nil && !equalBytes(got, o.data[off:]) {
				err = fmt.Errorf("reader %d: wrong bytes", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.settle()
	for _, name := range names {
		c := r.nodes[name]
		checkLimits(t, c)
		for _, id := range ids {
			for idx := range c.NumChunks(id.Size) {
				if node, _ := c.Owner(ChunkKey{id, idx}); node != name && cached(c, id, idx) {
					t.Errorf("%s cached chunk %d of %s, owned by %s", name, idx, id.Key, node)
				}
			}
		}
	}
}

func TestOpenRequiresPeersWithSelf(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Self = "a"
	if _, err := Open(cfg); err == nil {
		t.Fatal("Open with Self and no Peers succeeded")
	}
}

func TestPeerMetrics(t *testing.T) {
	r := newRegion(t, 2*time.Second, "a", "b")
	a := r.nodes["a"]
	o := newOrigin(8*testChunk, 81)
	id := r.object(o, "v")
	theirs := ownedBy(a, id, "b")
	readRange(t, a, o, id, 0, -1, ReadOptions{})
	r.peers["a"].setHook(func(context.Context, string, ChunkKey, int64, int64) (io.ReadCloser, error) {
		return nil, errPeer
	})
	readRange(t, a, o, id, theirs[0]*testChunk, 10, ReadOptions{})
	r.settle()
	a.SetPins(func(string, string, string) bool { return true })
	reg := prometheus.NewPedanticRegistry()
	if err := a.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`
# HELP fedgate_cache_peer_reads_total Reads of chunks from the peers that own them.
# TYPE fedgate_cache_peer_reads_total counter
fedgate_cache_peer_reads_total %d
# HELP fedgate_cache_peer_read_bytes_total Bytes read from peers.
# TYPE fedgate_cache_peer_read_bytes_total counter
fedgate_cache_peer_read_bytes_total %d
# HELP fedgate_cache_peer_fallbacks_total Reads of peer-owned chunks that fell back to the origin (the peer failed or was slow).
# TYPE fedgate_cache_peer_fallbacks_total counter
fedgate_cache_peer_fallbacks_total 1
# HELP fedgate_cache_pinned_bytes Bytes of pinned chunks (never evicted).
# TYPE fedgate_cache_pinned_bytes gauge
fedgate_cache_pinned_bytes %d
`, len(theirs)+1, len(theirs)*testChunk, (8-len(theirs))*testChunk)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fedgate_cache_peer_reads_total", "fedgate_cache_peer_read_bytes_total",
		"fedgate_cache_peer_fallbacks_total", "fedgate_cache_pinned_bytes"); err != nil {
		t.Fatal(err)
	}
}
