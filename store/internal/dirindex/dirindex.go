// Package dirindex keeps the sorted entries of large directories between
// the pages of a listing, so that a listing of a flat directory reads and
// sorts the directory once instead of once per page.
//
// An Index is one directory's children: their sort keys (the key fragment
// each child stands for, relative to the directory) and a kind byte each,
// packed into one byte buffer with 32-bit offsets (the key's bytes plus 5
// bytes per child), sorted in byte order. A Cache holds the indexes of the
// directories a store's listings read lately, keyed by the directory and
// validated against the directory's inode, size, mtime and ctime: any
// entry added, removed or renamed in the directory changes its mtime and
// ctime, so a changed directory is read again. An index built less than
// RacyWindow after the directory's last change is used by the listing that
// built it but not kept (a change in the same timestamp tick would go
// unseen, as in git's "racy" index entries). Indexes are dropped after TTL
// unused and, least recently used first, when the cache holds more than
// MaxBytes or MaxEntries.
package dirindex

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Index is the sorted children of one directory. It is immutable once
// built and safe for concurrent readers.
type Index struct {
	buf  []byte
	offs []uint32 // child i's key is buf[offs[i]:offs[i+1]]
	kind []byte
}

// Len returns the number of children.
func (ix *Index) Len() int { return len(ix.kind) }

// At returns child i's key fragment and kind. The string shares the
// index's memory (never modified).
func (ix *Index) At(i int) (string, byte) {
	b := ix.buf[ix.offs[i]:ix.offs[i+1]]
	if len(b) == 0 {
		return "", ix.kind[i]
	}
	return unsafe.String(&b[0], len(b)), ix.kind[i]
}

// Search returns the index of the first child whose key is >= key.
func (ix *Index) Search(key string) int {
	lo, hi := 0, ix.Len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if k, _ := ix.At(m); k < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// First returns the first child of a directory whose keys all start with
// base that may hold keys >= target: every earlier child's keys sort before
// target. It assumes the children's key sets never interleave (every key
// of a child starts with its fragment, and no fragment is a proper prefix
// of a sibling's unless that sibling's only key is its fragment, a leaf),
// so the one earlier child that may hold keys >= target is a non-leaf whose
// fragment is a prefix of target, just before where target would go.
func (ix *Index) First(base, target string, leaf func(kind byte) bool) int {
	if !strings.HasPrefix(target, base) {
		if target < base {
			return 0
		}
		return ix.Len() // every key here starts with base, so sorts before target
	}
	rel := target[len(base):]
	i := ix.Search(rel)
	if i > 0 {
		if frag, kind := ix.At(i - 1); !leaf(kind) && strings.HasPrefix(rel, frag) {
			i--
		}
	}
	return i
}

// Bytes returns the memory the index holds.
func (ix *Index) Bytes() int64 {
	return int64(cap(ix.buf) + 4*cap(ix.offs) + cap(ix.kind))
}

// Builder collects a directory's children and sorts them into an Index.
type Builder struct {
	buf  []byte
	offs []uint32
	kind []byte
}

// Add appends one child; key must not be longer than 4 GiB in total.
func (b *Builder) Add(key string, kind byte) {
	if b.offs == nil {
		b.offs = append(b.offs, 0)
	}
	b.buf = append(b.buf, key...)
	b.offs = append(b.offs, uint32(len(b.buf)))
	b.kind = append(b.kind, kind)
}

// Build sorts the children by key (byte order) and returns the index.
func (b *Builder) Build() *Index {
	n := len(b.kind)
	if n == 0 {
		return &Index{offs: []uint32{0}}
	}
	key := func(i uint32) string {
		s := b.buf[b.offs[i]:b.offs[i+1]]
		if len(s) == 0 {
			return ""
		}
		return unsafe.String(&s[0], len(s))
	}
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortFunc(perm, func(x, y uint32) int { return strings.Compare(key(x), key(y)) })
	ix := &Index{buf: make([]byte, 0, len(b.buf)), offs: make([]uint32, 1, n+1), kind: make([]byte, n)}
	for j, i := range perm {
		ix.buf = append(ix.buf, key(i)...)
		ix.offs = append(ix.offs, uint32(len(ix.buf)))
		ix.kind[j] = b.kind[i]
	}
	*b = Builder{}
	return ix
}

// stamp is what a directory's index is validated against.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func stampOf(fi os.FileInfo) (stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true
}

func (s stamp) changed() time.Time {
	m := time.Unix(s.mtime.Unix())
	if c := time.Unix(s.ctime.Unix()); c.After(m) {
		return c
	}
	return m
}

// Defaults of a Cache.
const (
	DefaultMaxBytes   = 256 << 20
	DefaultMaxEntries = 64
	DefaultTTL        = 2 * time.Minute
	// MinChildren: smaller directories are not kept (reading them is as
	// cheap as a lookup).
	MinChildren = 512
	// RacyWindow: an index of a directory changed this recently is not
	// kept (timestamps are taken from a coarse clock).
	RacyWindow = 100 * time.Millisecond
)

// Cache holds recently read directory indexes. The zero value is not
// usable; use New.
type Cache struct {
	MaxBytes   int64
	MaxEntries int
	TTL        time.Duration
	Now        func() time.Time

	mu    sync.Mutex
	m     map[string]*list.Element
	lru   list.List // of *entry, most recently used first
	bytes int64
	// building: directories being read, so concurrent listers of one
	// directory read it once.
	building map[string]*build
	hits     int64
	misses   int64 // reads of directories worth keeping
}

type entry struct {
	dir  string
	st   stamp
	ix   *Index
	used time.Time
}

type build struct {
	done chan struct{}
	st   stamp
	ix   *Index
	err  error
}

// New returns a cache with the default bounds.
func New() *Cache {
	return &Cache{MaxBytes: DefaultMaxBytes, MaxEntries: DefaultMaxEntries, TTL: DefaultTTL, Now: time.Now}
}

// Stats returns the number of lookups answered from the cache, the number
// of reads of directories of MinChildren or more children (those worth
// keeping), the indexes held and their bytes.
func (c *Cache) Stats() (hits, misses int64, entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, c.lru.Len(), c.bytes
}

// ReadFunc reads the children of the open directory f into b, in any order.
type ReadFunc func(f *os.File, b *Builder) error

// Get returns the index of the open directory f, named dir (any string
// unique to the directory within the cache's store). It is the cached one
// when f's stamp still matches; otherwise read builds it, from f.
// A nil Cache reads every time.
func (c *Cache) Get(f *os.File, dir string, read ReadFunc) (*Index, error) {
	if c == nil {
		return readIndex(f, read)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := stampOf(fi)
	if !ok {
		return readIndex(f, read)
	}
	c.mu.Lock()
	now := c.Now()
	c.expire(now)
	if el, ok := c.m[dir]; ok {
		e := el.Value.(*entry)
		if e.st == st {
			e.used = now
			c.lru.MoveToFront(el)
			c.hits++
			c.mu.Unlock()
			return e.ix, nil
		}
		c.remove(el)
	}
	if b, ok := c.building[dir]; ok && b.st == st {
		c.mu.Unlock()
		<-b.done
		return b.ix, b.err
	}
	b := &build{done: make(chan struct{}), st: st}
	if c.building == nil {
		c.building = map[string]*build{}
	}
	c.building[dir] = b
	c.mu.Unlock()

	start := c.Now()
	b.ix, b.err = readIndex(f, read)
	close(b.done)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.building[dir] == b {
		delete(c.building, dir)
	}
	if b.err == nil && b.ix.Len() >= MinChildren {
		c.misses++
	}
	if b.err != nil || b.ix.Len() < MinChildren || start.Sub(st.changed()) < RacyWindow || b.ix.Bytes() > c.MaxBytes {
		return b.ix, b.err
	}
	if el, ok := c.m[dir]; ok {
		c.remove(el)
	}
	if c.m == nil {
		c.m = map[string]*list.Element{}
	}
	c.m[dir] = c.lru.PushFront(&entry{dir: dir, st: st, ix: b.ix, used: c.Now()})
	c.bytes += b.ix.Bytes()
	for c.bytes > c.MaxBytes || c.lru.Len() > c.MaxEntries {
		c.remove(c.lru.Back())
	}
	return b.ix, nil
}

func readIndex(f *os.File, read ReadFunc) (*Index, error) {
	var b Builder
	if err := read(f, &b); err != nil {
		return nil, err
	}
	return b.Build(), nil
}

// expire drops the indexes unused for TTL.
func (c *Cache) expire(now time.Time) {
	for el := c.lru.Back(); el != nil; el = c.lru.Back() {
		if now.Sub(el.Value.(*entry).used) < c.TTL {
			return
		}
		c.remove(el)
	}
}

func (c *Cache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.m, e.dir)
	c.bytes -= e.ix.Bytes()
}

// Entry types ReadNames reports.
const (
	TypeOther = iota
	TypeFile  // a regular file
	TypeDir   // a directory
)

// ReadNames calls fn for every entry of directory f but "." and "..", with
// its type (TypeFile, TypeDir or TypeOther; lstat'ed where the filesystem
// does not say). It reads 64 KiB of entries at a time with getdents64 and
// allocates nothing per entry: name is valid only during the call.
func ReadNames(f *os.File, fn func(name string, typ int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		var n int
		var errno error
		if err := rc.Read(func(fd uintptr) bool {
			n, errno = unix.Getdents(int(fd), buf)
			return errno != unix.EAGAIN
		}); err != nil {
			return err
		}
		if errno == unix.EINTR {
			continue
		}
		if errno != nil {
			return &os.PathError{Op: "getdents64", Path: f.Name(), Err: errno}
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			dtype := buf[off+18]
			nb := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(nb, 0); i >= 0 {
				nb = nb[:i]
			}
			off += reclen
			if len(nb) == 0 || (len(nb) == 1 && nb[0] == '.') || (len(nb) == 2 && nb[0] == '.' && nb[1] == '.') {
				continue
			}
			name := unsafe.String(&nb[0], len(nb))
			typ := TypeOther
			switch dtype {
			case unix.DT_REG:
				typ = TypeFile
			case unix.DT_DIR:
				typ = TypeDir
			case unix.DT_UNKNOWN:
				var st unix.Stat_t
				var serr error
				rc.Control(func(fd uintptr) { serr = unix.Fstatat(int(fd), name, &st, unix.AT_SYMLINK_NOFOLLOW) })
				if serr == nil {
					switch st.Mode & unix.S_IFMT {
					case unix.S_IFREG:
						typ = TypeFile
					case unix.S_IFDIR:
						typ = TypeDir
					}
				}
			}
			fn(name, typ)
		}
	}
}
