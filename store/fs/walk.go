package fs

// The listing: a walk of the tree that yields keys in S3's byte order
// without sorting the whole tree.

import (
	"errors"
	"io/fs"
	"iter"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fedgate/fedgate/store/internal/dirindex"
)

// walkEntry is a key (a regular file) or, with a delimiter, a common
// prefix.
type walkEntry struct {
	Key      string
	IsPrefix bool
	Info     fs.FileInfo // files only
	// dirfd is the open descriptor of a file's directory (files only),
	// valid while the entry is yielded.
	dirfd int
}

// hidden reports names the walk never shows: fedgate's temporary files of
// writes in progress.
func hidden(name string) bool { return strings.HasPrefix(name, tmpPrefix) }

// tmpPrefix starts the names of files being written (renamed into place
// when complete).
const tmpPrefix = ".fedgate-tmp-"

// Children are sorted by the key order of each: a file's key, or a
// directory's path with its trailing "/" — every key below a directory d
// starts with d+"/", and compares with any sibling's key as d+"/" does, so
// ordering siblings by these keys and walking depth first gives byte order
// over the whole tree ("a-b" < "a/..." < "a0"). A directory's index holds
// these fragments relative to the directory, with kind kindFile or kindDir.
const (
	kindFile = 'f'
	kindDir  = 'd'
)

func isFileKind(k byte) bool { return k == kindFile }

// walk yields the keys under root in byte order: those starting with
// prefix, after startAfter; with a delimiter, keys that contain it after
// the prefix are folded into one common prefix each (as S3 lists). Only
// regular files are keys: symbolic links, devices and sockets are left
// out (os.Root never follows a link out of the tree), and so are hidden
// names. Each directory's names are read and sorted when the walk reaches
// it; nothing else is held. An unreadable directory yields an error with
// the key it stands for, and the walk goes on.
//
// dirs, when not nil, keeps large directories' sorted names between
// walks (the pages of one listing), validated by each directory's mtime
// and ctime (see dirindex).
func walk(root *os.Root, dirs *dirindex.Cache, prefix, startAfter, delimiter string) iter.Seq2[walkEntry, error] {
	return func(yield func(walkEntry, error) bool) {
		w := &walker{root: root, dirs: dirs, prefix: prefix, startAfter: startAfter, delim: delimiter, yield: yield}
		w.dir("")
	}
}

type walker struct {
	root                      *os.Root
	dirs                      *dirindex.Cache
	prefix, startAfter, delim string
	yield                     func(walkEntry, error) bool
	lastPrefix                string // the last common prefix yielded
	stopped                   bool
}

func (w *walker) emit(e walkEntry, err error) bool {
	if w.stopped {
		return false
	}
	if !w.yield(e, err) {
		w.stopped = true
	}
	return !w.stopped
}

// dir walks directory path (its key prefix: "" or ending in "/").
func (w *walker) dir(path string) bool {
	name := strings.TrimSuffix(path, "/")
	if name == "" {
		name = "."
	}
	d, err := w.root.OpenRoot(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && path == "" {
			return true
		}
		return w.emit(walkEntry{Key: path}, err)
	}
	defer d.Close()
	f, err := d.Open(".")
	if err != nil {
		return w.emit(walkEntry{Key: path}, err)
	}
	defer f.Close()
	ix, err := w.children(f, path)
	if err != nil {
		return w.emit(walkEntry{Key: path}, err)
	}
	dirfd := int(f.Fd()) // a directory: Fd leaves it as it is
	for i := ix.First(path, max(w.prefix, w.startAfter), isFileKind); i < ix.Len(); i++ {
		frag, kind := ix.At(i)
		key := path + frag
		if key > w.prefix && !strings.HasPrefix(key, w.prefix) && !strings.HasPrefix(w.prefix, key) {
			break // every later sibling sorts after the prefix too
		}
		if !w.visit(d, dirfd, key, kind == kindDir) {
			return false
		}
	}
	return true
}

// children returns the open directory f's (path's) files and
// directories, sorted.
func (w *walker) children(f *os.File, path string) (*dirindex.Index, error) {
	return w.dirs.Get(f, path, func(f *os.File, b *dirindex.Builder) error {
		return dirindex.ReadNames(f, func(name string, typ int) {
			if hidden(name) || !utf8.ValidString(name) {
				return // not UTF-8: no S3 key names it
			}
			if path == "" && name+"/" == reservedPrefix {
				return // its keys are fedgate's own, kept in stateDir
			}
			switch typ {
			case dirindex.TypeFile:
				b.Add(name, kindFile)
			case dirindex.TypeDir:
				b.Add(name+"/", kindDir)
			}
		})
	})
}

// visit walks one child of directory d (open as dirfd): a file (key) or
// a directory (key ends in "/").
func (w *walker) visit(d *os.Root, dirfd int, key string, dir bool) bool {
	if !dir {
		if !strings.HasPrefix(key, w.prefix) || key <= w.startAfter {
			return true
		}
		if cp, ok := w.commonPrefix(key); ok {
			return w.emitPrefix(cp)
		}
		name := key[strings.LastIndexByte(key, '/')+1:]
		var info fs.FileInfo
		var err error
		if fi, ok := lstatAt(dirfd, name); ok {
			info = fi
		} else {
			info, err = d.Lstat(name) // the old path: its answers and errors
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return true // removed since the directory was read
			}
			return w.emit(walkEntry{Key: key}, err)
		}
		if !info.Mode().IsRegular() {
			return true // replaced since the directory was read
		}
		return w.emit(walkEntry{Key: key, Info: info, dirfd: dirfd}, nil)
	}
	// A directory: every key below it starts with key.
	if !strings.HasPrefix(w.prefix, key) && !strings.HasPrefix(key, w.prefix) {
		return true // neither inside the prefix nor on the way to it
	}
	if w.startAfter >= key && !strings.HasPrefix(w.startAfter, key) {
		return true // every key below sorts at or before startAfter
	}
	if strings.HasPrefix(key, w.prefix) {
		if cp, ok := w.commonPrefix(key); ok {
			// The delimiter occurs in the directory's own path after the
			// prefix, so every key below folds into cp: list it once, if
			// the directory holds a key at all (S3 has no empty
			// prefixes).
			if cp <= w.startAfter || cp == w.lastPrefix {
				return true
			}
			if has, err := w.hasKey(key); err != nil {
				return w.emit(walkEntry{Key: key}, err)
			} else if !has {
				return true
			}
			return w.emitPrefix(cp)
		}
	}
	return w.dir(key)
}

// commonPrefix returns the common prefix key folds into: up to and
// including the first delimiter after the listing prefix.
func (w *walker) commonPrefix(key string) (string, bool) {
	if w.delim == "" {
		return "", false
	}
	i := strings.Index(key[len(w.prefix):], w.delim)
	if i < 0 {
		return "", false
	}
	return key[:len(w.prefix)+i+len(w.delim)], true
}

func (w *walker) emitPrefix(cp string) bool {
	if cp == w.lastPrefix || cp <= w.startAfter {
		return true // keys folding into one prefix are adjacent in byte order
	}
	w.lastPrefix = cp
	return w.emit(walkEntry{Key: cp, IsPrefix: true}, nil)
}

// hasKey reports whether directory path holds a regular file, at any
// depth.
func (w *walker) hasKey(path string) (bool, error) {
	f, err := w.root.Open(strings.TrimSuffix(path, "/"))
	if err != nil {
		return false, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if !hidden(e.Name()) && e.Type().IsRegular() {
			return true, nil
		}
	}
	for _, e := range ents {
		if !hidden(e.Name()) && e.IsDir() {
			if ok, err := w.hasKey(path + e.Name() + "/"); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}
