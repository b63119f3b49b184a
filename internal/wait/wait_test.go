package wait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A condition that becomes true is seen; one that never does ends with an
// error after the timeout (in a synctest bubble: no real time passes).
func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		time.AfterFunc(time.Second, func() { n.Store(1) })
		start := time.Now()
		if err := Until(context.Background(), 5*time.Second, func() bool { return n.Load() == 1 }); err != nil {
			t.Fatalf("Until: %v", err)
		}
		if d := time.Since(start); d < time.Second || d > time.Second+maxInterval {
			t.Errorf("Until returned after %v, want within %v of 1s", d, maxInterval)
		}
		start = time.Now()
		if err := Until(context.Background(), 3*time.Second, func() bool { return false }); err == nil {
			t.Fatal("Until: nil for a condition that never holds")
		}
		if d := time.Since(start); d < 3*time.Second {
			t.Errorf("Until gave up after %v, before its 3s timeout", d)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Until(ctx, time.Hour, func() bool { return false }); !errors.Is(err, context.Canceled) {
			t.Errorf("Until with a cancelled context: %v, want context.Canceled", err)
		}
	})
}
