package cachetier

import (
	"cmp"
	"container/list"
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

type object struct {
	key    objKey
	size   int64
	chunks map[int64]*entry
}

type entry struct {
	obj        *object
	idx        int64
	length     int64
	name       [32]byte // file name and index key: see chunkName
	group      *group
	lastAccess int64  // unix nanoseconds, persisted for LRU order across restarts
	sum        uint32 // CRC-32C of the chunk's bytes, when hasSum
	hasSum     bool   // records written before checksums have none
	dirty      bool   // lastAccess changed since last persisted
	// unverified: loaded at Open and not yet checked against its file
	// (verify.go); never served until checked.
	unverified bool
	pinned     bool // in the pinned lists, not the LRU ones
	class      int  // the priority class whose LRU list holds it (unpinned)
	lru, glru  *list.Element
	// open is the chunk file kept open for hits (see openFiles), with
	// its element in Cache.open's LRU list.
	open     *chunkFile
	openElem *list.Element
}

type group struct {
	name        string
	quota, used int64 // used includes this group's fills in progress
	pinnedBytes int64
	class       int       // Priority + 1: index into index.lru
	lru         list.List // unpinned chunks; front: most recently used
	pinned      list.List
}

type index struct {
	keys        map[storeKey]map[store.Validator]*object
	groups      map[string]*group
	lru         [numClasses]list.List // unpinned chunks by class; front: most recently used
	pinned      list.List             // pinned chunks; front: most recently used
	used        int64                 // bytes of chunks plus fills in progress (reserved)
	pinnedBytes int64
}

func newIndex() index {
	return index{keys: make(map[storeKey]map[store.Validator]*object), groups: make(map[string]*group)}
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

func (c *Cache) lookupLocked(ck chunkID) *entry {
	obj := c.idx.keys[storeKey{ck.obj.store, ck.obj.key}][ck.obj.validator]
	if obj == nil {
		return nil
	}
	return obj.chunks[ck.idx]
}

// groupLocked returns the named group, creating it; quota >= 0 sets its quota.
func (c *Cache) groupLocked(name string, quota int64) *group {
	g := c.idx.groups[name]
	if g == nil {
		g = &group{name: name, class: PriorityNormal.class()}
		c.idx.groups[name] = g
	}
	if quota >= 0 {
		g.quota = quota
	}
	return g
}

// listsOf returns the whole cache's and the group's list that e is in.
func (c *Cache) listsOf(e *entry) (all, grp *list.List) {
	if e.pinned {
		return &c.idx.pinned, &e.group.pinned
	}
	return &c.idx.lru[e.class], &e.group.lru
}

func (c *Cache) touchLocked(e *entry) {
	all, grp := c.listsOf(e)
	all.MoveToFront(e.lru)
	grp.MoveToFront(e.glru)
	e.lastAccess = c.cfg.Now().UnixNano()
	e.dirty = true
}

// demoteLocked makes e the next chunk to evict: a chunk this node no longer
// owns (the ring changed) is served while it lasts, then makes room first.
func (c *Cache) demoteLocked(e *entry) {
	if !e.pinned {
		c.idx.lru[e.class].MoveToBack(e.lru)
		e.group.lru.MoveToBack(e.glru)
	}
}

// chunkCount returns how many chunks the index holds.
func (c *Cache) chunkCount() int {
	n := c.idx.pinned.Len()
	for i := range c.idx.lru {
		n += c.idx.lru[i].Len()
	}
	return n
}

// addLocked records a chunk whose file is in place and counts its bytes;
// it evicts nothing (fills reserve their room before they start).
func (c *Cache) addLocked(ck chunkID, objSize, length int64, name [32]byte, g *group, lastAccess int64) *entry {
	sk := storeKey{ck.obj.store, ck.obj.key}
	versions := c.idx.keys[sk]
	if versions == nil {
		versions = make(map[store.Validator]*object, 1)
		c.idx.keys[sk] = versions
	}
	obj := versions[ck.obj.validator]
	if obj == nil {
		obj = &object{key: ck.obj, size: objSize, chunks: make(map[int64]*entry)}
		versions[ck.obj.validator] = obj
	}
	if old := obj.chunks[ck.idx]; old != nil {
		c.removeLocked(old, false) // same name: the new file replaced it
	}
	e := &entry{obj: obj, idx: ck.idx, length: length, name: name, group: g, lastAccess: lastAccess, class: g.class}
	obj.chunks[ck.idx] = e
	e.pinned = c.pinnedLocked(e)
	all, grp := c.listsOf(e)
	e.lru = all.PushFront(e)
	e.glru = grp.PushFront(e)
	c.idx.used += length
	g.used += length
	if e.pinned {
		c.idx.pinnedBytes += length
		g.pinnedBytes += length
	}
	return e
}

// removeLocked forgets e and, when unlink, removes its file. The unlink is
// done under the lock so that it cannot remove a later fill's file of the
// same name; open handles keep reading the unlinked file.
func (c *Cache) removeLocked(e *entry, unlink bool) {
	obj := e.obj
	if obj.chunks[e.idx] != e {
		return // already removed
	}
	delete(obj.chunks, e.idx)
	c.closeOpenLocked(e)
	if len(obj.chunks) == 0 {
		sk := storeKey{obj.key.store, obj.key.key}
		delete(c.idx.keys[sk], obj.key.validator)
		if len(c.idx.keys[sk]) == 0 {
			delete(c.idx.keys, sk)
		}
	}
	all, grp := c.listsOf(e)
	all.Remove(e.lru)
	grp.Remove(e.glru)
	c.idx.used -= e.length
	e.group.used -= e.length
	if e.pinned {
		c.idx.pinnedBytes -= e.length
		e.group.pinnedBytes -= e.length
	}
	if unlink && !c.nameInUseLocked(chunkID{e.obj.key, e.idx}) {
		if err := os.Remove(c.chunkPath(e.name)); err != nil && !os.IsNotExist(err) {
			c.log.Warn("remove chunk file", "err", err)
		}
	}
	c.pending = append(c.pending, op{key: e.name})
}

// nameInUseLocked reports whether chunk id's file name holds, or is about
// to hold, a file that must stay: one the index records, or one a fill of
// the chunk is renaming onto it (fill.committing).
func (c *Cache) nameInUseLocked(id chunkID) bool {
	if fl := c.inflight[id]; fl != nil && fl.committing {
		return true
	}
	return c.lookupLocked(id) != nil
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
		c.evictLocked(back.Value.(*entry))
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
		c.evictLocked(back.Value.(*entry))
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
	for el := g.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		c.idx.lru[e.class].Remove(e.lru)
		e.class = class
		es = append(es, e)
	}
	// g.lru is newest first already; mergeByAge wants that order.
	slices.SortStableFunc(es, func(a, b *entry) int { return cmp.Compare(b.lastAccess, a.lastAccess) })
	mergeByAge(&c.idx.lru[class], es, func(e *entry) **list.Element { return &e.lru })
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
