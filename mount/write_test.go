package mount

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/wait"
)

// uploads is the real S3 client with its write calls counted, and
// UploadPart optionally held at a gate or failed.
type uploads struct {
	*s3.Client
	creates, parts, puts, copies, partCopies atomic.Int64
	inflight, peak                           atomic.Int64
	gate                                     chan struct{} // non-nil: UploadPart waits for it to close
	failPart                                 int32         // non-zero: this part number answers AccessDenied
}

func (u *uploads) CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, o ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	u.creates.Add(1)
	return u.Client.CreateMultipartUpload(ctx, in, o...)
}

func (u *uploads) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	u.puts.Add(1)
	return u.Client.PutObject(ctx, in, o...)
}

func (u *uploads) CopyObject(ctx context.Context, in *s3.CopyObjectInput, o ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	u.copies.Add(1)
	return u.Client.CopyObject(ctx, in, o...)
}

func (u *uploads) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput, o ...func(*s3.Options)) (*s3.UploadPartCopyOutput, error) {
	u.partCopies.Add(1)
	return u.Client.UploadPartCopy(ctx, in, o...)
}

func (u *uploads) UploadPart(ctx context.Context, in *s3.UploadPartInput, o ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	u.parts.Add(1)
	n := u.inflight.Add(1)
	defer u.inflight.Add(-1)
	for {
		p := u.peak.Load()
		if n <= p || u.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if u.gate != nil {
		select {
		case <-u.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if aws.ToInt32(in.PartNumber) == u.failPart {
		return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "injected"}
	}
	return u.Client.UploadPart(ctx, in, o...)
}

func get(t *testing.T, c *s3.Client, key string) ([]byte, error) {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// openUploads lists the multipart uploads in progress in bucket data.
func openUploads(t *testing.T, c *s3.Client) int {
	t.Helper()
	out, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String("data")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

func writeAll(t *testing.T, w *writer, data []byte, chunk int) {
	t.Helper()
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		n, errno := w.write(t.Context(), data[off:end], int64(off))
		if errno != 0 || n != end-off {
			t.Fatalf("write at %d: %d bytes, %v", off, n, errno)
		}
	}
}

func newTestWriter(f *FS, key string) *writer {
	w := f.newWriter("data", key)
	w.dirty = true
	w.handles = 1
	f.setWriter(cacheKey("data", key), w)
	return w
}

const mib = 1 << 20

// A file written sequentially streams as parts uploaded in parallel while
// the writer goes on, completed at commit; the object is byte-equal; a
// write after the upload completed fails; nothing is left open.
func TestWriteSequentialMultipart(t *testing.T) {
	c := stack(t)
	api := &uploads{Client: c}
	f := testFS(t, api, Config{PartSize: 5 * mib, WriteParallel: 3, MaxMemory: 64 * mib})
	data := randBytes(10, 23*mib+333)
	w := newTestWriter(f, "ckpt/model.pt")
	api.gate = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeAll(t, w, data[:16*mib], 128<<10)
	}()
	// Three parts sent, none finished: the writer is on its fourth part.
	wait.For(t, 30*time.Second, "3 part uploads in flight", func() bool { return api.inflight.Load() == 3 })
	<-done
	close(api.gate)
	for off := 16 * mib; off < len(data); off += mib {
		end := min(off+mib, len(data))
		if _, errno := w.write(t.Context(), data[off:end], int64(off)); errno != 0 {
			t.Fatal(errno)
		}
	}
	if got := w.meta().size; got != int64(len(data)) {
		t.Errorf("size while written: %d, want %d", got, len(data))
	}
	if errno := w.commit(); errno != 0 {
		t.Fatalf("commit: %v", errno)
	}
	if got, err := get(t, c, "ckpt/model.pt"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after commit: %v, equal %v", err, bytes.Equal(got, data))
	}
	if api.parts.Load() != 5 || api.creates.Load() != 1 || api.puts.Load() != 0 {
		t.Errorf("%d parts, %d creates, %d puts; want 5 parts of one multipart upload", api.parts.Load(), api.creates.Load(), api.puts.Load())
	}
	if p := api.peak.Load(); p != 3 {
		t.Errorf("at most %d parts in flight, want --write-parallel 3", p)
	}
	if errno := w.commit(); errno != 0 {
		t.Errorf("a second commit (a dup'ed descriptor closed): %v", errno)
	}
	if _, errno := w.write(t.Context(), []byte("x"), int64(len(data))); errno != syscall.EIO {
		t.Errorf("write after the upload completed: %v, want EIO", errno)
	}
	w.release()
	if n := openUploads(t, c); n != 0 {
		t.Errorf("%d multipart uploads open", n)
	}
	if u := f.mem.inUse(); u != 0 {
		t.Errorf("%d bytes of --max-memory held after release", u)
	}
}

// A file within one part is one PutObject; random writes inside it (a
// header fixed up after the body) are fine; a close, more writes (a
// descriptor dup'ed by a shell) and another close put it again; an empty
// file is an empty object.
func TestWriteSmallFile(t *testing.T) {
	c := stack(t)
	api := &uploads{Client: c}
	f := testFS(t, api, Config{PartSize: 5 * mib})
	body := randBytes(11, 100000)
	w := newTestWriter(f, "small.bin")
	if _, errno := w.write(t.Context(), make([]byte, 16), 0); errno != 0 {
		t.Fatal(errno)
	}
	writeAll(t, w, body[16:], 4096) // offsets 0.. shifted below
	w2 := newTestWriter(f, "small2.bin")
	writeAll(t, w2, body, 7000)
	if _, errno := w2.write(t.Context(), []byte("HEADER"), 0); errno != 0 {
		t.Fatalf("fix-up write at 0: %v", errno)
	}
	want := append([]byte("HEADER"), body[6:]...)
	if errno := w2.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, err := get(t, c, "small2.bin"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("small file with a fixed-up header: %v", err)
	}
	if api.creates.Load() != 0 || api.puts.Load() != 1 {
		t.Errorf("%d creates, %d puts; want one PutObject", api.creates.Load(), api.puts.Load())
	}
	more := []byte("appended after a close of a dup")
	if _, errno := w2.write(t.Context(), more, int64(len(want))); errno != 0 {
		t.Fatalf("write after the first close: %v", errno)
	}
	if errno := w2.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := get(t, c, "small2.bin"); !bytes.Equal(got, append(want, more...)) {
		t.Error("the second close did not put the whole file")
	}
	w2.release()
	w.release() // released without commit: nothing
	if _, err := get(t, c, "small.bin"); toErrno(err) != syscall.ENOENT {
		t.Errorf("a file released without close: %v, want no object", err)
	}

	e := newTestWriter(f, "empty")
	if errno := e.commit(); errno != 0 {
		t.Fatal(errno)
	}
	e.release()
	if got, err := get(t, c, "empty"); err != nil || len(got) != 0 {
		t.Errorf("empty file: %d bytes, %v", len(got), err)
	}
}

// Writes the mount cannot turn into an upload are EOPNOTSUPP and change
// nothing; the file goes on.
func TestWriteRefused(t *testing.T) {
	c := stack(t)
	f := testFS(t, c, Config{PartSize: 5 * mib})
	data := randBytes(12, 12*mib)
	w := newTestWriter(f, "seq.bin")
	writeAll(t, w, data[:11*mib], mib)
	if _, errno := w.write(t.Context(), []byte("x"), 3*mib); errno != syscall.EOPNOTSUPP {
		t.Errorf("write before the uploaded boundary: %v, want EOPNOTSUPP", errno)
	}
	if _, errno := w.write(t.Context(), []byte("x"), 40*mib); errno != syscall.EOPNOTSUPP {
		t.Errorf("write far past the end: %v, want EOPNOTSUPP", errno)
	}
	if errno := w.truncate(t.Context(), 2*mib); errno != syscall.EOPNOTSUPP {
		t.Errorf("truncate into the uploaded part: %v, want EOPNOTSUPP", errno)
	}
	// A hole inside the tail part is zeros.
	hole := 11*mib + 1000
	if _, errno := w.write(t.Context(), data[hole:], int64(hole)); errno != 0 {
		t.Fatalf("write after a small hole: %v", errno)
	}
	if errno := w.commit(); errno != 0 {
		t.Fatal(errno)
	}
	want := append(append(append([]byte{}, data[:11*mib]...), make([]byte, 1000)...), data[hole:]...)
	if got, err := get(t, c, "seq.bin"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("object after refused writes: %v equal %v", err, bytes.Equal(got, want))
	}
	w.release()

	// Opened without O_TRUNC over an object: refused until truncated to 0.
	put(t, c, "old", []byte("old bytes"))
	o := f.newWriter("data", "old")
	o.needTrunc, o.committed, o.handles = true, true, 1
	o.size.Store(9)
	if _, errno := o.write(t.Context(), []byte("new"), 0); errno != syscall.EOPNOTSUPP {
		t.Errorf("write without O_TRUNC: %v, want EOPNOTSUPP", errno)
	}
	if errno := o.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := get(t, c, "old"); string(got) != "old bytes" {
		t.Errorf("object after a refused write: %q", got)
	}
	if errno := o.truncate(t.Context(), 0); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := o.write(t.Context(), []byte("new"), 0); errno != 0 {
		t.Fatalf("write after truncate to 0: %v", errno)
	}
	if errno := o.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := get(t, c, "old"); string(got) != "new" {
		t.Errorf("object after truncate and write: %q", got)
	}
	o.release()
}

// An upload error is the commit's errno, and the upload is aborted: no
// object, no multipart upload left. A writer released without commit (a
// killed writer) and one truncated to 0 mid-upload abort too.
func TestWriteAbort(t *testing.T) {
	c := stack(t)
	api := &uploads{Client: c, failPart: 2}
	f := testFS(t, api, Config{PartSize: 5 * mib, Tries: 1})
	data := randBytes(13, 17*mib)
	w := newTestWriter(f, "fails")
	var errno syscall.Errno
	for off := 0; off < len(data) && errno == 0; off += mib {
		_, errno = w.write(t.Context(), data[off:off+mib], int64(off))
	}
	if errno == 0 {
		errno = w.commit()
	}
	if errno != syscall.EACCES {
		t.Errorf("a part answered AccessDenied: %v, want EACCES", errno)
	}
	if errno := w.commit(); errno != syscall.EACCES {
		t.Errorf("a later close: %v, want EACCES again", errno)
	}
	w.release()
	if _, err := get(t, c, "fails"); toErrno(err) != syscall.ENOENT {
		t.Errorf("failed upload left an object: %v", err)
	}
	if n := openUploads(t, c); n != 0 {
		t.Errorf("failed upload left %d multipart uploads", n)
	}

	api.failPart = 0
	k := newTestWriter(f, "killed")
	writeAll(t, k, data[:12*mib], mib)
	if openUploads(t, c) != 1 {
		t.Fatal("no multipart upload under way")
	}
	k.release()
	if n := openUploads(t, c); n != 0 {
		t.Errorf("released writer left %d multipart uploads", n)
	}
	if _, err := get(t, c, "killed"); toErrno(err) != syscall.ENOENT {
		t.Errorf("released writer left an object: %v", err)
	}

	tr := newTestWriter(f, "truncated")
	writeAll(t, tr, data[:12*mib], mib)
	if errno := tr.truncate(t.Context(), 0); errno != 0 {
		t.Fatal(errno)
	}
	if n := openUploads(t, c); n != 0 {
		t.Errorf("truncate to 0 left %d multipart uploads", n)
	}
	writeAll(t, tr, []byte("short"), 5)
	if errno := tr.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := get(t, c, "truncated"); string(got) != "short" {
		t.Errorf("after truncate to 0 and a write: %q", got)
	}
	tr.release()
	if u := f.mem.inUse(); u != 0 {
		t.Errorf("%d bytes of --max-memory held after all released", u)
	}
}

// At --max-memory a writer waits for parts to finish instead of failing,
// and fails with EIO only after the deadline.
func TestWriteMemoryCapWaits(t *testing.T) {
	c := stack(t)
	api := &uploads{Client: c, gate: make(chan struct{})}
	f := testFS(t, api, Config{PartSize: 5 * mib, WriteParallel: 4, MaxMemory: 10 * mib})
	data := randBytes(14, 16*mib)
	w := newTestWriter(f, "capped")
	wrote := make(chan syscall.Errno, 1)
	go func() {
		var errno syscall.Errno
		for off := 0; off < len(data) && errno == 0; off += mib {
			_, errno = w.write(context.Background(), data[off:off+mib], int64(off))
		}
		wrote <- errno
	}()
	wait.For(t, 30*time.Second, "2 part uploads in flight", func() bool { return api.inflight.Load() == 2 })
	select {
	case errno := <-wrote:
		t.Fatalf("the writer finished (%v) with 2 parts held and no memory left", errno)
	case <-time.After(300 * time.Millisecond):
	}
	if u := f.mem.inUse(); u != 10*mib {
		t.Errorf("memory in use %d, want the cap %d", u, 10*mib)
	}
	close(api.gate)
	if errno := <-wrote; errno != 0 {
		t.Fatalf("writer after memory freed: %v", errno)
	}
	if errno := w.commit(); errno != 0 {
		t.Fatal(errno)
	}
	if got, _ := get(t, c, "capped"); !bytes.Equal(got, data) {
		t.Error("object differs")
	}
	w.release()

	// A cap that never frees: EIO after the deadline, not a hang.
	api2 := &uploads{Client: c, gate: make(chan struct{})}
	defer close(api2.gate)
	f2 := testFS(t, api2, Config{PartSize: 5 * mib, MaxMemory: 5 * mib, Tries: 1, RequestTimeout: 50 * time.Millisecond})
	// Hold all the memory elsewhere (a reader's blocks).
	if !f2.mem.tryAcquire(5 * mib) {
		t.Fatal("budget")
	}
	w2 := newTestWriter(f2, "never")
	start := time.Now()
	_, errno := w2.write(t.Context(), []byte("x"), 0)
	if errno != syscall.EIO || time.Since(start) > 10*time.Second {
		t.Errorf("write with no memory: %v after %v, want EIO after about %v", errno, time.Since(start), f2.memWait())
	}
	f2.mem.release(5 * mib)
	w2.release()
}

// unlink, mkdir, rmdir and rename, seen through S3.
func TestNamespaceWrites(t *testing.T) {
	c := stack(t)
	api := &uploads{Client: c}
	f := testFS(t, api, Config{})
	ctx := t.Context()
	put(t, c, "a/one", []byte("1"))
	put(t, c, "a/two", []byte("22"))

	if errno := f.mkdir(ctx, "data", "empty"); errno != 0 {
		t.Fatal(errno)
	}
	if m, err := f.statPath(ctx, "data", "empty"); err != nil || !m.dir {
		t.Errorf("mkdir: %+v %v, want a directory", m, err)
	}
	if errno := f.rmdir(ctx, "data", "a"); errno != syscall.ENOTEMPTY {
		t.Errorf("rmdir of a directory with files: %v, want ENOTEMPTY", errno)
	}
	if errno := f.rmdir(ctx, "data", "empty"); errno != 0 {
		t.Fatal(errno)
	}
	if _, err := f.statPath(ctx, "data", "empty"); toErrno(err) != syscall.ENOENT {
		t.Errorf("after rmdir: %v, want ENOENT", err)
	}

	if errno := f.rename(ctx, "data", "a/one", "data", "a/two", true); errno != syscall.EEXIST {
		t.Errorf("RENAME_NOREPLACE onto a file: %v, want EEXIST", errno)
	}
	if errno := f.rename(ctx, "data", "a/one", "data", "a/two", false); errno != 0 {
		t.Fatal(errno)
	}
	if got, err := get(t, c, "a/two"); err != nil || string(got) != "1" {
		t.Errorf("rename replaced a/two with %q, %v", got, err)
	}
	if _, err := get(t, c, "a/one"); toErrno(err) != syscall.ENOENT {
		t.Errorf("the source after rename: %v, want gone", err)
	}
	put(t, c, "b/x/y", []byte("y"))
	if errno := f.rename(ctx, "data", "b/x", "data", "c", false); errno != syscall.EXDEV {
		t.Errorf("rename of a directory: %v, want EXDEV", errno)
	}
	if errno := f.rename(ctx, "data", "a/two", "data", "b/x", false); errno != syscall.EISDIR {
		t.Errorf("rename onto a directory: %v, want EISDIR", errno)
	}

	// An object over the CopyObject bound is copied by parts.
	defer func(m, p int64) { maxCopy, copyPartSize = m, p }(maxCopy, copyPartSize)
	maxCopy, copyPartSize = 5*mib, 5*mib
	big := randBytes(15, 12*mib+5)
	put(t, c, "big", big)
	if errno := f.rename(ctx, "data", "big", "data", "moved/big", false); errno != 0 {
		t.Fatal(errno)
	}
	if got, err := get(t, c, "moved/big"); err != nil || !bytes.Equal(got, big) {
		t.Errorf("renamed by UploadPartCopy: %v equal %v", err, bytes.Equal(got, big))
	}
	if api.partCopies.Load() != 3 {
		t.Errorf("%d UploadPartCopy for 3 parts", api.partCopies.Load())
	}

	if errno := f.unlink(ctx, "data", "moved/big"); errno != 0 {
		t.Fatal(errno)
	}
	if _, err := get(t, c, "moved/big"); toErrno(err) != syscall.ENOENT {
		t.Errorf("after unlink: %v", err)
	}
	// Unlinked while being written: the upload is aborted, the close keeps nothing.
	w := newTestWriter(f, "doomed")
	writeAll(t, w, randBytes(16, 12*mib), mib)
	if errno := f.unlink(ctx, "data", "doomed"); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := w.write(ctx, []byte("x"), 12*mib); errno != 0 {
		t.Errorf("write after unlink: %v", errno)
	}
	if errno := w.commit(); errno != 0 {
		t.Errorf("close after unlink: %v", errno)
	}
	w.release()
	if _, err := get(t, c, "doomed"); toErrno(err) != syscall.ENOENT {
		t.Errorf("unlinked file written: %v", err)
	}
	if n := openUploads(t, c); n != 0 {
		t.Errorf("%d multipart uploads open", n)
	}
}

func TestWriteErrno(t *testing.T) {
	for code, want := range map[string]syscall.Errno{
		"InsufficientStorage": syscall.ENOSPC, "EntityTooLarge": syscall.EFBIG,
		"EgressBudgetExceeded": syscall.EDQUOT, "AccessDenied": syscall.EACCES,
	} {
		err := &smithy.GenericAPIError{Code: code}
		if got := toErrno(err); got != want {
			t.Errorf("%s: %v, want %v", code, got, want)
		}
		if code != "AccessDenied" && retryable(err) {
			t.Errorf("%s is retried", code)
		}
	}
	if toErrno(errors.New("x")) != syscall.EIO {
		t.Error("unknown error is not EIO")
	}
}

func TestKilledStat(t *testing.T) {
	fields := make([]string, 52)
	for i := range fields {
		fields[i] = "0"
	}
	line := func(flags, code string) string {
		f := append([]string{}, fields...)
		f[0], f[1], f[2] = "42", "(py thon)", "R"
		f[8], f[51] = flags, code
		return strings.Join(f, " ")
	}
	if !killedStat(line("4194564", "9")) { // PF_EXITING, SIGKILL
		t.Error("killed: not seen")
	}
	if killedStat(line("4194564", "0")) || killedStat(line("4194564", "256")) {
		t.Error("a clean exit seen as a kill")
	}
	if killedStat(line("4194560", "9")) {
		t.Error("not exiting seen as killed")
	}
}

// A daemon that exits with files open for writing aborts their uploads.
func TestAbortWritesAtShutdown(t *testing.T) {
	c := stack(t)
	f := testFS(t, c, Config{PartSize: 5 * mib})
	w := newTestWriter(f, "open-at-exit")
	writeAll(t, w, randBytes(17, 12*mib), mib)
	small := newTestWriter(f, "small-open-at-exit")
	writeAll(t, small, []byte("x"), 1)
	if openUploads(t, c) != 1 {
		t.Fatal("no multipart upload under way")
	}
	if n := f.abortWrites(); n != 1 {
		t.Errorf("aborted %d uploads, want 1", n)
	}
	if n := openUploads(t, c); n != 0 {
		t.Errorf("%d multipart uploads left at shutdown", n)
	}
	if _, errno := w.write(t.Context(), []byte("x"), 12*mib); errno == 0 {
		t.Error("a write after shutdown succeeded")
	}
}

// Read blocks count against --max-memory: a reader under a small cap
// reads every byte (readahead skipped when the cap is reached), never
// holds more than the cap, and gives it all back at release.
func TestReadBlocksUnderMemoryCap(t *testing.T) {
	c := stack(t)
	data := randBytes(18, 12*mib+5)
	put(t, c, "big", data)
	f := testFS(t, c, Config{BlockSize: mib, ReadAhead: 8 * mib, PartSize: 5 * mib, MaxMemory: 5 * mib})
	h := open(t, f, "big")
	var got []byte
	peak := int64(0)
	for off := int64(0); off < int64(len(data)); off += 128 << 10 {
		b, errno := readAt(t, h, off, 128<<10)
		if errno != 0 {
			t.Fatalf("read at %d: %v", off, errno)
		}
		got = append(got, b...)
		peak = max(peak, f.mem.inUse())
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read under the memory cap differs")
	}
	if peak > 5*mib || peak == 0 {
		t.Errorf("peak memory %d, cap %d", peak, 5*mib)
	}
	h.Release(t.Context())
	wait.For(t, 30*time.Second, "the write buffers to be released", func() bool { return f.mem.inUse() == 0 })
}

// Reads through a descriptor open for writing come from the tail buffer;
// bytes already uploaded are EOPNOTSUPP.
func TestReadWhileWriting(t *testing.T) {
	c := stack(t)
	f := testFS(t, c, Config{PartSize: 5 * mib})
	data := randBytes(19, 7*mib)
	w := newTestWriter(f, "rw")
	writeAll(t, w, data, mib)
	buf := make([]byte, 100)
	if n, errno := w.read(buf, 6*mib); errno != 0 || n != 100 || !bytes.Equal(buf, data[6*mib:6*mib+100]) {
		t.Errorf("read of the tail: %d %v", n, errno)
	}
	if _, errno := w.read(buf, 100); errno != syscall.EOPNOTSUPP {
		t.Errorf("read of an uploaded part: %v, want EOPNOTSUPP", errno)
	}
	if n, errno := w.read(buf, 7*mib); errno != 0 || n != 0 {
		t.Errorf("read at the end: %d %v", n, errno)
	}
	if errno := w.commit(); errno != 0 {
		t.Fatal(errno)
	}
	w.release()
}
