package federation

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/store"
)

// LocalExtents is the short-circuit read (docs/gpu-data-path.md): the
// bytes [off, off+n) of the object version info describes, as files on
// this node. A bucket read through the region cache gets them in this
// node's own cache (Local: a GPU node keeps what its training reads, even
// chunks the ring gives to a peer), filled as a GET fills them (from the
// owning peer or the origin, metered and refused by budgets the same way),
// a few chunks at once; a bucket on a local store (posix) gets the store's
// file. The chunks are pinned in the cache until release, which also
// closes every descriptor. The extents are in object order.
// Bytes of a write-back object still staged are not files here:
// ErrNotLocal.
func (b *Bucket) LocalExtents(ctx context.Context, info store.ObjectInfo, off, n int64) ([]backend.Extent, func(), error) {
	if off < 0 || n < 0 || off+n > info.Size {
		return nil, nil, fmt.Errorf("%w: range [%d, +%d) of a %d-byte object", backend.ErrInvalidArgument, off, n, info.Size)
	}
	if strings.HasPrefix(string(info.Validator), stagedPrefix) {
		return nil, nil, fmt.Errorf("%w: the object is staged for write-back", backend.ErrNotLocal)
	}
	if !b.cache.Chunked || b.ns.cache == nil {
		return b.localFileExtents(ctx, info, off, n)
	}
	skey := b.prefix + info.Key
	if info.StoreKey != "" {
		skey = info.StoreKey
	}
	tag := egressTag{bucket: b.Name, key: info.Key}
	id := cachetier.ObjectID{Store: b.store.Name(), Key: skey, Validator: info.Validator, Size: info.Size}
	fetch := b.ns.fetcher(tag, b.store, skey, info.Validator)
	opts := cachetier.ReadOptions{Group: b.Name, GroupQuota: b.cache.Quota, GroupPriority: b.cache.Priority,
		ReadAhead: -1, Concurrency: b.ns.fill, Local: true}
	cs := b.ns.cache.ChunkSize()
	var first, last int64 // chunk indexes
	if n > 0 {
		first, last = off/cs, (off+n-1)/cs
	} else {
		first, last = 0, -1
	}
	exts := make([]backend.Extent, last-first+1)
	refs := make([]cachetier.ChunkRef, len(exts))
	leases := make([]func(), len(exts))
	release := func() {
		for i, r := range refs {
			if r.Release != nil {
				r.Release()
			}
			if leases[i] != nil {
				leases[i]()
			}
		}
	}
	// A few chunks at once, as a reader's read-ahead fills them.
	par := max(b.ns.fill, 1)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range exts {
		idx := first + int64(i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			leases[i] = b.ns.cache.Lease(id, idx) // pinned here until the reader lets go
			ref, err := b.ns.cache.Chunk(ctx, id, idx, fetch, opts)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			refs[i] = ref
			start, end := max(off, idx*cs), min(off+n, (idx+1)*cs)
			exts[i] = backend.Extent{File: ref.File, FileOffset: ref.Offset + start - idx*cs, Length: end - start, ObjectOffset: start}
		})
	}
	wg.Wait()
	if firstErr != nil {
		release()
		return nil, nil, firstErr
	}
	b.ns.egress.count(tag, b.store, "read", countServed, n, b.ns.readReuse(b.Name, info, b.store))
	return exts, release, nil
}

// localFileExtents hands over a local store's file (a bucket not read
// through the cache).
func (b *Bucket) localFileExtents(ctx context.Context, info store.ObjectInfo, off, n int64) ([]backend.Extent, func(), error) {
	lf, prefix := b.LocalFiler()
	if lf == nil {
		return nil, nil, fmt.Errorf("%w: bucket %s is read neither through the cache nor from local files", backend.ErrNotLocal, b.Name)
	}
	f, dataOff, cur, err := lf.OpenLocal(ctx, prefix+info.Key)
	if err != nil {
		return nil, nil, err
	}
	if cur.Validator != info.Validator {
		f.Close()
		return nil, nil, fmt.Errorf("federation: %s/%s changed since it was looked up: %w", b.Name, info.Key, store.ErrPreconditionFailed)
	}
	sent, err := b.LocalRead(ctx, cur)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	sent(n)
	var once sync.Once
	return []backend.Extent{{File: f, FileOffset: dataOff + off, Length: n, ObjectOffset: off}}, func() { once.Do(func() { f.Close() }) }, nil
}
