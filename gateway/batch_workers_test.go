package gateway

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// runBlocked hands n functions to w that block until release closes, and
// fails unless all n run at once (goRun never waits for a free worker).
func runBlocked(t *testing.T, w *workers, n int) (release func()) {
	t.Helper()
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	stop := make(chan struct{})
	for range n {
		w.goRun(func() {
			defer done.Done()
			started.Done()
			<-stop
		})
	}
	ok := make(chan struct{})
	go func() { started.Wait(); close(ok) }()
	select {
	case <-ok:
	case <-time.After(10 * time.Second):
		t.Fatalf("not every one of %d functions handed to the workers started while the others ran", n)
	}
	return func() { close(stop); done.Wait() }
}

// idleWorkers waits until want workers are idle.
func idleWorkers(t *testing.T, w *workers, want int) {
	t.Helper()
	wait.For(t, 10*time.Second, fmt.Sprintf("%d idle workers", want), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.ready) == want
	})
}

// The batch fetch workers: every function handed over runs at once,
// beside all the others still running; finished workers take the next
// functions instead of new goroutines starting; idle ones end.
func TestBatchWorkersRunEverythingAtOnce(t *testing.T) {
	w := &workers{idleFor: time.Second}
	const n = 64
	runBlocked(t, w, n)()
	idleWorkers(t, w, n)
	// The same n workers take the next n functions, and n more start
	// for the n after those.
	release := runBlocked(t, w, 2*n)
	idleWorkers(t, w, 0)
	release()
	idleWorkers(t, w, 2*n)
	// Idle for idleFor, they end, and so does the sweep.
	idleWorkers(t, w, 0)
	wait.For(t, 10*time.Second, "the sweep of idle workers to end with no worker left", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.sweeping
	})
	// And new ones start when needed.
	runBlocked(t, w, 8)()
	idleWorkers(t, w, 8)
}
