package placement

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
)

// BenchmarkErasureRead reads one 256 MiB object through a 4+2 erasure
// placement over six posix stores, healthy (data shards only) and with two
// stores priced so high that most stripes are decoded from the four cheap
// ones, and the same bytes as one plain object of one posix store: the
// peer, in the same run, every variant timed in alternating rounds (all
// from the page cache: this measures the reader's own cost, CRC32C and
// Reed-Solomon included). Reports MB/s of each (median of the rounds) and
// the ratios to the plain read.
//
//	go test -run '^$' -bench ErasureRead -benchtime 3x ./federation/placement/
func BenchmarkErasureRead(b *testing.B) {
	const size = 256 << 20
	ctx := context.Background()
	stores, _ := posixStores(b, 6)
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	if _, err := stores[0].Put(ctx, "plain", bytes.NewReader(data), size, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	var costs atomic.Pointer[[]float64]
	flat := []float64{0, 0, 0, 0, 0, 0}
	costs.Store(&flat)
	e, err := NewErasure("ec", placementLoc, stores, 4, 2, WithCosts(func() []float64 { return *costs.Load() }))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Put(ctx, "obj", bytes.NewReader(data), size, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	dear := []float64{1, 1, 0, 0, 0, 0} // two stores dear: decode from the other four
	read := func(st store.Store, key string, c *[]float64) float64 {
		costs.Store(c)
		start := time.Now()
		rc, err := st.ReadRange(ctx, key, 0, -1, "")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size {
			b.Fatalf("read %s: %d bytes, %v", key, n, err)
		}
		return float64(size) / time.Since(start).Seconds() / 1e6
	}
	// Warm the page cache and check the bytes once.
	rc, err := e.ReadRange(ctx, "obj", 0, -1, "")
	if err != nil {
		b.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		b.Fatal("erasure read differs")
	}
	read(stores[0], "plain", &flat)
	var plain, healthy, decode []float64
	b.SetBytes(3 * size)
	b.ResetTimer()
	for range b.N {
		plain = append(plain, read(stores[0], "plain", &flat))
		healthy = append(healthy, read(e, "obj", &flat))
		decode = append(decode, read(e, "obj", &dear))
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	p, h, d := med(plain), med(healthy), med(decode)
	b.ReportMetric(p, "plain-MB/s")
	b.ReportMetric(h, "ec-MB/s")
	b.ReportMetric(d, "ec-decode-MB/s")
	b.ReportMetric(h/p, "ec/plain")
	b.ReportMetric(d/p, "decode/plain")
}

// BenchmarkErasureReadCapped reads one 64 MiB object through a 4+2
// erasure placement whose six stores each cap every ranged read at
// 50 MB/s with a 256 KiB burst (a connection to a cloud store with a
// socket buffer's worth of slack), and the same bytes as one plain object
// of one such store: the peer, in alternating rounds. Reports MB/s and
// ec/plain: about K when a stripe's blocks are read at once.
//
//	go test -run '^$' -bench ErasureReadCapped -benchtime 3x ./federation/placement/
func BenchmarkErasureReadCapped(b *testing.B) {
	const size = 64 << 20
	const rate = 50e6
	ctx := context.Background()
	raw, _ := posixStores(b, 6)
	stores := make([]store.Store, len(raw))
	for i, s := range raw {
		stores[i] = &cappedStore{Store: s, rate: rate, burst: 256 << 10}
	}
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if _, err := raw[0].Put(ctx, "plain", bytes.NewReader(data), size, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	e, err := NewErasure("ec", placementLoc, stores, 4, 2)
	if err != nil {
		b.Fatal(err)
	}
	// Written uncapped (the bench is about reads).
	w, err := NewErasure("ec", placementLoc, raw, 4, 2)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Put(ctx, "obj", bytes.NewReader(data), size, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	read := func(st store.Store, key string) float64 {
		start := time.Now()
		rc, err := st.ReadRange(ctx, key, 0, -1, "")
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			b.Fatalf("read %s: %d bytes, %v", key, len(got), err)
		}
		return float64(size) / time.Since(start).Seconds() / 1e6
	}
	var plain, ec []float64
	b.SetBytes(2 * size)
	b.ResetTimer()
	for range b.N {
		plain = append(plain, read(stores[0], "plain"))
		ec = append(ec, read(e, "obj"))
	}
	b.StopTimer()
	sort.Float64s(plain)
	sort.Float64s(ec)
	p, x := plain[len(plain)/2], ec[len(ec)/2]
	b.ReportMetric(p, "plain-MB/s")
	b.ReportMetric(x, "ec-MB/s")
	b.ReportMetric(x/p, "ec/plain")
}

// cappedStore caps each ranged read at rate bytes a second, with burst
// bytes of slack (what a socket buffer holds while nobody reads).
type cappedStore struct {
	store.Store
	rate  float64
	burst float64
}

func (c *cappedStore) ReadRange(ctx context.Context, key string, off, n int64, v store.Validator) (io.ReadCloser, error) {
	rc, err := c.Store.ReadRange(ctx, key, off, n, v)
	if err != nil {
		return nil, err
	}
	return &cappedBody{ReadCloser: rc, c: c, avail: c.burst, last: time.Now()}, nil
}

type cappedBody struct {
	io.ReadCloser
	c     *cappedStore
	avail float64
	last  time.Time
}

// Read takes what the bucket holds (up to the burst, refilled at rate
// since the last read) and, once in debt, sleeps it off: the average is
// the rate whatever the timer's precision.
func (b *cappedBody) Read(p []byte) (int, error) {
	now := time.Now()
	b.avail = min(b.c.burst, b.avail+b.c.rate*now.Sub(b.last).Seconds())
	b.last = now
	if b.avail < 0 {
		// pacing: the capped body's rate
		time.Sleep(time.Duration(-b.avail / b.c.rate * float64(time.Second)))
		now = time.Now()
		b.avail = min(b.c.burst, b.avail+b.c.rate*now.Sub(b.last).Seconds())
		b.last = now
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), int(b.c.burst))])
	b.avail -= float64(n)
	return n, err
}
