package azure

// Listing. Azure lists blob names in UTF-16 order, which List turns into
// byte order (order.go; the suite's ListOrder and ListModel tests and
// TestListUTF16Order check it), folds names at a delimiter like S3 (List folds delimiters longer than one byte
// itself, see listPage), and pages with an opaque
// continuation marker. It has no StartAfter, so List filters names <=
// StartAfter itself, and keeps a small LRU cache from the last entries it
// yielded (per prefix and delimiter) to the marker of the Azure page they
// were on: when the gateway asks for the next S3 page with StartAfter = the
// last key of the previous one, the listing resumes at that Azure page
// instead of listing again from the prefix. The cached marker is that of the
// page holding the entry, never the following one, so a key created after
// the entry and before the next listed name is not skipped. Without a cache
// hit, List falls back to listing from the prefix and skipping.

import (
	"container/list"
	"context"
	"iter"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fedgate/fedgate/store"
)

const listPageSize = 1000

// List yields the container's objects and common prefixes in byte order,
// one Azure page (1,000 entries) at a time; keys under ".fedgate/" are
// never yielded. Errors are mapped as for Stat and end the listing.
func (s *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if opts.StartAfter > opts.Prefix && !strings.HasPrefix(opts.StartAfter, opts.Prefix) {
			return // every key with the prefix sorts before StartAfter
		}
		after := opts.StartAfter
		marker := ""
		if after != "" {
			marker = s.markers.get(markerKey{opts.Prefix, opts.Delimiter, after})
		}
		type seen struct{ name, marker string }
		var recent [2]seen   // the last two entries yielded, with their resume marker
		var markers []string // by page sequence number
		var order reorder[store.Entry]
		// emit yields the entries order has made final; false when the
		// consumer stopped.
		emit := func(end bool) bool {
			for {
				h, ok := order.pop(end)
				if !ok {
					return true
				}
				e := h.v
				if e.Key <= after || strings.HasPrefix(e.Key, reservedPrefix) {
					continue
				}
				after = e.Key
				// A later listing resumes at the oldest page with entries
				// not yet yielded.
				recent[0], recent[1] = recent[1], seen{e.Key, markers[order.oldestPage(h.page)]}
				if !yield(e, nil) {
					// The gateway reads one entry past its page and resumes
					// after the one before: remember both.
					for _, r := range recent {
						if r.marker != "" {
							s.markers.put(markerKey{opts.Prefix, opts.Delimiter, r.name}, r.marker)
						}
					}
					return false
				}
			}
		}
		for {
			page, next, err := s.listPage(ctx, opts, false, marker)
			if err != nil {
				yield(store.Entry{}, err)
				return
			}
			markers = append(markers, marker)
			for _, l := range page {
				order.push(l.e.Key, l.e, l.name, len(markers)-1)
				if !emit(false) {
					return
				}
			}
			if next == "" {
				emit(true)
				return
			}
			marker = next
		}
	}
}

// listed is an entry of an Azure page, and the name Azure listed it at.
type listed struct {
	e    store.Entry
	name string
	// In a listing of versions: the blob's version id (nil for a blob
	// written while versioning was off) and whether it is the current one.
	version *string
	current bool
}

// listPage fetches the Azure page at marker, with every version of each
// blob when versions is set: its entries in Azure's order and the marker
// of the next page ("" at the end).
func (s *Store) listPage(ctx context.Context, opts store.ListOptions, versions bool, marker string) ([]listed, string, error) {
	var m *string
	if marker != "" {
		m = to.Ptr(marker)
	}
	var prefix *string
	if opts.Prefix != "" {
		prefix = to.Ptr(opts.Prefix)
	}
	include := container.ListBlobsInclude{Metadata: true, Versions: versions}
	var items []*container.BlobItem
	var prefixes []string
	var next *string
	// Azurite folds at the first byte of a longer delimiter ("c/" makes
	// "a/c", not "a/c/"): such delimiters are folded here, on a flat
	// listing, so the result does not depend on the server.
	fold := len(opts.Delimiter) > 1
	if opts.Delimiter == "" || fold {
		resp, err := s.cont.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
			Include: include, Marker: m, MaxResults: to.Ptr(s.pageSize), Prefix: prefix,
		}).NextPage(ctx)
		if err != nil {
			return nil, "", s.mapErr("list", opts.Prefix, err)
		}
		if resp.Segment != nil {
			items = resp.Segment.BlobItems
		}
		next = resp.NextMarker
	} else {
		resp, err := s.cont.NewListBlobsHierarchyPager(opts.Delimiter, &container.ListBlobsHierarchyOptions{
			Include: include, Marker: m, MaxResults: to.Ptr(s.pageSize), Prefix: prefix,
		}).NextPage(ctx)
		if err != nil {
			return nil, "", s.mapErr("list", opts.Prefix, err)
		}
		if resp.Segment != nil {
			items = resp.Segment.BlobItems
			for _, p := range resp.Segment.BlobPrefixes {
				if p != nil && p.Name != nil {
					prefixes = append(prefixes, *p.Name)
				}
			}
		}
		next = resp.NextMarker
	}
	// Merge the blobs and the prefixes, each in order, into one sequence.
	out := make([]listed, 0, len(items)+len(prefixes))
	for _, it := range items {
		if it == nil || it.Name == nil {
			continue
		}
		for len(prefixes) > 0 && utf16Less(prefixes[0], *it.Name) {
			out = append(out, listed{e: store.Entry{Key: prefixes[0], IsPrefix: true}, name: prefixes[0]})
			prefixes = prefixes[1:]
		}
		if fold {
			if i := strings.Index((*it.Name)[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := (*it.Name)[:len(opts.Prefix)+i+len(opts.Delimiter)]
				out = append(out, listed{e: store.Entry{Key: cp, IsPrefix: true}, name: *it.Name})
				continue
			}
		}
		out = append(out, listed{e: store.Entry{Key: *it.Name, Info: itemInfo(it)}, name: *it.Name,
			version: it.VersionID, current: it.IsCurrentVersion != nil && *it.IsCurrentVersion})
	}
	for _, p := range prefixes {
		out = append(out, listed{e: store.Entry{Key: p, IsPrefix: true}, name: p})
	}
	if next == nil {
		return out, "", nil
	}
	return out, *next, nil
}

func itemInfo(it *container.BlobItem) store.ObjectInfo {
	p := blobProps{props: props{metadata: it.Metadata}}
	if pr := it.Properties; pr != nil {
		p.contentType, p.cacheControl, p.disposition = pr.ContentType, pr.CacheControl, pr.ContentDisposition
		p.encoding, p.language = pr.ContentEncoding, pr.ContentLanguage
		p.size, p.mtime, p.etag, p.md5 = pr.ContentLength, pr.LastModified, pr.ETag, pr.ContentMD5
	}
	return infoOf(*it.Name, p)
}

// markerKey names a listing position: the entry name yielded in a listing
// of prefix folded at delimiter.
type markerKey struct{ prefix, delimiter, name string }

// markerCache is a fixed-size LRU cache from listing positions to the
// Azure marker of the page holding them. Entries are hints: a stale or
// missing one costs requests, never correctness.
type markerCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent; values are markerKey
	byKey map[markerKey]markerEntry
}

type markerEntry struct {
	marker string
	elem   *list.Element
}

func newMarkerCache(max int) *markerCache {
	return &markerCache{max: max, order: list.New(), byKey: map[markerKey]markerEntry{}}
}

func (c *markerCache) get(k markerKey) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return ""
	}
	c.order.MoveToFront(e.elem)
	return e.marker
}

func (c *markerCache) put(k markerKey, marker string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e.elem)
		c.byKey[k] = markerEntry{marker, e.elem}
		return
	}
	c.byKey[k] = markerEntry{marker, c.order.PushFront(k)}
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(markerKey)
		delete(c.byKey, old)
	}
}
