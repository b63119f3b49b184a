package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/store"
)

func testIfNoneMatch(t *testing.T, s store.Store, caps Capabilities) {
	first, second := data(20, 1000), data(21, 1000)
	put(t, s, "once", first, store.PutOptions{IfNoneMatch: true})
	_, err := s.Put(t.Context(), "once", bytes.NewReader(second), int64(len(second)), store.PutOptions{IfNoneMatch: true})
	wantErr(t, "second create-if-absent Put", err, store.ErrPreconditionFailed)
	checkObject(t, s, "once", first)

	// After a Delete the key is absent again.
	if err := s.Delete(t.Context(), "once"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "once", second, store.PutOptions{IfNoneMatch: true})
	checkObject(t, s, "once", second)
}

// testIfNoneMatchRace: 16 writers create one key at once; exactly one wins
// and the object holds the winner's bytes.
func testIfNoneMatchRace(t *testing.T, s store.Store, caps Capabilities) {
	const writers = 16
	var (
		wg     sync.WaitGroup
		errs   [writers]error
		bodies [writers][]byte
	)
	start := make(chan struct{})
	for i := range writers {
		bodies[i] = data(uint64(100+i), 64<<10)
		wg.Go(func() {
			<-start
			_, errs[i] = s.Put(t.Context(), "race/key", bytes.NewReader(bodies[i]), int64(len(bodies[i])),
				store.PutOptions{IfNoneMatch: true})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both created the key", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrPreconditionFailed):
			t.Errorf("writer %d: %v, want nil or ErrPreconditionFailed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created the key")
	}
	checkObject(t, s, "race/key", bodies[winner])
}

func testIfMatch(t *testing.T, s store.Store, caps Capabilities) {
	ctx := t.Context()
	v1b, v2b, v3b := data(30, 500), data(31, 500), data(32, 500)
	v1 := put(t, s, "cas", v1b, store.PutOptions{})
	v2 := put(t, s, "cas", v2b, store.PutOptions{IfMatch: v1.Validator})
	checkObject(t, s, "cas", v2b)

	// A stale validator fails and changes nothing.
	_, err := s.Put(ctx, "cas", bytes.NewReader(v3b), int64(len(v3b)), store.PutOptions{IfMatch: v1.Validator})
	wantErr(t, "Put with stale IfMatch", err, store.ErrPreconditionFailed)
	checkObject(t, s, "cas", v2b)
	if got := stat(t, s, "cas").Validator; got != v2.Validator {
		t.Errorf("failed IfMatch Put changed the Validator: %q -> %q", v2.Validator, got)
	}
	// A missing key matches nothing.
	_, err = s.Put(ctx, "absent", bytes.NewReader(v3b), int64(len(v3b)), store.PutOptions{IfMatch: v2.Validator})
	wantErr(t, "Put IfMatch on a missing key", err, store.ErrPreconditionFailed)
	wantNotFound(t, s, "absent")

	// Concurrent compare-and-swaps from one validator: exactly one wins.
	const writers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range writers {
		wg.Go(func() {
			b := data(uint64(40+i), 500)
			_, err := s.Put(ctx, "cas", bytes.NewReader(b), int64(len(b)), store.PutOptions{IfMatch: v2.Validator})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrPreconditionFailed):
				t.Errorf("writer %d: %v, want nil or ErrPreconditionFailed", i, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of %d IfMatch writers from one validator succeeded, want 1", wins, writers)
	}
}

type rangeCase struct{ off, n int64 }

func (c rangeCase) String() string { return fmt.Sprintf("[%d,+%d)", c.off, c.n) }

// checkRanges reads each range of key and compares it with b.
func checkRanges(t *testing.T, s store.Store, key string, b []byte, cases []rangeCase) {
	t.Helper()
	size := int64(len(b))
	for _, c := range cases {
		end := size
		if c.n >= 0 {
			end = c.off + c.n
		}
		got, err := readRange(t, s, key, c.off, c.n, "")
		if err != nil {
			t.Errorf("ReadRange%v: %v", c, err)
			continue
		}
		if want := b[c.off:end]; !bytes.Equal(got, want) {
			t.Errorf("ReadRange%v: got %d bytes (md5 %s), want %d (md5 %s)", c, len(got), md5hex(got), len(want), md5hex(want))
		}
	}
}

func testReadRangeSmall(t *testing.T, s store.Store, caps Capabilities) {
	b := data(50, 1000)
	put(t, s, "r", b, store.PutOptions{})
	checkRanges(t, s, "r", b, []rangeCase{
		{0, -1}, {0, 1000}, {0, 1}, {0, 999}, {1, -1}, {1, 998},
		{999, 1}, {999, -1}, {10, 20}, {500, -1}, {500, 500}, {123, 1},
	})
	put(t, s, "one", []byte{7}, store.PutOptions{})
	checkRanges(t, s, "one", []byte{7}, []rangeCase{{0, -1}, {0, 1}})
}

// testReadRangeChunks reads ranges on and around the cache's chunk
// boundaries of a 2.125-chunk object.
func testReadRangeChunks(t *testing.T, s store.Store, caps Capabilities) {
	c := caps.chunkSize()
	size := 2*c + c/8 + 3
	b := data(51, int(size))
	put(t, s, "big", b, store.PutOptions{})
	checkRanges(t, s, "big", b, []rangeCase{
		{0, -1}, {0, c}, {c, c}, {2 * c, -1}, {2 * c, size - 2*c}, // whole chunks
		{0, 1}, {size - 1, 1}, {size - 1, -1}, // first and last byte
		{c - 1, 1}, {c, 1}, {c - 1, 2}, {2*c - 1, 1}, {2 * c, 1}, {2*c - 1, 2}, // across boundaries
		{c - 1, c + 2}, {c + 1, c - 2}, {c / 2, c}, {1, size - 2}, {c, -1},
	})
}

func testReadRangeIfMatch(t *testing.T, s store.Store, caps Capabilities) {
	b1, b2 := data(52, 2000), data(53, 2000)
	v1 := put(t, s, "im", b1, store.PutOptions{}).Validator
	got, err := readRange(t, s, "im", 100, 50, v1)
	if err != nil || !bytes.Equal(got, b1[100:150]) {
		t.Errorf("ReadRange with current validator: %d bytes, %v", len(got), err)
	}
	v2 := put(t, s, "im", b2, store.PutOptions{}).Validator
	if caps.NoReadPreconditions {
		t.Log("skipping the stale-validator read: NoReadPreconditions")
	} else {
		_, err = readRange(t, s, "im", 0, -1, v1)
		wantErr(t, "ReadRange with stale validator", err, store.ErrPreconditionFailed)
	}
	got, err = readRange(t, s, "im", 0, -1, v2)
	if err != nil || !bytes.Equal(got, b2) {
		t.Errorf("ReadRange with new validator: %d bytes, %v", len(got), err)
	}
	_, err = readRange(t, s, "missing", 0, -1, v2)
	wantErr(t, "ReadRange(missing key, validator)", err, store.ErrNotFound)
}
