package cachetier

import (
	"container/list"
	"os"
)

// DefaultOpenFiles is how many cached chunks' files a Cache keeps open
// between reads unless Config.OpenFiles says otherwise.
const DefaultOpenFiles = 1024

// openFiles keeps the files of recently read chunks open, so that a hit
// on one costs a pread instead of open, pread and close: for small objects
// (a training sample of 16 KiB) the open and close were most of a warm
// read's system time. A chunk file is never rewritten in place (a fill
// writes a temporary file and renames it over), so a descriptor kept open
// always reads the bytes its entry names; when the entry goes (evicted,
// invalidated, replaced) its descriptor is let go, and readers holding it
// finish on the unlinked file as they did with their own descriptors.
//
// Handles read with pread only (ReadAt), so one descriptor serves any
// number of them at once; Chunk hands out a private descriptor instead,
// since its callers may use the file offset.
type openFiles struct {
	max   int
	lru   list.List // of *entry with a kept file; front: most recently used
	files map[*entry]*chunkFile
}

// openLocked returns e's kept descriptor with a reference for the caller,
// or nil when none is kept.
func (c *Cache) openLocked(e *entry) *chunkFile {
	cf := c.open.files[e]
	if cf == nil {
		return nil
	}
	c.open.lru.MoveToFront(cf.elem)
	cf.ref()
	return cf
}

// keepOpenLocked keeps f, just opened for e, for later hits: it returns the
// chunkFile the caller reads (holding the caller's reference). When e is
// gone meanwhile, or another reader kept a descriptor first, or keeping is
// off, f is the caller's alone.
func (c *Cache) keepOpenLocked(e *entry, f *os.File) *chunkFile {
	if c.open.max <= 0 || !c.presentLocked(e) || c.closed {
		return newChunkFile(f)
	}
	if c.open.files[e] != nil { // another reader opened it at the same time
		f.Close()
		return c.openLocked(e)
	}
	cf := newChunkFile(f)
	cf.ref() // the cache's
	if c.open.files == nil {
		c.open.files = make(map[*entry]*chunkFile)
	}
	c.open.files[e] = cf
	cf.elem = c.open.lru.PushFront(e)
	for c.open.lru.Len() > c.open.max {
		c.closeOpenLocked(c.open.lru.Back().Value.(*entry))
	}
	return cf
}

// closeOpenLocked lets go of e's kept descriptor (closed once no reader
// holds it).
func (c *Cache) closeOpenLocked(e *entry) {
	cf := c.open.files[e]
	if cf == nil {
		return
	}
	c.open.lru.Remove(cf.elem)
	cf.elem = nil
	cf.unref()
	delete(c.open.files, e)
}

// closeAllOpenLocked lets go of every kept descriptor (Close).
func (c *Cache) closeAllOpenLocked() {
	for c.open.lru.Len() > 0 {
		c.closeOpenLocked(c.open.lru.Back().Value.(*entry))
	}
}
