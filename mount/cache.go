package mount

import (
	"sync"
	"time"
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
