package gcs

// Native versions (store.Versioner). A version id is an object's
// generation in decimal. GCS has no delete markers: deleting the live
// object of a bucket with versioning makes it noncurrent, and a key whose
// live object was deleted lists only noncurrent generations, none of them
// latest. Nor has it a "suspended" state: NativeVersioning is
// store.VersioningEnabled or "".
//
// GCS lists a name's generations oldest first (and fake-gcs-server in no
// order); ListVersions holds one name's generations at a time and yields
// them newest first, so it buffers one key, never the listing. It also
// drops a generation listed twice: fake-gcs-server's page token restarts
// the next page at a name, so the generations of a name that straddles a
// page boundary come again.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/fedgate/fedgate/store"
)

var _ store.Versioner = (*Store)(nil)

// NativeVersioning returns store.VersioningEnabled when the bucket's
// attributes say versioning is on, else "". ErrAccessDenied (the
// credentials may lack storage.buckets.get), ErrThrottled, ErrNotFound
// for a missing bucket.
func (s *Store) NativeVersioning(ctx context.Context) (string, error) {
	a, err := s.lbkt.Attrs(ctx)
	if err != nil {
		return "", mapErr("get versioning", s.bucket, err)
	}
	if a.VersioningEnabled {
		return store.VersioningEnabled, nil
	}
	return "", nil
}

// parseGeneration returns the generation a version id names: a positive
// decimal number, written as GCS writes it.
func parseGeneration(id string) (int64, bool) {
	g, err := strconv.ParseInt(id, 10, 64)
	return g, err == nil && g > 0 && strconv.FormatInt(g, 10) == id
}

func versionIDOf(gen int64) string { return strconv.FormatInt(gen, 10) }

// noSuchVersion is the error of a version the key does not have; err, when
// set, is GCS's answer.
func noSuchVersion(op, key, id string, err error) error {
	if err == nil {
		return fmt.Errorf("gcs: %s %q version %q: %w", op, key, id, store.ErrNoSuchVersion)
	}
	return store.Retried(fmt.Errorf("gcs: %s %q version %q: %w (%w)", op, key, id, store.ErrNoSuchVersion, redact(err)))
}

// StatVersion returns the info of one generation of key. ErrNoSuchVersion
// for an id that is no generation of key; ErrInvalidKey; ErrAccessDenied,
// ErrThrottled as Stat.
func (s *Store) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: stat version %q: %w", key, err)
	}
	gen, ok := parseGeneration(id)
	if !ok {
		return store.ObjectInfo{}, noSuchVersion("stat version", key, id, nil)
	}
	a, err := s.object(key).Generation(gen).Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return store.ObjectInfo{}, noSuchVersion("stat version", key, id, err)
	case err != nil:
		return store.ObjectInfo{}, mapErr("stat version", key, err)
	case a.Generation != gen:
		return store.ObjectInfo{}, noSuchVersion("stat version", key, id, nil)
	}
	info := infoOf(a)
	info.VersionID = id
	return info, nil
}

// ReadVersionRange streams length bytes (length < 0: to the end) of one
// generation from offset, as stored (a gzip Content-Encoding is not
// decoded). A range starting at or after the end yields no bytes. Errors
// as StatVersion's.
func (s *Store) ReadVersionRange(ctx context.Context, key, id string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("gcs: read version %q: %w", key, err)
	}
	gen, ok := parseGeneration(id)
	if !ok {
		return nil, noSuchVersion("read version", key, id, nil)
	}
	if length == 0 {
		if _, err := s.StatVersion(ctx, key, id); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := s.object(key).Generation(gen).ReadCompressed(true).NewRangeReader(ctx, max(offset, 0), length)
	switch {
	case err == nil:
		return &reader{r: r, key: key}, nil
	case errors.Is(err, storage.ErrObjectNotExist):
		return nil, noSuchVersion("read version", key, id, err)
	case httpCode(err) == 416: // offset at or past the end
		return io.NopCloser(strings.NewReader("")), nil
	}
	return nil, mapErr("read version", key, err)
}

// DeleteVersion deletes one generation for good. An id that is no
// generation of key is not an error; ErrInvalidKey, ErrAccessDenied,
// DeleteCurrent deletes key as Delete does: with versioning on, GCS keeps
// the live generation as a noncurrent one and adds no delete marker, so
// the id is always "".
func (s *Store) DeleteCurrent(ctx context.Context, key string) (string, error) {
	return "", s.Delete(ctx, key)
}

// ErrThrottled as Delete.
func (s *Store) DeleteVersion(ctx context.Context, key, id string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("gcs: delete version %q: %w", key, err)
	}
	gen, ok := parseGeneration(id)
	if !ok {
		return nil
	}
	err := s.object(key).Generation(gen).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return mapErr("delete version", key, err)
	}
	return nil
}

// versionAttrs are the object fields a version listing fetches.
var versionAttrs = append(slices.Clip(listAttrs), "Deleted")

// ListVersions yields every generation under opts.Prefix, keys ascending,
// each key's newest first, with common prefixes folded as List folds them
// (by GCS for a one-byte delimiter, here for a longer one), and never the
// store's reserved objects. IsLatest is the live generation's. Errors as
// List's.
func (s *Store) ListVersions(ctx context.Context, opts store.VersionListOptions) iter.Seq2[store.VersionEntry, error] {
	return func(yield func(store.VersionEntry, error) bool) {
		l := &versionLister{s: s, opts: opts, yield: yield}
		for _, sp := range spans(opts.Prefix) {
			if !l.span(ctx, sp) {
				return
			}
		}
		l.flush()
	}
}

type versionLister struct {
	s     *Store
	opts  store.VersionListOptions
	yield func(store.VersionEntry, error) bool
	last  string // key of the last row or prefix yielded (or skipped)
	any   bool
	group []*storage.ObjectAttrs // generations of one key, not yet yielded
}

// start is where the listing begins (inclusive): at KeyMarker, whose later
// versions may be wanted, or after the folded prefix it is in.
func (l *versionLister) start() string {
	p, d, km := l.opts.Prefix, l.opts.Delimiter, l.opts.KeyMarker
	if d != "" && strings.HasPrefix(km, p) {
		if i := strings.Index(km[len(p):], d); i >= 0 {
			if next := successor(km[:len(p)+i+len(d)]); next != "" {
				return next
			}
		}
	}
	return km
}

func (l *versionLister) fail(err error) bool {
	l.yield(store.VersionEntry{}, mapErr("list versions", l.opts.Prefix, err))
	return false
}

// object takes a generation in listing order (names ascending).
func (l *versionLister) object(a *storage.ObjectAttrs) bool {
	if len(l.group) > 0 && l.group[0].Name != a.Name {
		if !l.flush() {
			return false
		}
	}
	if l.any && a.Name <= l.last {
		return true // a key yielded already
	}
	l.group = append(l.group, a)
	return true
}

// prefix takes a common prefix in listing order.
func (l *versionLister) prefix(p string) bool {
	if !l.flush() {
		return false
	}
	if p <= l.opts.KeyMarker || (l.any && p <= l.last) {
		return true
	}
	l.last, l.any = p, true
	return l.yield(store.VersionEntry{Key: p, IsPrefix: true}, nil)
}

// flush yields the held key's generations, newest first, those at or
// before (KeyMarker, VersionIDMarker) left out.
func (l *versionLister) flush() bool {
	g := l.group
	l.group = nil
	if len(g) == 0 {
		return true
	}
	slices.SortFunc(g, func(a, b *storage.ObjectAttrs) int { return cmp.Compare(b.Generation, a.Generation) })
	g = slices.CompactFunc(g, func(a, b *storage.ObjectAttrs) bool { return a.Generation == b.Generation })
	key := g[0].Name
	l.last, l.any = key, true
	switch {
	case key < l.opts.KeyMarker:
		return true
	case key == l.opts.KeyMarker:
		after, ok := parseGeneration(l.opts.VersionIDMarker)
		if !ok {
			return true // after every version of KeyMarker
		}
		i := 0
		for i < len(g) && g[i].Generation >= after {
			i++
		}
		g = g[i:]
	}
	for _, a := range g {
		e := store.VersionEntry{Key: key, IsLatest: a.Deleted.IsZero(), Info: infoOf(a)}
		e.Info.VersionID = versionIDOf(a.Generation)
		if !l.yield(e, nil) {
			return false
		}
	}
	return true
}

func (l *versionLister) query(lo, hi, delim string) *storage.Query {
	q := &storage.Query{Prefix: l.opts.Prefix, Delimiter: delim, StartOffset: lo, EndOffset: hi, Versions: true}
	_ = q.SetAttrSelection(versionAttrs) // the names are valid
	return q
}

// span lists one range; false when the listing is over.
func (l *versionLister) span(ctx context.Context, sp span) bool {
	lo := max(sp.lo, l.start())
	if sp.hi != "" && lo >= sp.hi {
		return true
	}
	if len(l.opts.Delimiter) == 1 {
		return l.folded(ctx, lo, sp.hi)
	}
	return l.flat(ctx, lo, sp.hi)
}

// folded lists [lo, hi) with GCS folding common prefixes. A page holds its
// generations and, apart, its prefixes: prefixes after the page's last
// object wait for the next page, as in List.
func (l *versionLister) folded(ctx context.Context, lo, hi string) bool {
	pager := iterator.NewPager(l.s.lbkt.Objects(ctx, l.query(lo, hi, l.opts.Delimiter)), l.s.listPage, "")
	var held []string // prefixes not yet taken, sorted
	for {
		var page []*storage.ObjectAttrs
		next, err := pager.NextPage(&page)
		if err != nil {
			return l.fail(err)
		}
		var objs []*storage.ObjectAttrs
		prefixes := held
		for _, a := range page {
			if a.Prefix != "" {
				prefixes = append(prefixes, a.Prefix)
			} else {
				objs = append(objs, a)
			}
		}
		slices.Sort(prefixes)
		prefixes = slices.Compact(prefixes)
		slices.SortStableFunc(objs, func(a, b *storage.ObjectAttrs) int { return strings.Compare(a.Name, b.Name) })
		i := 0
		for _, a := range objs {
			for ; i < len(prefixes) && prefixes[i] < a.Name; i++ {
				if !l.prefix(prefixes[i]) {
					return false
				}
			}
			if !l.object(a) {
				return false
			}
		}
		held = slices.Clone(prefixes[i:])
		if next == "" || len(objs) == 0 {
			// Later pages hold only names after this page's last object.
			for _, p := range held {
				if !l.prefix(p) {
					return false
				}
			}
			held = nil
		}
		if next == "" {
			return true
		}
	}
}

// flat lists [lo, hi) without server-side folding; a delimiter, if any, is
// folded here, restarting the listing after each common prefix.
func (l *versionLister) flat(ctx context.Context, lo, hi string) bool {
	return l.s.flatList(ctx, l.opts.Prefix, l.opts.Delimiter, lo, hi, l.query, l.prefix, l.object, l.fail)
}
