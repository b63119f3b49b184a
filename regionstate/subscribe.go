package regionstate

import "sync"

// Subscribe registers f to be called on the FSM goroutine with every
// command this node applies without error from now on, after the batch
// holding it is visible in State (and with nil after a snapshot replaced
// the whole state). f must not block and must not call
// Subscribe or the returned cancel. cancel removes f; once it returns, f is
// not called again.
//
// Subscribing after Open is what lets a caller build the objects that
// react to applied commands (which need an open Node and its State)
// without a hook that exists before they do: a command applied before
// Subscribe returns is already in State when the subscriber reads it.
func (n *Node) Subscribe(f func(Command)) (cancel func()) {
	return n.fsm.subs.add(f)
}

// subscribers is the FSM's list of Subscribe callbacks.
type subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(Command)
}

func (s *subscribers) add(f func(Command)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(Command){}
	}
	id := s.next
	s.next++
	s.fns[id] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.fns, id)
	}
}

// notify hands cmds to every subscriber. It holds the
// lock while calling them, so a cancelled subscriber is never called after
// cancel returns (callbacks must not block).
func (f *fsm) notify(cmds []Command) {
	if len(cmds) == 0 {
		return
	}
	f.subs.mu.Lock()
	defer f.subs.mu.Unlock()
	for _, fn := range f.subs.fns {
		for _, c := range cmds {
			fn(c)
		}
	}
}
