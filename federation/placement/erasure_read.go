package placement

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/klauspost/reedsolomon"
)

// ecReader streams [pos, end) of an erasure-coded object. It walks the
// range one checksum block at a time: a block of a data shard is read from
// that shard (one ranged read per shard, streamed) and verified; when the
// shard is missing, unreadable or fails a checksum, its remaining blocks
// are rebuilt from K other shards of the segment, read in lockstep from the
// same offsets. Memory: one block when the data shards are healthy, K+1
// blocks while rebuilding.
type ecReader struct {
	ctx      context.Context
	e        *Erasure
	m        *manifest
	kh       string
	coder    reedsolomon.Encoder
	pos, end int64
	pending  []byte
	src      *shardSource
	bad      map[shardRef]bool
	err      error
}

type shardRef struct{ seg, shard int }

func (e *Erasure) newReader(ctx context.Context, key string, m *manifest, pos, end int64) (io.ReadCloser, error) {
	coder, err := e.enc(m.Data, m.Parity)
	if err != nil {
		return nil, fmt.Errorf("placement %s: read %s: %w", e.name, quote(key), err)
	}
	return &ecReader{ctx: ctx, e: e, m: m, kh: keyHash(key), coder: coder, pos: pos, end: end, bad: map[shardRef]bool{}}, nil
}

func (r *ecReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for len(r.pending) == 0 {
		if r.pos >= r.end {
			return 0, io.EOF
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err
			return 0, err
		}
		if err := r.fill(); err != nil {
			r.err = err
			r.closeSrc()
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	r.pos += int64(n)
	return n, nil
}

func (r *ecReader) Close() error {
	r.closeSrc()
	if r.err == nil {
		r.err = errors.New("placement: read after close")
	}
	return nil
}

func (r *ecReader) closeSrc() {
	if r.src != nil {
		r.src.close()
		r.src = nil
	}
}

// fill sets pending to the next bytes of the range (without moving pos).
func (r *ecReader) fill() error {
	m := r.m
	if len(m.Segments) == 0 {
		r.pending = m.Inline[r.pos:r.end]
		return nil
	}
	s := m.segmentAt(r.pos)
	sg := &m.Segments[s]
	base := m.offs[s]
	S, B := sg.Shard, m.Block
	o := r.pos - base
	j := int(o / S)
	col := o - int64(j)*S
	b := col / B
	if r.src == nil || r.src.ref != (shardRef{s, j}) || r.src.next != b {
		r.closeSrc()
		// The shard's columns the range needs end at endCol.
		endCol := min(S, min(r.end, base+sg.Size)-base-int64(j)*S)
		r.src = &shardSource{r: r, ref: shardRef{s, j}, sg: sg, next: b, endBlock: blocks(endCol, B)}
		r.src.open()
	}
	blk, err := r.src.read()
	if err != nil {
		return fmt.Errorf("placement %s: read: segment %d (bytes %d-%d): %w", r.e.name, s, base, base+sg.Size-1, err)
	}
	start := base + int64(j)*S + b*B // object offset of the block
	hi := min(int64(len(blk)), base+sg.Size-start, r.end-start)
	r.pending = blk[r.pos-start : hi]
	return nil
}

// shardSource yields the verified blocks [next, endBlock) of one data
// shard, read directly or rebuilt.
type shardSource struct {
	r        *ecReader
	ref      shardRef
	sg       *segment
	next     int64
	endBlock int64
	direct   io.ReadCloser
	buf      []byte
	// while rebuilding:
	rebuilding bool
	inputs     []*shardInput
	cands      []int // shards not yet tried as inputs
	shards     [][]byte
}

type shardInput struct {
	shard int
	rc    io.ReadCloser
	buf   []byte
}

func (src *shardSource) blockLen(b int64) int64 {
	return min(src.r.m.Block, src.sg.Shard-b*src.r.m.Block)
}

// store returns the index in the placement of shard j's store, or -1.
func (src *shardSource) store(j int) int { return src.r.e.storeOf(src.r.m, src.sg.Stores[j]) }

// openShard opens shard j's blocks [from, endBlock).
func (src *shardSource) openShard(j int, from int64) (io.ReadCloser, error) {
	i := src.store(j)
	if i < 0 {
		return nil, fmt.Errorf("store %s is no longer in the layout", src.r.m.Stores[src.sg.Stores[j]])
	}
	B := src.r.m.Block
	off := from * B
	n := min(src.endBlock*B, src.sg.Shard) - off
	rc, err := src.r.e.stores[i].ReadRange(src.r.ctx, shardKey(src.r.kh, src.sg.Set, src.sg.Index, j), off, n, "")
	src.r.e.observe(i, err)
	return rc, err
}

func (src *shardSource) open() {
	j := src.ref.shard
	if i := src.store(j); i >= 0 && !src.r.bad[src.ref] && src.r.e.healthy(i) {
		if rc, err := src.openShard(j, src.next); err == nil {
			src.direct = rc
			return
		}
	}
	src.r.bad[src.ref] = true
}

// readBlock reads block b of shard j from rc into buf and verifies it.
func (src *shardSource) readBlock(rc io.Reader, j int, b int64, buf []byte) ([]byte, error) {
	n := src.blockLen(b)
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(rc, buf); err != nil {
		return buf, err
	}
	if crc32.Checksum(buf, castagnoli) != src.sg.blockSum(j, b) {
		return buf, fmt.Errorf("shard %d block %d fails its checksum", j, b)
	}
	return buf, nil
}

func (src *shardSource) read() ([]byte, error) {
	if src.next >= src.endBlock {
		return nil, errors.New("placement: read past the range")
	}
	if src.direct != nil {
		blk, err := src.readBlock(src.direct, src.ref.shard, src.next, src.buf)
		src.buf = blk
		if err == nil {
			src.next++
			return blk, nil
		}
		if ctxErr := src.r.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		src.direct.Close()
		src.direct = nil
		src.r.bad[src.ref] = true
	}
	return src.rebuild()
}

// rebuild returns block next of the shard, rebuilt from K other shards.
func (src *shardSource) rebuild() ([]byte, error) {
	r := src.r
	k, n := r.m.Data, r.m.Data+r.m.Parity
	if !src.rebuilding {
		src.rebuilding = true
		// Candidates: healthy stores first, then in read order, then data
		// shards before parity (a tie goes to the lower index).
		rank := map[int]int{}
		for pos, i := range r.e.order() {
			rank[i] = pos
		}
		for j := range n {
			if j != src.ref.shard && !r.bad[shardRef{src.ref.seg, j}] && src.store(j) >= 0 {
				src.cands = append(src.cands, j)
			}
		}
		slices.SortStableFunc(src.cands, func(a, b int) int { return rank[src.store(a)] - rank[src.store(b)] })
		src.shards = make([][]byte, n)
	}
	b := src.next
	for {
		// Top the inputs up to K.
		for len(src.inputs) < k && len(src.cands) > 0 {
			j := src.cands[0]
			src.cands = src.cands[1:]
			rc, err := src.openShard(j, b)
			if err != nil {
				if r.ctx.Err() != nil {
					return nil, r.ctx.Err()
				}
				r.bad[shardRef{src.ref.seg, j}] = true
				continue
			}
			src.inputs = append(src.inputs, &shardInput{shard: j, rc: rc})
		}
		if len(src.inputs) < k {
			return nil, fmt.Errorf("%w: %d of the %d needed shards of segment %d are readable", ErrUnrecoverable, len(src.inputs), k, src.ref.seg)
		}
		clear(src.shards)
		failed := false
		for x := 0; x < len(src.inputs); x++ {
			in := src.inputs[x]
			blk, err := src.readBlock(in.rc, in.shard, b, in.buf)
			in.buf = blk
			if err != nil {
				if r.ctx.Err() != nil {
					return nil, r.ctx.Err()
				}
				in.rc.Close()
				r.bad[shardRef{src.ref.seg, in.shard}] = true
				src.inputs = slices.Delete(src.inputs, x, x+1)
				x--
				failed = true
				continue
			}
			src.shards[in.shard] = blk
		}
		if failed {
			// Replacements start at block b; the inputs that read block b
			// already are past it, so start them all over at b.
			for _, in := range src.inputs {
				in.rc.Close()
				src.cands = append([]int{in.shard}, src.cands...)
			}
			src.inputs = src.inputs[:0]
			continue
		}
		break
	}
	out := src.buf[:0]
	if int64(cap(out)) < src.blockLen(b) {
		out = make([]byte, 0, src.blockLen(b))
	}
	src.shards[src.ref.shard] = out
	required := make([]bool, k)
	required[src.ref.shard] = true
	if err := r.coder.ReconstructSome(src.shards, required); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnrecoverable, err)
	}
	src.buf = src.shards[src.ref.shard]
	src.next++
	return src.buf, nil
}

func (src *shardSource) close() {
	if src.direct != nil {
		src.direct.Close()
		src.direct = nil
	}
	for _, in := range src.inputs {
		in.rc.Close()
	}
	src.inputs = nil
}
