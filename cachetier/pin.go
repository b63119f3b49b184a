package cachetier

import (
	"bytes"
	"cmp"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
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
	c.pins = pinned
	c.mu.Unlock()
	c.repin()
}

// Repin applies the pin predicate again to every cached chunk: call it
// when the set of pins behind the predicate changed. Chunks that became
// unpinned are evictable again, at the place in the LRU order their last
// access gives them. The index keeps no identities in memory (index.go),
// so it reads them from index.db's records (and from those not written
// yet): one read of index.db, in batches, and one call of the predicate
// per chunk.
func (c *Cache) Repin() { c.repin() }

// pinnedLocked reports whether chunk ck of group g is to be pinned.
func (c *Cache) pinnedLocked(ck chunkID, g *group) bool {
	if c.leases[ck] > 0 {
		return true
	}
	if c.pins == nil || !c.ownsLocally(ck) {
		return false
	}
	return c.pins(g.name, ck.obj.store, ck.obj.key)
}

// ownsLocally reports whether chunk ck is this node's to keep by the
// current ring.
func (c *Cache) ownsLocally(ck chunkID) bool {
	k := ChunkKey{ObjectID{Store: ck.obj.store, Key: ck.obj.key, Validator: ck.obj.validator}, ck.idx}
	return c.peerOwner(k, false) == ""
}

func (c *Cache) repin() {
	c.mu.Lock()
	var recs []record
	for _, ops := range [][]op{c.writing, c.pending} {
		for _, o := range ops {
			if o.val == nil {
				continue
			}
			if r, err := decodeRecord(o.val); err == nil {
				r.name = o.key
				recs = append(recs, r)
			}
		}
	}
	c.repinLocked(recs)
	// While the index loads, only what is in memory needs the predicate
	// (what comes in later gets it then): the records up to the loader's
	// cursor and those brought in beyond it. At a node's start, when
	// SetPins comes right after Open, that is little.
	var limit []byte
	var beyond [][32]byte
	loading := c.loading
	if loading {
		limit = c.cursor
		for nm := range c.beyond {
			beyond = append(beyond, nm)
		}
	}
	c.mu.Unlock()
	if len(beyond) > 0 {
		recs = recs[:0]
		err := c.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketChunks)
			for _, nm := range beyond {
				if v := b.Get(nm[:]); v != nil {
					if l := decodeLoaded(nm[:], v); !l.stale {
						recs = append(recs, l.r)
					}
				}
			}
			return nil
		})
		if err != nil {
			c.log.Warn("repin: read cache index", "err", err)
			return
		}
		c.mu.Lock()
		c.repinLocked(recs)
		c.mu.Unlock()
	}
	if loading && limit == nil {
		return // no batch loaded yet
	}
	var after []byte
	for {
		batch, last, done, err := c.readBatch(after)
		if err != nil {
			c.log.Warn("repin: read cache index", "err", err)
			return
		}
		recs = recs[:0]
		for _, l := range batch {
			if !l.stale {
				recs = append(recs, l.r)
			}
		}
		c.mu.Lock()
		c.repinLocked(recs)
		c.mu.Unlock()
		if done || limit != nil && bytes.Compare(last, limit) >= 0 {
			return
		}
		after = last
	}
}

// repinLocked pins or unpins the entries that recs name, as the predicate
// and the leases now say.
func (c *Cache) repinLocked(recs []record) {
	var pin, unpin []*entry
	for i := range recs {
		r := &recs[i]
		e := c.lookupNameLocked(&r.name)
		if e == nil {
			continue
		}
		want := c.pinnedLocked(r.ck, e.group)
		switch {
		case want && !e.pinned:
			pin = append(pin, e)
		case !want && e.pinned:
			unpin = append(unpin, e)
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
			if e := c.lookupLocked(ck); e != nil && e.pinned && !c.pinnedLocked(ck, e.group) {
				c.movePinnedLocked([]*entry{e}, false)
			}
		})
	}
}
