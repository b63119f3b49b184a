package gateway

import (
	"sync"
	"testing"
	"time"
)

// The batch fetch workers never make a caller wait for a free one: every
// function handed over runs at once, beside all the others still running,
// and a worker that finished takes the next function.
func TestBatchWorkersRunEverythingAtOnce(t *testing.T) {
	w := workers{idle: make(chan func())}
	const n = 64
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		w.goRun(func() {
			defer done.Done()
			started.Done()
			<-release
		})
	}
	ok := make(chan struct{})
	go func() { started.Wait(); close(ok) }()
	select {
	case <-ok:
	case <-time.After(10 * time.Second):
		t.Fatal("not every function handed to the workers started while the others ran")
	}
	close(release)
	done.Wait()
	// The n workers now wait for work: the next functions go to them.
	deadline := time.Now().Add(10 * time.Second)
	for ran := 0; ran < n; {
		if time.Now().After(deadline) {
			t.Fatal("the idle workers did not take new functions")
		}
		took := make(chan struct{})
		select {
		case w.idle <- func() { close(took) }:
			<-took
			ran++
		case <-time.After(time.Millisecond):
		}
	}
}
