package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	for n, want := range map[int]time.Duration{
		0: 50 * time.Millisecond, 1: 50 * time.Millisecond, 2: 100 * time.Millisecond,
		6: 1600 * time.Millisecond, 7: 2 * time.Second, 1000: 2 * time.Second,
	} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestWaitJitter(t *testing.T) {
	d := 40 * time.Millisecond
	for range 1000 {
		if w := (Policy{Initial: d, Max: d, Jitter: Full}).Wait(1); w <= 0 || w > d {
			t.Fatalf("Full: %v outside (0, %v]", w, d)
		}
		if w := (Policy{Initial: d, Max: d, Jitter: Up}).Wait(1); w < d || w > d+d/2 {
			t.Fatalf("Up: %v outside [%v, %v]", w, d, d+d/2)
		}
		if w := (Policy{Initial: d, Max: d}).Wait(1); w != d {
			t.Fatalf("None: %v, want %v", w, d)
		}
	}
}

func TestSleepStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := (Policy{Initial: time.Hour, Max: time.Hour}).Sleep(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled ctx = %v, want context.Canceled", err)
	}
}
