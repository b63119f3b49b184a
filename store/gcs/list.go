package gcs

// List streams one GCS listing (or two: the range of the reserved prefix is
// cut out with EndOffset and StartOffset, so its objects are never fetched)
// page by page:
//
//   - with a one-byte delimiter GCS folds common prefixes itself. A page
//     holds its objects and, apart, its prefixes; the two are merged in byte
//     order, and entries after the page's last object are held back until
//     the next page, so a prefix never comes out of order whatever the
//     server's page boundaries are;
//   - with no delimiter, or a longer one, the objects come in order and a
//     delimiter is folded here: at each common prefix the listing restarts
//     after it (StartOffset = the prefix's successor), so folded keys are
//     skipped, not crawled.
//
// StartOffset is inclusive, so entries at or before StartAfter are dropped;
// a StartAfter inside a folded prefix starts the listing after that prefix.

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/fedgate/fedgate/store"
)

// defaultListPage is the number of entries a listing asks for per request
// (GCS returns at most 1000).
const defaultListPage = 1000

// listAttrs are the object fields a listing fetches.
var listAttrs = []string{
	"Name", "Size", "Updated", "Created", "Generation", "MD5", "CRC32C", "ComponentCount", "Metadata",
	"ContentType", "CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage",
}

// List yields the objects and common prefixes of opts in byte order. The
// store's reserved objects are never yielded. Errors (ErrAccessDenied,
// ErrThrottled, ErrNotFound for a missing bucket, ctx's) are yielded once
// and end the listing.
func (s *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		l := &lister{s: s, opts: opts, yield: yield}
		for _, sp := range spans(opts.Prefix) {
			if !l.span(ctx, sp) {
				return
			}
		}
	}
}

// span is a range of names: from lo (inclusive) to hi (exclusive); ""
// leaves a side open.
type span struct{ lo, hi string }

// spans are the ranges of names with prefix p, less the reserved prefix.
func spans(p string) []span {
	switch {
	case strings.HasPrefix(p, reservedPrefix):
		return nil
	case strings.HasPrefix(reservedPrefix, p):
		return []span{{"", reservedPrefix}, {successor(reservedPrefix), ""}}
	}
	return []span{{}}
}

// successor is the least string greater than every string with prefix p,
// or "" when that is not valid UTF-8 (GCS wants UTF-8 offsets).
func successor(p string) string {
	b := []byte(p)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return ""
	}
	b[len(b)-1]++
	if !utf8.Valid(b) {
		return ""
	}
	return string(b)
}

type lister struct {
	s     *Store
	opts  store.ListOptions
	yield func(store.Entry, error) bool
	last  string // key of the last entry yielded
	any   bool   // anything yielded yet
}

// start is where the listing begins (inclusive).
func (l *lister) start() string {
	p, d, sa := l.opts.Prefix, l.opts.Delimiter, l.opts.StartAfter
	if d != "" && strings.HasPrefix(sa, p) {
		if i := strings.Index(sa[len(p):], d); i >= 0 {
			// sa is inside (or is) a folded prefix, which sorts at or
			// before sa: skip all of it.
			if next := successor(sa[:len(p)+i+len(d)]); next != "" {
				return next
			}
		}
	}
	return sa
}

// emit yields e unless it is at or before StartAfter or already yielded.
func (l *lister) emit(e store.Entry) bool {
	if (l.opts.StartAfter != "" && e.Key <= l.opts.StartAfter) || (l.any && e.Key <= l.last) {
		return true
	}
	l.last, l.any = e.Key, true
	return l.yield(e, nil)
}

func (l *lister) fail(err error) bool {
	l.yield(store.Entry{}, mapErr("list", l.opts.Prefix, err))
	return false
}

// span lists one range; false when the listing is over.
func (l *lister) span(ctx context.Context, sp span) bool {
	lo := max(sp.lo, l.start())
	if sp.hi != "" && lo >= sp.hi {
		return true
	}
	if len(l.opts.Delimiter) == 1 {
		return l.folded(ctx, lo, sp.hi)
	}
	return l.flat(ctx, lo, sp.hi)
}

func (l *lister) query(lo, hi, delim string) *storage.Query {
	q := &storage.Query{Prefix: l.opts.Prefix, Delimiter: delim, StartOffset: lo, EndOffset: hi}
	_ = q.SetAttrSelection(listAttrs) // the names are valid
	return q
}

// folded lists [lo, hi) with GCS folding common prefixes.
func (l *lister) folded(ctx context.Context, lo, hi string) bool {
	pager := iterator.NewPager(l.s.lbkt.Objects(ctx, l.query(lo, hi, l.opts.Delimiter)), l.s.listPage, "")
	var held []store.Entry // sorted, not yet yielded
	for {
		var page []*storage.ObjectAttrs
		next, err := pager.NextPage(&page)
		if err != nil {
			return l.fail(err)
		}
		lastObj, objs := "", false
		for _, a := range page {
			if a.Prefix != "" {
				held = append(held, store.Entry{Key: a.Prefix, IsPrefix: true})
				continue
			}
			held = append(held, store.Entry{Key: a.Name, Info: infoOf(a)})
			lastObj, objs = max(lastObj, a.Name), true
		}
		slices.SortStableFunc(held, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
		held = slices.CompactFunc(held, func(a, b store.Entry) bool { return a.Key == b.Key })
		// Later pages hold only names after this page's last object.
		n := len(held)
		if next != "" && objs {
			n, _ = slices.BinarySearchFunc(held, lastObj, func(e store.Entry, k string) int {
				if e.Key <= k {
					return -1
				}
				return 1
			})
		}
		for _, e := range held[:n] {
			if !l.emit(e) {
				return false
			}
		}
		held = slices.Delete(held, 0, n)
		if next == "" {
			return true
		}
	}
}

// flat lists [lo, hi) without server-side folding; a delimiter, if any, is
// folded here.
func (l *lister) flat(ctx context.Context, lo, hi string) bool {
	return l.s.flatList(ctx, l.opts.Prefix, l.opts.Delimiter, lo, hi, l.query,
		func(cp string) bool { return l.emit(store.Entry{Key: cp, IsPrefix: true}) },
		func(a *storage.ObjectAttrs) bool { return l.emit(store.Entry{Key: a.Name, Info: infoOf(a)}) },
		l.fail)
}

// flatList lists [lo, hi) with query (a listing without server-side
// folding) and folds delimiter d after prefix p itself, restarting the
// listing after each common prefix: prefix and object are called in key
// order and stop the listing by returning false; fail ends it on an error.
// It returns false when the listing is over (stopped or failed).
func (s *Store) flatList(ctx context.Context, p, d, lo, hi string, query func(lo, hi, delim string) *storage.Query,
	prefix func(string) bool, object func(*storage.ObjectAttrs) bool, fail func(error) bool) bool {
	for {
		it := s.lbkt.Objects(ctx, query(lo, hi, ""))
		it.PageInfo().MaxSize = s.listPage
		restart, skip := "", ""
		for restart == "" {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return true
			}
			if err != nil {
				return fail(err)
			}
			if skip != "" && strings.HasPrefix(a.Name, skip) {
				continue
			}
			if i := strings.Index(a.Name[len(p):], d); d != "" && i >= 0 {
				cp := a.Name[:len(p)+i+len(d)]
				if !prefix(cp) {
					return false
				}
				if restart = successor(cp); restart == "" {
					skip = cp // no valid offset after cp: read past it
				}
				continue
			}
			if !object(a) {
				return false
			}
		}
		if lo = restart; hi != "" && lo >= hi {
			return true
		}
	}
}
