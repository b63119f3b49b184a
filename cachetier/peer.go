package cachetier

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// The region's cache is the sum of its nodes' caches: every chunk has one
// owner (Ring.Owner) and only the owner keeps it. A reader of a chunk that
// a peer owns streams it from the peer (Config.Peers), one stream per
// reader and chunk, through the reader's own buffer: nothing of the chunk
// is kept on this node. When the peer fails, gives no first byte within
// PeerTimeout, stalls for as long later, or ends early, the reader reads
// the rest of the chunk from the origin, from the offset the peer reached.

const (
	// peekSize bounds the first bytes a peer stream reads ahead of its
	// reader (to learn that the peer answers).
	peekSize = 4 << 10
	// peerSkipFactor times PeerTimeout is how long a peer that timed out
	// is skipped (its chunks are read from the origin).
	peerSkipFactor = 5
	// peerWarmTimeout bounds a read-ahead warm of a chunk on its owner,
	// which waits for the owner's whole fill.
	peerWarmTimeout = time.Minute
)

// SetMembers installs the ring of the region's nodes (ids as in
// Config.Self), replacing the previous one at once: call it whenever the
// region's membership changes. Chunks this node no longer owns stay cached
// here, served while they last but first to be evicted; pins are applied
// again (see SetPins).
func (c *Cache) SetMembers(members []string) {
	c.ring.Store(NewRing(members))
	c.Repin()
}

// Ring returns the ring installed by SetMembers (nil before the first).
func (c *Cache) Ring() *Ring { return c.ring.Load() }

// Owner returns the node that owns chunk k, and whether it is this node:
// the one that caches it. A node on its own (Config.Self ""), or one whose
// ring is empty or lacks it, owns every chunk.
func (c *Cache) Owner(k ChunkKey) (node string, local bool) {
	if node = c.peerOwner(k, false); node != "" {
		return node, false
	}
	return c.cfg.Self, true
}

// peerOwner returns the peer that owns k, or "" when k is this node's to
// cache: when local, with no Self, or when the ring is empty or lacks Self.
func (c *Cache) peerOwner(k ChunkKey, local bool) string {
	if local || c.cfg.Self == "" {
		return ""
	}
	r := c.ring.Load()
	if !r.Contains(c.cfg.Self) {
		return ""
	}
	if owner := r.Owner(k); owner != c.cfg.Self {
		return owner
	}
	return ""
}

// Alone reports whether this node owns every chunk: it is outside a ring,
// or the only member of its ring. Prime fills only chunks this node owns,
// so a caller fetching bytes in order to prime asks this first.
func (c *Cache) Alone() bool {
	if c.cfg.Self == "" {
		return true
	}
	r := c.ring.Load()
	return !r.Contains(c.cfg.Self) || len(r.members) == 1
}

// peerAvailable reports whether node may be asked: it has not timed out
// within the last peerSkipFactor × PeerTimeout.
func (c *Cache) peerAvailable(node string) bool {
	c.peerMu.Lock()
	defer c.peerMu.Unlock()
	until, ok := c.peerDown[node]
	if !ok {
		return true
	}
	if time.Now().Before(until) {
		return false
	}
	delete(c.peerDown, node)
	return true
}

// peerTimedOut skips node for a while.
func (c *Cache) peerTimedOut(node string) {
	c.peerMu.Lock()
	_, was := c.peerDown[node]
	c.peerDown[node] = time.Now().Add(peerSkipFactor * c.cfg.PeerTimeout)
	c.peerMu.Unlock()
	if !was {
		c.log.Warn("peer timed out: reading its chunks from the origin for a while",
			"peer", node, "timeout", c.cfg.PeerTimeout, "skip_for", peerSkipFactor*c.cfg.PeerTimeout)
	}
}

// peerStream reads [pos, end) of a chunk owned by a peer: from the peer,
// then from the origin for whatever the peer did not deliver. It belongs
// to one reader and holds at most peekSize bytes.
type peerStream struct {
	c      *Cache
	key    ChunkKey
	node   string
	fetch  Fetcher
	base   int64 // the chunk's offset in the object
	pos    int64 // next byte to deliver, in the chunk
	end    int64
	ctx    context.Context // ends at close
	cancel context.CancelFunc

	ready chan struct{} // closed when open is done with the fields below
	// Set by open before ready; then the reader's.
	src      io.ReadCloser // the peer's stream or, after a fallback, the origin's
	fromPeer bool
	pcancel  context.CancelFunc // ends the peer's stream
	stall    *time.Timer        // fires pcancel when the peer stalls
	stalled  atomic.Bool
	peek     []byte // the peer's first bytes, not yet delivered
	err      error  // sticky
}

// openPeer starts reading [lo, hi) of chunk k from node; the stream ends
// with ctx or close.
func (c *Cache) openPeer(ctx context.Context, node string, k ChunkKey, fetch Fetcher, lo, hi int64) *peerStream {
	s := &peerStream{c: c, key: k, node: node, fetch: fetch, base: k.Index * c.cfg.ChunkSize,
		pos: lo, end: hi, ready: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(ctx)
	go s.open()
	return s
}

// open asks the peer and waits for its first bytes, for at most
// PeerTimeout; failing that it opens the origin instead.
func (s *peerStream) open() {
	defer close(s.ready)
	c := s.c
	if c.peerAvailable(s.node) {
		pctx, pcancel := context.WithCancel(s.ctx)
		s.stall = time.AfterFunc(c.cfg.PeerTimeout, func() { s.stalled.Store(true); pcancel() })
		rc, peek, err := s.firstBytes(pctx)
		s.stall.Stop()
		if err == nil {
			s.src, s.fromPeer, s.pcancel, s.peek = rc, true, pcancel, peek
			c.st.peerBytes.Add(int64(len(peek)))
			return
		}
		pcancel()
		if s.ctx.Err() != nil {
			s.err = s.ctx.Err()
			return
		}
		s.failed(err)
	} else {
		c.st.peerFallback.Add(1)
	}
	s.err = s.openOrigin()
}

func (s *peerStream) firstBytes(ctx context.Context) (io.ReadCloser, []byte, error) {
	s.c.st.peerReads.Add(1)
	rc, err := s.c.cfg.Peers.ReadChunk(ctx, s.node, s.key, s.pos, s.end-s.pos)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, min(peekSize, s.end-s.pos))
	for range 100 {
		n, err := rc.Read(buf)
		if n > 0 {
			return rc, buf[:n], nil
		}
		if err != nil {
			rc.Close()
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
	}
	rc.Close()
	return nil, nil, io.ErrNoProgress
}

// failed notes that the peer failed with err (the stream is to fall back).
func (s *peerStream) failed(err error) {
	s.c.st.peerFallback.Add(1)
	if s.stalled.Load() {
		s.c.peerTimedOut(s.node)
	}
	s.c.log.Debug("peer read failed: reading from the origin", "peer", s.node,
		"store", s.key.Store, "key", s.key.Key, "chunk", s.key.Index, "offset", s.pos, "err", err)
}

// openOrigin reads the rest of the part from the origin.
func (s *peerStream) openOrigin() error {
	s.c.st.fetches.Add(1)
	rc, err := s.fetch(s.ctx, s.base+s.pos, s.end-s.pos)
	if err != nil {
		s.c.st.fetchErrors.Add(1)
		return s.fetchErr(err)
	}
	s.src, s.fromPeer = rc, false
	return nil
}

func (s *peerStream) fetchErr(err error) error {
	return fmt.Errorf("cachetier: fetch %s/%s chunk %d: %w", s.key.Store, s.key.Key, s.key.Index, err)
}

func (s *peerStream) pending() bool { return s.pos < s.end }

// read reads at off (in the chunk), which must be where the stream is.
func (s *peerStream) read(ctx context.Context, p []byte, off int64) (int, error) {
	if off != s.pos {
		return 0, fmt.Errorf("cachetier: peer stream at %d read at %d", s.pos, off)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if s.err != nil {
		return 0, s.err
	}
	if int64(len(p)) > s.end-s.pos {
		p = p[:s.end-s.pos]
	}
	if len(p) == 0 {
		return 0, nil
	}
	if len(s.peek) > 0 {
		n := copy(p, s.peek)
		s.peek = s.peek[n:]
		return s.advance(n), nil
	}
	for empty := 0; ; {
		var n int
		var err error
		if s.fromPeer {
			s.stall.Reset(s.c.cfg.PeerTimeout)
			n, err = s.src.Read(p)
			s.stall.Stop()
			s.c.st.peerBytes.Add(int64(n))
		} else {
			n, err = s.src.Read(p)
			s.c.st.originBytes.Add(int64(n))
		}
		if s.advance(n); s.pos == s.end {
			return n, nil
		}
		if err == nil {
			if n > 0 {
				return n, nil
			}
			if empty++; empty < 100 {
				continue
			}
			err = io.ErrNoProgress
		}
		switch {
		case s.ctx.Err() != nil:
			s.err = s.ctx.Err()
		case s.fromPeer:
			// The peer broke off or stalled: the origin delivers the rest.
			s.failed(err)
			s.closeSrc()
			if s.err = s.openOrigin(); s.err == nil && n == 0 {
				empty = 0
				continue
			}
		default:
			if err == io.EOF {
				err = fmt.Errorf("origin sent %d bytes short: %w", s.end-s.pos, io.ErrUnexpectedEOF)
			}
			s.c.st.fetchErrors.Add(1)
			s.err = s.fetchErr(err)
		}
		if n > 0 {
			return n, nil // the error, if any, comes with the next read
		}
		return 0, s.err
	}
}

// advance moves the stream n bytes on and lets go of its source at the end.
func (s *peerStream) advance(n int) int {
	s.pos += int64(n)
	if s.pos == s.end {
		s.closeSrc()
	}
	return n
}

func (s *peerStream) closeSrc() {
	if s.src != nil {
		s.src.Close()
		s.src = nil
	}
	if s.pcancel != nil {
		s.pcancel()
	}
}

// close ends the stream, now or, when open is still waiting for the peer,
// as soon as open gives up.
func (s *peerStream) close() {
	s.cancel()
	select {
	case <-s.ready:
		s.closeSrc()
	default:
		go func() {
			<-s.ready
			s.closeSrc()
		}()
	}
}

// peerChunkRef reads the whole chunk h streams into a private, unlinked
// file in Dir/tmp (not counted in the capacity: it is gone at Release).
func (c *Cache) peerChunkRef(ctx context.Context, h *handle) (ChunkRef, error) {
	f, err := os.CreateTemp(c.tmpDir, "peer-*")
	if err != nil {
		return ChunkRef{}, fmt.Errorf("cachetier: create chunk file: %w", err)
	}
	os.Remove(f.Name()) // the descriptor keeps it
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	s := h.peer
	for s.pending() {
		n, err := s.read(ctx, *bp, s.pos)
		if n > 0 {
			if _, werr := f.Write((*bp)[:n]); werr != nil {
				err = fmt.Errorf("cachetier: write chunk file: %w", werr)
			}
		}
		if err != nil {
			f.Close()
			return ChunkRef{}, err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return ChunkRef{}, fmt.Errorf("cachetier: chunk file: %w", err)
	}
	return makeRef(f, h.length, func() { f.Close() }), nil
}

// warmPeer makes node fill chunk k by reading its last byte.
func (c *Cache) warmPeer(ctx context.Context, node string, k ChunkKey) error {
	if !c.peerAvailable(node) {
		return fmt.Errorf("cachetier: warm %s/%s chunk %d: peer %s timed out a moment ago", k.Store, k.Key, k.Index, node)
	}
	c.st.peerReads.Add(1)
	rc, err := c.cfg.Peers.ReadChunk(ctx, node, k, c.chunkLen(k.Size, k.Index)-1, 1)
	if err == nil {
		var b [1]byte
		var n int
		n, err = io.ReadFull(rc, b[:])
		rc.Close()
		c.st.peerBytes.Add(int64(n))
	}
	if err != nil {
		return fmt.Errorf("cachetier: warm %s/%s chunk %d on %s: %w", k.Store, k.Key, k.Index, node, err)
	}
	return nil
}

// warmPeerAsync warms a peer-owned chunk on its owner for readers to come,
// unless it is being warmed already.
func (c *Cache) warmPeerAsync(node string, k ChunkKey) {
	ck := idOf(k.ObjectID, k.Index)
	c.mu.Lock()
	if _, busy := c.warming[ck]; busy || c.closed || c.lookupLocked(ck) != nil {
		c.mu.Unlock()
		return
	}
	c.warming[ck] = struct{}{}
	c.fills.Add(1) // before Close's Wait: closed is false under mu
	c.mu.Unlock()
	go func() {
		defer c.fills.Done()
		ctx, cancel := context.WithTimeout(c.ctx, peerWarmTimeout)
		err := c.warmPeer(ctx, node, k)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.log.Debug("read-ahead on a peer failed", "err", err)
		}
		c.mu.Lock()
		delete(c.warming, ck)
		c.mu.Unlock()
	}()
}

// Warm makes sure chunk idx of id is cached in the region, for preload
// jobs: when this node owns it (or opts.Local) it fills it here from fetch
// and waits until the chunk is complete; when a peer owns it, the peer is
// asked to fill it (by reading its last byte), and no origin fallback is
// tried. A chunk already cached here returns at once. It returns
// ErrNoValidator, ErrInvalidRange, ErrClosed, ctx's error, ErrNoRoom (the
// chunk was fetched but there was no room to keep it), or the fetch's or
// the peer's error, wrapped.
func (c *Cache) Warm(ctx context.Context, id ObjectID, idx int64, fetch Fetcher, opts ReadOptions) error {
	if err := checkID(id); err != nil {
		return err
	}
	if idx < 0 || idx >= c.NumChunks(id.Size) {
		return fmt.Errorf("%w: chunk %d of a %d-byte object", ErrInvalidRange, idx, id.Size)
	}
	opts = opts.withDefaults()
	ck := idOf(id, idx)
	length := c.chunkLen(id.Size, idx)
	node := c.peerOwner(ChunkKey{id, idx}, opts.Local)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if e := c.lookupLocked(ck); e != nil && e.length == length {
		if node == "" {
			c.groupOf(&opts)
			c.touchLocked(e)
		}
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if node != "" {
		return c.warmPeer(ctx, node, ChunkKey{id, idx})
	}
	opts.Local = true // decided: whatever the ring says by now
	h, err := c.acquire(ctx, id, idx, fetch, &opts, 0, length)
	if err != nil {
		return err
	}
	defer h.release()
	if h.fl == nil {
		return nil // cached meanwhile
	}
	if err := waitFill(ctx, h.fl); err != nil {
		return err
	}
	c.mu.Lock()
	kept := h.fl.reserved
	c.mu.Unlock()
	if !kept {
		return fmt.Errorf("%w: %s/%s chunk %d (group %q)", ErrNoRoom, id.Store, id.Key, idx, opts.Group)
	}
	return nil
}

// ReadChunk returns a reader of [off, off+n) of chunk k (n < 0: to the
// chunk's end) through this node's cache alone: a miss fills the whole
// chunk here from fetch, whatever the ring says, and no peer is asked. It
// is what the region's internal API serves a peer's PeerClient.ReadChunk
// with; errors are NewReader's. opts.Group and GroupQuota are the group the
// chunk is accounted to here (the bucket of k's store and key: the peer
// does not send it); ReadAhead and Local are ignored. For the sendfile
// path, Chunk with ReadOptions.Local gives the whole chunk as a file region
// instead.
func (c *Cache) ReadChunk(ctx context.Context, k ChunkKey, fetch Fetcher, off, n int64, opts ReadOptions) (io.ReadCloser, error) {
	if err := checkID(k.ObjectID); err != nil {
		return nil, err
	}
	if k.Index < 0 || k.Index >= c.NumChunks(k.Size) {
		return nil, fmt.Errorf("%w: chunk %d of a %d-byte object", ErrInvalidRange, k.Index, k.Size)
	}
	length := c.chunkLen(k.Size, k.Index)
	if n < 0 {
		n = length - off
	}
	if off < 0 || n < 0 || off > length || n > length-off {
		return nil, fmt.Errorf("%w: %d bytes at %d of a %d-byte chunk", ErrInvalidRange, n, off, length)
	}
	opts.Local, opts.ReadAhead = true, -1
	return c.newReader(ctx, k.ObjectID, fetch, k.Index*c.cfg.ChunkSize+off, n, opts, false)
}

// waitFill waits until fl is done and returns its error.
func waitFill(ctx context.Context, fl *fill) error {
	for {
		_, done, changed, err := fl.state()
		if done {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
