package regionstate

// Group commit: the leader commits the writes that arrive while earlier
// ones are being committed as one log entry (a TypeBatch entry holding
// each command as it was encoded), so Raft's cost per entry (encoding,
// the log store's write, replication, the FSM's transaction) is paid once
// per group instead of once per write. A write that finds no commit in
// flight is appended at once, alone and as itself, so a single client
// waits no longer than before; under load the groups grow by themselves.
//
// Only commands that need no log index of their own may share an entry
// (batchable): a journal entry or an object version takes its entry's
// index as its version, which must stay unique.
//
// A node that does not know TypeBatch cannot apply such an entry, so the
// leader groups only once every member of the configuration has said it
// can (the setting FeatureKey(id), which each node of a region of more
// than one member writes once; see announce). During a rolling upgrade
// the old nodes keep the region on one entry per write.

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// FeatureKey is the setting in which node id lists the log entry features
// it applies ("group": TypeBatch entries).
func FeatureKey(id string) string { return "member." + id + ".raft-features" }

// featureGroup is the feature a node announces once it applies TypeBatch.
const featureGroup = "group"

// groupMax bounds a group: commands and bytes of one entry.
const (
	groupMaxCommands = 256
	groupMaxBytes    = 512 << 10
)

// groupInflight is how many entries the committer keeps in flight at once:
// while they commit, the writes that arrive queue up and form the next
// group. Two keep the log store busy while the next group forms.
const groupInflight = 2

// batchableTypes are the command types that may share a log entry.
var batchableTypes = func() (t [256]bool) {
	for _, ct := range []CommandType{
		TypePutUser, TypeDeleteUser, TypeGrant, TypeRevoke,
		TypeCreateUpload, TypePutPart, TypeAbortUpload, TypeClaimUpload,
		TypeSetSetting, TypeSetBucketConfig, TypeTouch, TypeAddEgress,
		TypeSetPin, TypePutJob, TypeJobProgress, TypeDeleteJob,
	} {
		t[ct] = true
	}
	return t
}()

// batchable reports whether the encoded command data may share a log entry.
func batchable(data []byte) bool { return len(data) > 0 && batchableTypes[data[0]] }

// encodeGroup is the log entry of a group: TypeBatch, the number of
// commands, then each command's length and bytes (uvarints).
func encodeGroup(cmds [][]byte) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, c := range cmds {
		size += binary.MaxVarintLen64 + len(c)
	}
	out := make([]byte, 0, size)
	out = append(out, byte(TypeBatch))
	out = binary.AppendUvarint(out, uint64(len(cmds)))
	for _, c := range cmds {
		out = binary.AppendUvarint(out, uint64(len(c)))
		out = append(out, c...)
	}
	return out
}

// decodeGroup splits a TypeBatch entry into its commands.
func decodeGroup(data []byte) ([][]byte, error) {
	if len(data) == 0 || CommandType(data[0]) != TypeBatch {
		return nil, invalid("not a command group")
	}
	rest := data[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 || n > uint64(len(rest)) {
		return nil, invalid("command group: bad count")
	}
	rest = rest[k:]
	cmds := make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l == 0 || l > uint64(len(rest)-k) {
			return nil, invalid("command group: bad length of command %d", len(cmds))
		}
		cmds = append(cmds, rest[k:k+int(l)])
		rest = rest[k+int(l):]
	}
	if len(rest) != 0 {
		return nil, invalid("command group: %d bytes after the last command", len(rest))
	}
	return cmds, nil
}

// groupResult is the FSM's response to a TypeBatch entry: each command's
// error, or err for the whole entry when it could not be decoded.
type groupResult struct {
	errs []error
	err  error
}

func (g groupResult) at(i int) error {
	if g.err != nil {
		return g.err
	}
	if i < len(g.errs) {
		return g.errs[i]
	}
	return invalid("command group: no result for command %d", i)
}

// pendingWrite is a write waiting in the committer's queue.
type pendingWrite struct {
	data []byte
	done chan writeResult // buffered: the committer never blocks on it
}

type writeResult struct {
	index uint64
	err   error
}

// committer groups the leader's batchable writes (see the package comment
// above).
type committer struct {
	n       *Node
	mu      sync.Mutex
	queue   []*pendingWrite
	running int // entries in flight

	groups, grouped atomic.Uint64 // group entries appended, and their commands

	// ok caches whether every member applies groups (checked at most
	// every second, on the leader).
	okAt time.Time
	ok   bool
}

// submit queues data and waits for its result. The caller's ctx ending
// leaves the write's outcome unknown, as with any Raft write.
func (c *committer) submit(ctx context.Context, data []byte) (uint64, error) {
	p := &pendingWrite{data: data, done: make(chan writeResult, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	var group []*pendingWrite
	if c.running < groupInflight {
		c.running++
		group = c.take()
	}
	c.mu.Unlock()
	if len(group) == 1 && group[0] == p {
		// Alone: appended from this goroutine, as before group commit,
		// then whatever queued meanwhile is handed on.
		idx, err := c.n.applyOne(ctx, data)
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
		} else {
			next := c.take()
			c.mu.Unlock()
			go c.flush(next)
		}
		return idx, err
	}
	if group != nil {
		go c.flush(group)
	}
	select {
	case r := <-p.done:
		return r.index, r.err
	case <-c.n.done:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, fmt.Errorf("raft: outcome unknown: %w", ctx.Err())
	}
}

// take removes the next group from the queue (c.mu held).
func (c *committer) take() []*pendingWrite {
	size, k := 0, 0
	for k < len(c.queue) && k < groupMaxCommands {
		size += len(c.queue[k].data)
		if k > 0 && size > groupMaxBytes {
			break
		}
		k++
	}
	group := c.queue[:k:k]
	c.queue = c.queue[k:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	return group
}

// flush commits group, then the groups that queued up meanwhile, until the
// queue is empty.
func (c *committer) flush(group []*pendingWrite) {
	for {
		c.commit(group)
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		group = c.take()
		c.mu.Unlock()
	}
}

// commit appends group as one entry (a lone write, or a region where some
// member does not apply groups: one entry each) and hands out the results.
func (c *committer) commit(group []*pendingWrite) {
	if len(group) == 1 {
		idx, err := c.n.applyOne(context.Background(), group[0].data)
		group[0].done <- writeResult{idx, err}
		return
	}
	if !c.grouping() {
		var wg sync.WaitGroup
		for _, p := range group {
			wg.Go(func() {
				idx, err := c.n.applyOne(context.Background(), p.data)
				p.done <- writeResult{idx, err}
			})
		}
		wg.Wait()
		return
	}
	cmds := make([][]byte, len(group))
	for i, p := range group {
		cmds[i] = p.data
	}
	c.groups.Add(1)
	c.grouped.Add(uint64(len(cmds)))
	f := c.n.raft.Apply(encodeGroup(cmds), 0)
	if err := c.n.await(context.Background(), f); err != nil {
		for _, p := range group {
			p.done <- writeResult{err: err}
		}
		return
	}
	res, _ := f.Response().(groupResult)
	for i, p := range group {
		if err := res.at(i); err != nil {
			p.done <- writeResult{err: err}
		} else {
			p.done <- writeResult{index: f.Index()}
		}
	}
}

// GroupStats returns how many group entries this node appended as leader
// and how many commands they held (metrics: fedgate_raft_group_*).
func (n *Node) GroupStats() (entries, commands uint64) {
	return n.group.groups.Load(), n.group.grouped.Load()
}

// grouping reports whether every member of the configuration applies
// TypeBatch entries (this node does; a one-member region needs no word).
func (c *committer) grouping() bool {
	c.mu.Lock()
	ok, fresh := c.ok, time.Since(c.okAt) < time.Second
	c.mu.Unlock()
	if fresh {
		return ok
	}
	// Asked outside c.mu: GetConfiguration waits for Raft's main loop, and
	// submitters take c.mu on every write.
	ok = c.n.membersGroup()
	c.mu.Lock()
	c.ok, c.okAt = ok, time.Now()
	c.mu.Unlock()
	return ok
}

// membersGroup reports whether every other member has announced
// featureGroup.
func (n *Node) membersGroup() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.id {
			continue
		}
		if v, _ := n.fsm.state.Setting(FeatureKey(string(s.ID))); !hasFeature(v, featureGroup) {
			return false
		}
	}
	return true
}

func hasFeature(list, f string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == f {
			return true
		}
	}
	return false
}

// announce writes this node's FeatureKey once it belongs to a region of
// more than one member and the setting is missing: a write forwarded like
// any other, retried every few seconds until it is in.
func (n *Node) announce() {
	t := time.NewTicker(time.Duration(announceEvery.Load()))
	defer t.Stop()
	for {
		select {
		case <-n.done:
			return
		case <-t.C:
		}
		if v, _ := n.fsm.state.Setting(FeatureKey(n.id)); hasFeature(v, featureGroup) {
			return
		}
		f := n.raft.GetConfiguration()
		if f.Error() != nil || len(f.Configuration().Servers) < 2 || !n.inConfig(f.Configuration()) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.Apply(ctx, SetSetting{Key: FeatureKey(n.id), Value: featureGroup})
		cancel()
		if err != nil {
			n.log.Debug("raft: announcing this node's log features", "err", err)
		}
	}
}

// announceEvery paces announce's checks (nanoseconds; tests shorten it).
var announceEvery = func() (a atomic.Int64) { a.Store(int64(2 * time.Second)); return }()

func (n *Node) inConfig(cfg raft.Configuration) bool {
	for _, s := range cfg.Servers {
		if string(s.ID) == n.id {
			return true
		}
	}
	return false
}
