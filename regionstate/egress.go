package regionstate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// EgressRow is one aggregated row of the region's egress ledger: bytes
// moved in one hour between a store's location and the region's, for one
// bucket and store, in one direction ("read": store -> region, "write":
// region -> store). Served counts the bytes of the store's objects that
// nodes served to clients through the cache (reads): what was served but
// not read from the store for a client (Served - Bytes + Preloaded) is
// egress the cache avoided.
type EgressRow struct {
	Hour      int64 // Unix time / 3600
	Src, Dst  string
	Bucket    string
	Store     string
	Direction string
	// Prefix is the part of the bucket's keys the bytes belong to (reads
	// only; "" for the rest), so reads can be advised on per prefix.
	Prefix string `json:",omitempty"`
	Bytes  int64
	Served int64 `json:",omitempty"`
	// Logical counts bytes of objects read through a composite placement
	// (the egress itself is in its member stores' rows): Served - Bytes -
	// Logical is what the cache avoided.
	Logical int64 `json:",omitempty"`
	// Preloaded counts the bytes of Bytes (or of Logical) read into the
	// cache with no client waiting for them (preloads): moved, but not
	// matched by any serving yet, so they are left out of the avoided
	// bytes: Served - (Bytes + Logical - Preloaded) is what the cache
	// avoided, whoever filled it.
	Preloaded int64 `json:",omitempty"`
	// Reuse splits the bytes a node's clients read (reads from another
	// location than the region's; on the prefix's row) by how long before
	// the same node had last read the same object: index 0 first reads,
	// then distance buckets (the gateway's egress.ReuseBucket). Summed
	// element by element; nil on rows no node recorded them for (rows of
	// nodes older than the field, writes, reads in the region's location).
	// The slice is never changed in place once in the ledger: rows returned
	// by State.Egress may share it, read-only.
	Reuse []int64 `json:",omitempty"`
}

// MaxEgressReuse bounds the length of EgressRow.Reuse.
const MaxEgressReuse = 64

func (r EgressRow) key() string {
	parts := []string{strconv.FormatInt(r.Hour, 10), r.Src, r.Dst, r.Bucket, r.Store, r.Direction}
	if r.Prefix != "" {
		parts = append(parts, r.Prefix)
	}
	return strings.Join(parts, "\x00")
}

// AddEgress adds each row's counts to the ledger (rows with the same hour,
// locations, bucket, store and direction are summed). Nodes send their
// deltas every few seconds.
type AddEgress struct{ Rows []EgressRow }

// Type implements Command.
func (AddEgress) Type() CommandType { return TypeAddEgress }

// egressTable holds the ledger. Only the FSM goroutine writes it, under mu.
type egressTable struct {
	mu sync.RWMutex
	m  map[string]EgressRow
}

func (c *AddEgress) apply(b *batch) error {
	for _, r := range c.Rows {
		if r.Hour <= 0 || r.Src == "" || r.Dst == "" || r.Store == "" || r.Bytes < 0 || r.Served < 0 || r.Logical < 0 || r.Preloaded < 0 ||
			r.Direction != "read" && r.Direction != "write" {
			return invalid("egress row %+v: needs an hour, locations, a store, a direction (read or write) and counts >= 0", r)
		}
		if len(r.Reuse) > MaxEgressReuse {
			return invalid("egress row %+v: %d reuse buckets, at most %d", r, len(r.Reuse), MaxEgressReuse)
		}
		for _, n := range r.Reuse {
			if n < 0 {
				return invalid("egress row %+v: reuse counts must be >= 0", r)
			}
		}
	}
	t := b.cat.egress
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range c.Rows {
		k := r.key()
		cur := t.m[k]
		if cur.Hour == 0 {
			cur = r
			cur.Bytes, cur.Served, cur.Logical, cur.Preloaded, cur.Reuse = 0, 0, 0, 0, nil
		}
		cur.Bytes += r.Bytes
		cur.Served += r.Served
		cur.Logical += r.Logical
		cur.Preloaded += r.Preloaded
		cur.Reuse = addReuse(cur.Reuse, r.Reuse)
		t.m[k] = cur
		b.put(tEgress, k, mustJSON(cur))
	}
	return nil
}

// addReuse returns the element-wise sum of cur and add in a new slice (cur
// may be shared with snapshots and readers), or cur when add is empty.
func addReuse(cur, add []int64) []int64 {
	if len(add) == 0 {
		return cur
	}
	out := make([]int64, max(len(cur), len(add)))
	copy(out, cur)
	for i, n := range add {
		out[i] += n
	}
	return out
}

// PruneEgress removes the ledger rows of hours before BeforeHour (the
// retention of the egress ledger). Idempotent.
type PruneEgress struct{ BeforeHour int64 }

// Type implements Command.
func (PruneEgress) Type() CommandType { return TypePruneEgress }

func (c *PruneEgress) apply(b *batch) error {
	if c.BeforeHour <= 0 {
		return invalid("prune egress before hour %d", c.BeforeHour)
	}
	t := b.cat.egress
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.m {
		if r.Hour < c.BeforeHour {
			delete(t.m, k)
			b.del(tEgress, k)
		}
	}
	return nil
}

func (c *catalog) loadEgress(key, val []byte) error {
	var r EgressRow
	if err := json.Unmarshal(val, &r); err != nil {
		return fmt.Errorf("raft: decode egress row %q: %w", key, err)
	}
	c.egress.m[r.key()] = r
	return nil
}

// Egress returns the ledger rows of hours [fromHour, toHour), sorted by
// hour, then source, destination, bucket, store, direction and prefix.
func (s *State) Egress(fromHour, toHour int64) []EgressRow {
	t := s.load().egress
	t.mu.RLock()
	var out []EgressRow
	for _, r := range t.m {
		if r.Hour >= fromHour && r.Hour < toHour {
			out = append(out, r)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b EgressRow) int {
		return cmp.Or(cmp.Compare(a.Hour, b.Hour), strings.Compare(a.Src, b.Src), strings.Compare(a.Dst, b.Dst),
			strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Store, b.Store), strings.Compare(a.Direction, b.Direction), strings.Compare(a.Prefix, b.Prefix))
	})
	return out
}
