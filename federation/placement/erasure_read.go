package placement

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/klauspost/reedsolomon"
)

// ecReader streams [pos, end) of an erasure-coded object, one stripe (a
// row of blocks, see segment) at a time, touching only the stripes that
// hold the range. For each stripe it picks the cheaper of two plans (see
// plan): read the needed data shards' blocks directly, or read the
// stripe's block from the K cheapest shards and decode the needed data
// blocks. Every block read is checked against its CRC32C. A shard that
// fails (an error, a short read) is marked bad for the rest of the read;
// one whose block fails its checksum is left out of that stripe only, as
// bit rot spoils a block rather than a shard, until a second block of it
// fails; either way the stripe is planned again without it.
//
// Each shard in use has one ranged read open over the stripes of the
// segment still needed (opened when first needed, reopened at the right
// block after a plan skipped it). Memory: at most K+M blocks.
type ecReader struct {
	ctx      context.Context
	e        *Erasure
	m        *manifest
	kh       string
	coder    reedsolomon.Encoder
	pos, end int64
	pending  []byte
	bad      map[shardRef]bool
	err      error
	// cost[i] is the price per byte of reading from e.stores[i]; rank[i]
	// its place in the read order; both fixed when the read starts.
	cost []float64
	rank []int

	seg     int            // the segment streams belong to (-1: none)
	lastRow int64          // the last stripe of seg the range needs
	needEnd [2]int         // the data shards the last stripe needs: [lo, hi)
	streams []*shardStream // by shard of seg
	row     int64          // the stripe in blocks (-1: none)
	blocks  [][]byte       // by shard: its verified block of row, or nil
	skip    []bool         // by shard: its block of row failed its checksum
	bufs    [][]byte       // by shard: reusable block buffers
	// sumFails counts the blocks of a shard that failed their checksum:
	// one is skipped (the rest of the shard may be sound), a second makes
	// the shard bad.
	sumFails map[shardRef]int
	// key and without (the stores that lacked the manifest) are for
	// reportDegraded when the read ends.
	key     string
	without []int
}

type shardRef struct{ seg, shard int }

// shardStream is a ranged read of one shard, positioned at block next and
// ending before block end.
type shardStream struct {
	rc        io.ReadCloser
	next, end int64
}

func (e *Erasure) newReader(ctx context.Context, key string, m *manifest, pos, end int64, without []int) (io.ReadCloser, error) {
	coder, err := e.enc(m.Data, m.Parity)
	if err != nil {
		return nil, fmt.Errorf("placement %s: read %s: %w", e.name, quote(key), err)
	}
	r := &ecReader{ctx: ctx, e: e, m: m, kh: keyHash(key), coder: coder, pos: pos, end: end,
		bad: map[shardRef]bool{}, seg: -1, row: -1, key: key, without: without}
	if len(m.Segments) > 0 && pos < end {
		r.cost = e.readCosts()
		r.rank = make([]int, len(e.stores))
		for p, i := range e.order() {
			r.rank[i] = p
		}
		n := m.Data + m.Parity
		r.streams = make([]*shardStream, n)
		r.blocks = make([][]byte, n)
		r.skip = make([]bool, n)
		r.bufs = make([][]byte, n)
		r.sumFails = map[shardRef]int{}
	}
	return r, nil
}

// readCosts returns the price per byte of reading from each store (see
// WithCosts): all 0 without a cost function.
func (e *Erasure) readCosts() []float64 {
	out := make([]float64, len(e.stores))
	if e.opts.costs == nil {
		return out
	}
	c := e.opts.costs()
	valid := func(i int) bool { return i < len(c) && c[i] >= 0 } // false for NaN
	dear := 0.0
	for i := range out {
		if valid(i) {
			dear = max(dear, c[i])
		}
	}
	for i := range out {
		out[i] = dear
		if valid(i) {
			out[i] = c[i]
		}
	}
	return out
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
			r.closeStreams()
			return 0, err
		}
		if err := r.fill(); err != nil {
			r.err = err
			r.closeStreams()
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	r.pos += int64(n)
	return n, nil
}

func (r *ecReader) Close() error {
	r.closeStreams()
	if r.key != "" {
		// Once: every shard (or manifest) the read had to do without.
		without := r.without
		for ref := range r.bad {
			if i := r.e.storeOf(r.m, r.m.Segments[ref.seg].Stores[ref.shard]); i >= 0 {
				without = append(without, i)
			}
		}
		for ref := range r.sumFails {
			if i := r.e.storeOf(r.m, r.m.Segments[ref.seg].Stores[ref.shard]); i >= 0 {
				without = append(without, i)
			}
		}
		r.e.reportDegraded(r.ctx, r.key, without)
		r.key = ""
	}
	if r.err == nil {
		r.err = errors.New("placement: read after close")
	}
	return nil
}

func (r *ecReader) closeStreams() {
	for j, s := range r.streams {
		if s != nil {
			s.rc.Close()
			r.streams[j] = nil
		}
	}
}

// fill sets pending to the next bytes of the range (without moving pos):
// the rest of the block that holds pos, from the stripe in hand or after
// reading the stripe.
func (r *ecReader) fill() error {
	m := r.m
	if len(m.Segments) == 0 {
		r.pending = m.Inline[r.pos:r.end]
		return nil
	}
	s := m.segmentAt(r.pos)
	sg := &m.Segments[s]
	base, B, k := m.offs[s], m.Block, int64(m.Data)
	o := r.pos - base
	row := o / (k * B)
	bs := sg.blockLen(row, B)
	x := o - row*k*B // offset in the stripe
	j := int(x / bs)
	if s != r.seg || row != r.row || r.blocks[j] == nil {
		if err := r.loadRow(s, row); err != nil {
			return fmt.Errorf("placement %s: read: segment %d (bytes %d-%d): %w", r.e.name, s, base, base+sg.Size-1, err)
		}
	}
	start := base + row*k*B + int64(j)*bs // object offset of the block
	hi := min(bs, base+sg.Size-start, r.end-start)
	r.pending = r.blocks[j][x-int64(j)*bs : hi]
	return nil
}

// rowNeeds returns the data shards [lo, hi) whose blocks of stripe row of
// segment s hold bytes of the range from pos on.
func (r *ecReader) rowNeeds(s int, row, pos int64) (lo, hi int) {
	m := r.m
	sg := &m.Segments[s]
	base, B, k := m.offs[s], m.Block, int64(m.Data)
	bs := sg.blockLen(row, B)
	rowStart := base + row*k*B
	from := max(pos, rowStart) - rowStart
	to := min(r.end, base+sg.Size, rowStart+k*bs) - rowStart
	return int(from / bs), int((to-1)/bs) + 1
}

// loadRow reads stripe row of segment s: the data blocks the range needs
// from r.pos on end up in r.blocks.
func (r *ecReader) loadRow(s int, row int64) error {
	m := r.m
	sg := &m.Segments[s]
	n := m.Data + m.Parity
	if s != r.seg {
		r.closeStreams()
		r.seg = s
		base, k := m.offs[s], int64(m.Data)
		r.lastRow = (min(r.end, base+sg.Size) - 1 - base) / (k * m.Block)
		r.needEnd[0], r.needEnd[1] = r.rowNeeds(s, r.lastRow, r.pos)
	}
	r.row = row
	clear(r.blocks)
	clear(r.skip)
	lo, hi := r.rowNeeds(s, row, r.pos)
	bs := sg.blockLen(row, m.Block)
	for {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		use, decode, err := r.plan(s, lo, hi, r.blocks, r.skip)
		if err != nil {
			return err
		}
		if !r.readBlocks(s, row, bs, use) {
			continue // a shard failed: plan again without it
		}
		// Streams the plan did not read from are behind now.
		for j, st := range r.streams {
			if st != nil && st.next <= row {
				st.rc.Close()
				r.streams[j] = nil
			}
		}
		if !decode {
			return nil
		}
		shards := make([][]byte, n)
		required := make([]bool, m.Data)
		missing := false
		for j := range n {
			switch {
			case r.blocks[j] != nil:
				shards[j] = r.blocks[j]
			case j >= lo && j < hi:
				required[j], missing = true, true
				if int64(cap(r.bufs[j])) < bs {
					r.bufs[j] = make([]byte, 0, m.Block)
				}
				shards[j] = r.bufs[j][:0]
			}
		}
		if !missing {
			return nil
		}
		if err := r.coder.ReconstructSome(shards, required); err != nil {
			return fmt.Errorf("%w: %v", ErrUnrecoverable, err)
		}
		for j := lo; j < hi; j++ {
			if required[j] {
				if crc32.Checksum(shards[j], castagnoli) != sg.blockSum(j, row) {
					return fmt.Errorf("%w: rebuilt block %d of shard %d fails its checksum", ErrUnrecoverable, row, j)
				}
				r.blocks[j] = shards[j]
			}
		}
		return nil
	}
}

// price orders plans: first by how many shards on stores that failed
// lately they read (avoided unless needed), then by the price.
type price struct {
	down int
	sum  float64
}

func (a price) less(b price) bool { return a.down < b.down || a.down == b.down && a.sum < b.sum }

// cheaper reports whether a is strictly less than b, beyond rounding (so
// two sums of one price list in different orders tie).
func cheaper(a, b float64) bool {
	if !(a < b) {
		return false
	}
	return math.IsInf(b, 1) || b-a > 1e-9*math.Abs(b)
}

// shardPrice is what reading a block of shard j of segment s costs; a
// block in hand costs nothing.
func (r *ecReader) shardPrice(s, j int, hand [][]byte) price {
	if hand != nil && hand[j] != nil {
		return price{}
	}
	i := r.e.storeOf(r.m, r.m.Segments[s].Stores[j])
	p := price{sum: r.cost[i]}
	if !r.e.healthy(i) {
		p.down = 1
	}
	return p
}

// usable reports whether shard j of segment s is in hand or may still be
// read.
func (r *ecReader) usable(s, j int, hand [][]byte, skip []bool) bool {
	if hand != nil && hand[j] != nil {
		return true
	}
	return (skip == nil || !skip[j]) && !r.bad[shardRef{s, j}] && r.e.storeOf(r.m, r.m.Segments[s].Stores[j]) >= 0
}

// plan chooses the shards to read for a stripe of segment s whose data
// blocks [lo, hi) are needed: those blocks directly, or the K cheapest
// usable shards to decode them from, whichever costs less (a tie goes to
// the direct read, fewer bytes). Among shards of one price, data shards
// come first, then the read order, then the lower index.
// ErrUnrecoverable when neither is possible.
//
// hand holds the blocks of the stripe already read (they cost nothing),
// skip the shards whose block of the stripe failed its checksum; both may
// be nil.
func (r *ecReader) plan(s, lo, hi int, hand [][]byte, skip []bool) (use []int, decode bool, _ error) {
	k, n := r.m.Data, r.m.Data+r.m.Parity
	sg := &r.m.Segments[s]
	prices := make([]price, n)
	var cands []int
	for j := range n {
		if r.usable(s, j, hand, skip) {
			cands = append(cands, j)
			prices[j] = r.shardPrice(s, j, hand)
		}
	}
	total := func(js []int) price {
		var t price
		costs := make([]float64, 0, len(js))
		for _, j := range js {
			t.down += prices[j].down
			costs = append(costs, prices[j].sum)
		}
		// Summed in one order, so equal sets of prices sum alike.
		slices.Sort(costs)
		for _, c := range costs {
			t.sum += c
		}
		return t
	}
	direct := true
	for j := lo; j < hi; j++ {
		if !r.usable(s, j, hand, skip) {
			direct = false
		}
		use = append(use, j)
	}
	if len(cands) >= k {
		slices.SortFunc(cands, func(a, b int) int {
			pa, pb := prices[a], prices[b]
			switch {
			case pa.less(pb):
				return -1
			case pb.less(pa):
				return 1
			case (a < k) != (b < k):
				if a < k {
					return -1
				}
				return 1
			}
			ra, rb := r.rank[r.e.storeOf(r.m, sg.Stores[a])], r.rank[r.e.storeOf(r.m, sg.Stores[b])]
			if ra != rb {
				return ra - rb
			}
			return a - b
		})
		cands = cands[:k]
		if !direct {
			return cands, true, nil
		}
		dp, cp := total(use), total(cands)
		if cp.down < dp.down || cp.down == dp.down && cheaper(cp.sum, dp.sum) {
			return cands, true, nil
		}
	}
	if direct {
		return use, false, nil
	}
	return nil, false, fmt.Errorf("%w: %d of the %d needed shards of segment %d are readable", ErrUnrecoverable, len(cands), k, s)
}

// readBlocks reads block row (bs bytes) of each shard of use that is not
// in hand yet, opening the streams it lacks, all in parallel. It reports
// false when a shard failed (it is marked bad, or skipped for the stripe
// after a checksum failure); the blocks read well stay in hand.
func (r *ecReader) readBlocks(s int, row, bs int64, use []int) bool {
	var open []int
	for _, j := range use {
		if r.blocks[j] != nil {
			continue
		}
		if st := r.streams[j]; st != nil && (st.next != row || row >= st.end) {
			st.rc.Close()
			r.streams[j] = nil
		}
		if r.streams[j] == nil {
			open = append(open, j)
		}
	}
	ok := true
	if len(open) > 0 {
		// A stream ends at the last stripe the range needs, or before it
		// when that stripe's plan leaves the shard out.
		var last []int
		if r.lastRow > row {
			last, _, _ = r.plan(s, r.needEnd[0], r.needEnd[1], nil, nil)
		}
		streams := make([]*shardStream, len(open))
		errs := parallel(len(open), len(open), func(x int) error {
			end := r.lastRow + 1
			if last != nil && !slices.Contains(last, open[x]) {
				end--
			}
			st, err := r.openStream(s, open[x], row, end)
			streams[x] = st
			return err
		})
		for x, j := range open {
			if errs[x] != nil {
				r.bad[shardRef{s, j}] = true
				ok = false
				continue
			}
			r.streams[j] = streams[x]
		}
	}
	if !ok {
		return false
	}
	// The blocks are read at once, one goroutine per shard: each stream is
	// a ranged read of its own store (a connection, capped on its own by
	// a cloud), so a stripe takes as long as its slowest block, not the
	// sum of them.
	sg := &r.m.Segments[s]
	var todo []int
	for _, j := range use {
		if r.blocks[j] == nil {
			todo = append(todo, j)
		}
	}
	const (
		readOK = iota
		readFailed
		sumFailed
	)
	res := make([]int, len(todo))
	parallel(len(todo), len(todo), func(x int) error {
		j := todo[x]
		st := r.streams[j]
		buf := r.bufs[j]
		if int64(cap(buf)) < bs {
			buf = make([]byte, r.m.Block)
		}
		buf = buf[:bs]
		r.bufs[j] = buf
		_, err := io.ReadFull(st.rc, buf)
		st.next++
		switch {
		case err != nil:
			res[x] = readFailed
		case crc32.Checksum(buf, castagnoli) != sg.blockSum(j, row):
			res[x] = sumFailed
		}
		return nil
	})
	for x, j := range todo {
		switch res[x] {
		case readOK:
			r.blocks[j] = r.bufs[j]
		case readFailed:
			r.streams[j].rc.Close()
			r.streams[j] = nil
			r.bad[shardRef{s, j}] = true
			ok = false
		case sumFailed:
			// The stream is past the block: it reads on at the next one.
			ref := shardRef{s, j}
			r.sumFails[ref]++
			r.skip[j] = true
			if r.sumFails[ref] > 1 {
				r.bad[ref] = true
			}
			ok = false
		}
	}
	return ok
}

// openStream opens shard j of segment s at block row, up to block end.
func (r *ecReader) openStream(s, j int, row, end int64) (*shardStream, error) {
	m := r.m
	sg := &m.Segments[s]
	i := r.e.storeOf(m, sg.Stores[j])
	from := row * m.Block
	to := min(end*m.Block, sg.Shard)
	rc, err := r.e.stores[i].ReadRange(r.ctx, shardKey(r.kh, sg.Set, sg.Index, j), from, to-from, "")
	r.e.observe(i, err)
	if err != nil {
		return nil, err
	}
	return &shardStream{rc: rc, next: row, end: end}, nil
}
