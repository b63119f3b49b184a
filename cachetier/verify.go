package cachetier

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"encoding/hex"

	bolt "go.etcd.io/bbolt"
)

// Open serves at once; the chunk files are checked against their records
// as the loader (load.go) brings the records into memory, by one
// background goroutine (verifyLoop): a record whose file is missing, is not a regular file, has
// another size, or whose bytes do not match the record's CRC-32C is
// dropped with its file. Until an entry is checked it is never served: a
// read that finds it checks it first (verifyEntry), so a bad chunk is
// dropped and fetched again from the origin, never sent. Then the fan-out
// directories are swept of chunk files that no record names (a crash
// between a fill's rename and its record) and were there before Open.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// testVerifyStart, when set (tests), is called by verifyLoop before it
// checks anything.
var testVerifyStart func()

// Verified returns a channel closed once every entry loaded from index.db has been
// checked against its chunk file and orphan files are swept (or the cache
// closed first).
func (c *Cache) Verified() <-chan struct{} { return c.verifiedCh }

func (c *Cache) verifyLoop() {
	defer c.fills.Done()
	defer close(c.verifiedCh)
	if testVerifyStart != nil {
		testVerifyStart()
	}
	start := time.Now()
	checked, dropped := 0, 0
	for {
		c.mu.Lock()
		q, loading := c.verifyQ, c.loading
		c.verifyQ = nil
		c.mu.Unlock()
		for i, e := range q {
			if c.ctx.Err() != nil {
				return
			}
			if !c.verifyEntry(e) {
				dropped++
			}
			q[i] = nil
		}
		checked += len(q)
		if len(q) > 0 {
			continue
		}
		if !loading {
			break
		}
		select {
		case <-c.verifyWake:
		case <-c.ctx.Done():
			return
		}
	}
	removed, err := c.sweepOrphans()
	if err != nil && c.ctx.Err() == nil {
		c.log.Warn("sweep chunk files", "err", err)
	}
	c.log.Info("cache index verified", "chunks", checked, "dropped", dropped,
		"orphan_files", removed, "took", time.Since(start))
}

// wakeVerify tells verifyLoop that there are entries to check, or that
// loading ended.
func (c *Cache) wakeVerify() {
	select {
	case c.verifyWake <- struct{}{}:
	default:
	}
}

// verifyEntry checks e, if it is still unverified and in the index, against
// its file, dropping it (and its file) when bad. It reports whether e is
// still in the index.
func (c *Cache) verifyEntry(e *entry) bool {
	c.mu.Lock()
	if !c.presentLocked(e) {
		c.mu.Unlock()
		return false
	}
	if !e.unverified {
		c.mu.Unlock()
		return true
	}
	path, length, sum, hasSum := c.chunkPath(e.name()), e.length, e.sum, e.hasSum
	c.mu.Unlock()
	err := checkChunkFile(path, length, sum, hasSum)
	c.mu.Lock()
	if !c.presentLocked(e) {
		c.mu.Unlock()
		return false
	}
	if err == nil {
		e.unverified = false
		c.mu.Unlock()
		return true
	}
	name := e.name()
	c.log.Warn("dropped a bad cached chunk", "name", hex.EncodeToString(name[:]), "chunk", e.idx, "err", err)
	c.removeLocked(e, true)
	c.st.verifyDropped.Add(1)
	c.mu.Unlock()
	c.wakePersist()
	return false
}

// presentLocked reports whether e is (still) in the index.
func (c *Cache) presentLocked(e *entry) bool { return !e.gone }

var errBadChunk = errors.New("chunk file does not match its record")

// checkChunkFile reads the file at path and checks its size and, with
// hasSum, its CRC-32C.
func checkChunkFile(path string, length int64, sum uint32, hasSum bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() != length {
		return fmt.Errorf("%w: size %d, want %d", errBadChunk, fi.Size(), length)
	}
	if !hasSum {
		return nil
	}
	h := crc32.New(castagnoli)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if _, err := io.CopyBuffer(h, io.LimitReader(f, length), *bp); err != nil {
		return err
	}
	if got := h.Sum32(); got != sum {
		return fmt.Errorf("%w: CRC-32C %08x, want %08x", errBadChunk, got, sum)
	}
	return nil
}

// sweepOrphans removes every file in the fan-out directories that no
// record of index.db names and no fill has committed since Open
// (Cache.fresh, which it then stops keeping). It runs once the index is
// loaded and checked: a record not yet written for a chunk in memory is a
// fill's since Open, so in fresh.
func (c *Cache) sweepOrphans() (int, error) {
	defer func() {
		c.mu.Lock()
		c.fresh = nil
		c.mu.Unlock()
	}()
	removed := 0
	for i := range 256 {
		if c.ctx.Err() != nil {
			return removed, nil
		}
		dir := filepath.Join(c.chunkDir, hex.EncodeToString([]byte{byte(i)}))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return removed, err
		}
		var known map[[32]byte]bool
		err = c.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketChunks)
			known = make(map[[32]byte]bool, len(ents))
			for _, de := range ents {
				var name [32]byte
				if len(de.Name()) == 64 && de.Type().IsRegular() {
					if _, err := hex.Decode(name[:], []byte(de.Name())); err == nil && b.Get(name[:]) != nil {
						known[name] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			return removed, err
		}
		for _, de := range ents {
			var name [32]byte
			if len(de.Name()) == 64 {
				if _, err := hex.Decode(name[:], []byte(de.Name())); err == nil && known[name] {
					continue
				}
			}
			c.mu.Lock()
			_, fresh := c.fresh[name]
			if !fresh {
				err = os.RemoveAll(filepath.Join(dir, de.Name()))
			}
			c.mu.Unlock()
			if err != nil {
				return removed, err
			}
			if !fresh {
				removed++
			}
		}
	}
	return removed, nil
}
