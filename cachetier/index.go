package cachetier

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
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

// entry is one cached chunk: 128 bytes (one allocation of that size
// class), and no strings. Its identity (store, key, validator) is not
// kept: nm, the SHA-256 chunk name of the identity (its file name and
// index.db key), finds it, and the record in index.db holds the identity
// for the few operations that need it (pins, the ring: repin in pin.go).
type entry struct {
	nm         [32]byte // chunkName of the identity
	keyHash    uint64   // keyHashOf(store, key): the chain Invalidate walks
	knext      *entry   // next entry of the same keyHash (index.byKey)
	idx        int64
	length     int64
	group      *group
	lastAccess int64  // unix nanoseconds, persisted for LRU order across restarts
	sum        uint32 // CRC-32C of the chunk's bytes, when hasSum
	hasSum     bool   // records written before checksums have none
	dirty      bool   // lastAccess changed since last persisted
	// unverified: loaded from index.db and not yet checked against its
	// file (verify.go); never served until checked.
	unverified bool
	pinned     bool     // in the pinned lists, not the LRU ones
	class      uint8    // the priority class whose LRU list holds it (unpinned)
	gone       bool     // removed from the index
	links      [2]links // in the whole cache's list and the group's (elist)
}

type group struct {
	name        string
	quota, used int64 // used includes this group's fills in progress and its unloaded chunks
	pinnedBytes int64
	// unloaded, unloadedBytes: the group's records in index.db not in
	// memory yet (load.go); counted in used.
	unloaded      int
	unloadedBytes int64
	class         int   // Priority + 1: index into index.lru
	lru           elist // unpinned chunks; front: most recently used
	pinned        elist
}

type index struct {
	// chunks finds an entry by its name; byKey holds the first entry of
	// each keyHash's chain (entry.knext): every cached chunk of every
	// version of a store's key, for Invalidate.
	chunks, byKey etable
	groups        map[string]*group
	lru           [numClasses]elist // unpinned chunks by class; front: most recently used
	pinned        elist             // pinned chunks; front: most recently used
	used          int64             // bytes of chunks plus fills in progress (reserved) plus unloaded records
	pinnedBytes   int64
	// unloaded, unloadedBytes: records in index.db not in memory yet
	// (load.go), counted in used and in Stats' chunk counts.
	unloaded      int
	unloadedBytes int64
}

func newIndex() index {
	return index{
		chunks: etable{key: func(e *entry) uint64 { return nameHash(&e.nm) }},
		byKey:  etable{key: func(e *entry) uint64 { return e.keyHash }},
		groups: make(map[string]*group),
	}
}

// nameHash places a chunk name in index.chunks: its first 8 bytes (a
// SHA-256 is uniform already). A variable so that tests can make every
// name collide; lookups compare the whole name.
var nameHash = func(nm *[32]byte) uint64 { return binary.LittleEndian.Uint64(nm[:8]) }

// keyHashSeed makes keyHashOf differ between processes (it is never
// persisted), so no set of keys collides on every node.
var keyHashSeed = maphash.MakeSeed()

// keyHashOf is the hash of (store, key) that chains a key's chunks for
// Invalidate. Keys whose hashes collide share a chain: Invalidate of one
// then drops the other's chunks too, which costs a refetch, never a wrong
// byte. A variable for tests.
var keyHashOf = func(st, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(keyHashSeed)
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(st)))])
	h.WriteString(st)
	h.WriteString(key)
	return h.Sum64()
}

// name is e's file name and index key (chunkName).
func (e *entry) name() [32]byte { return e.nm }

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
	nm := chunkName(ck)
	if e := c.lookupNameLocked(&nm); e != nil || !c.loading {
		return e
	}
	return c.faultInLocked(ck, nm)
}

// lookupMemLocked returns chunk ck's entry if it is in memory, or nil.
func (c *Cache) lookupMemLocked(ck chunkID) *entry {
	nm := chunkName(ck)
	return c.lookupNameLocked(&nm)
}

// lookupNameLocked returns the entry named nm if it is in memory, or nil.
func (c *Cache) lookupNameLocked(nm *[32]byte) *entry {
	return c.idx.chunks.find(nameHash(nm), func(e *entry) bool { return e.nm == *nm })
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
func (c *Cache) addLocked(ck chunkID, length int64, g *group, lastAccess int64) *entry {
	if old := c.lookupLocked(ck); old != nil {
		c.removeLocked(old, false) // same name: the new file replaced it
	}
	nm := chunkName(ck)
	e := c.insertLocked(ck, nm, length, g, lastAccess)
	c.noteBeyondLocked(nm)
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

// insertLocked makes an entry for chunk ck (named nm), which is not in
// memory, and decides whether it is pinned; it puts it in no list and
// counts nothing.
func (c *Cache) insertLocked(ck chunkID, nm [32]byte, length int64, g *group, lastAccess int64) *entry {
	e := &entry{nm: nm, keyHash: keyHashOf(ck.obj.store, ck.obj.key), idx: ck.idx, length: length,
		group: g, lastAccess: lastAccess, class: uint8(g.class)}
	c.idx.chunks.insert(e)
	if head := c.idx.byKey.find(e.keyHash, func(*entry) bool { return true }); head != nil {
		e.knext, head.knext = head.knext, e
	} else {
		c.idx.byKey.insert(e)
	}
	e.pinned = c.pinnedLocked(ck, g)
	return e
}

// noteBeyondLocked records, while the index loads, an entry made by a fill
// or a lookup beyond the loader's cursor: repin reads its record too.
func (c *Cache) noteBeyondLocked(nm [32]byte) {
	if c.loading && (c.cursor == nil || bytes.Compare(nm[:], c.cursor) > 0) {
		c.beyond[nm] = struct{}{}
	}
}

// keyChainLocked returns the entries chained under (store, key)'s hash:
// every cached chunk of the key, and those of any key whose hash
// collides with it.
func (c *Cache) keyChainLocked(st, key string) []*entry {
	var es []*entry
	for e := c.idx.byKey.find(keyHashOf(st, key), func(*entry) bool { return true }); e != nil; e = e.knext {
		es = append(es, e)
	}
	return es
}

// removeLocked forgets e and, when unlink, removes its file. The unlink is
// done under the lock so that it cannot remove a later fill's file of the
// same name; open handles keep reading the unlinked file.
func (c *Cache) removeLocked(e *entry, unlink bool) {
	if e.gone {
		return // already removed
	}
	e.gone = true
	c.idx.chunks.remove(e)
	if head := c.idx.byKey.find(e.keyHash, func(*entry) bool { return true }); head == e {
		c.idx.byKey.remove(e)
		if e.knext != nil {
			c.idx.byKey.insert(e.knext)
		}
	} else {
		for p := head; p != nil; p = p.knext {
			if p.knext == e {
				p.knext = e.knext
				break
			}
		}
	}
	e.knext = nil
	c.closeOpenLocked(e)
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
	if unlink && !c.nameInUseLocked(name) {
		if err := os.Remove(c.chunkPath(name)); err != nil && !os.IsNotExist(err) {
			c.log.Warn("remove chunk file", "err", err)
		}
	}
	c.pending = append(c.pending, op{key: name})
}

// nameInUseLocked reports whether chunk id's file name holds, or is about
// to hold, a file that must stay: one the index records, or one a fill of
// the chunk is renaming onto it (fill.committing).
func (c *Cache) nameInUseLocked(nm [32]byte) bool {
	if _, ok := c.committing[nm]; ok {
		return true
	}
	return c.lookupNameLocked(&nm) != nil
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
