package faulty

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
	"github.com/fedgate/fedgate/store/storetest"
)

func newPosix(t *testing.T) store.Store {
	s, err := posix.New("p", policies.Location{Cloud: "onprem", Region: "test"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With no faults the wrapper is transparent: it passes the store suite.
func TestConformanceWithoutFaults(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return Wrap(newPosix(t), Config{}) },
		storetest.Capabilities{Short: true, MaxKeyLen: posix.MaxKeyLen})
}

func TestErrorRate(t *testing.T) {
	f := Wrap(newPosix(t), Config{Seed: 1, ErrorRate: 0.3})
	failed := 0
	for range 1000 {
		if _, err := f.Stat(t.Context(), "k"); errors.Is(err, store.ErrThrottled) {
			failed++
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unexpected error %v", err)
		}
	}
	if failed < 240 || failed > 360 {
		t.Fatalf("%d of 1000 calls failed, want about 300", failed)
	}
}

func TestResetMidBody(t *testing.T) {
	inner := newPosix(t)
	data := bytes.Repeat([]byte("x"), 1<<20)
	if _, err := inner.Put(t.Context(), "k", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f := Wrap(inner, Config{Seed: 2, ResetRate: 1})
	rc, err := f.ReadRange(t.Context(), "k", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, ErrReset) || n <= 0 || n >= int64(len(data)) {
		t.Fatalf("read %d bytes, err %v; want a reset part-way", n, err)
	}
	if f.Count.Resets.Load() != 1 {
		t.Fatalf("resets = %d", f.Count.Resets.Load())
	}
}

func TestBandwidthCap(t *testing.T) {
	inner := newPosix(t)
	data := bytes.Repeat([]byte("y"), 300_000)
	if _, err := inner.Put(t.Context(), "k", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f := Wrap(inner, Config{BandwidthPerStream: 1_000_000})
	start := time.Now()
	rc, err := f.ReadRange(t.Context(), "k", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("capped read: %d bytes, %v", len(got), err)
	}
	// 300 kB at 1 MB/s takes at least 0.3 s (a lower bound, never flaky).
	if el := time.Since(start); el < 290*time.Millisecond {
		t.Fatalf("300 kB at 1 MB/s took %v", el)
	}
}
