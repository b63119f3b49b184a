package cachetier

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The index is loaded in the background: Open reads only index.db's totals
// (the bytes and chunks it records, per group, kept in the same
// transactions as the records: persist.go) and serves at once, whatever
// the number of chunks. loadLoop then reads the records in key (chunk
// name) order, loadBatch at a time, each batch in its own read
// transaction (a long one would hold off index.db's growth), and brings
// them into memory under Cache.mu. Until it is done:
//
//   - used counts every record of index.db, loaded or not (from the
//     totals), so the capacity and the quotas hold from the first fill;
//     eviction can take only chunks already in memory (a fill that finds
//     no room among them runs uncached), in LRU order batch by batch
//     (appendBatchLocked), exactly once the load is done;
//   - a lookup of a chunk not in memory (lookupLocked) looks for its
//     record in index.db directly, by its name, and brings it in
//     (faultInLocked): a hit during the load is served like any other,
//     after the same check of its file as every loaded chunk (verify.go);
//   - a record is resolved once it is in memory, or its name is at or
//     before the loader's cursor, or its chunk was removed since Open
//     (tombs), or its key invalidated (invKeys): the loader and the
//     lookups bring in only unresolved records, so none comes back after
//     it was evicted, dropped or replaced, and none is counted twice.
//
// Records that do not decode, or whose key is not their identity's name,
// are deleted as the loader meets them; their files (and those of
// invalidated keys) go with the orphan sweep. Once every record is
// loaded, the cache evicts down to Capacity (it may have shrunk).

// loadBatch is how many records the loader reads per transaction (a
// variable for tests).
var loadBatch = 16384

// testLoadBatch, when set (tests), is called by loadLoop after it read
// each batch and before it applies it, with the cache's context.
var testLoadBatch func(ctx context.Context)

// Loaded returns a channel closed once every record of index.db is in
// memory (or the cache closed first).
func (c *Cache) Loaded() <-chan struct{} { return c.loadedCh }

// loaded is one record read by the loader; stale when it is to be deleted
// (counted: it decodes, so the totals count it).
type loaded struct {
	r       record
	stale   bool
	counted bool
}

func (c *Cache) loadLoop() {
	defer c.fills.Done()
	defer close(c.loadedCh)
	start := time.Now()
	var after []byte
	n := 0
	for c.ctx.Err() == nil {
		batch, last, done, err := c.readBatch(after)
		if err != nil {
			c.log.Error("load cache index: records not loaded are not served", "err", err)
		}
		if testLoadBatch != nil {
			testLoadBatch(c.ctx)
		}
		if c.ctx.Err() != nil {
			break
		}
		c.mu.Lock()
		c.applyBatchLocked(batch)
		n += len(batch)
		if done {
			c.finishLoadLocked()
			c.mu.Unlock()
			c.wakeVerify()
			c.wakePersist()
			c.log.Info("cache index loaded", "records", n, "took", time.Since(start))
			return
		}
		if last != nil {
			c.cursor = last
		}
		c.mu.Unlock()
		c.wakeVerify()
		c.wakePersist()
		after = last
	}
	c.mu.Lock()
	c.loading = false // closed: lookups no longer look in index.db
	c.mu.Unlock()
}

// readBatch reads up to loadBatch records after the key after (nil: from
// the first); last is the last key read; done says no record follows.
func (c *Cache) readBatch(after []byte) (batch []loaded, last []byte, done bool, err error) {
	err = c.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketChunks).Cursor()
		var k, v []byte
		if after == nil {
			k, v = cur.First()
		} else if k, v = cur.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = cur.Next()
		}
		for ; k != nil && len(batch) < loadBatch; k, v = cur.Next() {
			batch = append(batch, decodeLoaded(k, v))
			last = bytes.Clone(k)
		}
		done = k == nil
		return nil
	})
	return batch, last, done || err != nil, err
}

func decodeLoaded(k, v []byte) loaded {
	r, err := decodeRecord(v)
	if err != nil {
		var l loaded
		copy(l.r.name[:], k)
		l.stale = true
		if len(k) != len(l.r.name) {
			l.r.name = [32]byte{}
		}
		return l
	}
	if len(k) != len(r.name) || chunkName(r.ck) != [32]byte(k) {
		l := loaded{r: r, stale: true, counted: true}
		// A key of another length names no chunk (its first 32 bytes
		// may be another chunk's name, whose record and file must stay):
		// the zero name, which nothing deletes.
		if len(k) == len(l.r.name) {
			l.r.name = [32]byte(k)
		}
		return l
	}
	r.name = [32]byte(k)
	return loaded{r: r}
}

// resolvedLocked reports whether the record named name needs no loading:
// the loader is past it, or its chunk was removed since Open.
func (c *Cache) resolvedLocked(name [32]byte) bool {
	if c.cursor != nil && bytes.Compare(name[:], c.cursor) <= 0 {
		return true
	}
	_, gone := c.tombs[name]
	return gone
}

// applyBatchLocked brings the unresolved records of batch into memory, at
// the cold end of the LRU lists (appendBatchLocked), and deletes the stale
// ones.
func (c *Cache) applyBatchLocked(batch []loaded) {
	var es []*entry
	for i := range batch {
		l := &batch[i]
		r := &l.r
		if c.resolvedLocked(r.name) {
			continue
		}
		if l.stale {
			c.dropRecordLocked(l)
			continue
		}
		if c.lookupMemLocked(r.ck) != nil {
			continue
		}
		if _, inv := c.invKeys[storeKey{r.ck.obj.store, r.ck.obj.key}]; inv {
			c.dropRecordLocked(l)
			continue
		}
		es = append(es, c.bringInLocked(r))
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(b.lastAccess, a.lastAccess) })
	c.appendBatchLocked(es)
}

// bringInLocked makes the entry of record r (unresolved, counted in the
// totals) and queues it for verification; the caller puts it in the
// lists.
func (c *Cache) bringInLocked(r *record) *entry {
	g := c.groupLocked(r.group, -1)
	e := c.insertLocked(r.ck, r.name, r.length, g, r.lastAccess)
	e.sum, e.hasSum, e.unverified = r.sum, r.hasSum, true
	c.resolveUnloadedLocked(g, r.length)
	if e.pinned {
		c.idx.pinnedBytes += e.length
		g.pinnedBytes += e.length
	}
	c.verifyQ = append(c.verifyQ, e)
	return e
}

// resolveUnloadedLocked counts one record of g as no longer unloaded (its
// bytes stay in used: in memory now, or dropped by the caller).
func (c *Cache) resolveUnloadedLocked(g *group, length int64) {
	g.unloaded--
	g.unloadedBytes -= length
	c.idx.unloaded--
	c.idx.unloadedBytes -= length
}

// dropRecordLocked deletes a stale or invalidated record from index.db
// and, when the totals count it, from used.
func (c *Cache) dropRecordLocked(l *loaded) {
	if l.counted || !l.stale {
		g := c.groupLocked(l.r.group, -1)
		c.resolveUnloadedLocked(g, l.r.length)
		c.idx.used -= l.r.length
		g.used -= l.r.length
	}
	c.pending = append(c.pending, op{key: l.r.name})
	// Its file goes with it: left to the orphan sweep, it stays whenever
	// the sweep reads index.db before this delete is written.
	if l.r.name != ([32]byte{}) && !c.nameInUseLocked(l.r.name) {
		if err := os.Remove(c.chunkPath(l.r.name)); err != nil && !os.IsNotExist(err) {
			c.log.Warn("remove chunk file", "err", err)
		}
	}
}

// appendBatchLocked puts es (newest first) at the cold end of their
// lists. During the load the loaded chunks are therefore in LRU order
// batch by batch, not across batches: the next to evict is the least
// recently used of the latest batch (a random sample of loadBatch records
// by name, so its least recently used is among the oldest of all);
// finishLoadLocked sorts the lists once every record is in. Merging each
// batch into its place instead walked the whole list per batch: 12 of
// the 16 CPU-seconds of a load of 1M records.
func (c *Cache) appendBatchLocked(es []*entry) {
	for _, e := range es {
		all, grp := c.listsOf(e)
		all.PushBack(e)
		grp.PushBack(e)
	}
}

// sortListsLocked puts every list in last-access order, newest first
// (touches during the load set lastAccess too, so they keep their place).
func (c *Cache) sortListsLocked() {
	lists := []*elist{&c.idx.pinned}
	for i := range c.idx.lru {
		lists = append(lists, &c.idx.lru[i])
	}
	for _, g := range c.idx.groups {
		lists = append(lists, &g.lru, &g.pinned)
	}
	var es []*entry
	for _, l := range lists {
		es = es[:0]
		for e := l.Front(); e != nil; e = l.Next(e) {
			es = append(es, e)
		}
		slices.SortStableFunc(es, func(a, b *entry) int { return cmp.Compare(b.lastAccess, a.lastAccess) })
		l.head, l.tail, l.n = nil, nil, 0
		for _, e := range es {
			*l.lk(e) = links{}
			l.PushBack(e)
		}
	}
}

// faultInLocked looks for chunk ck's record in index.db while the loader
// has not brought it in, and brings it in; nil when there is none (or it
// is resolved: see the top of this file). The entry goes to the cold end
// of its lists: the read that wanted it moves it to the front.
func (c *Cache) faultInLocked(ck chunkID, name [32]byte) *entry {
	if c.resolvedLocked(name) {
		return nil
	}
	var l loaded
	found := false
	err := c.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketChunks).Get(name[:]); v != nil {
			l, found = decodeLoaded(name[:], v), true
		}
		return nil
	})
	if err != nil || !found {
		return nil
	}
	_, inv := c.invKeys[storeKey{ck.obj.store, ck.obj.key}]
	if l.stale || inv {
		c.dropRecordLocked(&l)
		c.tombs[name] = struct{}{}
		return nil
	}
	e := c.bringInLocked(&l.r)
	c.noteBeyondLocked(name)
	all, grp := c.listsOf(e)
	all.PushBack(e)
	grp.PushBack(e)
	c.wakeVerify()
	return e
}

// finishLoadLocked ends the load: records the totals counted but the
// loader did not meet (index.db changed behind the cache's back) are
// uncounted, and the cache evicts down to Capacity.
func (c *Cache) finishLoadLocked() {
	c.loading = false
	c.cursor, c.tombs, c.invKeys, c.beyond = nil, nil, nil, nil
	// Every record of an invalidated key met so far is dropped (its delete
	// queued before this): the invalidations kept in index.db are spent.
	c.invClear, c.invPending = c.invKept, nil
	if c.idx.unloaded != 0 || c.idx.unloadedBytes != 0 {
		c.log.Warn("cache index totals did not match its records: corrected",
			"chunks", c.idx.unloaded, "bytes", c.idx.unloadedBytes)
		c.recount = true // and in index.db, at the next write (flush)
		for _, g := range c.idx.groups {
			g.used -= g.unloadedBytes
			g.unloaded, g.unloadedBytes = 0, 0
		}
		c.idx.used -= c.idx.unloadedBytes
		c.idx.unloaded, c.idx.unloadedBytes = 0, 0
	}
	c.sortListsLocked()
	for class := 0; c.idx.used > c.cfg.Capacity && class < numClasses; {
		if back := c.idx.lru[class].Back(); back != nil {
			c.evictLocked(back)
		} else {
			class++
		}
	}
}
