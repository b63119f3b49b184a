package cachetier

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// The index is mirrored to a bbolt file, index.db: bucket "chunks" maps a
// chunk's name (32 bytes, see chunkName) to a record; bucket "meta" holds
// the format and the chunk size. Changes are queued in order under Cache.mu
// and written by one goroutine in one transaction per batch (persistLoop),
// so a fill never waits for the index. Last-access times are written at
// Close; after a crash the LRU order is the one last written.
//
// A fill does not fsync its chunk file. Before a batch that adds records is
// written, flush syncs the cache's filesystem once (syncfs(2)): every chunk
// file renamed before the batch was taken is then on disk, data and name,
// so a record never names bytes that might be lost. One sync per batch
// replaces an fsync per fill, which cost a disk cache flush each; batches
// are at least persistEvery apart.
//
// The file and the chunk files can disagree only in safe ways, which the
// background verification after Open repairs (verify.go): a record whose
// file is missing, has the wrong size or other bytes than its checksum is
// dropped, and a chunk file without a record (a crash between rename and
// persist) is removed. Open itself reads only index.db. A chunk's file name is a function of its identity, so a record
// can never point at another chunk's bytes.

var (
	bucketMeta   = []byte("meta")
	bucketChunks = []byte("chunks")
	keyFormat    = []byte("format")
	keyChunkSize = []byte("chunk_size")
)

const (
	formatVersion = 1
	// recordV1 has no checksum; recordVersion (2) appends the chunk's
	// CRC-32C, big-endian. Both are read.
	recordV1      = 1
	recordVersion = 2
)

// op is one index write; a nil val deletes key.
type op struct {
	key [32]byte
	val []byte
}

type record struct {
	ck                          chunkID
	group                       string
	objSize, length, lastAccess int64
	name                        [32]byte
	sum                         uint32
	hasSum                      bool
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRecord(b []byte, r *record) []byte {
	k := r.ck.obj
	if b == nil {
		b = make([]byte, 0, 52+len(k.store)+len(k.key)+len(k.validator)+len(r.group))
	}
	if r.hasSum {
		b = append(b, recordVersion)
	} else {
		b = append(b, recordV1)
	}
	b = appendString(b, k.store)
	b = appendString(b, k.key)
	b = appendString(b, string(k.validator))
	b = appendString(b, r.group)
	b = binary.AppendVarint(b, r.ck.idx)
	b = binary.AppendVarint(b, r.objSize)
	b = binary.AppendVarint(b, r.length)
	b = binary.AppendVarint(b, r.lastAccess)
	if r.hasSum {
		b = binary.BigEndian.AppendUint32(b, r.sum)
	}
	return b
}

var errBadRecord = errors.New("bad index record")

func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) == 0 || b[0] != recordV1 && b[0] != recordVersion {
		return r, errBadRecord
	}
	r.hasSum = b[0] == recordVersion
	b = b[1:]
	str := func() string {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			b = nil
			return ""
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s
	}
	num := func() int64 {
		v, k := binary.Varint(b)
		if k <= 0 {
			b = nil
			return -1
		}
		b = b[k:]
		return v
	}
	r.ck.obj.store, r.ck.obj.key = str(), str()
	r.ck.obj.validator = store.Validator(str())
	r.group = str()
	r.ck.idx, r.objSize, r.length = num(), num(), num()
	r.lastAccess = num()
	if r.hasSum && b != nil {
		if len(b) != 4 {
			return r, errBadRecord
		}
		r.sum = binary.BigEndian.Uint32(b)
		b = b[4:]
	}
	if b == nil || len(b) != 0 || r.ck.idx < 0 || r.length <= 0 || r.objSize < r.length {
		return r, errBadRecord
	}
	return r, nil
}

// wakePersist nudges the persister; call it after queueing ops.
func (c *Cache) wakePersist() {
	select {
	case c.persistWake <- struct{}{}:
	default:
	}
}

// persistEvery is the least time between two batches of index writes:
// each batch that adds records syncs the whole filesystem (see flush),
// which other programs writing to it would otherwise pay for at every
// fill. Memory is the truth meanwhile; a crash loses at most the records
// of this long, whose chunk files Open then removes.
const persistEvery = 100 * time.Millisecond

func (c *Cache) persistLoop() {
	defer close(c.persistDone)
	pause := time.NewTimer(0)
	<-pause.C
	for {
		select {
		case <-c.persistWake:
			if !c.flush(false) {
				continue
			}
		case <-c.persistStop:
			c.flush(true)
			return
		}
		pause.Reset(persistEvery)
		select {
		case <-pause.C:
		case <-c.persistStop:
			pause.Stop()
			c.flush(true)
			return
		}
	}
}

// writeBatch is what one flush writes: the queued ops, the changed
// last-access times (at Close), the keys invalidated during the load, and
// whether the load ended (the kept invalidations are spent) or found the
// totals off (recount them).
type writeBatch struct {
	ops      []op
	dirty    []touched
	inv      []storeKey
	invClear bool
	recount  bool
}

type touched struct {
	nm [32]byte
	at int64
}

func (w *writeBatch) empty() bool {
	return len(w.ops) == 0 && len(w.dirty) == 0 && len(w.inv) == 0 && !w.invClear && !w.recount
}

// flush writes the queued ops and, when all, every changed last-access time,
// and reports whether it wrote anything.
func (c *Cache) flush(all bool) bool {
	c.mu.Lock()
	w := writeBatch{ops: c.pending, inv: c.invPending, invClear: c.invClear, recount: c.recount}
	c.pending, c.invPending, c.invClear, c.recount = nil, nil, false, false
	c.writing = w.ops
	if all {
		lists := []*elist{&c.idx.pinned}
		for i := range c.idx.lru {
			lists = append(lists, &c.idx.lru[i])
		}
		for _, l := range lists {
			for e := l.Front(); e != nil; e = l.Next(e) {
				if e.dirty {
					w.dirty = append(w.dirty, touched{e.nm, e.lastAccess})
					e.dirty = false
				}
			}
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.writing = nil
		c.mu.Unlock()
	}()
	if w.empty() {
		return false
	}
	if !c.cfg.NoSync && !c.syncBroken && slices.ContainsFunc(w.ops, func(o op) bool { return o.val != nil }) {
		if err := c.syncFS(); err != nil {
			// Some chunk's bytes may not be on disk, and a later sync that
			// succeeds does not say they are (the kernel reports a lost
			// write once): no record is written any more. Memory keeps
			// the chunks; the next Open removes their files as chunks
			// without a record.
			c.log.Error("sync cache files: no more index records are written until restart", "err", err)
			c.syncBroken = true
		}
	}
	if c.syncBroken {
		w.ops = slices.DeleteFunc(w.ops, func(o op) bool { return o.val != nil })
	}
	if w.empty() {
		return false
	}
	if err := c.db.Update(func(tx *bolt.Tx) error { return w.write(tx) }); err != nil {
		// Memory stays the truth; the next Open repairs what the file lacks.
		c.log.Error("write cache index", "ops", len(w.ops), "err", err)
	}
	return true
}

// write applies w in tx, keeping the totals the sum of the records.
func (w *writeBatch) write(tx *bolt.Tx) error {
	b := tx.Bucket(bucketChunks)
	d := make(map[string]total)
	count := func(v []byte, sign int64) {
		if r, err := decodeRecord(v); err == nil {
			d[r.group] = total{d[r.group].bytes + sign*r.length, d[r.group].chunks + sign}
		}
	}
	for _, o := range w.ops {
		if old := b.Get(o.key[:]); old != nil {
			count(old, -1)
		}
		var err error
		if o.val == nil {
			err = b.Delete(o.key[:])
		} else {
			err = b.Put(o.key[:], o.val)
			count(o.val, 1)
		}
		if err != nil {
			return err
		}
	}
	// Last-access times (at Close): the record read back, since
	// memory keeps no identities (index.go).
	for _, t := range w.dirty {
		v := b.Get(t.nm[:])
		if v == nil {
			continue
		}
		r, err := decodeRecord(v)
		if err != nil {
			continue
		}
		r.lastAccess = t.at
		if err := b.Put(t.nm[:], appendRecord(nil, &r)); err != nil {
			return err
		}
	}
	if err := writeInvalidated(tx, w.inv, w.invClear); err != nil {
		return err
	}
	if w.recount {
		return recountTotals(tx)
	}
	return addTotals(tx, d)
}

// Bucket "invalidated" keeps the keys invalidated while the index was
// loading (key: the length-prefixed store, then the key; no value) until a
// load ends: a restart before the loader met their records drops them at
// the next load all the same (load reads them into invKeys).
var bucketInvalidated = []byte("invalidated")

func invalidatedKey(k storeKey) []byte { return append(appendString(nil, k.store), k.key...) }

func writeInvalidated(tx *bolt.Tx, inv []storeKey, clear bool) error {
	if clear {
		if err := tx.DeleteBucket(bucketInvalidated); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		return nil
	}
	if len(inv) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketInvalidated)
	if err != nil {
		return err
	}
	for _, k := range inv {
		if err := b.Put(invalidatedKey(k), []byte{}); err != nil {
			return err
		}
	}
	return nil
}

// readInvalidated returns the keys kept in bucket "invalidated".
func readInvalidated(tx *bolt.Tx) []storeKey {
	b := tx.Bucket(bucketInvalidated)
	if b == nil {
		return nil
	}
	var out []storeKey
	b.ForEach(func(k, _ []byte) error {
		n, m := binary.Uvarint(k)
		if m > 0 && n <= uint64(len(k)-m) {
			out = append(out, storeKey{string(k[m : m+int(n)]), string(k[m+int(n):])})
		}
		return nil
	})
	return out
}

// syncfs flushes the filesystem that holds dir.
func syncfs(dir *os.File) error {
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// load prepares index.db (format, chunk size) and reads its totals: the
// bytes and chunks it records, per group, which the cache counts as used
// before a single record is in memory. The records themselves are brought
// in by loadLoop, in the background (load.go).
func (c *Cache) load() error {
	wantSize := binary.BigEndian.AppendUint64(nil, uint64(c.cfg.ChunkSize))
	wantFormat := []byte{formatVersion}
	var tot map[string]total
	var inv []storeKey
	err := c.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		gotSize, gotFormat := meta.Get(keyChunkSize), meta.Get(keyFormat)
		if gotSize != nil && (!bytes.Equal(gotSize, wantSize) || !bytes.Equal(gotFormat, wantFormat)) {
			// Chunk boundaries moved: every chunk is unreachable. Dropping the
			// records makes the orphan sweep remove the files.
			c.log.Warn("chunk size or index format changed: emptying the cache",
				"chunk_size", c.cfg.ChunkSize)
			for _, name := range [][]byte{bucketChunks, bucketTotals, bucketInvalidated} {
				if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
					return err
				}
			}
		}
		if err := meta.Put(keyChunkSize, wantSize); err != nil {
			return err
		}
		if err := meta.Put(keyFormat, wantFormat); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketChunks); err != nil {
			return err
		}
		if tx.Bucket(bucketTotals) == nil {
			// An index written before totals were kept (or an empty
			// one): count its records once, now.
			if err := recountTotals(tx); err != nil {
				return err
			}
		}
		tot = readTotals(tx)
		inv = readInvalidated(tx)
		return nil
	})
	if err != nil {
		return err
	}
	for name, t := range tot {
		g := c.groupLocked(name, -1)
		g.used, g.unloaded, g.unloadedBytes = t.bytes, int(t.chunks), t.bytes
		c.idx.used += t.bytes
		c.idx.unloaded += int(t.chunks)
		c.idx.unloadedBytes += t.bytes
	}
	for _, k := range inv {
		c.invKeys[k] = struct{}{}
	}
	c.invKept = len(inv) > 0
	c.loading = true
	if err := c.makeFanout(); err != nil {
		return err
	}
	if c.cfg.Capacity == 0 {
		size, err := c.cfg.CapacityFor(c.idx.used)
		if err == nil && size <= 0 {
			err = fmt.Errorf("cachetier: CapacityFor(%d) chose %d bytes", c.idx.used, size)
		}
		if err != nil {
			return capacityError{err}
		}
		c.cfg.Capacity = size
	}
	return nil
}

// total is what index.db records for one group: bytes and chunks.
type total struct{ bytes, chunks int64 }

// Bucket "totals" maps a group's name to its total (16 bytes: bytes and
// chunks, big-endian) over the records of bucket "chunks" that decode; it
// is updated in the same transaction as the records (flush), so it is
// always their sum.
var bucketTotals = []byte("totals")

func readTotals(tx *bolt.Tx) map[string]total {
	tot := make(map[string]total)
	b := tx.Bucket(bucketTotals)
	if b == nil {
		return tot
	}
	b.ForEach(func(k, v []byte) error {
		if len(v) == 16 {
			if len(k) == 1 && k[0] == 0 {
				k = nil
			}
			tot[string(k)] = total{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))}
		}
		return nil
	})
	return tot
}

// addTotals adds d to the totals in index.db (tx is writable).
func addTotals(tx *bolt.Tx, d map[string]total) error {
	b, err := tx.CreateBucketIfNotExists(bucketTotals)
	if err != nil {
		return err
	}
	for name, dt := range d {
		k := []byte(name)
		if len(k) == 0 {
			k = []byte{0} // bbolt has no empty keys; "\x00" is the group ""
		}
		var t total
		if v := b.Get(k); len(v) == 16 {
			t = total{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))}
		}
		t.bytes += dt.bytes
		t.chunks += dt.chunks
		if t.chunks <= 0 {
			err = b.Delete(k)
		} else {
			err = b.Put(k, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(t.bytes)), uint64(t.chunks)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recountTotals sets the totals from the records (tx is writable).
func recountTotals(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketTotals); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	d := make(map[string]total)
	err := tx.Bucket(bucketChunks).ForEach(func(_, v []byte) error {
		if r, err := decodeRecord(v); err == nil {
			d[r.group] = total{d[r.group].bytes + r.length, d[r.group].chunks + 1}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return addTotals(tx, d)
}

// makeFanout creates the 256 fan-out directories.
func (c *Cache) makeFanout() error {
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(c.chunkDir, hex.EncodeToString([]byte{byte(i)})), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// capacityError is Config.CapacityFor's error, returned by Open as it is.
type capacityError struct{ err error }

func (e capacityError) Error() string { return e.err.Error() }
