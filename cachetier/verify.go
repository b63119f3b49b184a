package cachetier

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"encoding/hex"
)

// Open loads index.db and serves at once; the chunk files are checked
// against their records afterwards, by one background goroutine
// (verifyLoop): a record whose file is missing, is not a regular file, has
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

// Verified returns a channel closed once every entry loaded at Open has been
// checked against its chunk file and orphan files are swept (or the cache
// closed first).
func (c *Cache) Verified() <-chan struct{} { return c.verifiedCh }

func (c *Cache) verifyLoop(queue []*entry, loaded [][32]byte) {
	defer c.fills.Done()
	defer close(c.verifiedCh)
	if testVerifyStart != nil {
		testVerifyStart()
	}
	start := time.Now()
	dropped := 0
	for i, e := range queue {
		if c.ctx.Err() != nil {
			return
		}
		if !c.verifyEntry(e) {
			dropped++
		}
		queue[i] = nil
	}
	removed, err := c.sweepOrphans(loaded)
	if err != nil && c.ctx.Err() == nil {
		c.log.Warn("sweep chunk files", "err", err)
	}
	c.log.Info("cache index verified", "chunks", len(queue), "dropped", dropped,
		"orphan_files", removed, "took", time.Since(start))
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
	c.log.Warn("dropped a bad cached chunk", "store", e.obj.key.store, "key", e.obj.key.key,
		"chunk", e.idx, "err", err)
	c.removeLocked(e, true)
	c.st.verifyDropped.Add(1)
	c.mu.Unlock()
	c.wakePersist()
	return false
}

// presentLocked reports whether e is (still) in the index.
func (c *Cache) presentLocked(e *entry) bool { return e.obj.chunk(e.idx) == e }

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

// sweepOrphans removes every file in the fan-out directories that is not
// the file of a chunk loaded at Open (loaded, sorted) nor one a fill has
// committed since (Cache.fresh, which it then stops keeping).
func (c *Cache) sweepOrphans(loaded [][32]byte) (int, error) {
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
		for _, de := range ents {
			var name [32]byte
			if len(de.Name()) == 64 && de.Type().IsRegular() {
				if _, err := hex.Decode(name[:], []byte(de.Name())); err == nil {
					if _, ok := slices.BinarySearchFunc(loaded, name, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }); ok {
						continue
					}
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
