package mount

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// writeHandle is a file open for writing (docs/mount.md, "Writes").
type writeHandle struct {
	w *writer
	n *node
	// rd reads the existing object through a handle opened O_RDWR without
	// O_TRUNC, until it is truncated.
	rd *handle

	mu       sync.Mutex
	released bool
}

var (
	_ fs.FileWriter    = (*writeHandle)(nil)
	_ fs.FileReader    = (*writeHandle)(nil)
	_ fs.FileFlusher   = (*writeHandle)(nil)
	_ fs.FileFsyncer   = (*writeHandle)(nil)
	_ fs.FileReleaser  = (*writeHandle)(nil)
	_ fs.FileGetattrer = (*writeHandle)(nil)
)

func (n *node) newWriteHandle(w *writer) *writeHandle {
	w.mu.Lock()
	w.handles++
	w.mu.Unlock()
	return &writeHandle{w: w, n: n}
}

func (h *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, errno := h.w.write(ctx, data, off)
	return uint32(n), errno
}

func (h *writeHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.w.mu.Lock()
	needTrunc := h.w.needTrunc
	h.w.mu.Unlock()
	if needTrunc && h.rd != nil {
		return h.rd.Read(ctx, dest, off)
	}
	n, errno := h.w.read(dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Flush is a close of one descriptor (of several, after dup or fork):
// it commits what was written. A writer killed by a signal commits
// nothing: its upload is aborted.
func (h *writeHandle) Flush(ctx context.Context) syscall.Errno {
	if killedCaller(ctx) {
		h.w.mu.Lock()
		if h.w.state == wOpen && !h.w.unlinked && (h.w.dirty || h.w.uploadID != "") {
			h.w.warn("the writing process was killed; the upload is aborted and the file not written")
			h.w.abort("aborted")
			h.w.state, h.w.err = wFailed, errKilled
		}
		h.w.mu.Unlock()
		return 0
	}
	errno := h.w.commit()
	if errno == 0 {
		h.invalidate()
	}
	return errno
}

// Fsync completes the upload as close does (docs/mount.md).
func (h *writeHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	errno := h.w.commit()
	if errno == 0 {
		h.invalidate()
	}
	return errno
}

// invalidate drops the kernel's cached attributes of the file, so that a
// stat after close asks the mount (which asks S3: exact size and mtime).
func (h *writeHandle) invalidate() {
	go h.n.NotifyContent(-1, 0) // not from within the FUSE call
}

func (h *writeHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return 0
	}
	h.released = true
	h.mu.Unlock()
	if h.rd != nil {
		h.rd.Release(ctx)
	}
	h.w.release()
	return 0
}

func (h *writeHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, h, out)
}

// openWrite opens an existing file for writing. With O_TRUNC the file
// starts empty (the object is replaced at close). Without it, writes are
// refused (EOPNOTSUPP) until the file is truncated to 0: an object cannot
// be changed in place; reads through an O_RDWR handle read the object.
func (n *node) openWrite(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p := n.at()
	f := n.f
	if f.cfg.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	ck := cacheKey(p.bucket, p.key)
	if f.activeWriter(ck) != nil {
		f.log.Warn("open for writing refused: the file is being written by another open in this mount", "bucket", p.bucket, "key", p.key)
		return nil, 0, syscall.EBUSY
	}
	w := f.newWriter(p.bucket, p.key)
	var rd *handle
	if flags&syscall.O_TRUNC == 0 {
		w.needTrunc = true
		m, err := f.fileMeta(ctx, p.bucket, p.key)
		if err != nil {
			return nil, 0, toErrno(err)
		}
		w.size.Store(m.size)
		w.mtime.Store(m.mtime.Unix())
		w.committed = true
		if flags&syscall.O_ACCMODE == syscall.O_RDWR {
			rd = newHandle(f, p.bucket, p.key, m)
		}
	} else {
		w.dirty = true
	}
	f.setWriter(ck, w)
	h := n.newWriteHandle(w)
	h.rd = rd
	return h, 0, 0
}

// Create makes a new file, written at close.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.at()
	f := n.f
	if f.cfg.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if p.bucket == "" {
		return nil, nil, 0, syscall.EPERM // the root of every bucket holds buckets only
	}
	key := p.key + name
	ck := cacheKey(p.bucket, key)
	if f.activeWriter(ck) != nil {
		return nil, nil, 0, syscall.EBUSY
	}
	w := f.newWriter(p.bucket, key)
	w.dirty = true
	f.setWriter(ck, w)
	f.stats.del(ck)
	f.dirs.bump()
	in := n.child(ctx, name, w.meta(), out)
	return in, in.Operations().(*node).newWriteHandle(w), 0, 0
}

// Setattr: truncate (of a file being written: to 0 or within its last
// part; of a closed file: to 0 only, an empty object); chmod, chown and
// utimes are accepted and change nothing (S3 keeps no modes, owners or
// times), so that cp -p and rsync -a work.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	p := n.at()
	f := n.f
	if f.cfg.ReadOnly {
		return syscall.EROFS
	}
	if size, ok := in.GetSize(); ok {
		if n.dir {
			return syscall.EISDIR
		}
		var w *writer
		if wh, ok := fh.(*writeHandle); ok {
			w = wh.w
		} else if aw := f.writer(cacheKey(p.bucket, p.key)); aw != nil && aw.active() {
			w = aw
		}
		if w != nil {
			if errno := w.truncate(ctx, int64(size)); errno != 0 {
				return errno
			}
		} else if errno := f.truncateClosed(ctx, p.bucket, p.key, int64(size)); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, fh, out)
}

// truncateClosed truncates a file no one writes: to its size (nothing to
// do) or to 0 (an empty object); else EOPNOTSUPP.
func (f *FS) truncateClosed(ctx context.Context, bucket, key string, size int64) syscall.Errno {
	m, err := f.fileMeta(ctx, bucket, key)
	if err != nil {
		return toErrno(err)
	}
	switch {
	case size == m.size:
		return 0
	case size != 0:
		f.log.Warn("truncate refused: a closed file can be truncated to 0 only", "bucket", bucket, "key", key, "size", size)
		return syscall.EOPNOTSUPP
	}
	err = f.do(ctx, "PutObject", func(ctx context.Context) error {
		_, err := f.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(""), ContentLength: aws.Int64(0)})
		return err
	})
	if err != nil {
		f.log.Warn("truncate failed", "bucket", bucket, "key", key, "err", err)
		return toErrno(err)
	}
	f.wrote(bucket, key)
	return 0
}

// Unlink deletes the object (DeleteObject). A file being written in this
// mount is dropped: its upload is aborted and its close keeps nothing.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p := n.at()
	if n.f.cfg.ReadOnly {
		return syscall.EROFS
	}
	if p.bucket == "" {
		return syscall.EPERM
	}
	return n.f.unlink(ctx, p.bucket, p.key+name)
}

func (f *FS) unlink(ctx context.Context, bucket, key string) syscall.Errno {
	ck := cacheKey(bucket, key)
	if w := f.writer(ck); w != nil {
		w.discard()
		f.dropWriter(ck, w)
	}
	err := f.do(ctx, "DeleteObject", func(ctx context.Context) error {
		_, err := f.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
		return err
	})
	if err != nil {
		f.log.Warn("unlink failed", "bucket", bucket, "key", key, "err", err)
		return toErrno(err)
	}
	f.stats.putMissing(ck)
	f.dirs.bump()
	return 0
}

// Mkdir puts a zero-byte "dir/" marker object, so that an empty directory
// persists; listings do not show markers.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.at()
	if n.f.cfg.ReadOnly {
		return nil, syscall.EROFS
	}
	if p.bucket == "" {
		return nil, syscall.EPERM // buckets are made with `fedgate` or S3, not mkdir
	}
	if errno := n.f.mkdir(ctx, p.bucket, p.key+name); errno != 0 {
		return nil, errno
	}
	return n.child(ctx, name, meta{dir: true, mtime: time.Now().Truncate(time.Second)}, out), 0
}

func (f *FS) mkdir(ctx context.Context, bucket, key string) syscall.Errno {
	marker := key + "/"
	err := f.do(ctx, "PutObject", func(ctx context.Context) error {
		_, err := f.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &marker, Body: strings.NewReader(""), ContentLength: aws.Int64(0)})
		return err
	})
	if err != nil {
		f.log.Warn("mkdir failed", "bucket", bucket, "key", marker, "err", err)
		return toErrno(err)
	}
	f.stats.put(cacheKey(bucket, key), meta{dir: true})
	f.dirs.bump()
	return 0
}

// Rmdir deletes the directory's marker; ENOTEMPTY while any key (or a
// file being written) is under it.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	p := n.at()
	if n.f.cfg.ReadOnly {
		return syscall.EROFS
	}
	if p.bucket == "" {
		return syscall.EPERM
	}
	return n.f.rmdir(ctx, p.bucket, p.key+name)
}

func (f *FS) rmdir(ctx context.Context, bucket, key string) syscall.Errno {
	prefix := key + "/"
	if f.hasWritersBelow(bucket, prefix) {
		return syscall.ENOTEMPTY
	}
	var lo *s3.ListObjectsV2Output
	err := f.do(ctx, "ListObjectsV2", func(ctx context.Context) error {
		var err error
		lo, err = f.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(2)})
		return err
	})
	if err != nil {
		return toErrno(err)
	}
	for _, o := range lo.Contents {
		if aws.ToString(o.Key) != prefix {
			return syscall.ENOTEMPTY
		}
	}
	err = f.do(ctx, "DeleteObject", func(ctx context.Context) error {
		_, err := f.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &prefix})
		return err
	})
	if err != nil {
		f.log.Warn("rmdir failed", "bucket", bucket, "key", prefix, "err", err)
		return toErrno(err)
	}
	f.stats.putMissing(cacheKey(bucket, key))
	f.dirs.bump()
	return 0
}

// Rename of a file: CopyObject (UploadPartCopy parts over 5 GiB) pinned
// to the source's ETag, then DeleteObject of the source. Not atomic: a
// reader may see both names for a moment, and a failure between the two
// leaves both. A directory is EXDEV (mv then copies and deletes file by
// file); RENAME_EXCHANGE is EINVAL; RENAME_NOREPLACE is honoured.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	p := n.at()
	f := n.f
	if f.cfg.ReadOnly {
		return syscall.EROFS
	}
	npn, ok := newParent.(*node)
	if !ok {
		return syscall.EPERM
	}
	np := npn.at()
	if p.bucket == "" || np.bucket == "" {
		return syscall.EPERM
	}
	if flags&fs.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	if ch := n.GetChild(name); ch != nil {
		if cn, ok := ch.Operations().(*node); ok && cn.dir {
			return syscall.EXDEV
		}
	}
	src, dst := p.key+name, np.key+newName
	errno := f.rename(ctx, p.bucket, src, np.bucket, dst, flags&unix.RENAME_NOREPLACE != 0)
	if errno == 0 {
		if ch := n.GetChild(name); ch != nil {
			if cn, ok := ch.Operations().(*node); ok {
				// go-fuse moves the inode to the new name: its ops use its
				// place, which other operations may be reading now.
				cn.loc.Store(&objPath{bucket: np.bucket, key: dst})
			}
		}
	}
	return errno
}

func (f *FS) rename(ctx context.Context, sb, sk, db, dk string, noReplace bool) syscall.Errno {
	sck, dck := cacheKey(sb, sk), cacheKey(db, dk)
	if f.activeWriter(sck) != nil || f.activeWriter(dck) != nil {
		return syscall.EBUSY
	}
	m, err := f.head(ctx, sb, sk)
	if err != nil {
		if toErrno(err) == syscall.ENOENT {
			if sm, serr := f.statPath(ctx, sb, sk); serr == nil && sm.dir {
				return syscall.EXDEV
			}
		}
		return toErrno(err)
	}
	dm, derr := f.statPath(ctx, db, dk)
	switch {
	case derr == nil && dm.dir:
		return syscall.EISDIR
	case derr == nil && noReplace:
		return syscall.EEXIST
	case derr != nil && toErrno(derr) != syscall.ENOENT:
		return toErrno(derr)
	}
	if sb == db && sk == dk {
		return 0
	}
	if err := f.copyObject(ctx, sb, sk, db, dk, m); err != nil {
		f.log.Warn("rename failed: copy", "bucket", sb, "key", sk, "to_bucket", db, "to_key", dk, "err", err)
		return toErrno(err)
	}
	f.stats.del(dck)
	f.dirs.bump()
	err = f.do(ctx, "DeleteObject", func(ctx context.Context) error {
		_, err := f.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &sb, Key: &sk})
		return err
	})
	if err != nil {
		f.log.Warn("rename: copied, but the source could not be deleted; both names exist", "bucket", sb, "key", sk, "to_bucket", db, "to_key", dk, "err", err)
		return toErrno(err)
	}
	f.stats.putMissing(sck)
	return 0
}

// maxCopy is the largest object one CopyObject copies (S3's bound).
var maxCopy int64 = 5 << 30

// copyPartSize is the part of a copy of a larger object.
var copyPartSize int64 = 512 << 20

func copySource(bucket, key string) string {
	return url.PathEscape(bucket) + "/" + strings.ReplaceAll(url.PathEscape(key), "%2F", "/")
}

// copyObject copies an object of meta m, pinned to its ETag.
func (f *FS) copyObject(ctx context.Context, sb, sk, db, dk string, m meta) error {
	srcName := copySource(sb, sk)
	var ifMatch *string
	if m.etag != "" {
		ifMatch = aws.String(m.etag)
	}
	if m.size <= maxCopy {
		return f.doTimeout(ctx, "CopyObject", f.sizedTimeout(m.size), func(ctx context.Context) error {
			_, err := f.api.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &db, Key: &dk, CopySource: &srcName, CopySourceIfMatch: ifMatch})
			return err
		})
	}
	var out *s3.CreateMultipartUploadOutput
	err := f.do(ctx, "CreateMultipartUpload", func(ctx context.Context) error {
		var err error
		out, err = f.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &db, Key: &dk})
		return err
	})
	if err != nil {
		return err
	}
	id := out.UploadId
	part := max(copyPartSize, (m.size+9999)/10000)
	nparts := (m.size + part - 1) / part
	etags := make([]string, nparts)
	errs := make(chan error, nparts)
	slots := make(chan struct{}, f.cfg.WriteParallel)
	var wg sync.WaitGroup
	for i := range nparts {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			first, last := i*part, min((i+1)*part, m.size)-1
			errs <- f.doTimeout(ctx, "UploadPartCopy", f.sizedTimeout(last-first+1), func(ctx context.Context) error {
				o, err := f.api.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
					Bucket: &db, Key: &dk, UploadId: id, PartNumber: aws.Int32(int32(i + 1)),
					CopySource: &srcName, CopySourceIfMatch: ifMatch, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", first, last)),
				})
				if err == nil {
					etags[i] = aws.ToString(o.CopyPartResult.ETag)
				}
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		if e != nil {
			err = e
		}
	}
	if err == nil {
		parts := make([]types.CompletedPart, nparts)
		for i := range parts {
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(etags[i])}
		}
		err = f.doTimeout(ctx, "CompleteMultipartUpload", f.sizedTimeout(m.size), func(ctx context.Context) error {
			_, err := f.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &db, Key: &dk, UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			return err
		})
	}
	if err != nil {
		_ = f.do(context.Background(), "AbortMultipartUpload", func(actx context.Context) error {
			_, aerr := f.api.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &db, Key: &dk, UploadId: id})
			return aerr
		})
	}
	return err
}

var _ fs.NodeSetxattrer = (*node)(nil)

// Setxattr is EOPNOTSUPP: S3 keeps no extended attributes or ACLs. (go-fuse
// answers ENODATA by default, which makes `cp -p` fail instead of falling
// back to chmod.)
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}
