package mount

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/fedgate/fedgate/clients/localread"
	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// sameETag compares ETags with or without their quotes.
func sameETag(a, b string) bool { return strings.Trim(a, `"`) == strings.Trim(b, `"`) }

// openLocal opens the object through the node's --local-socket
// (clients/localread, docs/gpu-data-path.md). When the node hands over one
// file that is the whole object (a posix or fs store's file, an object of
// one cached chunk), the handle asks for FUSE passthrough: the kernel
// reads that file itself and reads never reach the daemon. Otherwise the
// handle reads the passed descriptors with pread. ok false: the node
// cannot (NotLocal, no socket, any error); the caller reads over S3.
func (n *node) openLocal(ctx context.Context, m meta) (fs.FileHandle, uint32, bool) {
	p := n.at()
	f := n.f
	lctx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	lf, err := f.cfg.Local.OpenLocal(lctx, p.bucket, p.key)
	cancel()
	if err != nil {
		var le *localread.Error
		if !errors.As(err, &le) || le.Code != "NotLocal" {
			f.log.Debug("short-circuit open failed; reading over S3", "bucket", p.bucket, "key", p.key, "err", err)
		}
		f.metrics.opens.WithLabelValues("s3").Inc()
		return nil, 0, false
	}
	lm := meta{size: lf.Size(), mtime: lf.LastModified().Truncate(1e9), etag: lf.ETag()}
	if m.etag != "" && sameETag(lm.etag, m.etag) {
		lm.etag, lm.mtime = m.etag, m.mtime // one spelling and precision per file
	} else {
		f.stats.put(cacheKey(p.bucket, p.key), lm) // the object changed since the stat: the node's view is newer
	}
	h := newHandle(f, p.bucket, p.key, lm)
	h.local = lf
	exts, files := lf.Extents()
	if len(exts) == 1 && len(files) == 1 && exts[0].FileOffset == 0 && exts[0].ObjectOffset == 0 && exts[0].Length == lm.size {
		var st unix.Stat_t
		if unix.Fstat(int(files[0].Fd()), &st) == nil && st.Size == lm.size {
			// go-fuse keeps one backing file per inode while any
			// passthrough handle of it is open: a new version opened
			// meanwhile must not get the old one's, so it reads with pread.
			n.mu.Lock()
			pass := n.passOpen == 0 || n.passETag == lm.etag
			if pass {
				n.passOpen++
				n.passETag = lm.etag
				n.lastETag = lm.etag
			}
			n.mu.Unlock()
			if pass {
				f.metrics.opens.WithLabelValues("passthrough").Inc()
				return &passHandle{handle: h, n: n, fd: int(files[0].Fd())}, 0, true
			}
		}
	}
	f.metrics.opens.WithLabelValues("local").Inc()
	return h, n.keepCache(lm.etag), true
}

// passHandle is an open file the kernel reads through FUSE passthrough.
type passHandle struct {
	*handle
	n  *node
	fd int
}

var _ fs.FilePassthroughFder = (*passHandle)(nil)

func (p *passHandle) PassthroughFd() (int, bool) { return p.fd, true }

func (p *passHandle) Release(ctx context.Context) syscall.Errno {
	p.n.mu.Lock()
	p.n.passOpen--
	p.n.mu.Unlock()
	return p.handle.Release(ctx)
}

// readLocal reads the short-circuit descriptors with pread.
func (h *handle) readLocal(dest []byte, off int64) (int, syscall.Errno) {
	n, err := h.local.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		h.f.log.Warn("short-circuit read failed", "bucket", h.bucket, "key", h.key, "offset", off, "err", err)
		return 0, syscall.EIO
	}
	return n, 0
}
