// Package backoff is fedgate's one exponential backoff: the wait before a
// retry of a request (federation's store reads, preload listing), of a
// Raft write whose leader moved, and of a failing background drain.
//
// It only says how long to wait. Which layer retries which failure, and how
// many times, is decided where the retries are made (see federation/read.go
// and docs/stores.md, "Retries").
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter is how a wait is randomised.
type Jitter int

const (
	// None waits exactly Delay(n).
	None Jitter = iota
	// Full waits a uniform random time in (0, Delay(n)]: concurrent
	// retries of the same failure spread out over the whole window.
	Full
	// Up waits Delay(n) plus up to half of it again at random: never less
	// than the schedule, still not in lockstep.
	Up
)

// Policy is an exponential schedule: Initial before retry 1, doubling
// after each retry, capped at Max.
type Policy struct {
	Initial, Max time.Duration
	Jitter       Jitter
}

// Delay is the wait before retry n (1-based) before jitter: Initial<<(n-1),
// at most Max (Initial for n < 1).
func (p Policy) Delay(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// Wait is the jittered wait before retry n.
func (p Policy) Wait(n int) time.Duration {
	d := p.Delay(n)
	if d <= 0 {
		return 0
	}
	switch p.Jitter {
	case Full:
		return time.Duration(rand.Int64N(int64(d)) + 1)
	case Up:
		return d + rand.N(d/2+1)
	}
	return d
}

// Sleep waits Wait(n), or until ctx ends (returning its error).
func (p Policy) Sleep(ctx context.Context, n int) error {
	t := time.NewTimer(p.Wait(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
