package federation

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// The region's cache across nodes: a chunk is cached only by the node the
// ring names; other nodes read it from that owner over the internal API
// (ServeChunk on the owner's side), falling back to the store.

// bucketOf returns the bucket whose objects live under key in store st
// (the longest matching prefix), or nil.
func (n *Namespace) bucketOf(storeName, key string) *Bucket {
	var best *Bucket
	consider := func(b *Bucket) {
		if b.store.Name() == storeName && strings.HasPrefix(key, b.prefix) && (best == nil || len(b.prefix) > len(best.prefix)) {
			best = b
		}
	}
	for _, b := range n.v().global {
		consider(b)
	}
	for _, rec := range n.rs.State().Buckets() {
		if rec.Store == storeName && strings.HasPrefix(key, rec.Prefix) {
			if b, err := n.fromRecord(rec); err == nil {
				consider(b)
			}
		}
	}
	return best
}

// fetcher reads ranges of one object version of bucket from its store,
// with the read retry budget (and counts them, and checks the bucket's
// egress budget).
// t names the bucket and the object's key in it; key is the store's key.
func (n *Namespace) fetcher(t egressTag, st store.Store, key string, v store.Validator) cachetier.Fetcher {
	return func(ctx context.Context, off, length int64) (io.ReadCloser, error) {
		if err := n.checkColdRead(ctx, t.bucket, st); err != nil {
			return nil, err
		}
		t := t
		t.blocked = &blockedRead{}
		ctx = withEgressTag(ctx, t)
		rc, err := openResuming(ctx, st, key, v, off, length)
		if err != nil {
			return nil, err
		}
		return n.countRead(rc, t, st, noReuse), nil
	}
}

// readOptions are the cache options of reads of bucket b (nil: none known).
func (n *Namespace) readOptions(b *Bucket) cachetier.ReadOptions {
	if b == nil {
		return cachetier.ReadOptions{Concurrency: n.fill}
	}
	return cachetier.ReadOptions{Group: b.Name, GroupQuota: b.cache.Quota, GroupPriority: b.cache.Priority, ReadAhead: b.cache.ReadAhead, Concurrency: n.fill}
}

// ServeChunk serves the internal API: [off, off+length) of chunk k, from
// this node's cache (filled from the store on a miss). It never asks
// another node, even when this node's view of the ring differs.
func (n *Namespace) ServeChunk(ctx context.Context, k cachetier.ChunkKey, off, length int64) (io.ReadCloser, error) {
	if n.cache == nil {
		return nil, fmt.Errorf("federation: this node has no cache")
	}
	st, ok := n.v().stores[k.Store]
	if !ok {
		return nil, fmt.Errorf("federation: store %q is not configured on this node", k.Store)
	}
	b := n.bucketOf(k.Store, k.Key)
	opts := n.readOptions(b)
	opts.Local = true
	var t egressTag
	if b != nil {
		t = egressTag{bucket: b.Name, key: strings.TrimPrefix(k.Key, b.prefix)}
	}
	return n.cache.ReadChunk(ctx, k, n.fetcher(t, st, k.Key, k.Validator), off, length, opts)
}

// pinned is the cache's pin predicate: the Raft pins, by bucket and
// key prefix (relative to the bucket).
func (n *Namespace) pinned(group, storeName, key string) bool {
	if b := n.lookupBucket(group); b != nil && b.cache.Pin && b.store.Name() == storeName && strings.HasPrefix(key, b.prefix) {
		return true // the policy pins the bucket (cache.pin, by name or glob)
	}
	pins := n.rs.State().Pins()
	if len(pins) == 0 {
		return false
	}
	var b *Bucket
	for _, p := range pins {
		if p.Bucket != group {
			continue
		}
		if b == nil {
			if b = n.lookupBucket(group); b == nil {
				return false
			}
		}
		if b.store.Name() == storeName && strings.HasPrefix(key, b.prefix+p.Prefix) {
			return true
		}
	}
	return false
}

// StartPins installs the pin predicate in the cache (call once at start),
// and the policy's bucket priorities.
func (n *Namespace) StartPins() {
	if n.cache != nil {
		n.cache.SetPins(n.pinned)
		n.setPriorities(n.v())
	}
}

// setPriorities gives the cache the eviction class of every bucket the
// policy declares (buckets created through S3 under a glob rule get
// theirs with their first read).
func (n *Namespace) setPriorities(v *nsView) {
	if n.cache == nil {
		return
	}
	for name, b := range v.global {
		n.cache.SetPriority(name, b.cache.Priority)
	}
}

// cachePriority maps the policy's cache.priority to the cache's class.
func cachePriority(p policies.CachePriority) cachetier.Priority {
	switch p {
	case policies.PriorityLow:
		return cachetier.PriorityLow
	case policies.PriorityHigh:
		return cachetier.PriorityHigh
	}
	return cachetier.PriorityNormal
}

// repin re-evaluates pins after they changed (off the FSM goroutine: it
// walks every chunk).
func (n *Namespace) repin(cmd regionstate.Command) {
	if _, ok := cmd.(*regionstate.SetPin); ok && n.cache != nil {
		go n.cache.Repin()
	}
}
