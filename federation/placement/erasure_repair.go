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

	"github.com/fedgate/fedgate/store"
)

// Repair checks and rebuilds every erasure-coded object under prefix. It
// lists the keys of every store (the union, so an object whose manifest one
// store lost is still found), and for each:
//
//   - reads the manifest of every store and picks the newest intact
//     version (by version id);
//   - reads every shard of that version in full, verifies its checksums,
//     and rebuilds the missing or corrupt blocks from the intact ones
//     (each stripe needs K intact blocks), writing the shards that had
//     one back to their stores;
//   - writes that manifest to every store that lacks it, holds an older
//     version or a damaged copy (compare-and-swap, as a Put does), and then
//     removes the shards of the older versions it replaced.
//
// progress, when set, is called after each object and each segment read
// with the objects done, the total (counted by a first listing pass) and
// the bytes read. Memory: one segment's
// K+M shards. Shards are checked block by block and rebuilt stripe by
// stripe, so a segment is repairable while no stripe has lost more than
// M of its K+M blocks. The returned error names the objects it could not repair
// (a store still down, fewer than K intact shards); the others are
// repaired all the same. Under DryRun it checks and reports only (it still
// reads every shard, to verify them).
func (e *Erasure) Repair(ctx context.Context, prefix string, progress func(RepairProgress)) (RepairStats, error) {
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
		changed, err := e.repairObject(ctx, key, &st, func() {
			if progress != nil {
				progress(RepairProgress{Objects: st.Objects - 1, Total: max(total, st.Objects), BytesRead: st.BytesRead})
			}
		})
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
			progress(RepairProgress{Objects: st.Objects, Total: max(total, st.Objects), BytesRead: st.BytesRead})
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

func (e *Erasure) repairObject(ctx context.Context, key string, st *RepairStats, segmentDone func()) (changed bool, _ error) {
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
	found := dryRun(ctx)
	var lacking []int // dry run: the stores that need something
	// The shards.
	kh := keyHash(key)
	for s := range m.Segments {
		fixed, err := e.repairSegment(ctx, kh, m, s, st, &lacking)
		segmentDone()
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
		if found != nil {
			if c.m == nil || c.m.Version < m.Version {
				lacking = append(lacking, i)
				st.Manifests++
			}
			continue
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
	if found != nil {
		if len(lacking) > 0 {
			found(key, e.names(lacking))
			changed = true
		}
		return changed, errors.Join(failures...)
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

// repairSegment reads all K+M shards of segment s in full and verifies
// them block by block; then it rebuilds, stripe by stripe, every block
// that is missing or damaged from K intact blocks of its stripe (so
// damage spread over more than M shards is repaired as long as no stripe
// lost more than M blocks), and rewrites the shards that had one.
// Reed-Solomon works byte position by byte position, so this holds for
// both manifest formats.
func (e *Erasure) repairSegment(ctx context.Context, kh string, m *manifest, s int, st *RepairStats, lacking *[]int) (int, error) {
	sg := &m.Segments[s]
	k, n := m.Data, m.Data+m.Parity
	coder, err := e.enc(m.Data, m.Parity)
	if err != nil {
		return 0, err
	}
	rows := blocks(sg.Shard, m.Block)
	shards := make([][]byte, n)
	// badBlock[j][r]: block r of shard j is missing or damaged; nil when
	// the whole shard is intact.
	badBlock := make([][]bool, n)
	allBad := func(j int) {
		badBlock[j] = make([]bool, rows)
		for r := range badBlock[j] {
			badBlock[j][r] = true
		}
	}
	var read atomic.Int64
	parallel(n, n, func(j int) error {
		i := e.storeOf(m, sg.Stores[j])
		if i < 0 {
			allBad(j)
			return nil
		}
		rc, err := e.stores[i].ReadRange(ctx, shardKey(kh, sg.Set, sg.Index, j), 0, -1, "")
		e.observe(i, err)
		if err != nil {
			allBad(j)
			return nil
		}
		defer rc.Close()
		b := make([]byte, sg.Shard)
		got, err := io.ReadFull(rc, b)
		read.Add(int64(got))
		shards[j] = b
		if err != nil || store.ExpectEOF(rc) != nil {
			// Missing bytes or extra ones: not this write's shard.
			allBad(j)
			return nil
		}
		for r := range rows {
			lo := r * m.Block
			if crc32.Checksum(b[lo:lo+sg.blockLen(r, m.Block)], castagnoli) != sg.blockSum(j, r) {
				if badBlock[j] == nil {
					badBlock[j] = make([]bool, rows)
				}
				badBlock[j][r] = true
			}
		}
		return nil
	})
	st.BytesRead += read.Load()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var damaged []int
	for j := range n {
		if badBlock[j] != nil {
			damaged = append(damaged, j)
			if shards[j] == nil {
				shards[j] = make([]byte, sg.Shard)
			}
		}
	}
	if len(damaged) == 0 {
		return 0, nil
	}
	row := make([][]byte, n)
	required := make([]bool, n)
	for r := range rows {
		lo, bl := r*m.Block, sg.blockLen(r, m.Block)
		intact := 0
		for j := range n {
			required[j] = badBlock[j] != nil && badBlock[j][r]
			if required[j] {
				row[j] = shards[j][lo : lo : lo+bl]
			} else {
				row[j] = shards[j][lo : lo+bl]
				intact++
			}
		}
		if intact == n {
			continue
		}
		if intact < k {
			return 0, fmt.Errorf("segment %d: %w: block %d is intact in %d of %d shards, %d needed", s, ErrUnrecoverable, r, intact, n, k)
		}
		if err := coder.ReconstructSome(row, required); err != nil {
			return 0, fmt.Errorf("segment %d: %w: %v", s, ErrUnrecoverable, err)
		}
		for j := range n {
			if required[j] {
				copy(shards[j][lo:lo+bl], row[j])
			}
		}
	}
	fixed := 0
	var errs []error
	for _, j := range damaged {
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
		if dryRun(ctx) != nil {
			*lacking = append(*lacking, i)
			fixed++
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
