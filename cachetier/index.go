package cachetier

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"

	"github.com/fedgate/fedgate/store"
)

// The in-memory index: every cached chunk, reachable by key (for lookups
// and Invalidate) and by recency (one LRU list for the whole cache and one
// per group). It is guarded by Cache.mu and mirrored to bbolt (persist.go).
//
// Pinned chunks (pin.go) sit in lists of their own, the whole cache's and
// their group's, in recency order too: eviction walks only the unpinned
// lists, so it never sees a pinned chunk and never has to skip one. Their
// bytes still count in used, for the capacity and the group's quota.
//
// The whole cache's unpinned chunks are in one LRU list per priority class
// (their group's Priority): making room evicts the least recently used
// chunk of the lowest class first, and a fill evicts only chunks of its
// group's class or lower.

type storeKey struct{ store, key string }

type objKey struct {
	store, key string
	validator  store.Validator
}

// chunkID is a chunk's identity; the singleflight map is keyed by it.
type chunkID struct {
	obj objKey
	idx int64
}

// object is one cached version of an object: its chunks, sorted by index,
// and the next version of the same store and key (index.keys holds the
// first). A slice and a chain instead of two maps per object: most cached
// objects have one version and many have one chunk (docs/cache.md).
type object struct {
	key    objKey
	size   int64
	next   *object
	chunks []*entry
}

func (o *object) find(idx int64) (int, bool) {
	return slices.BinarySearchFunc(o.chunks, idx, func(e *entry, i int64) int { return cmp.Compare(e.idx, i) })
}

// chunk returns chunk idx, or nil.
func (o *object) chunk(idx int64) *entry {
	if i, ok := o.find(idx); ok {
		return o.chunks[i]
	}
	return nil
}

type entry struct {
	obj        *object
	idx        int64
	length     int64
	group      *group
	lastAccess int64  // unix nanoseconds, persisted for LRU order across restarts
	sum        uint32 // CRC-32C of the chunk's bytes, when hasSum
	hasSum     bool   // records written before checksums have none
	dirty      bool   // lastAccess changed since last persisted
	// unverified: loaded at Open and not yet checked against its file
	// (verify.go); never served until checked.
	unverified bool
	pinned     bool     // in the pinned lists, not the LRU ones
	class      uint8    // the priority class whose LRU list holds it (unpinned)
	links      [2]links // in the whole cache's list and the group's (elist)
	// open is the chunk file kept open for hits (see openFiles); its
	// element in Cache.open's LRU list is open.elem.
	open *chunkFile
}

type group struct {
	name        string
	quota, used int64 // used includes this group's fills in progress and its unloaded chunks
	pinnedBytes int64
	// unloaded, unloadedBytes: the group's records in index.db not in
	// memory yet (load.go); counted in used.
	unloaded      int
	unloadedBytes int64
	class       int   // Priority + 1: index into index.lru
	lru         elist // unpinned chunks; front: most recently used
	pinned      elist
}

type index struct {
	keys        map[storeKey]*object // the first version; see object.next
	groups      map[string]*group
	lru         [numClasses]elist // unpinned chunks by class; front: most recently used
	pinned      elist             // pinned chunks; front: most recently used
	used        int64             // bytes of chunks plus fills in progress (reserved) plus unloaded records
	pinnedBytes int64
	// unloaded, unloadedBytes: records in index.db not in memory yet
	// (load.go), counted in used and in Stats' chunk counts.
	unloaded      int
	unloadedBytes int64
}

func newIndex() index {
	return index{keys: make(map[storeKey]*object), groups: make(map[string]*group)}
}

// name is e's file name and index key (chunkName); it is not kept.
func (e *entry) name() [32]byte { return chunkName(chunkID{e.obj.key, e.idx}) }

// objectLocked returns the cached version k, or nil.
func (c *Cache) objectLocked(k objKey) *object {
	o := c.idx.keys[storeKey{k.store, k.key}]
	for o != nil && o.key.validator != k.validator {
		o = o.next
	}
	return o
}

func idOf(id ObjectID, idx int64) chunkID {
	return chunkID{objKey{id.Store, id.Key, id.Validator}, idx}
}

// chunkName is SHA-256 over the length-prefixed store, key and validator
// and the big-endian index: the chunk's file name and index key.
func chunkName(ck chunkID) [32]byte {
	h := sha256.New()
	var b [binary.MaxVarintLen64]byte
	for _, s := range []string{ck.obj.store, ck.obj.key, string(ck.obj.validator)} {
		h.Write(b[:binary.PutUvarint(b[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	h.Write(binary.BigEndian.AppendUint64(b[:0], uint64(ck.idx)))
	var name [32]byte
	h.Sum(name[:0])
	return name
}

// chunkPath fans chunk files out over 256 directories by their first byte.
func (c *Cache) chunkPath(name [32]byte) string {
	s := hex.EncodeToString(name[:])
	return filepath.Join(c.chunkDir, s[:2], s)
}

// lookupLocked returns chunk ck's entry, or nil. While the index is being
// loaded (load.go) a chunk not in memory yet is looked for in index.db and
// brought in (faultInLocked).
func (c *Cache) lookupLocked(ck chunkID) *entry {
	if e := c.lookupMemLocked(ck); e != nil || !c.loading {
		return e
	}
	return c.faultInLocked(ck)
}

// lookupMemLocked returns chunk ck's entry if it is in memory, or nil.
func (c *Cache) lookupMemLocked(ck chunkID) *entry {
	obj := c.objectLocked(ck.obj)
	if obj == nil {
		return nil
	}
	return obj.chunk(ck.idx)
}

// groupLocked returns the named group, creating it; quota >= 0 sets its quota.
func (c *Cache) groupLocked(name string, quota int64) *group {
	g := c.idx.groups[name]
	if g == nil {
		g = &group{name: name, class: PriorityNormal.class(),
			lru: elist{which: grpLinks}, pinned: elist{which: grpLinks}}
		c.idx.groups[name] = g
	}
	if quota >= 0 {
		g.quota = quota
	}
	return g
}

// listsOf returns the whole cache's and the group's list that e is in.
func (c *Cache) listsOf(e *entry) (all, grp *elist) {
	if e.pinned {
		return &c.idx.pinned, &e.group.pinned
	}
	return &c.idx.lru[e.class], &e.group.lru
}

func (c *Cache) touchLocked(e *entry) {
	all, grp := c.listsOf(e)
	all.MoveToFront(e)
	grp.MoveToFront(e)
	e.lastAccess = c.cfg.Now().UnixNano()
	e.dirty = true
}

// demoteLocked makes e the next chunk to evict: a chunk this node no longer
// owns (the ring changed) is served while it lasts, then makes room first.
func (c *Cache) demoteLocked(e *entry) {
	if !e.pinned {
		c.idx.lru[e.class].MoveToBack(e)
		e.group.lru.MoveToBack(e)
	}
}

// chunkCount returns how many chunks the index holds (the records not
// loaded yet included).
func (c *Cache) chunkCount() int {
	n := c.idx.pinned.Len() + c.idx.unloaded
	for i := range c.idx.lru {
		n += c.idx.lru[i].Len()
	}
	return n
}

// addLocked records a chunk whose file is in place and counts its bytes;
// it evicts nothing (fills reserve their room before they start).
func (c *Cache) addLocked(ck chunkID, objSize, length int64, g *group, lastAccess int64) *entry {
	if old := c.lookupLocked(ck); old != nil {
		c.removeLocked(old, false) // same name: the new file replaced it
	}
	e := c.insertLocked(ck, objSize, length, g, lastAccess)
	all, grp := c.listsOf(e)
	all.PushFront(e)
	grp.PushFront(e)
	c.idx.used += length
	g.used += length
	if e.pinned {
		c.idx.pinnedBytes += length
		g.pinnedBytes += length
	}
	return e
}

// insertLocked makes an entry for chunk ck, which is not in memory, and
// decides whether it is pinned; it puts it in no list and counts nothing.
func (c *Cache) insertLocked(ck chunkID, objSize, length int64, g *group, lastAccess int64) *entry {
	obj := c.objectLocked(ck.obj)
	if obj == nil {
		sk := storeKey{ck.obj.store, ck.obj.key}
		obj = &object{key: ck.obj, size: objSize, next: c.idx.keys[sk]}
		c.idx.keys[sk] = obj
	}
	e := &entry{obj: obj, idx: ck.idx, length: length, group: g, lastAccess: lastAccess, class: uint8(g.class)}
	i, _ := obj.find(ck.idx)
	obj.chunks = slices.Insert(obj.chunks, i, e)
	e.pinned = c.pinnedLocked(e)
	return e
}

// removeLocked forgets e and, when unlink, removes its file. The unlink is
// done under the lock so that it cannot remove a later fill's file of the
// same name; open handles keep reading the unlinked file.
func (c *Cache) removeLocked(e *entry, unlink bool) {
	obj := e.obj
	i, ok := obj.find(e.idx)
	if !ok || obj.chunks[i] != e {
		return // already removed
	}
	obj.chunks = slices.Delete(obj.chunks, i, i+1)
	c.closeOpenLocked(e)
	if len(obj.chunks) == 0 {
		obj.chunks = nil
		sk := storeKey{obj.key.store, obj.key.key}
		if head := c.idx.keys[sk]; head == obj {
			if obj.next == nil {
				delete(c.idx.keys, sk)
			} else {
				c.idx.keys[sk] = obj.next
			}
		} else {
			for o := head; o != nil; o = o.next {
				if o.next == obj {
					o.next = obj.next
					break
				}
			}
		}
	}
	all, grp := c.listsOf(e)
	all.Remove(e)
	grp.Remove(e)
	c.idx.used -= e.length
	e.group.used -= e.length
	if e.pinned {
		c.idx.pinnedBytes -= e.length
		e.group.pinnedBytes -= e.length
	}
	name := e.name()
	if c.loading {
		c.tombs[name] = struct{}{} // its record in index.db is not to be loaded again
	}
	if unlink && !c.nameInUseLocked(chunkID{e.obj.key, e.idx}) {
		if err := os.Remove(c.chunkPath(name)); err != nil && !os.IsNotExist(err) {
			c.log.Warn("remove chunk file", "err", err)
		}
	}
	c.pending = append(c.pending, op{key: name})
}

// nameInUseLocked reports whether chunk id's file name holds, or is about
// to hold, a file that must stay: one the index records, or one a fill of
// the chunk is renaming onto it (fill.committing).
func (c *Cache) nameInUseLocked(id chunkID) bool {
	if fl := c.inflight[id]; fl != nil && fl.committing {
		return true
	}
	return c.lookupMemLocked(id) != nil
}

func (c *Cache) evictLocked(e *entry) {
	c.removeLocked(e, true)
	c.st.evictions.Add(1)
}

// reserveLocked makes room for n more bytes in g and in the whole cache by
// evicting least recently used chunks (the group's own first, for its
// quota; then the lowest priority class first, up to g's own class), and
// counts them as used. It returns false, evicting no more, when the fills
// in progress, the pinned chunks and the chunks of higher classes leave no
// room or n exceeds a limit: the fill then runs uncached. Chunks being
// fetched and pinned chunks are never evicted: they are not in the LRU
// lists.
func (c *Cache) reserveLocked(n int64, g *group) bool {
	if n > c.cfg.Capacity || (g.quota > 0 && n > g.quota) {
		return false
	}
	for g.quota > 0 && g.used+n > g.quota {
		back := g.lru.Back()
		if back == nil {
			return false
		}
		c.evictLocked(back)
	}
	for class := 0; c.idx.used+n > c.cfg.Capacity; {
		back := c.idx.lru[class].Back()
		if back == nil {
			if class == g.class {
				return false
			}
			class++
			continue
		}
		c.evictLocked(back)
	}
	c.idx.used += n
	g.used += n
	return true
}

// setClassLocked moves g and its unpinned chunks to class, merging them
// into that class's LRU list by last access.
func (c *Cache) setClassLocked(g *group, class int) {
	if g.class == class {
		return
	}
	g.class = class
	var es []*entry
	for e := g.lru.Front(); e != nil; e = g.lru.Next(e) {
		c.idx.lru[e.class].Remove(e)
		e.class = uint8(class)
		es = append(es, e)
	}
	// g.lru is newest first already; mergeByAge wants that order.
	slices.SortStableFunc(es, func(a, b *entry) int { return cmp.Compare(b.lastAccess, a.lastAccess) })
	mergeByAge(&c.idx.lru[class], es)
}

func (c *Cache) unreserveLocked(n int64, g *group) {
	c.idx.used -= n
	g.used -= n
}

// forget drops e after its file was found missing (removed behind the
// cache's back, or evicted between lookup and open).
func (c *Cache) forget(e *entry) {
	c.mu.Lock()
	c.removeLocked(e, false)
	c.mu.Unlock()
	c.wakePersist()
}
