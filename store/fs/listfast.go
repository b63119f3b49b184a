package fs

// The listing's fast path: each listed file is looked up relative to its
// directory's open descriptor, not through os.Root nor by its full path.

import (
	"encoding/json"
	"errors"
	iofs "io/fs"
	"path/filepath"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statInfo is an fs.FileInfo made from a raw fstatat, as os.Lstat makes
// one (its ModTime and Sys are what validatorOf and meta.bound read).
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (fi *statInfo) Name() string       { return fi.name }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *statInfo) IsDir() bool        { return fi.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (fi *statInfo) Sys() any           { return &fi.st }

// Mode is the permission bits, with the type for regular files and
// directories only (the listing keeps regular files; nothing else asks).
func (fi *statInfo) Mode() iofs.FileMode {
	m := iofs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		m |= iofs.ModeDir
	default:
		m |= iofs.ModeIrregular
	}
	return m
}

// lstatAt is the listing's lstat of name in the open directory dirfd: one
// fstatat(AT_SYMLINK_NOFOLLOW), a lookup in the directory the listing
// holds instead of os.Root's walk. ok false (any error) leaves the file
// to os.Root's Lstat, which gives the old answers and errors.
func lstatAt(dirfd int, name string) (*statInfo, bool) {
	if dirfd < 0 {
		return nil, false
	}
	fi := &statInfo{name: name}
	for {
		err := unix.Fstatat(dirfd, name, &fi.st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		return fi, err == nil
	}
}

// noGetxattrat is set once getxattrat(2) (Linux 6.13) is found missing or
// refused: listings then read attributes by full path.
var noGetxattrat atomic.Bool

// xattrArgs is struct xattr_args of getxattrat(2).
type xattrArgs struct {
	value uint64 // user pointer to the buffer
	size  uint32
	flags uint32
}

var metaAttrBytes = append([]byte(metaAttr), 0)

// getxattrAt reads attribute metaAttr of name in dirfd into buf without
// following a link: getxattrat(2) with AT_SYMLINK_NOFOLLOW. unsupported
// reports a kernel (or sandbox) without it.
func getxattrAt(dirfd int, name string, buf []byte) (n int, err error, unsupported bool) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err, false
	}
	args := xattrArgs{size: uint32(len(buf))}
	if len(buf) > 0 {
		args.value = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	for {
		r, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
			unix.AT_SYMLINK_NOFOLLOW, uintptr(unsafe.Pointer(&metaAttrBytes[0])),
			uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
		switch e {
		case 0:
			return int(r), nil, false
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EPERM, unix.EINVAL:
			// EPERM: a seccomp filter that does not know the call; EINVAL:
			// a kernel that checks flags or sizes otherwise. The path-based
			// call answers these files the old way.
			return 0, e, true
		}
		return 0, e, false
	}
}

// listMeta reads the metadata attribute of the listed file name in the
// open directory dirfd (key's), into buf when it fits. Without dirfd (< 0)
// or getxattrat(2), it reads by full path with lgetxattr, which does not
// follow the last segment; a directory above swapped for a link meanwhile
// could make that read another file's attribute, which is then not bound
// to this file's inode and size (the ETag falls back to the Validator's).
func (s *Store) listMeta(dirfd int, name, key string, buf []byte) meta {
	var n int
	var err error
	read := func(b []byte) (int, error) { return unix.Lgetxattr(filepath.Join(s.dir, key), metaAttr, b) }
	if dirfd >= 0 && !noGetxattrat.Load() {
		var unsupported bool
		if n, err, unsupported = getxattrAt(dirfd, name, buf); unsupported {
			noGetxattrat.Store(true)
			n, err = read(buf)
		} else {
			read = func(b []byte) (int, error) {
				n, err, _ := getxattrAt(dirfd, name, b)
				return n, err
			}
		}
	} else {
		n, err = read(buf)
	}
	if errors.Is(err, unix.ERANGE) {
		buf = make([]byte, 1<<16)
		n, err = read(buf)
	}
	if err != nil || n == 0 {
		return meta{}
	}
	var m meta
	if json.Unmarshal(buf[:n], &m) != nil {
		return meta{}
	}
	return m
}
