package cachetier

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Ring is the region's hash ring: it names the one node that owns each
// chunk, by rendezvous (highest random weight) hashing. Every member gets a
// score for a chunk and the highest score owns it, so when a member joins it
// takes only the chunks it now scores highest on, and when one leaves only
// its own chunks move, each to its runner-up. No other chunk changes owner.
//
// The hash is part of the region's protocol (every node must name the same
// owner): FNV-1a 64 over the store, key and Validator, each prefixed by
// its length as a uvarint, and the big-endian chunk index, XORed with splitmix64's finalizer of FNV-1a
// 64 over the node id, through splitmix64's finalizer again. It uses no
// seed and no map order, so it is the same in every process; it must not
// change between versions (TestRingStable). Equal scores (never seen in
// practice) go to the smaller id.
//
// A Ring is immutable and safe for concurrent use; a nil or empty Ring owns
// nothing (Owner returns "").
type Ring struct {
	members []string // sorted, distinct, non-empty
	weights []uint64 // mixed hash of each member's id
}

// NewRing returns the ring of the given node ids; empty ids are dropped and
// duplicates count once. The slice is not retained.
func NewRing(members []string) *Ring {
	m := slices.DeleteFunc(slices.Clone(members), func(s string) bool { return s == "" })
	slices.Sort(m)
	m = slices.Compact(m)
	r := &Ring{members: m, weights: make([]uint64, len(m))}
	for i, node := range m {
		h := fnv.New64a()
		h.Write([]byte(node))
		r.weights[i] = mix64(h.Sum64())
	}
	return r
}

// Members returns the ring's node ids, sorted (a copy).
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// Contains reports whether node is a member.
func (r *Ring) Contains(node string) bool {
	if r == nil {
		return false
	}
	_, ok := slices.BinarySearch(r.members, node)
	return ok
}

// Owner returns the member that owns chunk k, or "" for an empty ring.
func (r *Ring) Owner(k ChunkKey) string {
	if r == nil || len(r.members) == 0 {
		return ""
	}
	kh := chunkHash(k)
	best, bestScore := 0, mix64(kh^r.weights[0])
	for i := 1; i < len(r.weights); i++ {
		// Ties (never seen in practice) go to the smaller id: members are sorted.
		if s := mix64(kh ^ r.weights[i]); s > bestScore {
			best, bestScore = i, s
		}
	}
	return r.members[best]
}

// chunkHash is FNV-1a 64 over the length-prefixed store, key and Validator
// and the big-endian chunk index.
func chunkHash(k ChunkKey) uint64 {
	h := fnv.New64a()
	var b [binary.MaxVarintLen64]byte
	for _, s := range []string{k.Store, k.Key, string(k.Validator)} {
		h.Write(binary.AppendUvarint(b[:0], uint64(len(s))))
		h.Write([]byte(s))
	}
	h.Write(binary.BigEndian.AppendUint64(b[:0], uint64(k.Index)))
	return h.Sum64()
}

// mix64 is splitmix64's finalizer: a bijection whose every output bit
// depends on every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
