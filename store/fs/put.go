package fs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// temp is a file being written next to its key, under a hidden name.
type temp struct {
	s   *Store
	rel string // the temporary file's path
	f   *os.File
}

// newTemp creates the temporary file of a write of key (path rel), making
// the key's missing directories. A segment of rel that is a file makes the
// key impossible: ErrInvalidKey, naming it. A directory removed between
// its making and the file's creation (a Delete or a failed write pruning
// it, a Put of a file of that name taking its place while it was empty) is
// made again.
func (s *Store) newTemp(key, rel string) (*temp, error) {
	dir := ""
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir = rel[:i]
	}
	for attempt := 0; ; attempt++ {
		t, err := s.tryTemp(key, dir)
		switch {
		case err == nil || !errors.Is(err, iofs.ErrNotExist) || errors.Is(err, store.ErrNotFound):
			return t, err
		case attempt == 20:
			return nil, mapErr("put", key, err)
		}
	}
}

func (s *Store) tryTemp(key, dir string) (*temp, error) {
	if dir != "" {
		// The key's directory is made and reached through no link: a
		// write goes where the listing will show it, and nothing is made
		// through a link first.
		if err := s.mkdirsNoLinks(dir); err != nil {
			if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV) {
				return nil, fmt.Errorf("fs: put %q: a segment of %q is a symbolic link, and the store writes no key through one: %w", key, dir, store.ErrInvalidKey)
			}
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, iofs.ErrExist) {
				return nil, fmt.Errorf("fs: put %q: %w", key, s.fileOnPath(key, dir))
			}
			if errors.Is(err, iofs.ErrNotExist) {
				return nil, err // removed meanwhile: again
			}
			return nil, mapErr("put", key, err)
		}
	}
	name := tmpPrefix + store.RandomID()
	if dir != "" {
		name = dir + "/" + name
	}
	f, err := s.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("fs: put %q: %w", key, s.fileOnPath(key, dir))
	case errors.Is(err, iofs.ErrNotExist):
		return nil, err // removed meanwhile: again
	case err != nil:
		return nil, mapErr("put", key, err)
	}
	return &temp{s: s, rel: name, f: f}, nil
}

// mkdirsNoLinks makes the directory rel and its missing parents one
// segment at a time, each reached with openat2(2) refusing symbolic links:
// a segment that is a link fails with ELOOP (EXDEV out of the root) before
// anything is made below it, and one that is a file with ENOTDIR.
func (s *Store) mkdirsNoLinks(rel string) error {
	parent := s.rootFD
	defer func() {
		if parent != s.rootFD {
			unix.Close(parent)
		}
	}()
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
	done := ""
	for seg := range strings.SplitSeq(rel, "/") {
		done = path.Join(done, seg)
		if err := unix.Mkdirat(parent, seg, 0o755); err != nil && err != unix.EEXIST {
			return &iofs.PathError{Op: "mkdirat", Path: done, Err: err}
		}
		var fd int
		var err error
		for {
			fd, err = unix.Openat2(parent, seg, &how)
			if err != unix.EINTR && err != unix.EAGAIN {
				break
			}
		}
		if err != nil {
			return &iofs.PathError{Op: "openat2", Path: done, Err: err}
		}
		if parent != s.rootFD {
			unix.Close(parent)
		}
		parent = fd
	}
	return nil
}

// fileOnPath explains why key cannot be written: a segment of dir is a
// file.
func (s *Store) fileOnPath(key, dir string) error {
	segs := strings.Split(dir, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		if fi, err := s.root.Lstat(p); err == nil && !fi.IsDir() {
			return fmt.Errorf("%q is a file, so no key can be below it: %w", p, store.ErrInvalidKey)
		}
	}
	return fmt.Errorf("a segment of %q is not a directory: %w", dir, store.ErrInvalidKey)
}

// discard removes the temporary file unless it was committed, and the
// directories that leaves empty (made for it, say).
func (t *temp) discard() {
	if t.f != nil {
		t.f.Close()
		t.s.root.Remove(t.rel)
		t.s.pruneDirs(t.rel)
	}
}

// Put streams body into a temporary file in key's directory, fsyncs it,
// records its MD5 and metadata in its extended attribute and renames it
// onto key (link(2) for IfNoneMatch). Errors: ErrReadOnly; ErrInvalidKey
// for a key that cannot be a file here; ErrMetadataNotSupported for
// metadata a filesystem without extended attributes cannot keep;
// ErrPreconditionFailed per opts; the body's error. On any error the tree
// is as it was.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if s.opts.ReadOnly {
		return store.ObjectInfo{}, fmt.Errorf("fs: put %q: %w", key, store.ErrReadOnly)
	}
	rel, err := keyPath(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("fs: put: %w", err)
	}
	if !s.xattrs && !onlyDerived(opts.Metadata) {
		return store.ObjectInfo{}, fmt.Errorf("fs: put %q: the filesystem under %s has no extended attributes to keep user metadata and content headers in: %w", key, s.dir, store.ErrMetadataNotSupported)
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := s.adoptLegacy(key); err != nil { // so If-None-Match sees it
		return store.ObjectInfo{}, err
	}
	t, err := s.newTemp(key, rel)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer t.discard()
	etag, err := t.copyBody(ctx, body, size)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("fs: put %q: %w", key, err)
	}
	m := metaOf(opts.Metadata)
	m.ETag = etag
	if opts.LateChecksums != nil {
		m.Checksums = store.MergeMaps(m.Checksums, opts.LateChecksums())
	}
	return s.commit(ctx, key, rel, t, m, opts)
}

// copyBody writes body to the temporary file, hashing it beside the
// writes, and returns its hex MD5.
func (t *temp) copyBody(ctx context.Context, body io.Reader, size int64) (string, error) {
	r := body
	if size >= 0 {
		r = io.LimitReader(body, size)
	}
	h := store.NewPipeHash(md5.New())
	defer h.Close()
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(io.MultiWriter(t.f, h), store.ContextReader(ctx, r), buf)
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if size >= 0 && n < size {
		return "", fmt.Errorf("read body: %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if size >= 0 {
		if err := store.ExpectEOF(body); err != nil {
			return "", fmt.Errorf("read body: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// commit fsyncs the temporary file, records m on it and moves it onto
// rel: after checking opts.IfMatch under key's lock, by rename(2), or by
// link(2) for opts.IfNoneMatch (atomic across nodes sharing an NFS
// export). The directory is fsynced before it returns.
func (s *Store) commit(ctx context.Context, key, rel string, t *temp, m meta, opts store.PutOptions) (store.ObjectInfo, error) {
	if s.xattrs {
		fi, err := t.f.Stat()
		if err != nil {
			return store.ObjectInfo{}, mapErr("put", key, err)
		}
		m.bind(fi)
		if err := writeMeta(t.f, m); err != nil {
			return store.ObjectInfo{}, fmt.Errorf("fs: put %q: %w", key, err)
		}
	}
	if err := t.f.Sync(); err != nil {
		return store.ObjectInfo{}, mapErr("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	mu := s.lock(key)
	mu.Lock()
	err := s.move(key, rel, t, opts)
	mu.Unlock()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	fi, err := t.f.Stat() // after the move: it changed the ctime
	if err != nil {
		return store.ObjectInfo{}, mapErr("put", key, err)
	}
	t.f.Close()
	t.f = nil
	dir := "."
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir = rel[:i]
	}
	if d, err := s.root.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return store.ObjectInfo{}, mapErr("put", key, err)
		}
	}
	if !s.xattrs {
		m = meta{} // kept nowhere: answer what the next Stat will
	}
	return infoOf(key, fi, m), nil
}

func (s *Store) move(key, rel string, t *temp, opts store.PutOptions) error {
	cur, err := s.root.Lstat(rel)
	if err == nil && cur.IsDir() && s.root.Remove(rel) == nil {
		cur, err = s.root.Lstat(rel) // an empty directory (no keys) gives way
	}
	switch {
	case err == nil && cur.IsDir():
		return fmt.Errorf("fs: put %q: %q is a directory holding other keys, so it cannot be a file: %w", key, rel, store.ErrInvalidKey)
	case err == nil && !cur.Mode().IsRegular():
		return fmt.Errorf("fs: put %q: %q is not a regular file (a symbolic link, say) and is not replaced: %w", key, rel, store.ErrInvalidKey)
	case opts.IfMatch != "" && err != nil:
		return fmt.Errorf("fs: put %q: key does not exist: %w", key, store.ErrPreconditionFailed)
	case opts.IfMatch != "" && validatorOf(cur) != opts.IfMatch:
		return fmt.Errorf("fs: put %q: validator %s, want %s: %w", key, validatorOf(cur), opts.IfMatch, store.ErrPreconditionFailed)
	}
	if opts.IfNoneMatch {
		err := s.root.Link(t.rel, rel)
		if errors.Is(err, iofs.ErrExist) {
			return fmt.Errorf("fs: put %q: key exists: %w", key, store.ErrPreconditionFailed)
		}
		if err != nil {
			return mapErr("put", key, err)
		}
		if err := s.root.Remove(t.rel); err != nil {
			return mapErr("put", key, err)
		}
		return nil
	}
	if err := s.root.Rename(t.rel, rel); err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, iofs.ErrExist) {
			return fmt.Errorf("fs: put %q: %q is a directory holding other keys, so it cannot be a file: %w", key, rel, store.ErrInvalidKey)
		}
		return mapErr("put", key, err)
	}
	return nil
}
