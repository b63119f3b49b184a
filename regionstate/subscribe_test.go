package regionstate

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestSubscribe(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var mu sync.Mutex
	var got []string
	unsub := n.Subscribe(func(c Command) {
		if s, ok := c.(*SetSetting); ok {
			mu.Lock()
			got = append(got, s.Key)
			mu.Unlock()
		}
	})
	if err := n.Apply(ctx, SetSetting{Key: "a", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	// Apply returns once the FSM applied the entry, and subscribers run
	// before the FSM returns its answer.
	mu.Lock()
	if len(got) != 1 || got[0] != "a" {
		t.Errorf("after one write, the subscriber saw %q, want [a]", got)
	}
	mu.Unlock()

	unsub()
	if err := n.Apply(ctx, SetSetting{Key: "b", Value: "2"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Errorf("a cancelled subscriber was called again: %q", got)
	}
}
