package placement

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
)

// counting wraps a store and records, per key, the ranged reads opened,
// the bytes they asked for and the bytes read from them.
type counting struct {
	store.Store
	mu        sync.Mutex
	opens     map[string]int
	requested map[string]int64
	read      map[string]int64
}

func newCounting(s store.Store) *counting {
	c := &counting{Store: s}
	c.reset()
	return c
}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opens, c.requested, c.read = map[string]int{}, map[string]int64{}, map[string]int64{}
}

func (c *counting) ReadRange(ctx context.Context, key string, off, n int64, v store.Validator) (io.ReadCloser, error) {
	rc, err := c.Store.ReadRange(ctx, key, off, n, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opens[key]++
	c.requested[key] += n
	if err != nil {
		return nil, err
	}
	return &countingBody{ReadCloser: rc, c: c, key: key}, nil
}

func (c *counting) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return c.Store.List(ctx, opts)
}

type countingBody struct {
	io.ReadCloser
	c   *counting
	key string
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.read[b.key] += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// shardReads sums what was read from shard objects: the bytes read and
// asked for, and the bytes read from data (shard < k) and parity shards.
type shardReads struct {
	opens                      int
	read, requested, data, par int64
	other                      int64 // manifests
	maxOpensOfOneShard         int
}

func (c *counting) shards(k int) shardReads {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s shardReads
	for key, n := range c.read {
		if !strings.HasPrefix(key, reservedPrefix) {
			s.other += n
			continue
		}
		s.read += n
		j, _ := strconv.Atoi(key[strings.LastIndexByte(key, '.')+1:])
		if j < k {
			s.data += n
		} else {
			s.par += n
		}
	}
	for key, n := range c.opens {
		if strings.HasPrefix(key, reservedPrefix) {
			s.opens += n
			s.requested += c.requested[key]
			s.maxOpensOfOneShard = max(s.maxOpensOfOneShard, n)
		}
	}
	return s
}

func countingStores(t testing.TB, n int) ([]*counting, []store.Store) {
	t.Helper()
	inner, _ := posixStores(t, n)
	cs := make([]*counting, n)
	ss := make([]store.Store, n)
	for i, s := range inner {
		cs[i] = newCounting(s)
		ss[i] = cs[i]
	}
	return cs, ss
}

func resetAll(cs []*counting) {
	for _, c := range cs {
		c.reset()
	}
}

// TestErasureCheapestShards: K=2, M=2 over 4 stores puts one shard of
// every segment in each store. Without costs a GET reads the data shards
// only; with one or two stores priced high, it reads nothing from them
// (decoding from the cheap ones where they hold data shards); the bytes
// are the same either way, whole and in ranges.
func TestErasureCheapestShards(t *testing.T) {
	cs, stores := countingStores(t, 4)
	opts := []Option{WithSegmentSize(100_000), WithBlockSize(8 << 10), WithInlineLimit(0)}
	plain, err := NewErasure("ec", placementLoc, stores, 2, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b := testData(70, 5*100_000+4321)
	mustPut(t, plain, "obj", b)

	resetAll(cs)
	if got, err := readAll(t, plain, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("GET without costs: %d bytes, %v", len(got), err)
	}
	var data int64
	for i, c := range cs {
		s := c.shards(2)
		if s.par != 0 {
			t.Errorf("without costs, store %d: %d bytes read from parity shards", i, s.par)
		}
		if s.maxOpensOfOneShard > 1 {
			t.Errorf("without costs, store %d: a shard opened %d times", i, s.maxOpensOfOneShard)
		}
		data += s.data
	}
	if data < int64(len(b)) || data > int64(len(b))+6*2 {
		t.Errorf("without costs: %d bytes of data shards read for %d", data, len(b))
	}

	var prices atomic.Pointer[[]float64]
	costs := func() []float64 { return *prices.Load() }
	for _, c := range []struct {
		prices    []float64
		rank      []int
		expensive []int
	}{
		{[]float64{10, 1, 1, 1}, []int{1, 2, 3, 0}, []int{0}},
		{[]float64{math.Inf(1), 0.1, 0.2, 0.3}, []int{1, 2, 3, 0}, []int{0}},
		{[]float64{1, 1, 5, 1}, []int{0, 1, 3, 2}, []int{2}},
		{[]float64{10, 10, 1, 1}, []int{2, 3, 0, 1}, []int{0, 1}},
		{[]float64{1, 7, 1, 7}, []int{0, 2, 1, 3}, []int{1, 3}},
	} {
		t.Run(fmt.Sprint(c.prices), func(t *testing.T) {
			prices.Store(&c.prices)
			e, err := NewErasure("ec", placementLoc, stores, 2, 2,
				append(opts, WithCosts(costs), WithRank(func() []int { return c.rank }))...)
			if err != nil {
				t.Fatal(err)
			}
			resetAll(cs)
			if got, err := readAll(t, e, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("GET: %d bytes, %v", len(got), err)
			}
			var par int64
			for _, i := range c.expensive {
				s := cs[i].shards(2)
				if s.read+s.other != 0 || s.opens != 0 {
					t.Errorf("store %d (price %v) read %d bytes (%d opens of shards)", i, c.prices[i], s.read+s.other, s.opens)
				}
			}
			for _, x := range cs {
				s := x.shards(2)
				par += s.par
				if s.maxOpensOfOneShard > 1 {
					t.Errorf("a shard opened %d times", s.maxOpensOfOneShard)
				}
			}
			if par == 0 {
				t.Error("no parity shard read: nothing was decoded")
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(c.expensive))))
			for range 20 {
				off := rng.Int64N(int64(len(b)))
				n := rng.Int64N(int64(len(b))-off) + 1
				got, err := readAll(t, e, "obj", off, n)
				if err != nil || !bytes.Equal(got, b[off:off+n]) {
					t.Fatalf("ReadRange(%d, %d): %d bytes, %v", off, n, len(got), err)
				}
			}
			for _, i := range c.expensive {
				if s := cs[i].shards(2); s.read+s.other != 0 {
					t.Errorf("ranges: store %d (price %v) read %d bytes", i, c.prices[i], s.read+s.other)
				}
			}
		})
	}

	// Prices are asked once per read: a change applies to the next one.
	e, err := NewErasure("ec", placementLoc, stores, 2, 2, append(opts, WithCosts(costs))...)
	if err != nil {
		t.Fatal(err)
	}
	prices.Store(&[]float64{1, 1, 1, 1})
	resetAll(cs)
	if got, err := readAll(t, e, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("GET: %v", err)
	}
	for i, c := range cs {
		if s := c.shards(2); s.par != 0 {
			t.Errorf("equal prices, store %d: %d bytes read from parity shards", i, s.par)
		}
	}
	// Invalid prices count as the dearest valid one.
	prices.Store(&[]float64{-1, 1})
	resetAll(cs)
	if got, err := readAll(t, e, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("GET with invalid prices: %v", err)
	}
}

// stripeBlocks returns the bytes of the shard blocks that hold [off,
// off+n) of an object of size bytes striped over k data shards in blocks
// of block bytes in segments of seg bytes, computed from the layout's
// definition: the bytes a healthy read must fetch.
func stripeBlocks(size, seg, block int64, k int, off, n int64) int64 {
	type blk struct {
		seg, row, shard int64
	}
	seen := map[blk]bool{}
	var total int64
	K := int64(k)
	w := K * block
	for x := off; x < off+n; x++ {
		s := x / seg
		o := x - s*seg
		sn := min(seg, size-s*seg)
		rows := (sn + w - 1) / w
		row := o / w
		bs := block
		if row == rows-1 {
			bs = (sn - row*w + K - 1) / K
		}
		b := blk{s, row, (o - row*w) / bs}
		if !seen[b] {
			seen[b] = true
			total += bs
		}
	}
	return total
}

// TestErasureRangedReadStripes: a small range reads only the blocks of the
// stripes that hold it, and never more than those.
func TestErasureRangedReadStripes(t *testing.T) {
	cs, stores := countingStores(t, 4)
	const seg, block = 600_001, 64 << 10
	e, err := NewErasure("ec", placementLoc, stores, 4, 2, WithSegmentSize(seg), WithBlockSize(block))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(2*seg + 400_000)
	b := testData(71, int(size))
	mustPut(t, e, "obj", b)
	mid := int64(seg + 3*4*block + block + 100) // segment 1, stripe 3, shard 1
	for _, r := range [][2]int64{
		{mid, 10}, {mid, 1}, {0, 10}, {size - 10, 10},
		{mid + block - 5, 10},             // two blocks of one stripe
		{seg + 4*block - 3, 10},           // the end of stripe 0 and the start of stripe 1
		{seg - 5, 10},                     // two segments
		{seg + 2*4*block + 10, 4 * block}, // one stripe's worth, over two stripes
		{size - 1000, 1000},               // the short last stripe
	} {
		resetAll(cs)
		got, err := readAll(t, e, "obj", r[0], r[1])
		if err != nil || !bytes.Equal(got, b[r[0]:r[0]+r[1]]) {
			t.Fatalf("ReadRange(%d, %d): %d bytes, %v", r[0], r[1], len(got), err)
		}
		want := stripeBlocks(size, seg, block, 4, r[0], r[1])
		var read, requested int64
		for _, c := range cs {
			s := c.shards(4)
			read += s.read
			requested += s.requested
			if s.par != 0 {
				t.Errorf("ReadRange(%d, %d): %d bytes of parity read", r[0], r[1], s.par)
			}
		}
		if read != want || requested > want {
			t.Errorf("ReadRange(%d, %d): read %d bytes of shards, asked for %d; the blocks that hold it are %d bytes", r[0], r[1], read, requested, want)
		}
	}
	if want := stripeBlocks(size, seg, block, 4, mid, 10); want != block {
		t.Errorf("the middle range needs %d bytes of blocks, want one block", want)
	}
}

// TestErasureUnhealthyStore: a store that failed lately is read only when
// a segment cannot be read without it.
func TestErasureUnhealthyStore(t *testing.T) {
	cs, stores := countingStores(t, 4)
	e, err := NewErasure("ec", placementLoc, stores, 2, 2,
		WithSegmentSize(50_000), WithBlockSize(4<<10), WithInlineLimit(0), WithCooldown(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(72, 3*50_000+20_001)
	mustPut(t, e, "obj", b)
	e.observe(0, errors.New("injected")) // store 0 failed: demoted, but it works
	resetAll(cs)
	if got, err := readAll(t, e, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("GET: %v", err)
	}
	if s := cs[0].shards(2); s.read+s.other != 0 {
		t.Errorf("the demoted store was read: %+v", s)
	}
	// The last segment loses its shards in two other stores: it needs
	// store 0. (Reading from it succeeds, which restores its health: so
	// the segments before are read first, without it.)
	m, err := e.loadManifest(t.Context(), "test", "obj", false)
	if err != nil {
		t.Fatal(err)
	}
	sg := m.Segments[len(m.Segments)-1]
	lost := 0
	for j, st := range sg.Stores {
		if st != 0 && lost < 2 {
			if err := stores[st].Delete(t.Context(), shardKey(keyHash("obj"), sg.Set, sg.Index, j)); err != nil {
				t.Fatal(err)
			}
			lost++
		}
	}
	e.observe(0, errors.New("injected"))
	resetAll(cs)
	if got, err := readAll(t, e, "obj", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("GET with the last segment needing the demoted store: %v", err)
	}
	s := cs[0].shards(2)
	if s.read == 0 || s.read > sg.Shard {
		t.Errorf("the demoted store gave %d bytes of shards, want the last segment's shard only (%d)", s.read, sg.Shard)
	}
}
