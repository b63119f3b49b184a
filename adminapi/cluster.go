package adminapi

import (
	"time"

	"github.com/fedgate/fedgate/backend"
)

// Cluster is the answer of GET /_fedgate/admin/cluster (and what
// `fedgate cluster status --json` prints).
type Cluster struct {
	Leader  string   `json:"leader"`
	Members []Member `json:"members"`
	// DrainBacklog is the region's write-back journal: objects (and
	// deletes) acknowledged but not yet in their stores.
	DrainBacklog Backlog `json:"drain_backlog"`
	// Lifecycle is the region leader's lifecycle runner: its last finished
	// pass and when the next is due (docs/lifecycle.md).
	Lifecycle Lifecycle `json:"lifecycle"`
}

// Lifecycle is the lifecycle runner's state: the last finished pass
// (zero LastEnd: none yet), its counts, and the next pass's due time.
type Lifecycle struct {
	LastStart    time.Time `json:"last_start,omitzero"`
	LastEnd      time.Time `json:"last_end,omitzero"`
	LastNode     string    `json:"last_node,omitempty"`
	Next         time.Time `json:"next"`
	EverySeconds float64   `json:"every_seconds"`
	Scanned      int64     `json:"scanned"`
	Expired      int64     `json:"expired"`
	Aborted      int64     `json:"aborted"`
	Skipped      int64     `json:"skipped"`
	Errors       int64     `json:"errors"`
}

// Backlog is the size of the write-back journal.
type Backlog struct {
	Objects       int     `json:"objects"`
	Bytes         int64   `json:"bytes"`
	OldestSeconds float64 `json:"oldest_seconds"`
}

// NodeUsage is one node's cache and staging use.
type NodeUsage struct {
	CacheUsed       int64 `json:"cache_used_bytes"`
	CacheCapacity   int64 `json:"cache_capacity_bytes"`
	StagingUsed     int64 `json:"staging_used_bytes"`
	StagingCapacity int64 `json:"staging_capacity_bytes"`
	// DegradedReads counts the reads the node served without some member
	// stores of a replicated or erasure-coded bucket since it started;
	// DegradedObjects are the objects it read so lately (newest first),
	// UnhealthyStores the stores failing its periodic health check.
	DegradedReads   int64            `json:"degraded_reads,omitempty"`
	DegradedObjects []DegradedObject `json:"degraded_objects,omitempty"`
	UnhealthyStores []StoreProblem   `json:"unhealthy_stores,omitempty"`
}

// DegradedObject is an object read degraded: Stores lacked its copy
// or shards (`fedgate repair` rebuilds them).
type DegradedObject struct {
	Bucket string    `json:"bucket"`
	Key    string    `json:"key"`
	Stores []string  `json:"stores"`
	Seen   time.Time `json:"seen"`
}

// StoreProblem is a store failing a node's health check.
type StoreProblem struct {
	Store string `json:"store"`
	Error string `json:"error"`
}

// DegradedUsage is the degraded part of NodeUsage from a backend's
// report, with at most maxObjects objects.
func DegradedUsage(d backend.Degraded, maxObjects int) NodeUsage {
	var u NodeUsage
	for _, b := range d.Buckets {
		u.DegradedReads += b.Reads
	}
	for _, o := range d.Objects[:min(len(d.Objects), maxObjects)] {
		u.DegradedObjects = append(u.DegradedObjects, DegradedObject{Bucket: o.Bucket, Key: o.Key, Stores: o.Stores, Seen: o.Seen})
	}
	for _, s := range d.Stores {
		if !s.Healthy {
			u.UnhealthyStores = append(u.UnhealthyStores, StoreProblem{Store: s.Store, Error: s.Error})
		}
	}
	return u
}

// Member is one member of the region's Raft configuration.
type Member struct {
	ID       string `json:"id"`
	Address  string `json:"address"`      // the Raft address peers dial
	HTTP     string `json:"http_address"` // its S3 port, as it registered it
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader,omitempty"`
	Healthy  bool   `json:"healthy"`         // it answered and knows a leader
	State    string `json:"state,omitempty"` // Leader, Follower, Candidate
	Term     uint64 `json:"term,omitempty"`
	Applied  uint64 `json:"applied_index"` // the last entry its state applied
	Commit   uint64 `json:"commit_index"`
	Problem  string `json:"problem,omitempty"`     // why it is not healthy
	Reported string `json:"reported_by,omitempty"` // the node that answered for it
	// ClockOffset is its clock minus the clock of the node that answered
	// the status, in seconds (measured over one request: within half its
	// round trip).
	ClockOffset float64 `json:"clock_offset_seconds"`
	NodeUsage
}

// AddMember is the body of POST /_fedgate/admin/cluster/members.
type AddMember struct {
	Address string `json:"address"`
}
