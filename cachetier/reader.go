package cachetier

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// NewReader returns a reader of [off, off+n) of id (n < 0: to the end).
// Cached chunks are read from their files; missing ones are fetched with
// fetch (one fetch per chunk however many readers want it), written to the
// cache and streamed on as they arrive. The reader keeps opts.ReadAhead
// chunks past the current one requested, at most opts.Concurrency of them
// fetching at once; closing it lets go of them (fetches nobody else wants
// are cancelled). Fetched bytes go to files, never to memory: a reader holds
// no buffer of its own.
//
// A missing chunk that a peer owns (see SetMembers; not with opts.Local) is
// streamed from the peer, the part of it the reader needs, and not kept
// here; read-ahead opens the next chunks' streams early, which has their
// owners fill them in parallel. When the peer fails or is slow (see
// Config.PeerTimeout) the rest of the chunk is read from fetch.
//
// NewReader waits until the origin (or, for a peer-owned chunk, the peer)
// has answered for the first chunk, so an origin error such as
// store.ErrPreconditionFailed (the object changed) or store.ErrNotFound is
// returned here, wrapped, before the caller has sent anything. It also returns ErrNoValidator, ErrInvalidRange, ErrClosed and
// ctx's error. Later fetch errors, and a fetch that delivers short
// (io.ErrUnexpectedEOF), are returned by Read after the bytes that arrived:
// a reader never ends early with io.EOF. The reader is not safe for
// concurrent use; Read after Close returns ErrClosed.
func (c *Cache) NewReader(ctx context.Context, id ObjectID, fetch Fetcher, off, n int64, opts ReadOptions) (io.ReadCloser, error) {
	return c.newReader(ctx, id, fetch, off, n, opts, true)
}

// newReader is NewReader; track says whether the read counts for the
// object's sequential pattern (a client's read does, a peer's does not).
func (c *Cache) newReader(ctx context.Context, id ObjectID, fetch Fetcher, off, n int64, opts ReadOptions, track bool) (io.ReadCloser, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if n < 0 {
		n = id.Size - off
	}
	if off < 0 || off > id.Size || n < 0 || n > id.Size-off {
		return nil, fmt.Errorf("%w: %d bytes at %d of a %d-byte object", ErrInvalidRange, n, off, id.Size)
	}
	r := &reader{c: c, ctx: ctx, id: id, fetch: fetch, opts: opts.withDefaults(), pos: off, end: off + n}
	if n == 0 {
		return r, nil
	}
	r.next, r.last = off/c.cfg.ChunkSize, (off+n-1)/c.cfg.ChunkSize
	if err := r.fillWindow(); err != nil {
		return nil, err
	}
	if track && c.sequential(id, off, off+n) && r.opts.ReadAhead > 0 {
		c.prefetch(id, fetch, r.last+1, min(r.last+int64(r.opts.ReadAhead), c.NumChunks(id.Size)-1), &r.opts)
	}
	if s := r.win[0].peer; s != nil {
		select {
		case <-s.ready:
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		}
		if s.err != nil {
			r.Close()
			return nil, s.err
		}
	}
	if fl := r.win[0].fl; fl != nil {
		select {
		case <-fl.opened:
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		}
		if fl.openErr != nil {
			r.Close()
			k := fl.id.obj
			return nil, fmt.Errorf("cachetier: fetch %s/%s chunk %d: %w", k.store, k.key, fl.id.idx, fl.openErr)
		}
	}
	return r, nil
}

// sequential records that a reader of [off, end) of id started and reports
// whether it starts where the object's previous reader ended.
func (c *Cache) sequential(id ObjectID, off, end int64) bool {
	k := objKey{id.Store, id.Key, id.Validator}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.seqEnd[k]
	if len(c.seqEnd) >= 4096 { // a bound, not an LRU: patterns re-form in one request
		clear(c.seqEnd)
	}
	c.seqEnd[k] = end
	return ok && off > 0 && prev == off
}

// prefetch fills chunks [from, to] of id for readers to come: each fill is
// held until it finishes, however long the reader that asked lives. A
// chunk a peer owns is warmed on the peer instead.
func (c *Cache) prefetch(id ObjectID, fetch Fetcher, from, to int64, opts *ReadOptions) {
	local := *opts
	local.Local = true
	for idx := from; idx <= to; idx++ {
		if node := c.peerOwner(ChunkKey{id, idx}, opts.Local); node != "" {
			c.warmPeerAsync(node, ChunkKey{id, idx})
			continue
		}
		ck := idOf(id, idx)
		c.mu.Lock()
		have := c.inflight[ck] != nil || c.lookupLocked(ck) != nil
		c.mu.Unlock()
		if have {
			continue
		}
		h, err := c.acquire(c.ctx, id, idx, fetch, &local, 0, c.chunkLen(id.Size, idx))
		if err != nil {
			return
		}
		if !h.pending() {
			h.release()
			continue
		}
		go func() {
			<-h.fl.finished
			h.release()
		}()
	}
}

type reader struct {
	c     *Cache
	ctx   context.Context
	id    ObjectID
	fetch Fetcher
	opts  ReadOptions

	pos, end   int64     // absolute offsets
	win        []*handle // consecutive chunks from the one holding pos
	next, last int64     // next chunk to acquire; last chunk of the range
	err        error     // sticky
	closed     bool
}

// fillWindow acquires the chunk at pos if the window is empty (its error is
// returned) and read-ahead chunks while the window is short of ReadAhead and
// fewer than Concurrency of its chunks are being fetched. Read-ahead is best
// effort: a chunk it fails to acquire is acquired again when the reader
// reaches it.
func (r *reader) fillWindow() error {
	fetching := 0
	for _, h := range r.win {
		if h.pending() {
			fetching++
		}
	}
	for r.next <= r.last {
		if len(r.win) > 0 && (len(r.win) > r.opts.ReadAhead || fetching >= r.opts.Concurrency) {
			break
		}
		cs := r.c.cfg.ChunkSize
		base := r.next * cs
		lo, hi := max(0, r.pos-base), min(r.c.chunkLen(r.id.Size, r.next), r.end-base)
		h, err := r.c.acquire(r.ctx, r.id, r.next, r.fetch, &r.opts, lo, hi)
		if err != nil {
			if len(r.win) == 0 {
				return err
			}
			return nil
		}
		r.win = append(r.win, h)
		r.next++
		if h.pending() {
			fetching++
		}
	}
	return nil
}

func (r *reader) Read(p []byte) (int, error) {
	switch {
	case r.closed:
		return 0, ErrClosed
	case r.err != nil:
		return 0, r.err
	case r.pos >= r.end:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	cs := r.c.cfg.ChunkSize
	idx := r.pos / cs
	for len(r.win) > 0 && r.win[0].idx < idx {
		r.win[0].release()
		r.win = slices.Delete(r.win, 0, 1)
	}
	if err := r.fillWindow(); err != nil {
		r.err = err
		return 0, err
	}
	if rem := r.end - r.pos; int64(len(p)) > rem {
		p = p[:rem]
	}
	h := r.win[0]
	n, err := h.readAt(r.ctx, p, r.pos-idx*cs)
	r.pos += int64(n)
	if h.hit {
		r.c.st.cacheBytes.Add(int64(n))
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

// Close releases the reader's chunks; it always returns nil.
func (r *reader) Close() error {
	if !r.closed {
		r.closed = true
		for _, h := range r.win {
			h.release()
		}
		r.win = nil
	}
	return nil
}

// Chunk returns chunk idx of id as a region of a file, fetching the whole
// chunk first on a miss (shared with any other reader of it). A missing
// chunk a peer owns (not with opts.Local) is read from the peer (or, when
// it fails, the origin) into a private unlinked file in Dir/tmp that is not
// part of the cache (nor of its capacity). The caller must call Release. It
// returns ErrNoValidator, ErrInvalidRange (idx outside the object; a
// zero-length object has no chunks), ErrClosed, ctx's error, or the fetch
// error, wrapped.
func (c *Cache) Chunk(ctx context.Context, id ObjectID, idx int64, fetch Fetcher, opts ReadOptions) (ChunkRef, error) {
	if err := checkID(id); err != nil {
		return ChunkRef{}, err
	}
	if idx < 0 || idx >= c.NumChunks(id.Size) {
		return ChunkRef{}, fmt.Errorf("%w: chunk %d of a %d-byte object", ErrInvalidRange, idx, id.Size)
	}
	opts = opts.withDefaults()
	h, err := c.acquire(ctx, id, idx, fetch, &opts, 0, c.chunkLen(id.Size, idx))
	if err != nil {
		return ChunkRef{}, err
	}
	defer h.release()
	if h.hit { // a private descriptor: h's may be shared (openFiles)
		f, err := reopenFile(h.file.f)
		if err != nil {
			return ChunkRef{}, err
		}
		c.st.cacheBytes.Add(h.length)
		return makeRef(f, h.length, func() { f.Close() }), nil
	}
	if h.peer != nil {
		return c.peerChunkRef(ctx, h)
	}
	if err := waitFill(ctx, h.fl); err != nil {
		return ChunkRef{}, err
	}
	f, err := c.reopen(h)
	if err != nil {
		return ChunkRef{}, err
	}
	return makeRef(f, h.length, func() { f.Close() }), nil
}

// reopenFile opens a new read-only descriptor of the file f has open,
// through /proc/self/fd (Linux): it works after the file was renamed or
// unlinked.
func reopenFile(f *os.File) (*os.File, error) {
	nf, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return nil, fmt.Errorf("cachetier: reopen chunk: %w", err)
	}
	return nf, nil
}

func makeRef(f *os.File, length int64, release func()) ChunkRef {
	var once sync.Once
	return ChunkRef{File: f, Offset: 0, Length: length, Release: func() { once.Do(release) }}
}

// reopen opens a private read-only descriptor of a finished fill's file:
// through /proc/self/fd, which works after the file was renamed or
// unlinked (Linux), else by its chunk name if the same file is there.
func (c *Cache) reopen(h *handle) (*os.File, error) {
	f, err := reopenFile(h.file.f)
	if err == nil {
		return f, nil
	}
	f, err2 := os.Open(c.chunkPath(chunkName(h.fl.id)))
	if err2 == nil {
		want, err3 := h.file.f.Stat()
		got, err4 := f.Stat()
		if err3 == nil && err4 == nil && os.SameFile(want, got) {
			return f, nil
		}
		f.Close()
	}
	return nil, err
}

// Prime starts filling chunk idx of id here with fetch, unless the chunk
// is cached or being filled here already, and reports whether it did. It
// is for a caller that holds the chunk's bytes already (a metadata request
// that brought a small object's bytes with it): fetch returns them, and a
// reader that comes for the chunk joins the fill instead of asking the
// origin again. Only a chunk this node owns is primed (or any, with
// opts.Local, or on a node outside a ring): a chunk the ring gives to a
// peer is filled on that peer, where the region's other nodes look for
// it, so Prime returns false for it. The fill is kept until it ends;
// nobody needs to wait for it.
//
// When Prime returns true, fetch is called exactly once: with the fill's
// context, or, when the fill could not start, with an ended context, so
// that what it holds is let go. When it returns false, fetch is never
// called.
func (c *Cache) Prime(id ObjectID, idx int64, fetch Fetcher, opts ReadOptions) bool {
	if checkID(id) != nil || idx < 0 || idx >= c.NumChunks(id.Size) {
		return false
	}
	if c.peerOwner(ChunkKey{id, idx}, opts.Local) != "" {
		return false
	}
	opts = opts.withDefaults()
	ck := idOf(id, idx)
	length := c.chunkLen(id.Size, idx)
	var called atomic.Bool
	once := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		if called.Swap(true) {
			return nil, fmt.Errorf("cachetier: primed chunk fetched twice")
		}
		return fetch(ctx, off, n)
	}
	c.mu.Lock()
	if c.closed || c.inflight[ck] != nil {
		c.mu.Unlock()
		return false
	}
	if e := c.lookupLocked(ck); e != nil {
		if e.length == length {
			c.mu.Unlock()
			return false
		}
		c.removeLocked(e, true) // recorded for another size: not this version
	}
	fl := c.startFillLocked(ck, id, length, c.groupOf(&opts), once)
	c.mu.Unlock()
	h := &handle{c: c, idx: idx, length: length, file: fl.file, fl: fl}
	go func() {
		<-fl.finished
		h.release()
		if !called.Load() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if rc, err := once(ctx, 0, length); err == nil {
				rc.Close()
			}
		}
	}()
	return true
}
