package mount

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/fedgate/fedgate/clients/localread"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is one open file: the object's meta pinned at open and the
// blocks fetched for it. Reads are served from blocks of BlockSize bytes,
// each one ranged GET with If-Match on the pinned ETag. A reader that
// continues where its last read ended is sequential: each such read
// doubles its readahead (up to ReadAhead), fetched as parallel blocks;
// any other read resets it. Blocks behind a sequential reader are
// dropped, and a handle never holds more than ReadAhead plus a few blocks.
type handle struct {
	f           *FS
	bucket, key string
	m           meta
	ctx         context.Context
	cancel      context.CancelFunc
	local       *localread.File // the short-circuit read, nil: ranged GETs

	mu     sync.Mutex
	blocks map[int64]*block
	next   int64 // where a sequential read would start
	ahead  int64 // blocks fetched ahead of the reader
}

type block struct {
	done chan struct{}
	data []byte
	err  error
	// end is when the fetch ended (set before done is closed): a failed
	// block answers its error to every read for failedBlockTTL after it,
	// so that the kernel's synchronous retry of a failed readahead page
	// does not start a second round of tries (one read(2) would then wait
	// twice the deadline docs/mount.md gives).
	end time.Time
	// refs: the handle's map and the fetch; the block's bytes of
	// --max-memory are given back when both let go.
	refs atomic.Int32
	mem  int64
	f    *FS
}

func (b *block) unref() {
	if b.refs.Add(-1) == 0 {
		b.f.mem.release(b.mem)
	}
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
)

// failedBlockTTL is how long a block that failed answers its error
// without a new try.
var failedBlockTTL = 5 * time.Second

func newHandle(f *FS, bucket, key string, m meta) *handle {
	ctx, cancel := context.WithCancel(f.ctx)
	return &handle{f: f, bucket: bucket, key: key, m: m, ctx: ctx, cancel: cancel, blocks: map[int64]*block{}}
}

func (h *handle) maxAhead() int64 { return h.f.cfg.ReadAhead / h.f.cfg.BlockSize }

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	(&node{f: h.f}).fill(&out.Attr, h.m)
	return 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.cancel()
	if h.local != nil {
		h.local.Close()
	}
	h.mu.Lock()
	for _, b := range h.blocks {
		b.unref()
	}
	h.blocks = nil
	h.mu.Unlock()
	return 0
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.f.metrics.fuseReads.Inc()
	size := h.m.size
	if off >= size || len(dest) == 0 {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), size)
	if h.local != nil {
		n, errno := h.readLocal(dest[:end-off], off)
		return fuse.ReadResultData(dest[:n]), errno
	}
	bs := h.f.cfg.BlockSize
	first, last := off/bs, (end-1)/bs
	nblocks := (size + bs - 1) / bs

	h.mu.Lock()
	if h.blocks == nil {
		h.mu.Unlock()
		return nil, syscall.EBADF
	}
	// Sequential: at, or within a block of, where the last read ended (the
	// kernel's async reads may arrive a little out of order).
	if off >= h.next-bs && off <= h.next+bs && !(h.next == 0 && off != 0) {
		h.ahead = min(max(1, h.ahead*2), h.maxAhead())
	} else {
		h.ahead = 0
	}
	h.next = max(h.next, end)
	if h.ahead == 0 {
		h.next = end
	}
	want := make([]*block, 0, last-first+1)
	for i := first; i <= last; i++ {
		want = append(want, h.fetch(i, true))
	}
	for i := last + 1; i <= last+h.ahead && i < nblocks; i++ {
		if h.fetch(i, false) == nil {
			break // --max-memory is full: no readahead now
		}
	}
	h.evict(first, last+h.ahead)
	h.mu.Unlock()

	n := 0
	for j, b := range want {
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, syscall.EINTR
		}
		if b.err != nil { // a read after failedBlockTTL tries again (fetch)
			h.f.log.Warn("read failed", "bucket", h.bucket, "key", h.key, "offset", off, "err", b.err)
			return nil, toErrno(b.err)
		}
		start := (first + int64(j)) * bs
		lo := max(off, start) - start
		hi := min(end, start+int64(len(b.data))) - start
		if lo >= hi {
			break
		}
		n += copy(dest[n:], b.data[lo:hi])
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// fetch returns block i, starting its GET when it is not there. A block
// the reader waits for (demand) waits for room in --max-memory; a
// readahead block is not fetched (nil) when there is none. h.mu held.
func (h *handle) fetch(i int64, demand bool) *block {
	if b, ok := h.blocks[i]; ok {
		select {
		case <-b.done:
			if b.err == nil || time.Since(b.end) < failedBlockTTL {
				return b
			}
			delete(h.blocks, i) // failed a while ago: try again
			b.unref()
		default:
			return b
		}
	}
	bs := h.f.cfg.BlockSize
	start := i * bs
	n := min(bs, h.m.size-start)
	b := &block{done: make(chan struct{}), f: h.f}
	if !demand {
		if !h.f.mem.tryAcquire(n) {
			return nil
		}
		b.mem = n
	}
	b.refs.Store(2)
	h.blocks[i] = b
	go func() {
		defer close(b.done)
		defer func() { b.end = time.Now() }()
		defer b.unref()
		if demand {
			mctx, cancel := context.WithTimeout(h.ctx, h.f.memWait())
			err := h.f.mem.acquire(mctx, n)
			cancel()
			if err != nil {
				b.err = fmt.Errorf("no room in --max-memory for a read block within %v: %w", h.f.memWait(), err)
				return
			}
			b.mem = n
		}
		select {
		case h.f.sem <- struct{}{}:
		case <-h.ctx.Done():
			b.err = h.ctx.Err()
			return
		}
		defer func() { <-h.f.sem }()
		b.data, b.err = h.f.getRange(h.ctx, h.bucket, h.key, h.m.etag, start, n)
	}()
	return b
}

// evict drops the blocks outside [first-1, last] and, when the handle
// still holds more than its bound, those farthest from first. h.mu held.
func (h *handle) evict(first, last int64) {
	limit := h.maxAhead() + 4
	for i, b := range h.blocks {
		if i < first-1 || (h.ahead > 0 && i > last) {
			delete(h.blocks, i)
			b.unref()
		}
	}
	for int64(len(h.blocks)) > limit {
		far, dist := int64(-1), int64(-1)
		for i := range h.blocks {
			d := i - first
			if d < 0 {
				d = -d
			}
			if d > dist {
				far, dist = i, d
			}
		}
		h.blocks[far].unref()
		delete(h.blocks, far)
	}
}

// getRange reads n bytes at off of the object whose ETag is etag: a
// changed object is errChanged, never its new bytes.
func (f *FS) getRange(ctx context.Context, bucket, key, etag string, off, n int64) ([]byte, error) {
	var data []byte
	err := f.do(ctx, "GetObject", func(ctx context.Context) error {
		in := &s3.GetObjectInput{Bucket: &bucket, Key: &key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))}
		if etag != "" {
			in.IfMatch = &etag
		}
		out, err := f.api.GetObject(ctx, in)
		if err != nil {
			if errorCode(err) == "PreconditionFailed" || httpStatus(err) == 412 {
				return fmt.Errorf("%s/%s: %w (%v)", bucket, key, errChanged, err)
			}
			return err
		}
		defer out.Body.Close()
		if got := aws.ToString(out.ETag); etag != "" && got != "" && got != etag {
			return fmt.Errorf("%s/%s: %w (ETag %s, opened as %s)", bucket, key, errChanged, got, etag)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(out.Body, buf); err != nil {
			return fmt.Errorf("%s/%s bytes %d+%d: %w", bucket, key, off, n, err)
		}
		data = buf
		return nil
	})
	if err == nil {
		f.metrics.readBytes.Add(float64(n))
	}
	return data, err
}
