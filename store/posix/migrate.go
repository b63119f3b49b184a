package posix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// errReplaced: the object's file was replaced or removed while it was
// being converted; the caller opens the key again.
var errReplaced = errors.New("posix: the object's file was replaced while it was converted")

// migrate converts the object file f at rel, in format 1 (its metadata in
// a trailer after its bytes) or left halfway by an earlier conversion, to
// format 2, so that it holds nothing but the object's bytes (format.go):
//
//   - where the record fits in the file's extended attribute, in place
//     and crash-safe: the attribute (with the object's size) is set and
//     fsynced, then the trailer is cut off with ftruncate. A crash between
//     the two leaves formHalf, read right from the attribute and finished
//     by the next call. The file keeps its inode, so readers holding it go
//     on reading the same bytes; its Validator changes once (size, mtime).
//   - else (a filesystem without user extended attributes, a record too
//     large for them): rewritten like a Put, the bytes copied in the
//     kernel (copy_file_range) to a staged file finished with a record
//     file, committed in f's place only if f is still key's file.
//
// Idempotent, and safe against another node converting the same file.
// errReplaced when f is no longer key's file.
func (s *Store) migrate(ctx context.Context, key, rel string, f *os.File) error {
	done, err := s.convertInPlace(key, rel, f)
	if done || err != nil {
		return err
	}
	return s.convertByCopy(ctx, key, rel, f)
}

// convertInPlace is migrate's first way; false (and no error) when the
// record does not fit in the file's extended attribute.
func (s *Store) convertInPlace(key, rel string, f *os.File) (bool, error) {
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	w, err := s.root.OpenFile(rel, os.O_RDWR, 0)
	if isNotExist(err) {
		return false, errReplaced
	}
	if err != nil {
		return false, mapErr("convert", key, err)
	}
	defer w.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	wfi, err := w.Stat()
	if err != nil {
		return false, err
	}
	if !os.SameFile(fi, wfi) {
		return false, errReplaced
	}
	size, m, fm, err := s.loadMeta(w, wfi)
	if err != nil {
		return false, err
	}
	if fm.exclusive() {
		return true, nil // converted meanwhile
	}
	if fm == formTrailer && s.noAttrs.Load() {
		return false, nil
	}
	// Older builds made files any user could read; the attribute is for
	// the node's user alone (fileMode).
	if err := w.Chmod(fileMode); err != nil {
		return false, mapErr("convert", key, err)
	}
	if fm == formTrailer {
		js, err := json.Marshal(record{Size: size, meta: m})
		if err != nil {
			return false, err
		}
		// Another node converting the file too sets the same record.
		switch err := unix.Fsetxattr(int(w.Fd()), metaAttr, js, 0); {
		case noAttr(err):
			s.noAttrs.Store(true)
			return false, nil
		case attrTooSmall(err):
			return false, nil
		case err != nil:
			return false, mapErr("convert", key, fmt.Errorf("set extended attribute %s: %w", metaAttr, err))
		}
		// Durable before the trailer goes: never a file with neither.
		if err := w.Sync(); err != nil {
			return false, mapErr("convert", key, err)
		}
	}
	// formHalf, or formTrailer with its attribute now set. The cut is
	// not fsynced: lost in a crash, it leaves formHalf, done again.
	if err := w.Truncate(size); err != nil {
		return false, mapErr("convert", key, err)
	}
	return true, nil
}

// convertByCopy is migrate's second way.
func (s *Store) convertByCopy(ctx context.Context, key, rel string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size, m, fm, err := s.loadMeta(f, fi)
	if err != nil {
		return err
	}
	if fm.exclusive() {
		return nil
	}
	st, err := s.newStaged()
	if err != nil {
		return mapErr("convert", key, err)
	}
	defer st.discard()
	// *os.File to *os.File through io.LimitedReader: copy_file_range.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if n, err := io.CopyN(st.f, f, size); err != nil {
		return mapErr("convert", key, fmt.Errorf("copied %d of %d bytes: %w", n, size, err))
	}
	st.size, st.etag = size, m.ETag
	if err := st.finish(key, &m); err != nil {
		return mapErr("convert", key, err)
	}
	err = s.commit(ctx, key, rel, st, store.PutOptions{IfMatch: validatorOf(fi)})
	if errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %v", errReplaced, err)
	}
	return err
}
