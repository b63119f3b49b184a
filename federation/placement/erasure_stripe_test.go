package placement

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// shardContents returns the bytes of every shard of key's current
// version, by location, read from the stores directly.
func shardContents(t testing.TB, e *Erasure, key string) map[[2]string][]byte {
	t.Helper()
	out := map[[2]string][]byte{}
	for _, loc := range shardLocations(t, e, key) {
		b, err := readAll(t, e.stores[e.byName[loc[0]]], loc[1], 0, -1)
		if err != nil {
			t.Fatalf("shard %s in %s: %v", loc[1], loc[0], err)
		}
		out[loc] = b
	}
	return out
}

// damageShards damages n shards of every segment of key (the first a data
// shard, so reads must decode): deleted, one byte flipped, cut one byte
// short, or a mix of those. It returns how many shards it damaged.
func damageShards(t testing.TB, e *Erasure, key string, rng *rand.Rand, n int, how string) int {
	t.Helper()
	m, err := e.loadManifest(t.Context(), "test", key, false)
	if err != nil {
		t.Fatal(err)
	}
	kh := keyHash(key)
	count := 0
	for _, sg := range m.Segments {
		shards := []int{rng.IntN(m.Data)}
		for len(shards) < n {
			if j := rng.IntN(m.Data + m.Parity); !slices.Contains(shards, j) {
				shards = append(shards, j)
			}
		}
		for x, j := range shards {
			s := e.stores[e.storeOf(m, sg.Stores[j])]
			sk := shardKey(kh, sg.Set, sg.Index, j)
			h := how
			if how == "mixed" {
				h = []string{"delete", "flip", "truncate"}[x%3]
			}
			switch h {
			case "delete":
				if err := s.Delete(t.Context(), sk); err != nil {
					t.Fatal(err)
				}
			default:
				b, err := readAll(t, s, sk, 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				if h == "flip" {
					b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
				} else {
					b = b[:len(b)-1]
				}
				mustPut(t, s, sk, b)
			}
			count++
		}
	}
	return count
}

// readRandom checks whole and random ranged reads of key against want.
func readRandom(t testing.TB, s store.Store, key string, want []byte, rng *rand.Rand, n int) {
	t.Helper()
	size := int64(len(want))
	check := func(off, n int64) {
		t.Helper()
		end := size
		if n >= 0 {
			end = min(off+n, size)
		}
		got, err := readAll(t, s, key, off, n)
		if err != nil {
			t.Fatalf("ReadRange(%s, %d, %d) of %d bytes: %v", key, off, n, size, err)
		}
		if !bytes.Equal(got, want[off:end]) {
			t.Fatalf("ReadRange(%s, %d, %d) of %d bytes: %d bytes differ from the %d written", key, off, n, size, len(got), end-off)
		}
	}
	check(0, -1)
	for range n {
		off := rng.Int64N(size + 1)
		switch rng.IntN(3) {
		case 0:
			check(off, rng.Int64N(20))
		case 1:
			check(off, rng.Int64N(size-off+1))
		default:
			check(off, -1)
		}
	}
}

// TestErasureStripedRandom: for K of 1 to 6 and sizes around the block,
// stripe and segment sizes (none of which divides the next), random ranges
// read back what was written with no shard, one, or M shards of every
// segment deleted, corrupted or cut short; Repair then restores every
// shard byte for byte.
func TestErasureStripedRandom(t *testing.T) {
	const seg = 10_007
	for _, c := range []struct{ k, block int }{
		{1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}, {6, 1000},
		{4, 20_000}, // blocks over the segment: one stripe per segment
		{3, 7},      // hundreds of stripes per segment
	} {
		k, block := c.k, c.block
		t.Run(fmt.Sprintf("k=%d,block=%d", k, block), func(t *testing.T) {
			stores, _ := posixStores(t, 4)
			e, err := NewErasure("ec", placementLoc, stores, k, 2,
				WithSegmentSize(seg), WithBlockSize(int64(block)), WithInlineLimit(0))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(k), uint64(block)))
			for _, size := range []int{1, block - 1, k*block + 1, seg - 1, seg, seg + 1, 3*seg + 17} {
				key := fmt.Sprintf("o/%06d", size)
				b := testData(uint64(100+size), size)
				mustPut(t, e, key, b)
				orig := shardContents(t, e, key)
				for _, d := range []struct {
					n   int
					how string
				}{{0, ""}, {1, "delete"}, {1, "flip"}, {1, "truncate"}, {2, "delete"}, {2, "flip"}, {2, "mixed"}} {
					damaged := damageShards(t, e, key, rng, d.n, d.how)
					readRandom(t, e, key, b, rng, 10)
					if damaged == 0 {
						continue
					}
					st, err := e.Repair(t.Context(), key, nil)
					if err != nil || st.Objects != 1 || st.Shards != int64(damaged) {
						t.Fatalf("%s, %d shards per segment %s: Repair = %+v, %v; want %d shards rewritten", key, d.n, d.how, st, err, damaged)
					}
					now := shardContents(t, e, key)
					for loc, want := range orig {
						if !bytes.Equal(now[loc], want) {
							t.Fatalf("%s, %d shards per segment %s: shard %s after Repair differs", key, d.n, d.how, loc[1])
						}
					}
				}
			}
		})
	}
}

// TestErasureStripeLayout: the shards hold the segment striped: data
// shard j's block r is the segment's bytes [(r*K+j)*B, +B), the last
// stripe in blocks of ceil(rem/K) padded with zeros, and the parity shards
// are the stripes' parity.
func TestErasureStripeLayout(t *testing.T) {
	stores, _ := posixStores(t, 4)
	const k, block, seg = 3, 1000, 7_777
	e, err := NewErasure("ec", placementLoc, stores, k, 2, WithSegmentSize(seg), WithBlockSize(block), WithInlineLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(80, seg+3*block+2)
	mustPut(t, e, "obj", b)
	m, err := e.loadManifest(t.Context(), "test", "obj", false)
	if err != nil {
		t.Fatal(err)
	}
	coder, _ := e.enc(k, 2)
	for s, sg := range m.Segments {
		data := b[m.offs[s] : m.offs[s]+sg.Size]
		w := int64(k * block)
		rows := (sg.Size + w - 1) / w
		last := (sg.Size - (rows-1)*w + k - 1) / k
		want := make([][]byte, k+2)
		for r := range rows {
			bs := int64(block)
			if r == rows-1 {
				bs = last
			}
			for j := range int64(k) {
				blk := make([]byte, bs)
				lo := min(r*w+j*bs, sg.Size)
				copy(blk, data[lo:min(lo+bs, sg.Size)])
				want[j] = append(want[j], blk...)
			}
		}
		if sg.Shard != int64(len(want[0])) || sg.Shard != (rows-1)*block+last {
			t.Fatalf("segment %d: shards of %d bytes, want %d", s, sg.Shard, len(want[0]))
		}
		want[k], want[k+1] = make([]byte, sg.Shard), make([]byte, sg.Shard)
		if err := coder.Encode(want); err != nil {
			t.Fatal(err)
		}
		for j := range k + 2 {
			got, err := readAll(t, e.stores[e.storeOf(m, sg.Stores[j])], shardKey(keyHash("obj"), sg.Set, sg.Index, j), 0, -1)
			if err != nil || !bytes.Equal(got, want[j]) {
				t.Errorf("segment %d shard %d: %d bytes, %v; not the striped layout", s, j, len(got), err)
			}
		}
	}
}

// TestErasureRepairPerStripe: damage in more shards than M, but never more
// than M blocks of one stripe, is repaired (and read around).
func TestErasureRepairPerStripe(t *testing.T) {
	stores, _ := posixStores(t, 3)
	e, err := NewErasure("ec", placementLoc, stores, 2, 1, WithSegmentSize(1<<20), WithBlockSize(1000), WithInlineLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(81, 10_000)
	mustPut(t, e, "obj", b)
	orig := shardContents(t, e, "obj")
	m, err := e.loadManifest(t.Context(), "test", "obj", false)
	if err != nil {
		t.Fatal(err)
	}
	sg := m.Segments[0]
	// Shard j loses a byte of block j: three shards damaged, one block
	// per stripe.
	for j := range 3 {
		s := e.stores[e.storeOf(m, sg.Stores[j])]
		sk := shardKey(keyHash("obj"), sg.Set, sg.Index, j)
		got, err := readAll(t, s, sk, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got[j*1000+7] ^= 0x40
		mustPut(t, s, sk, got)
	}
	readRandom(t, e, "obj", b, rand.New(rand.NewPCG(2, 2)), 20)
	st, err := e.Repair(t.Context(), "", nil)
	if err != nil || st.Shards != 3 {
		t.Fatalf("Repair = %+v, %v; want 3 shards rewritten", st, err)
	}
	for loc, want := range shardContents(t, e, "obj") {
		if !bytes.Equal(orig[loc], want) {
			t.Errorf("shard %s differs after Repair", loc[1])
		}
	}
	// Two blocks of one stripe lost: that stripe is gone, for reads and
	// Repair alike; the others still read.
	for j := range 2 {
		s := e.stores[e.storeOf(m, sg.Stores[j])]
		sk := shardKey(keyHash("obj"), sg.Set, sg.Index, j)
		got, _ := readAll(t, s, sk, 0, -1)
		got[4*1000+j] ^= 0x40
		mustPut(t, s, sk, got)
	}
	if _, err := readAll(t, e, "obj", 0, -1); !errors.Is(err, ErrUnrecoverable) {
		t.Errorf("read of a stripe with 2 of 3 blocks damaged: %v, want ErrUnrecoverable", err)
	}
	if got, err := readAll(t, e, "obj", 0, 8000); err != nil || !bytes.Equal(got, b[:8000]) {
		t.Errorf("read of the stripes before: %v", err)
	}
	if _, err := e.Repair(t.Context(), "", nil); !errors.Is(err, ErrUnrecoverable) {
		t.Errorf("Repair with a stripe lost: %v, want ErrUnrecoverable", err)
	}
}

// TestErasureFormat1: a manifest of format 1 (contiguous shards, never
// released) is refused by reads with an error naming the format, while
// Stat, List, Repair, overwrites and Delete work on it.
func TestErasureFormat1(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e := newTestErasure(t, stores)
	for _, key := range []string{"old/a", "old/b"} {
		mustPut(t, e, key, testData(82, 2*testSeg+5))
		for i, s := range stores {
			m, err := e.readManifest(t.Context(), i, key, "", false)
			if err != nil {
				t.Fatal(err)
			}
			m.Format = contiguousFormat
			enc := m.encode()
			if _, err := s.Put(t.Context(), key, bytes.NewReader(enc), int64(len(enc)), store.PutOptions{Metadata: store.Metadata{
				ContentType: manifestType, User: map[string]string{metaECVersion: m.Version},
			}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if info, err := e.Stat(t.Context(), "old/a"); err != nil || info.Size != 2*testSeg+5 {
		t.Errorf("Stat = %+v, %v", info, err)
	}
	if got := listKeys(t, e, store.ListOptions{Prefix: "old/"}); !slices.Equal(got, []string{"old/a", "old/b"}) {
		t.Errorf("List = %q", got)
	}
	_, err := readAll(t, e, "old/a", 0, -1)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format 1") {
		t.Errorf("read of a format 1 object: %v, want ErrCorrupt naming format 1", err)
	}
	if st, err := e.Repair(t.Context(), "old/", nil); err != nil || st.Healthy != 2 {
		t.Errorf("Repair = %+v, %v; want both healthy", st, err)
	}
	b := testData(83, testSeg+1)
	mustPut(t, e, "old/a", b)
	checkBytes(t, e, "old/a", b)
	if err := e.Delete(t.Context(), "old/b"); err != nil {
		t.Fatal(err)
	}
	// Only the new version of old/a has shards left.
	var shards int
	for _, s := range stores {
		_, n := storedBytes(t, s, reservedPrefix)
		shards += n
	}
	if want := len(shardLocations(t, e, "old/a")); shards != want {
		t.Errorf("%d shards left, want %d (the new version's)", shards, want)
	}
}

// TestErasureReaderMemory: a reader holds at most K+M blocks, whatever the
// object's size.
func TestErasureReaderMemory(t *testing.T) {
	stores, _ := posixStores(t, 4)
	const block = 4 << 10
	e, err := NewErasure("ec", placementLoc, stores, 4, 2, WithSegmentSize(100_000), WithBlockSize(block))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(84, 350_000)
	mustPut(t, e, "obj", b)
	// A lost data shard in every segment makes every stripe decode.
	damageShards(t, e, "obj", rand.New(rand.NewPCG(3, 3)), 2, "delete")
	rc, err := e.ReadRange(t.Context(), "obj", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r := rc.(*ecReader)
	var got []byte
	buf := make([]byte, 1000)
	held := 0
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		c := 0
		for _, b := range r.bufs {
			c += cap(b)
		}
		held = max(held, c)
		if err != nil {
			break
		}
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(b))
	}
	if held > 6*block {
		t.Errorf("the reader held %d bytes of blocks, want at most K+M blocks (%d)", held, 6*block)
	}
}

// TestErasureMultipartLayoutChange: parts encoded with another block size
// than the placement's at completion are refused with ErrInvalidPart, and
// the upload stays usable.
func TestErasureMultipartLayoutChange(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e1, err := NewErasure("ec", placementLoc, stores, 2, 2, WithSegmentSize(50_000), WithBlockSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := NewErasure("ec", placementLoc, stores, 2, 2, WithSegmentSize(50_000), WithBlockSize(3000))
	if err != nil {
		t.Fatal(err)
	}
	id, err := e1.CreateMultipart(t.Context(), "mp", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := testData(85, 120_001)
	p, err := e1.UploadPart(t.Context(), "mp", id, 1, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e2.CompleteMultipart(t.Context(), "mp", id, []store.PartInfo{p}, store.PutOptions{})
	wantErrIs(t, "completing with another block size", err, store.ErrInvalidPart)
	if _, err := e1.CompleteMultipart(t.Context(), "mp", id, []store.PartInfo{p}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	readRandom(t, e1, "mp", b, rand.New(rand.NewPCG(4, 4)), 10)
}

// TestErasureMultipartOldPartRecord: a part recorded without its shard
// format (by a build before the striped layout, whose shards have the same
// sizes) is refused at completion instead of being read back scrambled.
func TestErasureMultipartOldPartRecord(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e, err := NewErasure("ec", placementLoc, stores, 2, 2, WithSegmentSize(50_000), WithBlockSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.CreateMultipart(t.Context(), "mp", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := testData(86, 120_001)
	p, err := e.UploadPart(t.Context(), "mp", id, 1, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	key := partKey(keyHash("mp"), id, 1)
	var rec partRecord
	if err := e.readJSON(t.Context(), 0, key, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Format != manifestFormat || rec.Block != 1000 {
		t.Fatalf("part record format %d block %d", rec.Format, rec.Block)
	}
	rec.Format, rec.Block = 0, 0
	if err := e.putJSON(t.Context(), key, rec, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.CompleteMultipart(t.Context(), "mp", id, []store.PartInfo{p}, store.PutOptions{})
	wantErrIs(t, "completing a part of an older format", err, store.ErrInvalidPart)
	if err == nil || !strings.Contains(err.Error(), "upload it again") {
		t.Fatalf("error %v", err)
	}
}
