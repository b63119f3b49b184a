package fs

import (
	"context"
	"iter"

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
		buf := make([]byte, 4096) // attributes, for the whole listing
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
			info.ETag = s.listMeta(e.dirfd, e.Info.Name(), e.Key, buf).etag(e.Info)
			if !yield(store.Entry{Key: e.Key, Info: info}, nil) {
				return
			}
		}
	}
}
