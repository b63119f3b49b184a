package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/fedgate/fedgate/store"
)

// Put streams body into a staging file, appends the metadata, fsyncs it and
// commits it as key in one atomic step (see commit). size may be -1; with
// size >= 0 exactly size bytes are read and a shorter body fails with
// io.ErrUnexpectedEOF.
//
// Errors: ErrInvalidKey; ErrPreconditionFailed per opts.IfNoneMatch and
// opts.IfMatch; the body's read error or ctx's error (wrapped). On any error
// nothing is written and an object already under key is left as it was.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	rel, err := objectPath(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("posix: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	st, err := s.newStaged()
	if err != nil {
		return store.ObjectInfo{}, mapErr("put", key, err)
	}
	defer st.discard()
	if err := st.copyBody(ctx, body, size); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("posix: put %q: %w", key, err)
	}
	m := metaOf(opts.Metadata)
	m.ETag = st.etag
	if opts.LateChecksums != nil {
		m.Checksums = store.MergeMaps(m.Checksums, opts.LateChecksums())
	}
	if err := st.finish(key, &m); err != nil {
		return store.ObjectInfo{}, mapErr("put", key, err)
	}
	if err := s.commit(ctx, key, rel, st, opts); err != nil {
		return store.ObjectInfo{}, err
	}
	return infoOf(key, st.size, m, st.fi), nil
}

// commit moves the finished staging file st to rel, the path of key:
// link(2) for opts.IfNoneMatch (EEXIST -> ErrPreconditionFailed, atomic
// across nodes sharing an NFS mount), rename(2) otherwise, after checking
// opts.IfMatch under the key's lock. Missing parent directories are created;
// a Delete pruning them meanwhile makes the link or rename fail with ENOENT,
// which is retried. The parent directory is fsynced before returning.
func (s *Store) commit(ctx context.Context, key, rel string, st *staged, opts store.PutOptions) error {
	if err := s.move(ctx, key, rel, st, opts); err != nil {
		return err
	}
	// ENOENT: a Delete of key has removed the object and pruned its
	// directory since; the Put happened before it.
	if err := s.syncDir(parentDir(rel)); err != nil && !isNotExist(err) {
		return mapErr("put", key, err)
	}
	return nil
}

// move checks opts.IfMatch and links or renames st to rel, under key's lock.
func (s *Store) move(ctx context.Context, key, rel string, st *staged, opts store.PutOptions) error {
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	// old: the file replaced, whose record file (if it has one) goes
	// with it.
	var old os.FileInfo
	if opts.IfMatch != "" || s.records.Load() && !opts.IfNoneMatch {
		fi, err := s.root.Stat(rel)
		switch {
		case isNotExist(err) && opts.IfMatch != "":
			return fmt.Errorf("posix: put %q: key does not exist: %w", key, store.ErrPreconditionFailed)
		case isNotExist(err):
		case err != nil:
			return mapErr("put", key, err)
		case opts.IfMatch != "" && validatorOf(fi) != opts.IfMatch:
			return fmt.Errorf("posix: put %q: validator %s, want %s: %w",
				key, validatorOf(fi), opts.IfMatch, store.ErrPreconditionFailed)
		default:
			old = fi
		}
	}
	op := s.root.Rename
	if opts.IfNoneMatch {
		op = s.root.Link
	}
	dir := parentDir(rel)
	for attempt := 0; ; attempt++ {
		err := op(st.rel, rel)
		if err == nil || s.committed(st, rel) {
			// committed: an NFS client retransmitting a LINK or RENAME
			// whose reply was lost gets EEXIST or ENOENT for its own
			// success; the inode under rel tells.
			st.moved = !opts.IfNoneMatch // a link leaves the staged name
			if old != nil && !os.SameFile(old, st.fi) {
				s.dropRecord(old)
			}
			break
		}
		if opts.IfNoneMatch && errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("posix: put %q: key exists: %w", key, store.ErrPreconditionFailed)
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 100 {
			return mapErr("put", key, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.mkdirs(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return mapErr("put", key, err)
		}
	}
	return nil
}

// committed reports whether rel is the staged file st.
func (s *Store) committed(st *staged, rel string) bool {
	fi, err := s.root.Stat(rel)
	return err == nil && os.SameFile(fi, st.fi)
}
