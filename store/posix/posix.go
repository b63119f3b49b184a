// Package posix is the on-prem store: a directory on a local disk or on a
// NAS mounted by every node of a region.
//
// Any S3 key is held (see keys.go for the path encoding): "a" and "a/b",
// "dir/", "a//b" and 1024-byte keys coexist, and no key names a path
// outside the root. Each object is one file holding its bytes and nothing
// else, its metadata in an extended attribute of the file (or a record
// file, see format.go), written in a staging folder, fsynced and committed
// with one rename(2) (or link(2) for create-if-absent), so data and
// metadata change together and a failed write leaves nothing.
//
// Limits: IfMatch writes are checked and committed under a lock held inside
// this process; two nodes sharing one NAS path are not serialized against
// each other for IfMatch (IfNoneMatch is atomic across nodes: link(2) fails
// with EEXIST on NFS too). Temp files of writes that died with their process
// stay in .staging until removed by hand.
package posix

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/internal/dirindex"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
	_ store.LocalFiler  = (*Store)(nil)
)

// Store is a posix store rooted at one directory.
type Store struct {
	name string
	loc  policies.Location
	dir  string
	root *os.Root

	// locks serialize the check and the commit of an IfMatch write against
	// other writes and deletes of the same key, inside this process.
	locks     [64]sync.Mutex
	lastStamp atomic.Int64
	metas     metaCache
	// dirs keeps the sorted children of large directories between the
	// pages of a listing (see List).
	dirs *dirindex.Cache

	// noAttrs: the filesystem keeps no user extended attributes, so
	// records go to record files. records: the store has record files
	// (seen or written), so a replaced or deleted object's is removed.
	noAttrs, records atomic.Bool

	// sweptFiles and sweptBytes count the abandoned staging files removed
	// (see sweepStaging).
	sweptFiles, sweptBytes atomic.Int64
}

// StaleStaging is how long a file in the store's staging folder may go
// unwritten before the store takes it for the debris of a write whose
// process died (kill -9, a crash) and removes it. A write in progress
// keeps its file's modification time fresh; the folder may be shared by
// several nodes, so age is the only safe sign.
const StaleStaging = time.Hour

// sweepStaging removes the staging files not written for StaleStaging.
func (s *Store) sweepStaging(now time.Time) {
	d, err := s.root.Open(stagingDir)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleStaging {
				continue
			}
			if s.root.Remove(stagingDir+"/"+e.Name()) == nil {
				s.sweptFiles.Add(1)
				s.sweptBytes.Add(fi.Size())
				s.dropRecord(fi) // written before the process died, if it got that far
			}
		}
		if err != nil {
			return
		}
	}
}

// Swept returns how many abandoned staging files (and their bytes) the
// store removed since it was opened: at opening and at each Check.
func (s *Store) Swept() (files, bytes int64) { return s.sweptFiles.Load(), s.sweptBytes.Load() }

// New opens (creating it if needed) the store rooted at directory root.
func New(name string, loc policies.Location, root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("posix: empty root path")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("posix: %w", err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("posix: %w", err)
	}
	for _, d := range []string{stagingDir, multipartDir} {
		if err := r.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			r.Close()
			return nil, fmt.Errorf("posix: %w", err)
		}
	}
	s := &Store{name: name, loc: loc, dir: root, root: r, dirs: dirindex.New()}
	if _, err := r.Stat(recordDir); err == nil {
		s.records.Store(true)
	}
	s.sweepStaging(time.Now())
	return s, nil
}

// Close releases the root directory. The Store must not be used after.
func (s *Store) Close() error { return s.root.Close() }

// Check reports whether the store's directory is still the one the store
// opened, and makes its staging folders again if it was emptied: a
// directory removed, replaced or unmounted under a running node fails it
// (store.Checker).
func (s *Store) Check(context.Context) error {
	if err := store.CheckRoot(fmt.Sprintf("posix store %q", s.name), s.dir, s.root); err != nil {
		return err
	}
	for _, d := range []string{stagingDir, multipartDir} {
		// Emptied under the node: the folders come back (as a write
		// would make them), and the data lost shows as degraded reads.
		if err := s.root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("posix store %q: cannot make its folder %s: %w", s.name, d, err)
		}
	}
	s.sweepStaging(time.Now())
	return nil
}

// Name is the store's name in the policy file.
func (s *Store) Name() string { return s.name }

// Location is where the root's disk is, for routing and egress accounting.
func (s *Store) Location() policies.Location { return s.loc }

// Stat returns the object's info. ErrNotFound when key does not exist,
// ErrInvalidKey for a key no store holds, ErrCorrupt (wrapped) for a
// damaged file.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	f, rel, err := s.open(ctx, "stat", key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer f.Close()
	info, _, err := s.readInfo(f, rel, key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("posix: stat %q: %w", key, err)
	}
	return info, nil
}

// statFile returns the ObjectInfo of the open object file f, read from the
// file (not from the cache).
func (s *Store) statFile(f *os.File, key string) (store.ObjectInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	size, m, _, err := s.loadMeta(f, fi)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return infoOf(key, size, m, fi), nil
}

// ReadRange streams length bytes from offset (length < 0: to the end),
// clamped to the object. ErrNotFound when key does not exist;
// ErrPreconditionFailed when ifMatch is set and differs from the object's
// Validator (checked on the open file, so the bytes read are the ones
// matched).
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	f, rel, err := s.open(ctx, "read", key)
	if err != nil {
		return nil, err
	}
	info, _, err := s.readInfo(f, rel, key)
	if err == nil && ifMatch != "" && info.Validator != ifMatch {
		err = store.ErrPreconditionFailed
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("posix: read %q: %w", key, err)
	}
	size := info.Size
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

// OpenLocal opens the object's file, which holds the object's bytes and
// nothing else: they are the whole of f, [0, info.Size). The file may be
// handed to another process (a short-circuit read): a file in format 1,
// whose metadata follows the bytes, is converted first (migrate).
// ErrNotFound when key does not exist.
func (s *Store) OpenLocal(ctx context.Context, key string) (*os.File, int64, store.ObjectInfo, error) {
	for attempt := 0; ; attempt++ {
		f, rel, err := s.open(ctx, "open", key)
		if err != nil {
			return nil, 0, store.ObjectInfo{}, err
		}
		info, fm, err := s.readInfo(f, rel, key)
		if err == nil && fm.exclusive() {
			return f, 0, info, nil
		}
		if err == nil {
			err = s.migrate(ctx, key, rel, f)
		}
		f.Close()
		if err == nil || errors.Is(err, errReplaced) {
			if attempt < 3 {
				continue // open it again: converted, or another object now
			}
			err = fmt.Errorf("%w: the object kept changing while it was converted", store.ErrPreconditionFailed)
		}
		return nil, 0, store.ObjectInfo{}, fmt.Errorf("posix: open %q: %w", key, err)
	}
}

func (s *Store) open(ctx context.Context, op, key string) (*os.File, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	rel, err := objectPath(key)
	if err != nil {
		return nil, "", fmt.Errorf("posix: %s %q: %w", op, key, err)
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, "", mapErr(op, key, err)
	}
	return f, rel, nil
}

// Delete removes the object and the directories it leaves empty. A missing
// key is not an error; ErrInvalidKey for a key no store holds.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, err := objectPath(key)
	if err != nil {
		return fmt.Errorf("posix: delete %q: %w", key, err)
	}
	mu := s.lock(key)
	mu.Lock()
	var old os.FileInfo
	if s.records.Load() {
		old, _ = s.root.Stat(rel)
	}
	err = s.root.Remove(rel)
	if err == nil {
		s.dropRecord(old)
	}
	mu.Unlock()
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return mapErr("delete", key, err)
	}
	dir := parentDir(rel)
	// A concurrent Delete may already have pruned the now-empty directory;
	// then there is nothing left to sync.
	if err := s.syncDir(dir); err != nil && !isNotExist(err) {
		return mapErr("delete", key, err)
	}
	// Prune directories left empty. rmdir fails on a directory that is not
	// empty, so this never removes a committed object; a Put that finds its
	// directory gone creates it again (see commit). The removals are not
	// fsynced: after a crash an empty directory may come back, which List
	// ignores and Put reuses.
	for dir != "." && s.root.Remove(dir) == nil {
		dir = parentDir(dir)
	}
	return nil
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// mapErr wraps err with the sentinel it stands for.
func mapErr(op, key string, err error) error {
	switch {
	case isNotExist(err):
		return fmt.Errorf("posix: %s %q: %w (%w)", op, key, store.ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("posix: %s %q: %w (%w)", op, key, store.ErrAccessDenied, err)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("posix: %s %q: %w (%w)", op, key, store.ErrInvalidKey, err)
	}
	return fmt.Errorf("posix: %s %q: %w", op, key, err)
}

func (s *Store) lock(key string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &s.locks[h%uint32(len(s.locks))]
}

func (s *Store) syncDir(rel string) error {
	d, err := s.root.Open(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// mkdirs creates rel and its missing parents, fsyncing each new entry's
// parent. It walks down with one open directory per level, so a deep key
// costs a few syscalls per level.
func (s *Store) mkdirs(rel string) error {
	if rel == "." {
		return nil
	}
	d := s.root
	defer func() {
		if d != s.root {
			d.Close()
		}
	}()
	for comp := range strings.SplitSeq(rel, "/") {
		err := d.Mkdir(comp, 0o755)
		if err == nil {
			err = syncRoot(d)
		} else if errors.Is(err, fs.ErrExist) {
			err = nil
		}
		if err != nil {
			return err
		}
		next, err := d.OpenRoot(comp)
		if err != nil {
			return err
		}
		if d != s.root {
			d.Close()
		}
		d = next
	}
	return nil
}

func syncRoot(d *os.Root) error {
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// stamp returns a modification time later than every earlier stamp of this
// Store, so that two commits never share an mtime.
func (s *Store) stamp() time.Time {
	for {
		now := time.Now().UnixNano()
		last := s.lastStamp.Load()
		if now <= last {
			now = last + 1
		}
		if s.lastStamp.CompareAndSwap(last, now) {
			return time.Unix(0, now)
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// staged is a file being written in the staging folder.
type staged struct {
	s    *Store
	f    *os.File
	rel  string
	size int64
	etag string
	fi   os.FileInfo // after finish
	// moved: renamed out of staging, so discard has nothing to remove
	// (a Put that links its file in place still does).
	moved bool
}

func (s *Store) newStaged() (*staged, error) {
	rel := stagingDir + "/" + randHex(12)
	f, err := s.root.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		// The store's directory was emptied under the running node (a
		// wiped or replaced disk): make the folder again, so writes and
		// repair work without a restart.
		if err = s.root.Mkdir(stagingDir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			f, err = s.root.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		}
	}
	if err != nil {
		return nil, err
	}
	return &staged{s: s, f: f, rel: rel}, nil
}

// discard closes the file and removes it if it is still in staging.
func (st *staged) discard() {
	st.f.Close()
	if !st.moved {
		st.s.root.Remove(st.rel)
	}
}

// copyBody writes body to the file while computing its MD5 (on another
// goroutine: store.PipeHash). With size >= 0
// it reads exactly size bytes and fails with io.ErrUnexpectedEOF on fewer.
func (st *staged) copyBody(ctx context.Context, body io.Reader, size int64) error {
	r := body
	if size >= 0 {
		r = io.LimitReader(body, size)
	}
	h := store.NewPipeHash(md5.New()) // hashed beside the writes, not between them
	defer h.Close()
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(io.MultiWriter(st.f, h), store.ContextReader(ctx, r), buf)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if size >= 0 && n < size {
		return fmt.Errorf("read body: %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if size >= 0 {
		// Read on to the body's end: a verifying reader (checksums,
		// signatures) reports a mismatch there, instead of io.EOF.
		if err := store.ExpectEOF(body); err != nil {
			return fmt.Errorf("read body: %w", err)
		}
	}
	st.size, st.etag = n, hex.EncodeToString(h.Sum(nil))
	return nil
}

// finish records m for the object key (format 2: in the file's extended
// attribute, or its record file), stamps the mtime and fsyncs the file.
func (st *staged) finish(key string, m *meta) error {
	// Stamped first: the record file, where one is needed, is named by
	// the final inode, mtime and size.
	t := st.s.stamp()
	if err := st.s.root.Chtimes(st.rel, t, t); err != nil {
		return err
	}
	fi, err := st.f.Stat()
	if err != nil {
		return err
	}
	st.fi = fi
	if _, err := st.writeRecord(key, record{Size: st.size, meta: *m}); err != nil {
		return err
	}
	return st.f.Sync()
}

// finishPart appends m as a trailer (format 1: multipart parts, never
// handed out), stamps the mtime and fsyncs the file.
func (st *staged) finishPart(m *meta) error {
	if err := writeTrailer(st.f, st.size, m); err != nil {
		return err
	}
	t := st.s.stamp()
	if err := st.s.root.Chtimes(st.rel, t, t); err != nil {
		return err
	}
	if err := st.f.Sync(); err != nil {
		return err
	}
	fi, err := st.f.Stat()
	st.fi = fi
	return err
}
