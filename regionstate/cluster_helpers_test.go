package regionstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// cluster is an in-process region: nodes on hashicorp/raft's in-memory
// transport, wired together (or cut apart) by the test, with a Forward
// hook that calls the leader's ApplyEncoded directly, through the wire
// form of errors.
type cluster struct {
	t     *testing.T
	ids   []string
	tweak func(*Config)

	mu    sync.Mutex
	nodes map[string]*Node // live nodes
	dirs  map[string]string
	cut   map[string]bool // the minority side of a partition
}

func clusterAddr(id string) string { return "inmem:" + id }

// newCluster opens size nodes with BootstrapExpect and bootstraps them all
// with the full member list, then waits for a leader.
func newCluster(t *testing.T, size int, tweak func(*Config)) *cluster {
	c := &cluster{t: t, tweak: tweak, nodes: map[string]*Node{}, dirs: map[string]string{}, cut: map[string]bool{}}
	var members []Member
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		c.ids = append(c.ids, id)
		c.dirs[id] = t.TempDir()
		members = append(members, Member{ID: id, Address: clusterAddr(id), Voter: true})
	}
	for _, id := range c.ids {
		c.start(id, nil)
	}
	for _, id := range c.ids {
		if err := c.node(id).BootstrapCluster(members); err != nil {
			t.Fatalf("BootstrapCluster on %s: %v", id, err)
		}
	}
	// Each member writes its FeatureKey once (group.go); wait for those
	// writes so that they do not land in the middle of a test.
	l := c.leader()
	waitFor(t, "every member to announce its log features", func() bool {
		for _, id := range c.ids {
			if v, _ := l.State().Setting(FeatureKey(id)); v == "" {
				return false
			}
		}
		return true
	})
	return c
}

func init() { announceEvery.Store(int64(10 * time.Millisecond)) }

func (c *cluster) config(id string) Config {
	// 500ms: short enough for quick tests, long enough that a loaded 2-core
	// machine does not depose the leader mid-test (at 200ms, load averages
	// of 13-17 here lost the leadership under the group-commit writers).
	cfg := Config{NodeID: id, Dir: c.dirs[id], Logger: testLogger(c.t), ElectionTimeout: 500 * time.Millisecond,
		BootstrapExpect: len(c.ids), LeaderWait: 2 * time.Second, Forward: c.forwarder(id)}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// start opens node id (again) and wires it in; edit may change its config.
func (c *cluster) start(id string, edit func(*Config)) *Node {
	c.t.Helper()
	cfg := c.config(id)
	if edit != nil {
		edit(&cfg)
	}
	n := openNode(c.t, cfg)
	if n.Addr() != clusterAddr(id) {
		c.t.Fatalf("node %s has address %s", id, n.Addr())
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	c.wire()
	return n
}

// kill closes node id and unplugs it.
func (c *cluster) kill(id string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	closeNode(c.t, n)
	c.wire()
}

// partition cuts ids off from the other nodes; heal joins them again.
func (c *cluster) partition(ids ...string) {
	c.mu.Lock()
	for _, id := range ids {
		c.cut[id] = true
	}
	c.mu.Unlock()
	c.wire()
}

func (c *cluster) heal() {
	c.mu.Lock()
	clear(c.cut)
	c.mu.Unlock()
	c.wire()
}

// wire connects every pair of live nodes on the same side and disconnects
// every other pair.
func (c *cluster) wire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, na := range c.nodes {
		ta := na.trans.(*raft.InmemTransport)
		for _, b := range c.ids {
			nb, live := c.nodes[b]
			switch {
			case a == b:
			case live && c.cut[a] == c.cut[b]:
				ta.Connect(raft.ServerAddress(clusterAddr(b)), nb.trans)
			default:
				ta.Disconnect(raft.ServerAddress(clusterAddr(b)))
			}
		}
	}
}

func (c *cluster) forwarder(from string) func(context.Context, string, string, []byte) (uint64, error) {
	return func(ctx context.Context, id, addr string, data []byte) (uint64, error) {
		c.mu.Lock()
		to, ok := c.nodes[id]
		reachable := ok && c.cut[from] == c.cut[id] && c.nodes[from] != nil
		c.mu.Unlock()
		if !reachable || addr != clusterAddr(id) {
			return 0, fmt.Errorf("test: %s cannot reach %s at %s", from, id, addr)
		}
		idx, err := to.ApplyEncoded(ctx, data)
		b, jerr := json.Marshal(ToWire(err))
		if jerr != nil {
			return 0, jerr
		}
		var w *WireError
		if jerr := json.Unmarshal(b, &w); jerr != nil {
			return 0, jerr
		}
		return idx, w.Err()
	}
}

func (c *cluster) node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// live returns the live nodes in id order.
func (c *cluster) live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, id := range c.ids {
		if n, ok := c.nodes[id]; ok {
			out = append(out, n)
		}
	}
	return out
}

// leader waits until exactly one live node outside the cut leads and the
// others there know it, and returns it.
func (c *cluster) leader() *Node {
	c.t.Helper()
	var found *Node
	waitFor(c.t, "a leader", func() bool {
		var l *Node
		for _, n := range c.live() {
			if !c.isCut(n.ID()) && n.IsLeader() {
				if l != nil {
					return false
				}
				l = n
			}
		}
		if l == nil {
			return false
		}
		for _, n := range c.live() {
			if id, _ := n.Leader(); !c.isCut(n.ID()) && id != l.ID() {
				return false
			}
		}
		found = l
		return true
	})
	return found
}

func (c *cluster) isCut(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut[id]
}

// followers returns the live nodes other than l.
func (c *cluster) followers(l *Node) []*Node {
	return slices.DeleteFunc(c.live(), func(n *Node) bool { return n == l })
}

// converge waits until every live node has applied all the leader has and
// checks that they all hold the leader's state.
func (c *cluster) converge() dump {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l *Node
	var idx uint64
	for {
		l = c.leader()
		var err error
		if idx, err = l.Barrier(ctx); err == nil {
			break
		} else if !errors.Is(err, ErrNotLeader) {
			c.t.Fatalf("Barrier: %v", err)
		}
	}
	want := dumpState(l.State())
	for _, n := range c.live() {
		if err := n.WaitApplied(ctx, idx); err != nil {
			c.t.Fatalf("%s: %v", n.ID(), err)
		}
		sameState(c.t, "node "+n.ID(), dumpState(n.State()), want)
	}
	return want
}

// applyVia applies cmds through node n, which forwards when it follows.
func applyVia(t *testing.T, n *Node, cmds ...Command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cmd := range cmds {
		idx, err := n.ApplyIndex(ctx, cmd)
		if err != nil {
			t.Fatalf("ApplyIndex(%T) via %s: %v", cmd, n.ID(), err)
		}
		// Read-after-write on the node that was asked.
		if err := n.WaitApplied(ctx, idx); err != nil {
			t.Fatalf("WaitApplied(%d) on %s: %v", idx, n.ID(), err)
		}
	}
}
