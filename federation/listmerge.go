package federation

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// overlayItem is what the write-back journal adds to (or, as a tombstone,
// removes from) a listing: an object, or the common prefix it folds into.
type overlayItem struct {
	key       string
	isPrefix  bool
	tombstone bool
	entry     regionstate.JournalEntry
}

// overlay turns a bucket's pending journal entries into listing items for
// opts, sorted and with each common prefix once.
func overlay(entries []regionstate.JournalEntry, opts store.ListOptions) []overlayItem {
	var out []overlayItem
	for _, e := range entries {
		it := overlayItem{key: e.Key, tombstone: e.Tombstone, entry: e}
		if opts.Delimiter != "" {
			rest := e.Key[len(opts.Prefix):]
			if i := strings.Index(rest, opts.Delimiter); i >= 0 {
				if e.Tombstone {
					continue // a delete cannot hide a prefix other keys may still fill
				}
				it = overlayItem{key: opts.Prefix + rest[:i+len(opts.Delimiter)], isPrefix: true}
			}
		}
		if it.key <= opts.StartAfter {
			continue
		}
		if n := len(out); n > 0 && it.isPrefix && out[n-1].isPrefix && out[n-1].key == it.key {
			continue
		}
		out = append(out, it)
	}
	return out
}

// objectEntries drops the journal entries holding the bytes of versions
// (keyed by their store keys, listed through the version index).
func objectEntries(es []regionstate.JournalEntry) []regionstate.JournalEntry {
	return slices.DeleteFunc(es, func(e regionstate.JournalEntry) bool { return e.Object != "" })
}

// listMerged lists a write-back bucket: the store's listing with the
// journal's pending writes laid over it (a pending write replaces or adds
// the key, a pending delete hides it), so LIST shows every acknowledged
// write at once.
func (b *Bucket) listMerged(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if err := b.ns.readBarrier(ctx); err != nil {
			yield(store.Entry{}, err)
			return
		}
		items := overlay(objectEntries(b.ns.rs.State().Journal(b.Name, opts.Prefix)), opts)
		emit := func(it overlayItem) bool {
			if it.isPrefix {
				return yield(store.Entry{Key: it.key, IsPrefix: true}, nil)
			}
			if it.tombstone {
				return true
			}
			info := entryInfo(it.entry)
			return yield(store.Entry{Key: it.key, Info: info}, nil)
		}
		lastPrefix := ""
		for e, err := range b.listStore(ctx, opts) {
			if err != nil {
				yield(e, err)
				return
			}
			for len(items) > 0 && items[0].key < e.Key {
				if items[0].isPrefix {
					lastPrefix = items[0].key
				}
				if !emit(items[0]) {
					return
				}
				items = items[1:]
			}
			if len(items) > 0 && items[0].key == e.Key {
				it := items[0]
				items = items[1:]
				if it.isPrefix || e.IsPrefix {
					if e.Key == lastPrefix {
						continue
					}
					lastPrefix = e.Key
					if !yield(store.Entry{Key: e.Key, IsPrefix: true}, nil) {
						return
					}
					continue
				}
				if !emit(it) {
					return
				}
				continue
			}
			if e.IsPrefix {
				if e.Key == lastPrefix {
					continue
				}
				lastPrefix = e.Key
			}
			if !yield(e, nil) {
				return
			}
		}
		for _, it := range items {
			if it.isPrefix && it.key == lastPrefix {
				continue
			}
			if !emit(it) {
				return
			}
		}
	}
}
