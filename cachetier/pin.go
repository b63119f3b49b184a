package cachetier

import (
	"cmp"
	"slices"
	"sync"
)

// PinFunc reports whether the chunks of store's key cached for group (the
// bucket that read them) are pinned. It is called with the Cache's lock
// held, so it must be quick and must not call the Cache.
type PinFunc func(group, store, key string) bool

// SetPins installs the pin predicate (nil: nothing is pinned) and applies
// it to every cached chunk, as Repin does. Pins are not persisted: install
// the predicate again after Open, before the first reads, since until then
// every chunk is evictable.
//
// A pinned chunk is never evicted; it is still dropped by Invalidate (its
// object changed). Its bytes count against the capacity and its group's
// quota like any others: when pinned chunks leave no room, reads still
// succeed but what they fetch is not kept. Only chunks this node owns are
// pinned (each owner pins its own part of a pinned object): a chunk the
// ring moved elsewhere is unpinned here at the next SetMembers or Repin.
func (c *Cache) SetPins(pinned PinFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pins = pinned
	c.repinLocked()
}

// Repin applies the pin predicate again to every cached chunk: call it
// when the set of pins behind the predicate changed. Chunks that became
// unpinned are evictable again, at the place in the LRU order their last
// access gives them. It costs one call of the predicate per (object,
// group) cached.
func (c *Cache) Repin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repinLocked()
}

// pinnedLocked reports whether e (whose group and object are set) is to be
// pinned.
func (c *Cache) pinnedLocked(e *entry) bool {
	if c.leases[chunkID{e.obj.key, e.idx}] > 0 {
		return true
	}
	if c.pins == nil || !c.ownsLocally(e) {
		return false
	}
	return c.pins(e.group.name, e.obj.key.store, e.obj.key.key)
}

// ownsLocally reports whether e's chunk is this node's to keep by the
// current ring.
func (c *Cache) ownsLocally(e *entry) bool {
	k := ChunkKey{ObjectID{e.obj.key.store, e.obj.key.key, e.obj.key.validator, e.obj.size}, e.idx}
	return c.peerOwner(k, false) == ""
}

func (c *Cache) repinLocked() {
	var pin, unpin []*entry
	memo := make(map[*group]bool)
	for _, first := range c.idx.keys {
		for obj := first; obj != nil; obj = obj.next {
			clear(memo)
			for _, e := range obj.chunks {
				want := false
				if c.pins != nil {
					p, ok := memo[e.group]
					if !ok {
						p = c.pins(e.group.name, obj.key.store, obj.key.key)
						memo[e.group] = p
					}
					want = p && c.ownsLocally(e)
				}
				want = want || c.leases[chunkID{obj.key, e.idx}] > 0
				switch {
				case want && !e.pinned:
					pin = append(pin, e)
				case !want && e.pinned:
					unpin = append(unpin, e)
				}
			}
		}
	}
	c.movePinnedLocked(pin, true)
	c.movePinnedLocked(unpin, false)
}

// movePinnedLocked moves es between the LRU and the pinned lists, merging
// them in by last access so that the recency order is kept.
func (c *Cache) movePinnedLocked(es []*entry, pinned bool) {
	if len(es) == 0 {
		return
	}
	sign := int64(1)
	if !pinned {
		sign = -1
	}
	for _, e := range es {
		all, grp := c.listsOf(e)
		all.Remove(e)
		grp.Remove(e)
		e.pinned = pinned
		c.idx.pinnedBytes += sign * e.length
		e.group.pinnedBytes += sign * e.length
	}
	// Newest first, like the lists.
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(b.lastAccess, a.lastAccess) })
	byAll := make(map[*elist][]*entry)
	byGroup := make(map[*group][]*entry)
	for _, e := range es {
		if !pinned {
			e.class = uint8(e.group.class) // back into its group's class
		}
		all, _ := c.listsOf(e)
		byAll[all] = append(byAll[all], e)
		byGroup[e.group] = append(byGroup[e.group], e)
	}
	for all, aes := range byAll {
		mergeByAge(all, aes)
	}
	for _, ges := range byGroup {
		_, grp := c.listsOf(ges[0])
		mergeByAge(grp, ges)
	}
}

// mergeByAge inserts es (newest first) into l (newest first) by
// lastAccess.
func mergeByAge(l *elist, es []*entry) {
	at := l.Front()
	for _, e := range es {
		for at != nil && at.lastAccess > e.lastAccess {
			at = l.Next(at)
		}
		l.InsertBefore(e, at)
	}
}

// Lease pins chunk idx of id for a short-circuit reader that holds its file
// (docs/gpu-data-path.md): it is not evicted until release is called
// (which may be called more than once), so the node keeps serving it from
// the cache meanwhile. A chunk whose fill has not committed yet is pinned
// when it does. Invalidation still drops a leased chunk (the object
// changed); the reader's descriptor keeps its bytes.
func (c *Cache) Lease(id ObjectID, idx int64) (release func()) {
	ck := idOf(id, idx)
	c.mu.Lock()
	if c.leases == nil {
		c.leases = make(map[chunkID]int)
	}
	c.leases[ck]++
	if e := c.lookupLocked(ck); e != nil && !e.pinned {
		c.movePinnedLocked([]*entry{e}, true)
	}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.leases[ck]--; c.leases[ck] > 0 {
				return
			}
			delete(c.leases, ck)
			if e := c.lookupLocked(ck); e != nil && e.pinned && !c.pinnedLocked(e) {
				c.movePinnedLocked([]*entry{e}, false)
			}
		})
	}
}
