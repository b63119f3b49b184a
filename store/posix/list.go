package posix

import (
	"context"
	"errors"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/internal/dirindex"
)

// List yields the objects and common prefixes selected by opts in S3 byte
// order of their keys. It opens the directory of opts.Prefix directly,
// reads one directory at a time (holding only the entries of the
// directories on the current path), skips subtrees whose keys are all at or
// before opts.StartAfter or outside opts.Prefix, and folds a subtree whose
// keys all share one common prefix without walking it (beyond finding one
// object in it). Common prefixes at or before StartAfter are not yielded.
//
// An error reading a directory is yielded and ends the listing; an error
// reading one object (ErrCorrupt, say) is yielded with Entry.Key set, and
// the listing goes on if the caller keeps iterating.
func (s *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if len(opts.Prefix) > MaxKeyLen || strings.IndexByte(opts.Prefix, 0) >= 0 {
			return
		}
		if err := ctx.Err(); err != nil {
			yield(store.Entry{}, err)
			return
		}
		rel, base := prefixDir(opts.Prefix)
		d, err := s.root.OpenRoot(rel)
		if err != nil {
			if !isNotExist(err) {
				yield(store.Entry{}, mapErr("list", opts.Prefix, err))
			}
			return
		}
		defer d.Close()
		l := lister{s: s, ctx: ctx, opts: opts, yield: yield}
		l.walk(d, base)
	}
}

type lister struct {
	s      *Store
	ctx    context.Context
	opts   store.ListOptions
	yield  func(store.Entry, error) bool
	lastCP string
	buf    []byte // the metadata attribute of the file being listed
}

type child struct {
	name string
	typ  byte
	key  string // the key prefix (dir, cont) or key (file) it stands for
}

// walk lists directory d, which holds keys starting with base. It returns
// false when the listing must stop.
func (l *lister) walk(d *os.Root, base string) bool {
	df, err := d.Open(".")
	if err != nil {
		l.yield(store.Entry{}, mapErr("list", base, err))
		return false
	}
	defer df.Close()
	dirfd := int(df.Fd())
	ix, err := l.s.readChildren(df, base)
	if err != nil {
		l.yield(store.Entry{}, mapErr("list", base, err))
		return false
	}
	prefix, after := l.opts.Prefix, l.opts.StartAfter
	for i := ix.First(base, max(prefix, after), isFile); i < ix.Len(); i++ {
		if err := l.ctx.Err(); err != nil {
			l.yield(store.Entry{}, err)
			return false
		}
		frag, typ := ix.At(i)
		k := child{typ: typ, key: base + frag, name: childName(typ, frag)}
		if !strings.HasPrefix(k.key, prefix) && (k.typ == typeFile || !strings.HasPrefix(prefix, k.key)) {
			if k.key > prefix {
				break // every later sibling sorts after the prefix too
			}
			continue
		}
		if k.typ == typeFile {
			if k.key > after && !l.emitFile(d, dirfd, k) {
				return false
			}
			continue
		}
		// Every key below k starts with k.key.
		if k.key <= after && !strings.HasPrefix(after, k.key) {
			continue
		}
		if cp, ok := l.fold(k.key); ok {
			if cp <= after || cp == l.lastCP {
				continue
			}
			ok, err := l.hasObject(d, k.name)
			if err != nil {
				l.yield(store.Entry{}, mapErr("list", k.key, err))
				return false
			}
			if ok {
				l.lastCP = cp
				if !l.yield(store.Entry{Key: cp, IsPrefix: true}, nil) {
					return false
				}
			}
			continue
		}
		sub, err := d.OpenRoot(k.name)
		if err != nil {
			if isNotExist(err) {
				continue // removed since it was read
			}
			l.yield(store.Entry{}, mapErr("list", k.key, err))
			return false
		}
		more := l.walk(sub, k.key)
		sub.Close()
		if !more {
			return false
		}
	}
	return true
}

func isFile(typ byte) bool { return typ == typeFile }

// childName returns the directory entry name of a child (the inverse of
// decodeName).
func childName(typ byte, frag string) string {
	if typ == typeDir {
		frag = frag[:len(frag)-1]
	}
	return string(typ) + escape(frag)
}

// readChildren returns the entries of the open directory f that the
// encoding produced, sorted by key: the store's cached index when the
// directory has not changed since it was read (so the pages of a listing
// of one large directory read it once), else read 64 KiB of entries at a
// time.
func (s *Store) readChildren(f *os.File, base string) (*dirindex.Index, error) {
	return s.dirs.Get(f, base, func(f *os.File, b *dirindex.Builder) error {
		return dirindex.ReadNames(f, func(name string, t int) {
			typ, frag, ok := decodeName(name)
			if !ok || (typ == typeFile) != (t == dirindex.TypeFile) || (typ != typeFile) != (t == dirindex.TypeDir) {
				return
			}
			b.Add(frag, typ)
		})
	})
}

// fold returns the common prefix every key starting with key folds into,
// if there is one.
func (l *lister) fold(key string) (string, bool) {
	p, delim := l.opts.Prefix, l.opts.Delimiter
	if delim == "" || !strings.HasPrefix(key, p) {
		return "", false
	}
	i := strings.Index(key[len(p):], delim)
	if i < 0 {
		return "", false
	}
	return key[:len(p)+i+len(delim)], true
}

func (l *lister) emitFile(d *os.Root, dirfd int, k child) bool {
	if cp, ok := l.fold(k.key); ok {
		if cp <= l.opts.StartAfter || cp == l.lastCP {
			return true
		}
		l.lastCP = cp
		return l.yield(store.Entry{Key: cp, IsPrefix: true}, nil)
	}
	if l.buf == nil {
		l.buf = make([]byte, 2048)
	}
	if info, ok := l.s.listInfo(dirfd, k.name, k.key, l.buf); ok {
		return l.yield(store.Entry{Key: k.key, Info: info}, nil)
	}
	f, err := d.Open(k.name)
	if err != nil {
		if isNotExist(err) {
			return true // deleted since the directory was read
		}
		return l.yield(store.Entry{Key: k.key}, mapErr("list", k.key, err))
	}
	info, err := l.s.statFile(f, k.key)
	f.Close()
	if err != nil {
		return l.yield(store.Entry{Key: k.key}, mapErr("list", k.key, err))
	}
	return l.yield(store.Entry{Key: k.key, Info: info}, nil)
}

// hasObject reports whether directory name in d holds an object at any
// depth (a crash between a Delete and its pruning may leave empty ones).
func (l *lister) hasObject(d *os.Root, name string) (bool, error) {
	sub, err := d.OpenRoot(name)
	if err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, err
	}
	defer sub.Close()
	f, err := sub.Open(".")
	if err != nil {
		return false, err
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(128)
		for _, e := range ents {
			typ, _, ok := decodeName(e.Name())
			switch {
			case !ok:
			case typ == typeFile && e.Type().IsRegular():
				return true, nil
			case typ != typeFile && e.IsDir():
				if ok, err := l.hasObject(sub, e.Name()); ok || err != nil {
					return ok, err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}
