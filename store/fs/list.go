package fs

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// List yields the tree's keys in S3 byte order (see walk): each directory
// is read and sorted when the walk reaches it, and nothing else is held,
// so a tree of millions of files lists in the memory of its largest
// directory. Entries carry size, mtime, Validator and ETag (one
// extended-attribute read per file); their Metadata is left empty. An
// unreadable directory yields an error naming its prefix.
func (s *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		for e, err := range walk(s.root, s.dirs, opts.Prefix, opts.StartAfter, opts.Delimiter) {
			if cerr := ctx.Err(); cerr != nil {
				yield(store.Entry{}, cerr)
				return
			}
			if err != nil {
				if !yield(store.Entry{Key: e.Key}, mapErr("list", e.Key, err)) {
					return
				}
				continue
			}
			if e.IsPrefix {
				if !yield(store.Entry{Key: e.Key, IsPrefix: true}, nil) {
					return
				}
				continue
			}
			info := store.ObjectInfo{Key: e.Key, Size: e.Info.Size(), ModTime: e.Info.ModTime(), Validator: validatorOf(e.Info)}
			info.ETag = s.listMeta(e.Key).etag(e.Info)
			if !yield(store.Entry{Key: e.Key, Info: info}, nil) {
				return
			}
		}
	}
}

// listMeta reads the metadata attribute of the listed file key by path,
// without opening it. lgetxattr does not follow the last segment; a
// directory above swapped for a link meanwhile could make it read another
// file's attribute, which is then not bound to this file's inode and size
// (the ETag falls back to the Validator's).
func (s *Store) listMeta(key string) meta {
	var m meta
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(filepath.Join(s.dir, key), metaAttr, buf)
	if errors.Is(err, unix.ERANGE) {
		buf = make([]byte, 1<<16)
		n, err = unix.Lgetxattr(filepath.Join(s.dir, key), metaAttr, buf)
	}
	if err != nil || json.Unmarshal(buf[:n], &m) != nil {
		return meta{}
	}
	return m
}
