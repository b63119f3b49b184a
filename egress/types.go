// Package egress accounts for the bytes fedgate moves between stores and
// regions, prices them, and reports what crossing clouds cost and what the
// cache saved.
package egress

import "time"

// Direction says which way bytes moved between a store and a region.
type Direction string

// Directions.
const (
	// Read: store -> region (egress at the store's side).
	Read Direction = "read"
	// Write: region -> store (egress at the region's side).
	Write Direction = "write"
)

// Key is one aggregation bucket of the ledger: an hour, a pair of
// locations written "cloud:region", the fedgate bucket and store, the
// direction, and for reads the key prefix. Src is where the bytes left
// from (the store for a read, the region for a write); Dst where they
// arrived.
type Key struct {
	Hour      int64 // Unix time / 3600
	Src, Dst  string
	Bucket    string
	Store     string
	Direction Direction
	// Prefix is the part of the bucket the bytes were read from (reads
	// from another location than the region's): the object key's first two
	// path segments ("train/shard-00/"), fewer when the key has fewer; ""
	// for keys without one, writes, reads in the region's own location,
	// the bytes the cache avoided, and what a busy hour could not track
	// separately. Reports add prefixes up; advice
	// weighs each one.
	Prefix string `json:",omitempty"`
}

// Counts are the bytes of one Key.
type Counts struct {
	// Bytes moved between Src and Dst.
	Bytes int64 `json:"bytes"`
	// AvoidedBytes are bytes served from the region's cache instead of
	// being read from the store (reads only): egress avoided.
	AvoidedBytes int64 `json:"avoided_bytes"`
	// Reuse, on a read row from another location than the region's,
	// splits the bytes clients read (crossing or served by a copy or the
	// cache) by how long before the same region had last read the same
	// object (ReuseBuckets). The simulator records it; a gateway too, per
	// node (a read another node made last counts as a first read; see
	// docs/egress.md), on the row of the key's prefix. nil when not
	// recorded (older nodes, reuse distances turned off).
	Reuse []int64 `json:"reuse,omitempty"`
}

// Row is one ledger row.
type Row struct {
	Key
	Counts
}

// HourStart returns the start of a Key's hour.
func (k Key) HourStart() time.Time { return time.Unix(k.Hour*3600, 0).UTC() }

// HourOf returns the Hour value of t.
func HourOf(t time.Time) int64 { return t.Unix() / 3600 }
