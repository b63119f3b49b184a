package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Writes (docs/mount.md, "Writes"). A file opened for writing is a
// writer: the bytes not yet uploaded are its tail buffer, at most one
// part (--part-size) from the uploaded boundary base to the size so far.
// A write that goes past a full tail part sends that part as one
// UploadPart of a multipart upload (started then) and goes on while up to
// --write-parallel parts of the file upload; close (FUSE Flush) or fsync
// sends the tail as the last part and completes the upload. A file that
// never outgrew one part is one PutObject at close, and stays writable:
// a later close puts it again. Every path that does not complete an
// upload aborts it.

// writeState is where a writer is.
type writeState int

const (
	wOpen   writeState = iota // taking writes
	wDone                     // a multipart upload completed: later writes fail
	wFailed                   // an upload failed or was aborted: every call fails with err
)

var (
	errUnsupportedWrite = errors.New("write pattern not supported")
	errKilled           = errors.New("the writing process was killed; upload aborted")
	errAfterComplete    = errors.New("write after the upload was completed by close or fsync")
)

// unsignedPayload sends part and object bodies as UNSIGNED-PAYLOAD: the
// body is not hashed with SHA-256 for the signature (over plain HTTP the
// SDK would, and so would its checksum step before the signer's unless
// the payload hash is set first). The SDK's CRC32 checksum still covers
// the body (a tenth of SHA-256's CPU).
var unsignedPayload = s3.WithAPIOptions(
	v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware,
	func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("fedgateMountUnsignedPayloadHash",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD"), in)
			}), middleware.Before)
	},
)

type writer struct {
	f           *FS
	bucket, key string
	ctx         context.Context // uploads: ends at unmount, not with a FUSE call
	cancel      context.CancelFunc

	mu        sync.Mutex
	state     writeState
	err       error
	needTrunc bool // opened without O_TRUNC over an existing object: writes refused until truncated to 0
	dirty     bool // changed since the last commit
	committed bool // an object of this writer's bytes exists
	unlinked  bool // unlinked while open: nothing is uploaded any more
	base      int64
	buf       []byte // bytes [base, base+len(buf)) = [base, size)
	held      int64  // budget bytes held for buf
	size      atomic.Int64
	mtime     atomic.Int64 // unix seconds of the last change
	uploadID  string
	nparts    int32
	handles   int
	slots     chan struct{}
	inflight  sync.WaitGroup

	upMu  sync.Mutex
	upErr error
	etags map[int32]string
}

func (f *FS) newWriter(bucket, key string) *writer {
	ctx, cancel := context.WithCancel(f.ctx)
	w := &writer{f: f, bucket: bucket, key: key, ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, f.cfg.WriteParallel), etags: map[int32]string{}}
	w.mtime.Store(time.Now().Unix())
	return w
}

// meta is what stat shows of the file being written.
func (w *writer) meta() meta {
	return meta{size: w.size.Load(), mtime: time.Unix(w.mtime.Load(), 0)}
}

// active reports whether the writer's bytes are the truth about its path
// (stat shows them, a read-only open waits for close): it has taken bytes
// or a truncate that are not yet in an object.
func (w *writer) active() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == wOpen && !w.needTrunc && !w.unlinked && (w.dirty || !w.committed)
}

// writers: the files open for writing in this mount, by cache key.
func (f *FS) writer(ck string) *writer {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return f.writers[ck]
}

func (f *FS) activeWriter(ck string) *writer {
	if w := f.writer(ck); w != nil && w.active() {
		return w
	}
	return nil
}

func (f *FS) setWriter(ck string, w *writer) {
	f.wmu.Lock()
	f.writers[ck] = w
	f.wmu.Unlock()
}

func (f *FS) dropWriter(ck string, w *writer) {
	f.wmu.Lock()
	if f.writers[ck] == w {
		delete(f.writers, ck)
	}
	f.wmu.Unlock()
}

// writersUnder lists the active writers directly in directory prefix.
func (f *FS) writersUnder(bucket, prefix string) map[string]*writer {
	f.wmu.Lock()
	var ws []*writer
	for _, w := range f.writers {
		if w.bucket == bucket && strings.HasPrefix(w.key, prefix) && !strings.Contains(w.key[len(prefix):], "/") {
			ws = append(ws, w)
		}
	}
	f.wmu.Unlock()
	out := map[string]*writer{}
	for _, w := range ws {
		if w.active() {
			out[w.key[len(prefix):]] = w
		}
	}
	return out
}

// hasWritersBelow reports whether an active writer's key starts with prefix.
func (f *FS) hasWritersBelow(bucket, prefix string) bool {
	f.wmu.Lock()
	var ws []*writer
	for _, w := range f.writers {
		if w.bucket == bucket && strings.HasPrefix(w.key, prefix) {
			ws = append(ws, w)
		}
	}
	f.wmu.Unlock()
	for _, w := range ws {
		if w.active() {
			return true
		}
	}
	return false
}

func (w *writer) warn(msg string, args ...any) {
	w.f.log.Warn(msg, append([]any{"bucket", w.bucket, "key", w.key}, args...)...)
}

// usable is the errno of a call on a writer that cannot take it. w.mu held.
func (w *writer) usable() syscall.Errno {
	switch w.state {
	case wFailed:
		return toErrno(w.err)
	case wDone:
		w.warn("write refused", "err", errAfterComplete)
		return syscall.EIO
	}
	return 0
}

// memWait is how long a writer waits for room in --max-memory: as long as
// the uploads that free it may take.
func (f *FS) memWait() time.Duration {
	return time.Duration(f.cfg.Tries) * (f.cfg.RequestTimeout + 2*time.Second)
}

// grow makes the tail buffer hold need bytes; the bytes it adds are not
// cleared (a pooled buffer holds an older part's): the caller writes them
// or clears them (a hole).
// The first part grows by doubling (a small file holds little); later
// parts are whole --part-size buffers from the pool. w.mu held.
func (w *writer) grow(ctx context.Context, need int64) syscall.Errno {
	if need <= int64(len(w.buf)) {
		return 0
	}
	if need > int64(cap(w.buf)) {
		ps := w.f.cfg.PartSize
		newCap := ps
		if w.base == 0 {
			newCap = min(ps, max(need, 2*int64(cap(w.buf)), 256<<10))
		}
		mctx, cancel := context.WithTimeout(ctx, w.f.memWait())
		err := w.f.mem.acquire(mctx, newCap-w.held)
		cancel()
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return syscall.EINTR
			}
			w.warn("no memory for the write within the deadline (--max-memory)", "waited", w.f.memWait().String())
			return syscall.EIO
		}
		var nb []byte
		if newCap == ps {
			nb = w.f.getPartBuf()[:len(w.buf)]
		} else {
			nb = make([]byte, len(w.buf), newCap)
		}
		copy(nb, w.buf) // the old, smaller buffer is garbage; its bytes are in newCap
		w.buf, w.held = nb, newCap
	}
	w.buf = w.buf[:need] // the caller writes or clears the new bytes
	return 0
}

// putBuf gives the tail buffer back (memory and, for a whole part, the
// pool). w.mu held.
func (w *writer) putBuf() {
	w.f.putPartBuf(w.buf)
	w.f.mem.release(w.held)
	w.buf, w.held = nil, 0
}

// getPartBuf is a whole part's buffer, reused: a 4 GiB file is 256 parts
// of 16 MiB and allocating (and zeroing) each would cost as much as the copy.
func (f *FS) getPartBuf() []byte {
	if b, ok := f.partPool.Get().(*[]byte); ok && int64(cap(*b)) == f.cfg.PartSize {
		return (*b)[:0]
	}
	return make([]byte, 0, f.cfg.PartSize)
}

func (f *FS) putPartBuf(b []byte) {
	if int64(cap(b)) == f.cfg.PartSize {
		b = b[:0]
		f.partPool.Put(&b)
	}
}

// write takes data at off (FUSE Write). It returns how many bytes it took:
// fewer than len(data) only with an errno or when interrupted after some.
func (w *writer) write(ctx context.Context, data []byte, off int64) (int, syscall.Errno) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if errno := w.usable(); errno != 0 {
		return 0, errno
	}
	if w.unlinked {
		return len(data), 0
	}
	ps := w.f.cfg.PartSize
	size := w.size.Load()
	switch {
	case w.needTrunc:
		w.warn("write refused: the file was opened for writing without O_TRUNC (an object cannot be changed in place; open with O_TRUNC or truncate to 0 first)", "offset", off)
		return 0, syscall.EOPNOTSUPP
	case off < w.base:
		w.warn("write refused: before the part already uploaded (writes must be sequential, or within the last --part-size bytes)", "offset", off, "uploaded", w.base)
		return 0, syscall.EOPNOTSUPP
	case off > size && off >= w.base+ps:
		w.warn("write refused: a hole past the current part", "offset", off, "size", size)
		return 0, syscall.EOPNOTSUPP
	}
	done := 0
	for done < len(data) {
		if off >= w.base+ps {
			if errno := w.sendTail(ctx); errno != 0 {
				if done > 0 && errno == syscall.EINTR {
					break
				}
				return done, errno
			}
		}
		pos := off - w.base
		n := min(int64(len(data)-done), ps-pos)
		oldLen := int64(len(w.buf))
		if errno := w.grow(ctx, max(pos+n, oldLen)); errno != 0 {
			if done > 0 && errno == syscall.EINTR {
				break
			}
			return done, errno
		}
		if pos > oldLen {
			clear(w.buf[oldLen:pos]) // a hole reads as zeros
		}
		copy(w.buf[pos:pos+n], data[done:])
		done += int(n)
		off += n
		if off > w.size.Load() {
			w.size.Store(off)
		}
	}
	w.dirty = true
	w.mtime.Store(time.Now().Unix())
	w.f.metrics.writeBytes.Add(float64(done))
	return done, 0
}

// sendTail uploads the tail buffer as the next part, starting the
// multipart upload on the first, and waits for a slot when
// --write-parallel parts are in flight. w.mu held.
func (w *writer) sendTail(ctx context.Context) syscall.Errno {
	if err := w.partError(); err != nil {
		return w.fail(err)
	}
	if w.uploadID == "" {
		var out *s3.CreateMultipartUploadOutput
		err := w.f.do(w.ctx, "CreateMultipartUpload", func(ctx context.Context) error {
			var err error
			out, err = w.f.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.bucket, Key: &w.key})
			return err
		})
		if err != nil {
			return w.fail(err)
		}
		w.uploadID = aws.ToString(out.UploadId)
	}
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return syscall.EINTR
	case <-w.ctx.Done():
		return w.fail(w.ctx.Err())
	}
	if err := w.partError(); err != nil {
		<-w.slots
		return w.fail(err)
	}
	w.nparts++
	num, buf, held := w.nparts, w.buf, w.held
	w.base += int64(len(buf))
	w.buf, w.held = nil, 0
	w.inflight.Add(1)
	w.f.metrics.partsInFlight.Inc()
	go func() {
		defer w.inflight.Done()
		defer w.f.metrics.partsInFlight.Dec()
		etag, err := w.f.uploadPart(w.ctx, w.bucket, w.key, w.uploadID, num, buf)
		w.f.putPartBuf(buf)
		w.f.mem.release(held)
		<-w.slots
		w.upMu.Lock()
		if err != nil && w.upErr == nil {
			w.upErr = fmt.Errorf("part %d: %w", num, err)
		}
		w.etags[num] = etag
		w.upMu.Unlock()
	}()
	return 0
}

func (w *writer) partError() error {
	w.upMu.Lock()
	defer w.upMu.Unlock()
	return w.upErr
}

func (f *FS) uploadPart(ctx context.Context, bucket, key, id string, num int32, buf []byte) (string, error) {
	var etag string
	err := f.do(ctx, "UploadPart", func(ctx context.Context) error {
		out, err := f.api.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &bucket, Key: &key, UploadId: &id, PartNumber: aws.Int32(num),
			Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))),
		}, unsignedPayload)
		if err != nil {
			return err
		}
		etag = aws.ToString(out.ETag)
		return nil
	})
	return etag, err
}

// fail ends the writer: the upload is aborted, every later call gets
// err's errno. w.mu held.
func (w *writer) fail(err error) syscall.Errno {
	if w.state == wFailed {
		return toErrno(w.err)
	}
	w.state, w.err = wFailed, err
	w.warn("upload failed; aborted", "err", err)
	w.abort("failed")
	return toErrno(err)
}

// abort stops the multipart upload, if any, after its parts in flight, and
// drops the buffer. w.mu held.
func (w *writer) abort(result string) {
	w.inflight.Wait()
	if w.uploadID != "" {
		id := w.uploadID
		w.uploadID = ""
		// Not w.ctx: an unmount must still abort.
		err := w.f.do(context.Background(), "AbortMultipartUpload", func(ctx context.Context) error {
			_, err := w.f.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.bucket, Key: &w.key, UploadId: &id})
			return err
		})
		if err != nil && toErrno(err) != syscall.ENOENT {
			w.warn("abort of the multipart upload failed; the bucket's lifecycle or `fedgate` must clean it", "upload_id", id, "err", err)
		}
		w.upMu.Lock()
		w.etags, w.upErr = map[int32]string{}, nil
		w.upMu.Unlock()
		w.nparts = 0
	}
	w.putBuf()
	w.f.metrics.uploads.WithLabelValues(result).Inc()
}

// commit makes the bytes written so far the object (FUSE Flush, Fsync):
// one PutObject while the file is within one part (the writer stays open
// for more), else the last part and CompleteMultipartUpload (later
// writes fail). A second commit with nothing new is a no-op.
func (w *writer) commit() syscall.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state == wFailed:
		return toErrno(w.err)
	case w.state == wDone, w.unlinked, w.needTrunc:
		return 0
	case w.uploadID == "":
		if !w.dirty && w.committed {
			return 0
		}
		size := int64(len(w.buf))
		err := w.f.doTimeout(w.ctx, "PutObject", w.f.sizedTimeout(size), func(ctx context.Context) error {
			_, err := w.f.api.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &w.bucket, Key: &w.key, Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(size),
			}, unsignedPayload)
			return err
		})
		if err != nil {
			return w.fail(err)
		}
		w.committed, w.dirty = true, false
		w.f.metrics.uploads.WithLabelValues("ok").Inc()
		w.f.wrote(w.bucket, w.key)
		return 0
	}
	if errno := w.sendTail(w.ctx); errno != 0 {
		return errno
	}
	w.inflight.Wait()
	if err := w.partError(); err != nil {
		return w.fail(err)
	}
	parts := make([]types.CompletedPart, 0, w.nparts)
	w.upMu.Lock()
	for i := int32(1); i <= w.nparts; i++ {
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: aws.String(w.etags[i])})
	}
	w.upMu.Unlock()
	size := w.size.Load()
	tries := 0
	err := w.f.doTimeout(w.ctx, "CompleteMultipartUpload", w.f.sizedTimeout(size), func(ctx context.Context) error {
		tries++
		_, err := w.f.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		if err != nil && tries > 1 && errorCode(err) == "NoSuchUpload" {
			// An earlier try that timed out did complete it.
			if m, herr := w.f.head(ctx, w.bucket, w.key); herr == nil && m.size == size && strings.HasSuffix(strings.Trim(m.etag, `"`), "-"+strconv.Itoa(len(parts))) {
				return nil
			}
		}
		return err
	})
	if err != nil {
		return w.fail(err)
	}
	w.uploadID = ""
	w.state, w.committed, w.dirty = wDone, true, false
	w.putBuf()
	w.f.metrics.uploads.WithLabelValues("ok").Inc()
	w.f.wrote(w.bucket, w.key)
	return 0
}

// truncate sets the size of the file being written (ftruncate, or
// O_TRUNC after open): to 0 always (an upload under way is aborted and
// the file starts again), else only within the tail part.
func (w *writer) truncate(ctx context.Context, size int64) syscall.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == wFailed {
		return toErrno(w.err)
	}
	cur := w.size.Load()
	switch {
	case size == cur && !(size == 0 && w.needTrunc):
		return 0
	case size == 0:
		if w.uploadID != "" {
			w.abort("aborted")
		}
		w.putBuf()
		w.state, w.needTrunc, w.dirty = wOpen, false, true
		w.base = 0
		w.size.Store(0)
	case w.state == wDone || w.needTrunc || size < w.base || size > w.base+w.f.cfg.PartSize:
		w.warn("truncate refused: only to 0, or within the part not yet uploaded", "size", size, "uploaded", w.base)
		return syscall.EOPNOTSUPP
	default:
		oldLen := len(w.buf)
		if errno := w.grow(ctx, size-w.base); errno != 0 {
			return errno
		}
		w.buf = w.buf[:size-w.base]
		if len(w.buf) > oldLen {
			clear(w.buf[oldLen:])
		}
		w.size.Store(size)
		w.dirty = true
	}
	w.mtime.Store(time.Now().Unix())
	return 0
}

// read serves a read through a handle open for writing from the tail
// buffer; bytes already uploaded are EOPNOTSUPP.
func (w *writer) read(dest []byte, off int64) (int, syscall.Errno) {
	w.mu.Lock()
	defer w.mu.Unlock()
	size := w.size.Load()
	if off >= size {
		return 0, 0
	}
	if off < w.base || w.state == wDone {
		w.warn("read refused: the bytes are uploaded and the file is still open for writing; close it and open again", "offset", off)
		return 0, syscall.EOPNOTSUPP
	}
	return copy(dest, w.buf[off-w.base:]), 0
}

// release is the last close of a handle of the writer: what was not
// committed is dropped (a killed writer, a handle released without
// Flush), its upload aborted.
func (w *writer) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handles--
	if w.handles > 0 {
		return
	}
	if w.state == wOpen && (w.uploadID != "" || w.dirty) {
		w.warn("file released without a completed close; the upload is aborted and nothing of it is kept")
		w.abort("aborted")
		w.state, w.err = wFailed, errKilled
	} else {
		w.putBuf()
	}
	w.cancel()
	ck := cacheKey(w.bucket, w.key)
	w.f.dropWriter(ck, w)
	w.f.stats.del(ck)
	w.f.dirs.bump()
}

// discard is an unlink of the file being written: the upload is aborted,
// later writes and the close succeed and keep nothing.
func (w *writer) discard() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == wOpen && !w.unlinked {
		w.abort("aborted")
	}
	w.unlinked = true
}

// killedCaller reports whether the process of a FUSE call is exiting
// because a signal killed it: its /proc/PID/stat shows PF_EXITING and an
// exit code of a signal (set before the kernel closes its files, so a
// Flush sent from that close can tell a kill from a clean exit).
func killedCaller(ctx context.Context) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(c.Pid), 10) + "/stat")
	if err != nil {
		return false
	}
	return killedStat(string(b))
}

// killedStat parses /proc/PID/stat (proc(5)): field 9 flags, field 52
// exit_code.
func killedStat(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	fs := strings.Fields(stat[i+1:]) // fs[0] is field 3
	if len(fs) < 50 {
		return false
	}
	flags, err1 := strconv.ParseUint(fs[6], 10, 64)
	code, err2 := strconv.ParseInt(fs[49], 10, 64)
	const pfExiting = 0x4
	return err1 == nil && err2 == nil && flags&pfExiting != 0 && code&0x7f != 0
}

// wrote forgets what the stat cache knew of a path this mount changed, so
// that the next stat asks S3 (exact size, mtime and ETag).
func (f *FS) wrote(bucket, key string) { f.stats.del(cacheKey(bucket, key)); f.dirs.bump() }

var errShutdown = errors.New("the mount is shutting down with the file open; upload aborted")

func (f *FS) abortWrites() int {
	f.wmu.Lock()
	ws := make([]*writer, 0, len(f.writers))
	for _, w := range f.writers {
		ws = append(ws, w)
	}
	f.wmu.Unlock()
	n := 0
	for _, w := range ws {
		w.mu.Lock()
		if w.state == wOpen && w.uploadID != "" {
			w.warn("the mount is exiting with the file open for writing; its upload is aborted and the file not written")
			w.abort("aborted")
			w.state, w.err = wFailed, errShutdown
			n++
		}
		w.mu.Unlock()
	}
	return n
}
