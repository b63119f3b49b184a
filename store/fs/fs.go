// Package fs is the store kind for existing file trees: a directory on a
// local disk or a NAS (NFS, Lustre, GPFS) served as it is, with no import
// and no format of fedgate's. An object is a regular file at <root>/<key>;
// "/" in a key separates directories, and directories are not objects.
//
// Keys that cannot be such a path are refused with store.ErrInvalidKey and
// a reason: empty segments ("a//b", "/a", "a/"), "." and "..", segments of
// more than 255 bytes, names starting with ".fedgate-tmp-" (the store's
// own temporary files), and a key below a file ("a/b" where "a" is a file)
// or on a directory ("a" where "a/" holds files).
//
// Change detection: the Validator is the file's inode, size, mtime and
// ctime, so a file changed in place by any program (an `echo >>`, rsync
// --inplace restoring the mtime) gets a new one, and the region cache
// fetches it again. Symbolic links are never followed out of the root
// (os.Root), and are not objects: they are not listed, and reading one
// answers ErrNotFound. A file the gateway's user cannot read answers
// ErrAccessDenied for its key.
//
// ETags and metadata live in one extended attribute per file
// (user.fedgate, see meta.go): a file written through fedgate gets its MD5
// there, bound to the inode, size and mtime it was written with, so any
// change of the bytes outside fedgate makes it stale. A file that has no
// valid MD5 gets an ETag made from its Validator that no client takes for
// an MD5 ("<24 hex>-fs": rclone, for one, compares only 32-hex ETags with
// its own MD5). Writes (unless the policy says read_only: true) create a
// temporary file in the key's directory, fsync it and rename it into
// place; a reader sees the old file or the new one, never a mix.
package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/internal/dirindex"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
	_ store.Checker     = (*Store)(nil)
)

// Options are an fs store's settings from the policy file.
type Options struct {
	// ReadOnly refuses every write (store.ErrReadOnly): the tree is only
	// read, and nothing in it is created or changed, extended attributes
	// included.
	ReadOnly bool
}

// Store serves one directory tree.
type Store struct {
	name   string
	loc    policies.Location
	dir    string
	root   *os.Root
	rootFD int // the root, opened O_PATH, for openat2
	opts   Options
	xattrs bool // the filesystem keeps user extended attributes
	// dirs keeps the sorted names of large directories between the pages
	// of a listing (see walk).
	dirs *dirindex.Cache

	// locks serialize an IfMatch write's check and commit against other
	// writes and deletes of the same key, inside this process.
	locks [64]sync.Mutex
}

// New opens the store rooted at the existing directory dir. A missing
// directory is an error, not an empty bucket: a mistyped path or an
// unmounted NAS must not look like a tree without files.
func New(name string, loc policies.Location, dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fs: empty root path")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist (an fs store serves an existing directory: create or mount it first)", dir)
	case err != nil:
		return nil, fmt.Errorf("fs: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("fs: %w", err)
	}
	s := &Store{name: name, loc: loc, dir: dir, root: r, rootFD: fd, opts: opts, dirs: dirindex.New()}
	if f, err := s.openNoLinks(".", unix.O_PATH|unix.O_DIRECTORY); err != nil {
		s.Close()
		return nil, fmt.Errorf("openat2(2) with RESOLVE_NO_SYMLINKS (Linux 5.6 or later) is needed: %w", err)
	} else {
		f.Close()
	}
	if !opts.ReadOnly {
		if s.xattrs, err = s.probeXattrs(); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s is not writable (set read_only: true to serve it read-only): %w", dir, err)
		}
	}
	return s, nil
}

// Close releases the root directory.
func (s *Store) Close() error {
	unix.Close(s.rootFD)
	return s.root.Close()
}

// Name is the store's name in the policy file.
func (s *Store) Name() string { return s.name }

// Location is where the tree's disk is, for routing and egress accounting.
func (s *Store) Location() policies.Location { return s.loc }

// ReadOnly reports whether the policy made the store read-only.
func (s *Store) ReadOnly() bool { return s.opts.ReadOnly }

// Check reports whether the root is still the directory the store opened:
// an export unmounted or a directory replaced under a running node fails it.
func (s *Store) Check(context.Context) error {
	return store.CheckRoot(fmt.Sprintf("fs store %q", s.name), s.dir, s.root)
}

// errNoPath: a key that S3 allows but no file of the tree can have. A
// read of it finds nothing (ErrNotFound) and a delete has nothing to do;
// a write is refused (ErrInvalidKey, which it wraps).
var errNoPath = fmt.Errorf("%w: it cannot be a file path in an fs store", store.ErrInvalidKey)

// keyPath returns the path of key under the root, or an error wrapping
// store.ErrInvalidKey (errNoPath where S3 would take the key) that says why
// key cannot be a file there.
func keyPath(key string) (string, error) {
	invalid := func(why string) (string, error) {
		return "", fmt.Errorf("key %q: %s: %w", key, why, store.ErrInvalidKey)
	}
	switch {
	case key == "":
		return invalid("empty key")
	case len(key) > store.MaxKeyLen:
		return invalid(fmt.Sprintf("longer than %d bytes", store.MaxKeyLen))
	case strings.IndexByte(key, 0) >= 0:
		return invalid("it holds a NUL byte")
	case !utf8.ValidString(key):
		return invalid("not UTF-8")
	}
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("key %q: %s: %w", key, why, errNoPath)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return bad("an empty path segment (a leading, trailing or doubled '/')")
		case seg == "." || seg == "..":
			return bad("a '.' or '..' segment")
		case len(seg) > 255:
			return bad("a path segment longer than 255 bytes")
		case hidden(seg):
			return bad("names starting with " + tmpPrefix + " are the store's temporary files")
		}
	}
	if rest, ok := strings.CutPrefix(key, reservedPrefix); ok {
		return stateDir + "/" + rest, nil
	}
	return key, nil
}

// reservedPrefix starts the keys fedgate keeps in a store for itself (the
// region's claim on its default store, a placement member's marker, the
// bytes of object versions): never a bucket's, since no bucket name
// starts with '_'. The fs store keeps them out of the user's tree, in
// stateDir, so they are never listed as the tree's files; the tree's own
// top-level "_fedgate" directory, if it has one, is not served either
// (its keys name stateDir's files).
const reservedPrefix = "_fedgate/"

// stateDir is the hidden folder in the root where the keys under
// reservedPrefix live (a hidden name: never listed, never a key).
const stateDir = tmpPrefix + "state"

// legacyPath is where builds before stateDir wrote a reserved key: in the
// tree, as the key's plain path ("" for other keys).
func legacyPath(key string) string {
	if strings.HasPrefix(key, reservedPrefix) {
		return key
	}
	return ""
}

// adoptLegacy moves a reserved key's file that an older build wrote into
// the tree (legacyPath) to its place in stateDir, and removes the
// directories that leaves empty: link, then unlink, so a crash between
// leaves both and the next call finishes. A file already in stateDir
// wins. Nothing happens for other keys or on a read-only store.
func (s *Store) adoptLegacy(key string) error {
	old := legacyPath(key)
	if old == "" || s.opts.ReadOnly {
		return nil
	}
	f, err := s.openNoLinks(old, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV) {
			return nil // none (or a link, which is no object)
		}
		return mapErr("adopt", key, err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return mapErr("adopt", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	rel, _ := keyPath(key)
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	if err := s.mkdirsNoLinks(rel[:strings.LastIndexByte(rel, '/')]); err != nil {
		return mapErr("adopt", key, err)
	}
	if err := s.root.Link(old, rel); err != nil && !errors.Is(err, iofs.ErrExist) {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil // adopted by another call meanwhile
		}
		return mapErr("adopt", key, err)
	}
	if err := s.root.Remove(old); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return mapErr("adopt", key, err)
	}
	s.pruneDirs(old)
	return nil
}

// mapErr maps a filesystem error on key to the store's sentinels.
func mapErr(op, key string, err error) error {
	switch {
	case errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// ENOTDIR: a segment of the key is a file, so the key is no file.
		return fmt.Errorf("fs: %s %q: %w (%w)", op, key, store.ErrNotFound, err)
	case errors.Is(err, iofs.ErrPermission):
		return fmt.Errorf("fs: %s %q: %w (%w)", op, key, store.ErrAccessDenied, err)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("fs: %s %q: %w (%w)", op, key, store.ErrInvalidKey, err)
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		return fmt.Errorf("fs: %s %q: a symbolic link on the path: %w", op, key, store.ErrNotFound)
	}
	return fmt.Errorf("fs: %s %q: %w", op, key, err)
}

// openNoLinks opens rel under the root with openat2(2), refusing a
// symbolic link at any segment (ELOOP) and any path out of the root
// (EXDEV): what is not listed cannot be read through a link either.
func (s *Store) openNoLinks(rel string, flags int) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
	for {
		fd, err := unix.Openat2(s.rootFD, rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // EAGAIN: a concurrent rename; the kernel asks for a retry
		}
		if err != nil {
			return nil, &iofs.PathError{Op: "openat2", Path: rel, Err: err}
		}
		return os.NewFile(uintptr(fd), rel), nil
	}
}

// open opens key's file for reading: a regular file reached inside the
// root through no symbolic link.
func (s *Store) open(ctx context.Context, op, key string) (*os.File, os.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rel, err := keyPath(key)
	if errors.Is(err, errNoPath) {
		return nil, nil, fmt.Errorf("fs: %s: %w (%w)", op, store.ErrNotFound, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("fs: %s: %w", op, err)
	}
	if err := s.adoptLegacy(key); err != nil {
		return nil, nil, err
	}
	f, err := s.openNoLinks(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if old := legacyPath(key); old != "" && s.opts.ReadOnly && errors.Is(err, iofs.ErrNotExist) {
		f, err = s.openNoLinks(old, unix.O_RDONLY|unix.O_NONBLOCK) // where an older build wrote it
	}
	if err != nil {
		return nil, nil, mapErr(op, key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file: %w", store.ErrNotFound)
	}
	if err != nil {
		f.Close()
		return nil, nil, mapErr(op, key, err)
	}
	return f, fi, nil
}

// Stat returns the object's info: ErrNotFound when key is no regular file,
// ErrAccessDenied when it cannot be read, ErrInvalidKey for a key no file
// can have.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	f, fi, err := s.open(ctx, "stat", key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer f.Close()
	return infoOf(key, fi, readMeta(f)), nil
}

// ReadRange streams length bytes from offset (length < 0: to the end),
// clamped to the file's size when it was opened. ErrPreconditionFailed
// when ifMatch differs from the open file's Validator.
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	f, fi, err := s.open(ctx, "read", key)
	if err != nil {
		return nil, err
	}
	if ifMatch != "" && validatorOf(fi) != ifMatch {
		f.Close()
		return nil, fmt.Errorf("fs: read %q: validator %s, want %s: %w", key, validatorOf(fi), ifMatch, store.ErrPreconditionFailed)
	}
	size := fi.Size()
	offset = min(max(offset, 0), size)
	if length < 0 || length > size-offset {
		length = size - offset
	}
	return &fileSection{SectionReader: io.NewSectionReader(f, offset, length), f: f}, nil
}

type fileSection struct {
	*io.SectionReader
	f *os.File
}

func (r *fileSection) Close() error { return r.f.Close() }

// Delete removes key's file and the directories that leaves empty (S3 has
// no empty prefixes), up to the root. A missing key, or one that names a
// directory, is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("fs: delete %q: %w", key, store.ErrReadOnly)
	}
	rel, err := keyPath(key)
	if errors.Is(err, errNoPath) {
		return nil // no file has that name
	}
	if err != nil {
		return fmt.Errorf("fs: delete: %w", err)
	}
	if err := s.adoptLegacy(key); err != nil {
		return err
	}
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	f, err := s.openNoLinks(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err == nil {
		f.Close()
	}
	switch {
	case err != nil && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV)):
		return nil // nothing, or a link: no object
	case err != nil:
		return mapErr("delete", key, err)
	}
	fi, err := s.root.Lstat(rel)
	switch {
	case err != nil && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
		return nil
	case err != nil:
		return mapErr("delete", key, err)
	case !fi.Mode().IsRegular():
		return nil // a directory or a link: no object
	}
	if err := s.root.Remove(rel); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return mapErr("delete", key, err)
	}
	s.pruneDirs(rel)
	return nil
}

// pruneDirs removes the empty directories above rel, deepest first; the
// first one that is not empty (or is in use) stops it.
func (s *Store) pruneDirs(rel string) {
	for {
		i := strings.LastIndexByte(rel, '/')
		if i < 0 {
			return
		}
		rel = rel[:i]
		if s.root.Remove(rel) != nil {
			return
		}
	}
}

func (s *Store) lock(key string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &s.locks[h%uint32(len(s.locks))]
}

// stat parts of a file the Validator and ETag are made of.
type fileID struct {
	ino          uint64
	size         int64
	mtime, ctime int64 // ns
}

func idOf(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		id.ino = st.Ino
		id.ctime = time.Unix(st.Ctim.Unix()).UnixNano()
	case *unix.Stat_t: // the listing's statInfo
		id.ino = st.Ino
		id.ctime = time.Unix(st.Ctim.Unix()).UnixNano()
	}
	return id
}

// validatorOf is the file's change detector: inode, size, mtime, ctime,
// in hex ("%x.%x.%x.%x", written without fmt: listings make one per key).
func validatorOf(fi os.FileInfo) store.Validator {
	id := idOf(fi)
	b := make([]byte, 0, 64)
	b = strconv.AppendUint(b, id.ino, 16)
	b = append(b, '.')
	b = strconv.AppendInt(b, id.size, 16)
	b = append(b, '.')
	b = strconv.AppendInt(b, id.mtime, 16)
	b = append(b, '.')
	b = strconv.AppendInt(b, id.ctime, 16)
	return store.Validator(b)
}

// infoOf is the object info of a file and its metadata attribute (m.ETag
// only if it still describes these bytes).
func infoOf(key string, fi os.FileInfo, m meta) store.ObjectInfo {
	info := store.ObjectInfo{
		Key:       key,
		Size:      fi.Size(),
		ModTime:   fi.ModTime(),
		Validator: validatorOf(fi),
		Metadata:  m.metadata(key, fi),
	}
	info.ETag = m.etag(fi)
	return info
}
