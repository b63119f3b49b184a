package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"

	"github.com/klauspost/reedsolomon"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Erasure is a placement that cuts every object into segments and each
// segment into K data and M parity shards (Reed-Solomon, so any K of a
// segment's K+M shards rebuild it), spread over its stores, with a small
// manifest per object in every store. See the package documentation for
// the layout and the rules; it is a store.Store and a store.Multiparter.
type Erasure struct {
	base
	k, m    int
	byName  map[string]int
	mu      sync.Mutex
	encoder map[[2]int]reedsolomon.Encoder
}

var (
	_ store.Store       = (*Erasure)(nil)
	_ store.Multiparter = (*Erasure)(nil)
)

// NewErasure returns the placement that stores objects as data+parity
// shards over stores. Every segment's K+M shards go round-robin over the
// stores (several per store when K+M exceeds their number), so the layout
// must survive the loss of any one store: at most parity shards of a
// segment may share a store, i.e. ceil((data+parity)/len(stores)) <=
// parity. It understands every Option.
func NewErasure(name string, loc policies.Location, stores []store.Store, data, parity int, opts ...Option) (*Erasure, error) {
	b, err := newBase("erasure", name, loc, stores, opts)
	if err != nil {
		return nil, err
	}
	n := len(stores)
	switch {
	case data < 1 || parity < 1 || data+parity > 256:
		return nil, fmt.Errorf("placement %s: erasure data=%d parity=%d: want data >= 1, parity >= 1, data+parity <= 256", name, data, parity)
	case (data+parity+n-1)/n > parity:
		return nil, fmt.Errorf("placement %s: erasure %d+%d over %d stores puts %d shards of a segment on one store: losing that store would lose data (at most %d may share one)",
			name, data, parity, n, (data+parity+n-1)/n, parity)
	case b.opts.blockSize < 1:
		return nil, fmt.Errorf("placement %s: block size %d", name, b.opts.blockSize)
	case b.opts.segmentSize < int64(data):
		return nil, fmt.Errorf("placement %s: segment size %d is under %d bytes", name, b.opts.segmentSize, data)
	case b.opts.inlineLimit < 0:
		return nil, fmt.Errorf("placement %s: inline limit %d", name, b.opts.inlineLimit)
	}
	e := &Erasure{base: b, k: data, m: parity, byName: map[string]int{}, encoder: map[[2]int]reedsolomon.Encoder{}}
	for i, s := range stores {
		e.byName[s.Name()] = i
	}
	if _, err := e.enc(data, parity); err != nil {
		return nil, fmt.Errorf("placement %s: %w", name, err)
	}
	return e, nil
}

// enc returns the Reed-Solomon coder of k+m shards (a manifest may name a
// layout other than the placement's current one).
func (e *Erasure) enc(k, m int) (reedsolomon.Encoder, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.encoder[[2]int{k, m}]; ok {
		return c, nil
	}
	c, err := reedsolomon.New(k, m)
	if err != nil {
		return nil, err
	}
	e.encoder[[2]int{k, m}] = c
	return c, nil
}

// checkKey refuses, besides what no store holds, the names under the
// reserved prefix, where the shards live.
func (e *Erasure) checkKey(op, key string) error {
	err := checkKey(key)
	if err == nil && strings.HasPrefix(key, reservedPrefix) {
		err = fmt.Errorf("%w: names under %s are reserved for erasure-coded shards", store.ErrInvalidKey, reservedPrefix)
	}
	if err != nil {
		return fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), err)
	}
	return nil
}

// storeOf returns the index in e.stores of the store a manifest names at
// index i of its Stores, or -1 when the layout no longer has it.
func (e *Erasure) storeOf(m *manifest, i int) int {
	if idx, ok := e.byName[m.Stores[i]]; ok {
		return idx
	}
	return -1
}

// Stat returns the object's info from its manifest (its header only),
// read from the first store in read order that has an intact one.
// ErrNotFound when no reachable store has a manifest of key.
func (e *Erasure) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if err := e.checkKey("stat", key); err != nil {
		return store.ObjectInfo{}, err
	}
	m, err := e.loadManifest(ctx, "stat", key, true)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return m.info(key), nil
}

// ReadRange streams the range: it reads the manifest, then only the
// stripes that hold the range, each from the needed data shards' blocks
// or, when that costs less (WithCosts) or a data shard is missing,
// unreachable or fails its checksum, from the K cheapest shards of the
// segment, decoded; every block is verified. ErrUnrecoverable when fewer
// than K shards of a segment can be read. With ifMatch,
// ErrPreconditionFailed unless the manifest read holds that version. A
// GET that started before an overwrite may fail once the old version's
// shards are removed; the caller retries with the new version. An object
// written in manifest format 1 (contiguous shards) is refused with
// ErrCorrupt naming the format.
func (e *Erasure) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	if err := e.checkKey("read", key); err != nil {
		return nil, err
	}
	m, without, err := e.loadManifestFrom(ctx, "read", key, false)
	if err != nil {
		return nil, err
	}
	if ifMatch != "" && ifMatch != m.validator() {
		return nil, fmt.Errorf("placement %s: read %s: %w", e.name, quote(key), store.ErrPreconditionFailed)
	}
	offset = min(max(offset, 0), m.Size)
	end := m.Size
	if length >= 0 && length < m.Size-offset {
		end = offset + length
	}
	return e.newReader(ctx, key, m, offset, end, without)
}

// Delete removes the key's manifest from every store, then, when every
// store's manifest is gone, the shards of the versions they named. It is
// idempotent. When a store fails, its manifest (and every shard) stays and
// the error names the store: the object remains readable until a later
// Delete succeeds there. Failures to remove shards once every manifest is
// gone are not reported: those shards are unreachable garbage.
func (e *Erasure) Delete(ctx context.Context, key string) error {
	if err := e.checkKey("delete", key); err != nil {
		return err
	}
	olds := make([]*manifest, len(e.stores))
	errs := parallel(len(e.stores), len(e.stores), func(i int) error {
		m, err := e.readManifest(ctx, i, key, "", false)
		if err == nil {
			olds[i] = m
		}
		err = e.stores[i].Delete(ctx, key)
		e.observe(i, err)
		if err != nil {
			return e.storeErr(i, err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("placement %s: delete %s: %w", e.name, quote(key), err)
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	e.removeVersions(cctx, key, olds, nil)
	return nil
}

// removeVersions removes the shards of the manifests given (one removal
// per version), except shard sets that keep names. Best effort.
func (e *Erasure) removeVersions(ctx context.Context, key string, ms []*manifest, keep map[string]bool) int {
	seen := map[string]bool{}
	n := 0
	for _, m := range ms {
		if m == nil || seen[m.Version] {
			continue
		}
		seen[m.Version] = true
		var segs []segment
		for _, s := range m.Segments {
			if !keep[s.Set] {
				segs = append(segs, s)
			}
		}
		if len(segs) > 0 {
			e.removeSegments(ctx, keyHash(key), m, segs)
			n++
		}
	}
	return n
}

// removeSegments deletes every shard of segs (best effort).
func (e *Erasure) removeSegments(ctx context.Context, kh string, m *manifest, segs []segment) {
	type target struct {
		store int
		key   string
	}
	var ts []target
	for _, s := range segs {
		for j, st := range s.Stores {
			idx := -1
			if m != nil {
				idx = e.storeOf(m, st)
			} else if st >= 0 && st < len(e.stores) {
				idx = st
			}
			if idx >= 0 {
				ts = append(ts, target{idx, shardKey(kh, s.Set, s.Index, j)})
			}
		}
	}
	parallel(len(ts), 16, func(k int) error {
		err := e.stores[ts[k].store].Delete(ctx, ts[k].key)
		e.observe(ts[k].store, err)
		return err
	})
}

// List lists the first healthy store in read order (resuming on the next
// after the last entry when one fails part-way), hides the reserved shard
// names, and fills each object's info from its manifest's header (read in
// parallel, a window of listWindow entries ahead, from the listed store
// first). It never buffers more than that window.
func (e *Erasure) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if strings.HasPrefix(opts.Prefix, reservedPrefix) {
			return
		}
		raw := e.listFailover(ctx, opts, func(ctx context.Context, i int, o store.ListOptions) iter.Seq2[store.Entry, error] {
			return e.visible(ctx, i, o)
		})
		batch := make([]store.Entry, 0, listWindow)
		errs := make([]error, listWindow)
		flush := func() bool {
			parallel(len(batch), len(batch), func(k int) error {
				errs[k] = nil
				if batch[k].IsPrefix || batch[k].Key == "" {
					return nil
				}
				m, err := e.loadManifest(ctx, "list", batch[k].Key, true)
				if err != nil {
					errs[k] = err
					return nil
				}
				batch[k].Info = m.info(batch[k].Key)
				return nil
			})
			for k, ent := range batch {
				switch err := errs[k]; {
				case err == nil:
					if !yield(ent, nil) {
						return false
					}
				case errors.Is(err, store.ErrNotFound):
					// deleted since it was listed
				default:
					if !yield(store.Entry{Key: ent.Key}, err) {
						return false
					}
				}
			}
			batch = batch[:0]
			return true
		}
		for ent, err := range raw {
			if err != nil {
				if !flush() {
					return
				}
				if !yield(ent, err) {
					return
				}
				continue
			}
			batch = append(batch, ent)
			if len(batch) == listWindow && !flush() {
				return
			}
		}
		flush()
	}
}

const listWindow = 32

// visible lists store i without the reserved names. A listing that runs
// into them restarts after them rather than walking every shard; a common
// prefix that folds user keys and reserved names together (say ".fedgate-"
// under delimiter "-") is kept only when a user key is under it.
func (e *Erasure) visible(ctx context.Context, i int, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		o := opts
		for {
			restart := false
			for ent, err := range e.stores[i].List(ctx, o) {
				if err != nil {
					yield(ent, err)
					return
				}
				switch {
				case strings.HasPrefix(ent.Key, reservedPrefix):
					if o.StartAfter < reservedSkip {
						o.StartAfter = reservedSkip
						restart = true
					}
				case ent.IsPrefix && strings.HasPrefix(reservedPrefix, ent.Key):
					has, err := e.hasUserKey(ctx, i, ent.Key)
					if err != nil {
						yield(store.Entry{}, err)
						return
					}
					if has && !yield(ent, nil) {
						return
					}
					continue
				default:
					if !yield(ent, nil) {
						return
					}
					continue
				}
				if restart {
					break
				}
			}
			if !restart {
				return
			}
		}
	}
}

// hasUserKey reports whether store i holds a key under prefix outside the
// reserved names.
func (e *Erasure) hasUserKey(ctx context.Context, i int, prefix string) (bool, error) {
	for _, err := range e.visible(ctx, i, store.ListOptions{Prefix: prefix}) {
		return err == nil, err
	}
	return false, nil
}
