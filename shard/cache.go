package shard

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// Cache keeps member indexes in memory, least recently used first out,
// within a bound on their estimated size (Index.MemoryBytes). Concurrent
// Gets of one key share one build. Failed builds are not kept.
type Cache struct {
	max int64

	mu       sync.Mutex
	used     int64
	lru      *list.List               // of *cacheEntry, most recent at the front
	entries  map[string]*list.Element // key -> element
	building map[string]*build

	hits, misses, builds, evictions int64
}

type cacheEntry struct {
	key string
	ix  *Index
	n   int64
}

type build struct {
	done chan struct{}
	ix   *Index
	err  error
}

// NewCache returns a cache of at most maxBytes of indexes (<= 0: none are
// kept; every Get builds).
func NewCache(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, lru: list.New(), entries: map[string]*list.Element{}, building: map[string]*build{}}
}

// CacheStats are a cache's counters.
type CacheStats struct {
	Hits, Misses, Builds, Evictions int64
	Indexes                         int
	Bytes                           int64
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Builds: c.builds, Evictions: c.evictions, Indexes: len(c.entries), Bytes: c.used}
}

// Get returns the index kept under key, or builds it with build (once,
// however many callers ask at the same time) and keeps it. A caller whose
// own ctx is still live retries a build that another caller's cancelled
// context ended.
func (c *Cache) Get(ctx context.Context, key string, buildFn func(ctx context.Context) (*Index, error)) (*Index, error) {
	for {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok {
			c.lru.MoveToFront(el)
			c.hits++
			ix := el.Value.(*cacheEntry).ix
			c.mu.Unlock()
			return ix, nil
		}
		c.misses++
		b, running := c.building[key]
		if !running {
			b = &build{done: make(chan struct{})}
			c.building[key] = b
			c.builds++
		}
		c.mu.Unlock()
		if !running {
			b.ix, b.err = buildFn(ctx)
			c.mu.Lock()
			delete(c.building, key)
			if b.err == nil {
				c.add(key, b.ix)
			}
			c.mu.Unlock()
			close(b.done)
			return b.ix, b.err
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if b.err != nil && (errors.Is(b.err, context.Canceled) || errors.Is(b.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue // the builder's request went away; build for this one
		}
		return b.ix, b.err
	}
}

// add keeps ix under key (c.mu held), evicting the least recently used.
func (c *Cache) add(key string, ix *Index) {
	n := ix.MemoryBytes()
	if n > c.max {
		return
	}
	if el, ok := c.entries[key]; ok {
		c.used -= el.Value.(*cacheEntry).n
		c.lru.Remove(el)
	}
	c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, ix: ix, n: n})
	c.used += n
	for c.used > c.max {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, e.key)
		c.used -= e.n
		c.evictions++
	}
}
