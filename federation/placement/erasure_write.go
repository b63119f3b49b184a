package placement

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/fedgate/fedgate/store"
)

// encoded is what encodeStream made of a body.
type encoded struct {
	segs   []segment
	size   int64
	md5    []byte
	inline []byte // the whole body, when it is small enough to inline
	// tried: segments whose shards may have been written (for cleanup,
	// including a last one that failed part-way).
	tried []segment
}

// rotation is where a set's first segment puts its first shard: spread
// by key (and part), so the stores holding two shards of a segment
// differ between objects.
func (e *Erasure) rotation(kh string, part int) int {
	b, _ := hex.DecodeString(kh[:4])
	return (int(b[0])<<8 | int(b[1])) + part
}

// encodeStream reads body (exactly size bytes when size >= 0, then checks
// its end) one segment at a time, stripes each segment over K data shards
// (see segment), encodes M parity shards and writes the K+M shards, in
// parallel, to their stores under set. Memory: one segment's shards and
// their parity, segmentSize × (K+M)/K, plus one stripe being read (K
// blocks), allocated only as far as the body goes (a small body takes
// small buffers). With allowInline, a body of at most inlineLimit bytes
// is returned in inline and nothing is written.
func (e *Erasure) encodeStream(ctx context.Context, kh, set string, rot int, body io.Reader, size int64, allowInline bool) (encoded, error) {
	var out encoded
	k, m := e.k, e.m
	coder, err := e.enc(k, m)
	if err != nil {
		return out, err
	}
	var src io.Reader = store.ContextReader(ctx, body)
	if size >= 0 {
		src = io.LimitReader(src, size)
	}
	h := md5.New()
	segSize, B := e.opts.segmentSize, e.opts.blockSize
	st := striper{k: k, block: B, maxShard: stripedShard(segSize, k, B), data: make([][]byte, k)}
	var parity []byte
	// head keeps the first bytes while the body may still be inlined.
	var head []byte
	inlining := allowInline
	for idx := 0; ; idx++ {
		limit := segSize
		if size >= 0 {
			limit = min(segSize, size-out.size)
		}
		n, eof, err := st.read(src, limit, size >= 0, func(p []byte) {
			h.Write(p)
			if inlining && int64(len(head)+len(p)) <= e.opts.inlineLimit {
				head = append(head, p...)
			} else {
				inlining, head = false, nil
			}
		})
		if err != nil {
			return out, fmt.Errorf("read body: %w", err)
		}
		out.size += n
		last := eof || (size >= 0 && out.size == size)
		if n == 0 {
			break
		}
		if idx == 0 && last && inlining {
			out.inline = head
			break
		}
		inlining, head = false, nil
		S := int64(len(st.data[0]))
		if int64(cap(parity)) < S*int64(m) {
			parity = make([]byte, S*int64(m))
		}
		shards := make([][]byte, k+m)
		copy(shards, st.data)
		for j := range m {
			shards[k+j] = parity[int64(j)*S : int64(j+1)*S]
		}
		// Reed-Solomon works byte position by byte position, so encoding
		// the whole shards encodes every stripe.
		if err := coder.Encode(shards); err != nil {
			return out, err
		}
		seg := segment{Set: set, Index: idx, Size: n, Shard: S, Stores: make([]int, k+m), Sums: make([][]byte, k+m)}
		for j := range k + m {
			seg.Stores[j] = (rot + idx + j) % len(e.stores)
			seg.Sums[j] = sumBlocks(shards[j], B)
		}
		out.tried = append(out.tried, seg)
		errs := parallel(k+m, k+m, func(j int) error {
			i := seg.Stores[j]
			_, err := e.stores[i].Put(ctx, shardKey(kh, set, idx, j), bytes.NewReader(shards[j]), S,
				store.PutOptions{Metadata: store.Metadata{ContentType: "application/octet-stream"}})
			e.observe(i, err)
			if err != nil {
				return e.storeErr(i, fmt.Errorf("shard %d of segment %d: %w", j, idx, err))
			}
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			return out, err
		}
		out.segs = append(out.segs, seg)
		if last {
			break
		}
	}
	if size >= 0 {
		if out.size < size {
			return out, fmt.Errorf("read body: %d of %d bytes: %w", out.size, size, io.ErrUnexpectedEOF)
		}
		if err := store.ExpectEOF(store.ContextReader(ctx, body)); err != nil {
			return out, fmt.Errorf("read body: %w", err)
		}
	}
	out.md5 = h.Sum(nil)
	return out, nil
}

// striper reads a segment's bytes into its K data shards, striped: each
// stripe of K blocks is read whole, then dealt out block by block.
type striper struct {
	k        int
	block    int64
	maxShard int64    // the shard size of a whole segment: the most a shard grows to
	data     [][]byte // the data shards of the segment read last
	stripe   []byte
}

// read reads up to limit bytes (a segment) from src into st.data, calling
// seen with the bytes in order; n is how many it read, eof whether src
// ended. With known, limit bytes are expected, so the shards are allocated
// at their size at once; otherwise they grow with the body.
func (st *striper) read(src io.Reader, limit int64, known bool, seen func([]byte)) (n int64, eof bool, err error) {
	k := int64(st.k)
	w := k * st.block
	for j := range st.data {
		st.data[j] = st.data[j][:0]
		if known && limit > 0 {
			if S := stripedShard(limit, st.k, st.block); int64(cap(st.data[j])) < S {
				st.data[j] = make([]byte, 0, S)
			}
		}
	}
	for n < limit && !eof {
		st.stripe, eof, err = readUpTo(src, st.stripe[:0], min(w, limit-n))
		if err != nil {
			return n, eof, err
		}
		L := int64(len(st.stripe))
		if L == 0 {
			break
		}
		seen(st.stripe)
		n += L
		// A whole stripe has blocks of B bytes; a short one, the last of
		// the segment, of ceil(L/K).
		bs := (L + k - 1) / k
		for j := range k {
			lo := min(j*bs, L)
			st.data[j] = appendPadded(st.data[j], st.stripe[lo:min(lo+bs, L)], bs, st.maxShard)
		}
		if L < w {
			break
		}
	}
	return n, eof, nil
}

// appendPadded appends p to dst and zeros up to n bytes, growing dst by
// doubling up to maxCap (or what it must hold).
func appendPadded(dst, p []byte, n, maxCap int64) []byte {
	need := int64(len(dst)) + n
	if need > int64(cap(dst)) {
		c := min(max(2*int64(cap(dst)), need), max(maxCap, need))
		nb := make([]byte, len(dst), c)
		copy(nb, dst)
		dst = nb
	}
	l := len(dst)
	dst = dst[:need]
	copy(dst[l:], p)
	clear(dst[l+len(p):])
	return dst
}

// readUpTo appends to buf from r until it holds limit bytes or r ends
// (eof). buf grows by doubling, so its size follows the body's.
func readUpTo(r io.Reader, buf []byte, limit int64) (_ []byte, eof bool, err error) {
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			c := min(max(2*int64(cap(buf)), 64<<10), limit)
			nb := make([]byte, len(buf), c)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), limit)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// newManifest makes the manifest of a written body (its Version is set by
// install).
func (e *Erasure) newManifest(key string, enc encoded, etag string, meta store.Metadata) *manifest {
	m := &manifest{
		header: header{
			Format: manifestFormat, KeyHash: keyHash(key), Size: enc.size, ETag: etag,
			ModTime: e.opts.now().UTC(), Meta: meta, Data: e.k, Parity: e.m, Block: e.opts.blockSize,
		},
		body: body{Segments: enc.segs},
	}
	for _, s := range e.stores {
		m.Stores = append(m.Stores, s.Name())
	}
	if enc.inline != nil || (enc.size == 0 && len(enc.segs) == 0) {
		m.Inline = enc.inline
		m.InlineCRC = crc32.Checksum(enc.inline, castagnoli)
	}
	return m
}

// Put writes body as an erasure-coded object: the body is read one segment
// at a time (memory: segmentSize × (K+M)/K; see WithSegmentSize), each
// segment's shards are written to their stores under a shard set of its
// own, and when every shard is durable the manifest is installed in every
// store (see install): the object changes only then, in one step per
// store, so a failed body or store before it leaves the old object (and
// removes what was written). A body of at most the inline limit is stored
// inside the manifest.
//
// When a store fails after the manifest reached some stores, the Put fails
// naming it, and the stores disagree until a later Put, Delete or Repair
// (which completes the newest version). Conditions (IfNoneMatch, IfMatch
// on the placement's Validator) are decided atomically by the first listed
// store. Once the manifest is everywhere, the replaced version's shards
// are removed.
func (e *Erasure) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := e.checkKey("put", key); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := e.precheck(ctx, key, opts); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", e.name, quote(key), err)
	}
	kh := keyHash(key)
	set := newVersion(e.opts.now(), "")
	enc, err := e.encodeStream(ctx, kh, set, e.rotation(kh, 0), body, size, true)
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		e.removeSegments(cctx, kh, nil, enc.tried)
		cancel()
		return store.ObjectInfo{}, fmt.Errorf("placement %s: put %s: %w", e.name, quote(key), err)
	}
	meta := opts.Metadata
	if opts.LateChecksums != nil {
		meta.Checksums = store.MergeMaps(meta.Checksums, opts.LateChecksums())
	}
	m := e.newManifest(key, enc, hex.EncodeToString(enc.md5), meta)
	return e.commit(ctx, "put", key, m, opts, enc.tried)
}

// precheck fails a conditional write early, before its shards are
// written, when the sequencer's manifest already rules it out. (install
// checks again, atomically.)
func (e *Erasure) precheck(ctx context.Context, key string, opts store.PutOptions) error {
	if !opts.IfNoneMatch && opts.IfMatch == "" {
		return nil
	}
	cur, err := e.stores[0].Stat(ctx, key)
	e.observe(0, err)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if opts.IfMatch != "" {
			return store.ErrPreconditionFailed
		}
		return nil
	case err != nil:
		return e.storeErr(0, err)
	case opts.IfNoneMatch:
		return store.ErrPreconditionFailed
	}
	if v, ok := isManifest(cur); !ok || store.Validator(validatorPrefix+v) != opts.IfMatch {
		return store.ErrPreconditionFailed
	}
	return nil
}

// commit installs m and settles what it leaves: on failure before any
// store took it, the new shards (own) are removed; on success the replaced
// versions' shards are; when superseded by a newer version, its own
// shards are.
func (e *Erasure) commit(ctx context.Context, op, key string, m *manifest, opts store.PutOptions, own []segment) (store.ObjectInfo, error) {
	kh := keyHash(key)
	res, err := e.install(ctx, key, m, opts)
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	switch {
	case err != nil && res.installed == 0:
		e.removeSegments(cctx, kh, nil, own)
		return store.ObjectInfo{}, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), err)
	case err != nil && errors.Is(err, store.ErrInvalidKey):
		// A store of the layout cannot hold the key, so no earlier version
		// of it exists: take the manifest back from the stores that took it.
		for i := range res.installed {
			if cur, serr := e.stores[i].Stat(cctx, key); serr == nil {
				if v, ok := isManifest(cur); ok && v == m.Version {
					_ = e.stores[i].Delete(cctx, key)
				}
			}
		}
		e.removeSegments(cctx, kh, nil, own)
		return store.ObjectInfo{}, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), err)
	case err != nil:
		return store.ObjectInfo{}, fmt.Errorf("placement %s: %s %s: manifest written to %d of %d stores (a later write, Delete or Repair settles the key): %w",
			e.name, op, quote(key), res.installed, len(e.stores), err)
	case res.superseded:
		e.removeSegments(cctx, kh, nil, own)
	default:
		e.removeVersions(cctx, key, res.replaced, m.sets())
	}
	return m.info(key), nil
}
