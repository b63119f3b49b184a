package cachetier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// A fill fetches one chunk into a temporary file in Dir/tmp. Concurrent
// misses for the chunk join the fill in progress (singleflight, as in
// groupcache, but the result is a file, not a value): every joiner reads
// the bytes from the temporary file as they land, so nothing waits for the
// whole chunk and nothing holds it in memory. When the fetch has delivered
// exactly the chunk's length, the file is renamed to its chunk name
// (outside Cache.mu: see fill.committing), and only then does the index know
// it. The file is not fsynced here: its index record is written only after
// the next sync of the cache's filesystem (see flush), so a record never
// names bytes that might not be on disk. On any error the file is removed and the joiners get the
// error after the bytes that did arrive: a partial chunk is never visible,
// and never silently short.
//
// A fill's context is the Cache's, not a reader's: one reader giving up does
// not fail the others. When the last interested reader lets go of an
// unfinished fill, the fill is abandoned (removed from the singleflight map,
// so the next reader starts afresh) and cancelled.
type fill struct {
	id      chunkID
	objSize int64
	off     int64
	length  int64
	group   *group
	ctx     context.Context
	cancel  context.CancelFunc

	sum uint32 // CRC-32C of the bytes written so far (runFill's goroutine)

	// Guarded by Cache.mu.
	interest  int  // handles that still want the chunk
	reserved  bool // its bytes are counted in the index's used
	abandoned bool // never commit
	// committing: its file is being renamed onto its chunk name, outside
	// the lock; removeLocked leaves that name's file alone meanwhile (the
	// rename replaces it).
	committing bool

	started  chan struct{} // file.f or startErr is set
	opened   chan struct{} // the fetch returned; openErr is set
	file     *chunkFile    // its f is nil until started
	startErr error
	openErr  error
	done     atomic.Bool
	finished chan struct{} // closed when done

	mu       sync.Mutex
	progress int64 // bytes in file
	err      error // set when done
	changed  chan struct{}
}

// state returns what readers need to know, with a channel that is closed at
// the next change.
func (fl *fill) state() (progress int64, done bool, changed <-chan struct{}, err error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.progress, fl.done.Load(), fl.changed, fl.err
}

func (fl *fill) advance(progress int64) {
	fl.mu.Lock()
	fl.progress = progress
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
}

// chunkFile is an open chunk file shared by the handles that read it with
// ReadAt; the last unref closes it.
type chunkFile struct {
	f    *os.File
	refs atomic.Int32
	elem *list.Element // in Cache.open's LRU list while the cache keeps it (guarded by Cache.mu)
}

func newChunkFile(f *os.File) *chunkFile {
	cf := &chunkFile{f: f}
	cf.refs.Store(1)
	return cf
}

func (cf *chunkFile) ref() { cf.refs.Add(1) }

func (cf *chunkFile) unref() {
	if cf.refs.Add(-1) == 0 && cf.f != nil {
		cf.f.Close()
	}
}

// handle is one reader's hold on one chunk: a cached chunk's file (hit), a
// fill in progress, read as its bytes arrive, or a stream of part of a
// chunk a peer owns.
type handle struct {
	c      *Cache
	idx    int64
	length int64
	file   *chunkFile
	fl     *fill // the fill this handle holds interest in; nil for a hit
	peer   *peerStream
	hit    bool
	// settled: fl finished without error, so the file holds the whole chunk.
	settled bool
}

func (h *handle) pending() bool {
	if h.peer != nil {
		return h.peer.pending()
	}
	return h.fl != nil && !h.fl.done.Load()
}

func (h *handle) release() {
	if h.peer != nil {
		h.peer.close()
	}
	if h.fl != nil {
		h.c.dropInterest(h.fl)
	}
	if h.file != nil {
		h.file.unref()
	}
}

// readAt reads from the chunk at off, waiting for a fill to deliver the
// bytes. It returns the fill's error once the bytes before it are read. A
// peer's stream is read in order only: off must be where the last read
// ended.
func (h *handle) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if h.peer != nil {
		return h.peer.read(ctx, p, off)
	}
	if int64(len(p)) > h.length-off {
		p = p[:h.length-off]
	}
	if h.fl != nil && !h.settled {
		for {
			progress, done, changed, err := h.fl.state()
			if done && err == nil {
				h.settled = true
				break
			}
			if off < progress {
				p = p[:min(int64(len(p)), progress-off)]
				break
			}
			if done {
				return 0, err
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	n, err := h.file.f.ReadAt(p, off)
	if n == len(p) {
		return n, nil
	}
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF // the chunk file is shorter than its index record
	}
	return n, fmt.Errorf("cachetier: read chunk: %w", err)
}

// acquire returns a handle on chunk idx of id: a hit, a fill it joined or
// started, or, for a chunk a peer owns (unless opts.Local), a stream of
// [lo, hi) of the chunk from the peer. A chunk cached here or being filled
// here is read here whoever owns it now. It returns ErrClosed, ctx's error,
// or an error creating the fill's file; fetch errors come later, through
// the handle.
func (c *Cache) acquire(ctx context.Context, id ObjectID, idx int64, fetch Fetcher, opts *ReadOptions, lo, hi int64) (*handle, error) {
	ck := idOf(id, idx)
	length := c.chunkLen(id.Size, idx)
	node := c.peerOwner(ChunkKey{id, idx}, opts.Local)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		g := c.groupOf(opts)
		if e := c.lookupLocked(ck); e != nil {
			if e.length == length {
				if e.unverified {
					// Loaded at Open, not checked yet: check it now,
					// then look again (it is gone if it was bad).
					c.mu.Unlock()
					c.verifyEntry(e)
					continue
				}
				if node == "" {
					c.touchLocked(e)
				} else {
					c.demoteLocked(e) // the ring moved it: serve it while it lasts
				}
				if cf := c.openLocked(e); cf != nil {
					c.mu.Unlock()
					c.st.hits.Add(1)
					return &handle{c: c, idx: idx, length: length, file: cf, hit: true}, nil
				}
				path := c.chunkPath(e.name())
				c.mu.Unlock()
				f, err := os.Open(path)
				if errors.Is(err, fs.ErrNotExist) {
					c.forget(e)
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("cachetier: open chunk: %w", err)
				}
				c.mu.Lock()
				cf := c.keepOpenLocked(e, f)
				c.mu.Unlock()
				c.st.hits.Add(1)
				return &handle{c: c, idx: idx, length: length, file: cf, hit: true}, nil
			}
			c.removeLocked(e, true) // recorded for another size: not this version
		}
		fl := c.inflight[ck]
		if fl == nil && node != "" {
			c.mu.Unlock()
			s := c.openPeer(ctx, node, ChunkKey{id, idx}, fetch, lo, hi)
			return &handle{c: c, idx: idx, length: length, peer: s}, nil
		}
		if fl != nil {
			fl.interest++
			fl.file.ref() // while the fill holds its own reference
		} else {
			fl = c.startFillLocked(ck, id, length, g, fetch)
		}
		c.mu.Unlock()
		c.st.misses.Add(1)
		h := &handle{c: c, idx: idx, length: length, file: fl.file, fl: fl}
		select {
		case <-fl.started:
		case <-ctx.Done():
			h.release()
			return nil, ctx.Err()
		}
		if fl.startErr != nil {
			h.release()
			return nil, fl.startErr
		}
		return h, nil
	}
}

func (c *Cache) startFillLocked(ck chunkID, id ObjectID, length int64, g *group, fetch Fetcher) *fill {
	fl := &fill{
		id: ck, objSize: id.Size, off: ck.idx * c.cfg.ChunkSize, length: length, group: g,
		interest: 1,
		file:     &chunkFile{}, // f is set by runFill before started is closed
		started:  make(chan struct{}),
		opened:   make(chan struct{}),
		finished: make(chan struct{}),
		changed:  make(chan struct{}),
	}
	fl.file.refs.Store(2) // the fill's and the starter's
	fl.reserved = c.reserveLocked(length, g)
	fl.ctx, fl.cancel = context.WithCancel(c.ctx)
	c.inflight[ck] = fl
	c.fills.Add(1)
	c.st.filling.Add(1)
	c.wakePersist() // reserving may have evicted
	go c.runFill(fl, fetch)
	return fl
}

// dropInterest is a handle letting go of fl; the last one abandons a fill
// still fetching. One that has all its bytes is left to commit.
func (c *Cache) dropInterest(fl *fill) {
	c.mu.Lock()
	fl.interest--
	if fl.interest > 0 {
		c.mu.Unlock()
		return
	}
	if progress, done, _, _ := fl.state(); !done && progress < fl.length {
		fl.abandoned = true
		if c.inflight[fl.id] == fl {
			delete(c.inflight, fl.id)
		}
		fl.cancel()
	}
	c.mu.Unlock()
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (c *Cache) runFill(fl *fill, fetch Fetcher) {
	defer c.fills.Done()
	c.st.fetches.Add(1)
	f, err := os.CreateTemp(c.tmpDir, "fill-*")
	if err != nil {
		fl.startErr = fmt.Errorf("cachetier: create fill file: %w", err)
		fl.openErr = fl.startErr
		close(fl.started)
		close(fl.opened)
		c.finish(fl, "", fl.startErr)
		return
	}
	fl.file.f = f
	close(fl.started)
	err = c.copyChunk(fl, f, fetch)
	c.finish(fl, f.Name(), err)
}

// copyChunk fetches the chunk into f, publishing progress as it goes.
func (c *Cache) copyChunk(fl *fill, f *os.File, fetch Fetcher) error {
	rc, err := fetch(fl.ctx, fl.off, fl.length)
	if err != nil {
		fl.openErr = err
		close(fl.opened)
		return err
	}
	close(fl.opened)
	defer rc.Close()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for n < fl.length {
		if err := fl.ctx.Err(); err != nil {
			return err
		}
		m, rerr := rc.Read(buf[:min(int64(len(buf)), fl.length-n)])
		if m > 0 {
			if _, err := f.Write(buf[:m]); err != nil {
				return fmt.Errorf("write fill file: %w", err)
			}
			n += int64(m)
			fl.sum = crc32.Update(fl.sum, castagnoli, buf[:m])
			c.st.originBytes.Add(int64(m))
			fl.advance(n)
		}
		if rerr == io.EOF && n < fl.length {
			return fmt.Errorf("origin sent %d of %d bytes: %w", n, fl.length, io.ErrUnexpectedEOF)
		}
		if rerr != nil && rerr != io.EOF {
			return rerr
		}
	}
	return nil
}

// finish commits a complete fill (rename, index) unless it is abandoned or
// uncached, or cleans up after a failed one, then wakes its readers.
func (c *Cache) finish(fl *fill, tmp string, err error) {
	name := chunkName(fl.id)
	path := c.chunkPath(name)
	renamed := false
	c.mu.Lock()
	if err == nil && fl.reserved && !fl.abandoned {
		// The rename runs outside the lock: it can wait for the
		// filesystem's journal, and every other fill's commit, and every
		// hit, would wait behind it. Readers joining meanwhile read the
		// complete fill's file.
		fl.committing = true
		c.committing[name]++
		if c.fresh != nil {
			c.fresh[name] = struct{}{} // not an orphan (verify.go)
		}
		c.mu.Unlock()
		rerr := os.Rename(tmp, path)
		c.mu.Lock()
		fl.committing = false
		if c.committing[name]--; c.committing[name] == 0 {
			delete(c.committing, name)
		}
		if rerr != nil {
			c.log.Warn("commit chunk", "err", rerr) // the readers still get their bytes
		} else {
			renamed = true
		}
	}
	if c.inflight[fl.id] == fl {
		delete(c.inflight, fl.id)
	}
	if fl.reserved {
		c.unreserveLocked(fl.length, fl.group)
	}
	if renamed {
		if !fl.abandoned {
			e := c.addLocked(fl.id, fl.length, fl.group, c.cfg.Now().UnixNano())
			e.sum, e.hasSum = fl.sum, true
			c.pending = append(c.pending, op{key: name, val: appendRecord(nil, &record{ck: fl.id,
				group: fl.group.name, objSize: fl.objSize, length: fl.length, lastAccess: e.lastAccess,
				sum: fl.sum, hasSum: true})})
		} else if !c.nameInUseLocked(name) {
			// Invalidated while it was being renamed: not kept.
			if rerr := os.Remove(path); rerr != nil && !os.IsNotExist(rerr) {
				c.log.Warn("remove chunk file", "err", rerr)
			}
		}
	}
	c.mu.Unlock()
	c.wakePersist()
	if !renamed && tmp != "" {
		os.Remove(tmp) // open handles keep reading it
	}
	if err != nil {
		c.st.fetchErrors.Add(1)
		k := fl.id.obj
		err = fmt.Errorf("cachetier: fetch %s/%s chunk %d: %w", k.store, k.key, fl.id.idx, err)
	}
	fl.mu.Lock()
	fl.err = err
	fl.done.Store(true)
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
	close(fl.finished)
	fl.cancel()
	fl.file.unref()
	c.st.filling.Add(-1)
}
