package placement

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"sync/atomic"

	"github.com/fedgate/fedgate/federation/store"
)

// Repair checks and rebuilds every erasure-coded object under prefix. It
// lists the keys of every store (the union, so an object whose manifest one
// store lost is still found), and for each:
//
//   - reads the manifest of every store and picks the newest intact
//     version (by version id);
//   - reads every shard of that version in full, verifies its checksums,
//     and rebuilds the missing or corrupt ones from the intact ones (each
//     segment needs K intact shards), writing them back to their stores;
//   - writes that manifest to every store that lacks it, holds an older
//     version or a damaged copy (compare-and-swap, as a Put does), and then
//     removes the shards of the older versions it replaced.
//
// progress, when set, is called after each object with the objects done
// and the total (counted by a first listing pass). Memory: one segment's
// K+M shards. The returned error names the objects it could not repair
// (a store still down, fewer than K intact shards); the others are
// repaired all the same.
func (e *Erasure) Repair(ctx context.Context, prefix string, progress func(done, total int64)) (RepairStats, error) {
	var st RepairStats
	var errs repairErrors
	if len(prefix) >= len(reservedPrefix) && prefix[:len(reservedPrefix)] == reservedPrefix {
		return st, nil
	}
	keys := func() iter.Seq2[string, error] {
		ls := make([]iter.Seq2[store.Entry, error], len(e.stores))
		for i := range e.stores {
			ls[i] = e.visible(ctx, i, store.ListOptions{Prefix: prefix})
		}
		return mergeKeys(ls)
	}
	var total int64
	for _, err := range keys() {
		if err == nil {
			total++
		}
	}
	for key, err := range keys() {
		if err != nil {
			errs.add(err)
			continue
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		st.Objects++
		changed, err := e.repairObject(ctx, key, &st)
		switch {
		case err != nil:
			st.Failed++
			errs.add(fmt.Errorf("%s: %w", quote(key), err))
		case changed:
			st.Repaired++
		default:
			st.Healthy++
		}
		if progress != nil {
			progress(st.Objects, max(total, st.Objects))
		}
	}
	if err := errs.err(); err != nil {
		return st, fmt.Errorf("placement %s: repair %s: %w", e.name, quote(prefix), err)
	}
	return st, nil
}

// manifestCopy is one store's manifest of a key, as Repair found it.
type manifestCopy struct {
	m      *manifest
	info   store.ObjectInfo
	exists bool
	err    error // reading it (nil when absent or intact)
}

func (e *Erasure) repairObject(ctx context.Context, key string, st *RepairStats) (changed bool, _ error) {
	n := len(e.stores)
	copies := make([]manifestCopy, n)
	parallel(n, n, func(i int) error {
		c := &copies[i]
		info, err := e.stores[i].Stat(ctx, key)
		e.observe(i, err)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			c.err = err
			return nil
		}
		c.info, c.exists = info, true
		c.m, c.err = e.readManifest(ctx, i, key, info.Validator, false)
		return nil
	})
	newest := -1
	var failures []error
	for i, c := range copies {
		switch {
		case c.m != nil && (newest < 0 || c.m.Version > copies[newest].m.Version):
			newest = i
		case c.err != nil && !c.exists:
			failures = append(failures, e.storeErr(i, c.err))
		}
	}
	if newest < 0 {
		if len(failures) > 0 {
			return false, errors.Join(failures...)
		}
		for i, c := range copies {
			if c.exists {
				return false, e.storeErr(i, fmt.Errorf("%w: no intact manifest in any store", ErrCorrupt))
			}
		}
		return false, nil // deleted since it was listed
	}
	m := copies[newest].m
	// The shards.
	kh := keyHash(key)
	for s := range m.Segments {
		fixed, err := e.repairSegment(ctx, kh, m, s, st)
		if fixed > 0 {
			changed = true
			st.Shards += int64(fixed)
		}
		if err != nil {
			return changed, err
		}
	}
	// The manifests.
	enc := m.encode()
	var replaced []*manifest
	for i, c := range copies {
		if c.m != nil && c.m.Version == m.Version {
			continue
		}
		if c.m != nil {
			replaced = append(replaced, c.m)
		}
		ok, err := e.putManifestCopy(ctx, i, key, m, enc)
		if err != nil {
			failures = append(failures, e.storeErr(i, err))
			continue
		}
		if ok {
			changed = true
			st.Manifests++
		}
	}
	if len(failures) > 0 {
		return changed, errors.Join(failures...)
	}
	// Every store holds m now: the versions it replaced can go.
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if k := e.removeVersions(cctx, key, replaced, m.sets()); k > 0 {
		st.OldVersions += int64(k)
		changed = true
	}
	return changed, nil
}

// putManifestCopy writes manifest m (encoded enc) to store i unless the
// store holds it or a newer one; it reports whether it wrote.
func (e *Erasure) putManifestCopy(ctx context.Context, i int, key string, m *manifest, enc []byte) (bool, error) {
	s := e.stores[i]
	for range maxCAS {
		cur, err := s.Stat(ctx, key)
		e.observe(i, err)
		po := store.PutOptions{Metadata: store.Metadata{ContentType: manifestType, User: map[string]string{metaECVersion: m.Version}}}
		switch {
		case errors.Is(err, store.ErrNotFound):
			po.IfNoneMatch = true
		case err != nil:
			return false, err
		default:
			if v, ok := isManifest(cur); ok && v >= m.Version {
				if v > m.Version {
					return false, nil
				}
				// Same version: rewrite only a damaged copy.
				if _, err := e.readManifest(ctx, i, key, cur.Validator, false); err == nil || !errors.Is(err, ErrCorrupt) {
					return false, nil
				}
			}
			po.IfMatch = cur.Validator
		}
		_, err = s.Put(ctx, key, bytes.NewReader(enc), int64(len(enc)), po)
		e.observe(i, err)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, store.ErrPreconditionFailed):
			return false, err
		}
	}
	return false, fmt.Errorf("manifest kept changing")
}

// repairSegment reads all K+M shards of segment s in full, verifies them
// block by block, and rebuilds and rewrites the missing or damaged ones.
func (e *Erasure) repairSegment(ctx context.Context, kh string, m *manifest, s int, st *RepairStats) (int, error) {
	sg := &m.Segments[s]
	k, n := m.Data, m.Data+m.Parity
	coder, err := e.enc(m.Data, m.Parity)
	if err != nil {
		return 0, err
	}
	shards := make([][]byte, n)
	bad := make([]bool, n)
	var read atomic.Int64
	parallel(n, n, func(j int) error {
		i := e.storeOf(m, sg.Stores[j])
		if i < 0 {
			bad[j] = true
			return nil
		}
		rc, err := e.stores[i].ReadRange(ctx, shardKey(kh, sg.Set, sg.Index, j), 0, -1, "")
		e.observe(i, err)
		if err != nil {
			bad[j] = true
			return nil
		}
		defer rc.Close()
		b := make([]byte, sg.Shard)
		got, err := io.ReadFull(rc, b)
		read.Add(int64(got))
		if err != nil || store.ExpectEOF(rc) != nil {
			bad[j] = true
			return nil
		}
		for blk := range blocks(sg.Shard, m.Block) {
			lo := blk * m.Block
			if crc32.Checksum(b[lo:min(lo+m.Block, sg.Shard)], castagnoli) != sg.blockSum(j, blk) {
				bad[j] = true
				return nil
			}
		}
		shards[j] = b
		return nil
	})
	st.BytesRead += read.Load()
	var missing []int
	for j := range n {
		if bad[j] {
			shards[j] = nil
			missing = append(missing, j)
		}
	}
	if len(missing) == 0 {
		return 0, ctx.Err()
	}
	if n-len(missing) < k {
		return 0, fmt.Errorf("segment %d: %w: %d of %d shards intact, %d needed", s, ErrUnrecoverable, n-len(missing), n, k)
	}
	if err := coder.Reconstruct(shards); err != nil {
		return 0, fmt.Errorf("segment %d: %w: %v", s, ErrUnrecoverable, err)
	}
	fixed := 0
	var errs []error
	for _, j := range missing {
		if !bytes.Equal(sumBlocks(shards[j], m.Block), sg.Sums[j]) {
			// The intact shards disagree with the manifest: not fixable by
			// rebuilding.
			errs = append(errs, fmt.Errorf("segment %d: rebuilt shard %d fails its checksum: %w", s, j, ErrUnrecoverable))
			continue
		}
		i := e.storeOf(m, sg.Stores[j])
		if i < 0 {
			errs = append(errs, fmt.Errorf("segment %d shard %d: store %s is no longer in the layout", s, j, m.Stores[sg.Stores[j]]))
			continue
		}
		_, err := e.stores[i].Put(ctx, shardKey(kh, sg.Set, sg.Index, j), bytes.NewReader(shards[j]), sg.Shard,
			store.PutOptions{Metadata: store.Metadata{ContentType: "application/octet-stream"}})
		e.observe(i, err)
		if err != nil {
			errs = append(errs, e.storeErr(i, fmt.Errorf("segment %d shard %d: %w", s, j, err)))
			continue
		}
		fixed++
	}
	return fixed, errors.Join(errs...)
}
