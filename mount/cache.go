package mount

import (
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// meta is what the mount knows of one path: a file (an object) or a
// directory (a prefix with at least one key under it).
type meta struct {
	dir   bool
	size  int64
	mtime time.Time
	etag  string
}

// statEntry is a cached answer for one path; ok false is a negative entry
// (the path does not exist).
type statEntry struct {
	ok      bool
	m       meta
	expires time.Time
}

// statCache keeps the answers of HEAD and of listings for a TTL, negative
// ones too. It is bounded: when it holds max entries, expired entries go
// first, then an arbitrary half of the rest.
type statCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu sync.Mutex
	m  map[string]statEntry
}

func newStatCache(ttl time.Duration, max int) *statCache {
	return &statCache{ttl: ttl, max: max, now: time.Now, m: make(map[string]statEntry)}
}

// get returns the entry for path if it has not expired.
func (c *statCache) get(path string) (statEntry, bool) {
	if c.ttl <= 0 {
		return statEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[path]
	if !ok {
		return statEntry{}, false
	}
	if !c.now().Before(e.expires) {
		delete(c.m, path)
		return statEntry{}, false
	}
	return e, true
}

func (c *statCache) put(path string, m meta) { c.set(path, statEntry{ok: true, m: m}) }

func (c *statCache) putMissing(path string) { c.set(path, statEntry{}) }

func (c *statCache) set(path string, e statEntry) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	e.expires = now.Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max/2 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[path] = e
}

// del forgets path (a write or delete in this mount changed it).
func (c *statCache) del(path string) {
	c.mu.Lock()
	delete(c.m, path)
	c.mu.Unlock()
}

// dirCache keeps complete directory listings for the stat TTL, so that a
// directory read again within it (`find`, `ls -R`, a data loader that
// walks its classes every epoch) costs no ListObjectsV2. Any change this
// mount makes to the namespace (a file written, unlinked or renamed, a
// directory made or removed) drops every listing (bump); changes made
// elsewhere in the region are seen once the TTL has passed, as for stats.
// Bounded: a directory of more than maxDirCacheEntries names is not kept,
// and when the kept names would pass that number in all, the cache
// starts again empty.
type dirCache struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	gen   uint64
	total int
	m     map[string]dirListing
}

type dirListing struct {
	entries []fuse.DirEntry
	expires time.Time
	gen     uint64
}

const maxDirCacheEntries = 1 << 20

func newDirCache(ttl time.Duration) *dirCache {
	return &dirCache{ttl: ttl, now: time.Now, m: make(map[string]dirListing)}
}

// get returns the listing of dir made within the TTL and since the last
// change this mount made, or false.
func (c *dirCache) get(dir string) ([]fuse.DirEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[dir]
	if !ok {
		return nil, false
	}
	if l.gen != c.gen || !c.now().Before(l.expires) {
		delete(c.m, dir)
		c.total -= len(l.entries)
		return nil, false
	}
	return l.entries, true
}

// start returns the generation a listing begins in; put keeps it only if
// no change was made while it was read.
func (c *dirCache) start() (gen uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.now()
}

func (c *dirCache) put(dir string, entries []fuse.DirEntry, gen uint64, at time.Time) {
	if c.ttl <= 0 || len(entries) > maxDirCacheEntries {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if old, ok := c.m[dir]; ok {
		c.total -= len(old.entries)
	}
	if c.total+len(entries) > maxDirCacheEntries {
		c.m, c.total = make(map[string]dirListing), 0
	}
	c.m[dir] = dirListing{entries: entries, expires: at.Add(c.ttl), gen: gen}
	c.total += len(entries)
}

// bump drops every listing: this mount changed the namespace.
func (c *dirCache) bump() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m, c.total = make(map[string]dirListing), 0
}
