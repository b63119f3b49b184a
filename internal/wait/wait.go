// Package wait is the tests' one way to wait for something that nothing
// signals: poll a condition until it holds, with a deadline. Tests use it
// instead of sleeping for a fixed time (internal/archcheck refuses a
// time.Sleep in a test unless a "// pacing:" comment says it paces load).
//
// The poll interval starts at 100µs and doubles up to 20ms, so a condition
// that holds almost at once costs little and a long wait does not spin.
package wait

import (
	"context"
	"fmt"
	"testing"
	"time"
)

const (
	firstInterval = 100 * time.Microsecond
	maxInterval   = 20 * time.Millisecond
)

// For polls cond until it holds and fails tb (t.Fatalf) when it still does
// not after timeout; what names the condition in the failure. Call it from
// the test's goroutine; elsewhere use Until.
func For(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if err := Until(context.Background(), timeout, cond); err != nil {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Until polls cond until it holds (nil), ctx ends (ctx.Err()), or timeout
// passes (an error naming it).
func Until(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for !cond() {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("wait: condition not met in %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		interval = min(2*interval, maxInterval)
		t.Reset(interval)
	}
	return nil
}
