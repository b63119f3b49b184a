package mount

import (
	"context"
	"sync"
)

// budget bounds the bytes the mount holds for write part buffers and
// read blocks (--max-memory). A taker waits for room (with a deadline its
// caller sets) rather than failing; one request larger than the whole
// budget is let through when nothing else is held, so it cannot wait for
// ever.
type budget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	freed chan struct{} // closed and replaced at each release
	gauge func(int64)
}

func newBudget(max int64, gauge func(int64)) *budget {
	return &budget{max: max, freed: make(chan struct{}), gauge: gauge}
}

func (b *budget) fits(n int64) bool { return b.used+n <= b.max || b.used == 0 }

// tryAcquire takes n bytes when they fit now.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(n) {
		return false
	}
	b.used += n
	b.gauge(b.used)
	return true
}

// acquire takes n bytes, waiting until they fit or ctx ends.
func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.fits(n) {
			b.used += n
			b.gauge(b.used)
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.gauge(b.used)
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
