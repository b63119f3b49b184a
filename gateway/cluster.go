package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/go-chi/chi/v5"
)

// Cluster is what the admin API's cluster routes need from the node's
// region membership; package node implements it over package regionstate
// and the internal node-to-node API.
//
// Errors of the region's replicated state are the backend sentinels
// (backend.ErrNoLeader, ...), which the admin API answers like the S3
// routes do.
type Cluster interface {
	// ClusterStatus describes every member as this node sees it, asking
	// each one for its own Raft state (a member that does not answer is
	// not healthy).
	ClusterStatus(ctx context.Context) (AdminCluster, error)
	// AddMember asks the node serving S3 at address for its id and Raft
	// address and has the leader add it as a voter.
	AddMember(ctx context.Context, address string) (AdminMember, error)
	// RemoveMember has the leader remove the member with this id.
	RemoveMember(ctx context.Context, id string) error
	// Snapshot takes a Raft snapshot on this node now (and compacts its
	// log), returning the index it covers.
	Snapshot(ctx context.Context) (uint64, error)
}

// AdminCluster is the answer of GET /_fedgate/admin/cluster (and what
// `fedgate cluster status --json` prints).
type AdminCluster struct {
	Leader  string        `json:"leader"`
	Members []AdminMember `json:"members"`
	// DrainBacklog is the region's write-back journal: objects (and
	// deletes) acknowledged but not yet in their stores.
	DrainBacklog AdminBacklog `json:"drain_backlog"`
	// Lifecycle is the region leader's lifecycle runner: its last finished
	// pass and when the next is due (docs/lifecycle.md).
	Lifecycle AdminLifecycle `json:"lifecycle"`
}

// AdminLifecycle is the lifecycle runner's state: the last finished pass
// (zero LastEnd: none yet), its counts, and the next pass's due time.
type AdminLifecycle struct {
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

// AdminBacklog is the size of the write-back journal.
type AdminBacklog struct {
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
	DegradedReads   int64                 `json:"degraded_reads,omitempty"`
	DegradedObjects []AdminDegradedObject `json:"degraded_objects,omitempty"`
	UnhealthyStores []AdminStoreProblem   `json:"unhealthy_stores,omitempty"`
}

// AdminDegradedObject is an object read degraded: Stores lacked its copy
// or shards (`fedgate repair` rebuilds them).
type AdminDegradedObject struct {
	Bucket string    `json:"bucket"`
	Key    string    `json:"key"`
	Stores []string  `json:"stores"`
	Seen   time.Time `json:"seen"`
}

// AdminStoreProblem is a store failing a node's health check.
type AdminStoreProblem struct {
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
		u.DegradedObjects = append(u.DegradedObjects, AdminDegradedObject{Bucket: o.Bucket, Key: o.Key, Stores: o.Stores, Seen: o.Seen})
	}
	for _, s := range d.Stores {
		if !s.Healthy {
			u.UnhealthyStores = append(u.UnhealthyStores, AdminStoreProblem{Store: s.Store, Error: s.Error})
		}
	}
	return u
}

// AdminMember is one member of the region's Raft configuration.
type AdminMember struct {
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

// AdminAddMember is the body of POST /_fedgate/admin/cluster/members.
type AdminAddMember struct {
	Address string `json:"address"`
}

func (s *Server) clusterRoutes(r chi.Router) {
	r.Get("/cluster", func(w http.ResponseWriter, req *http.Request) {
		if s.cfg.Cluster == nil {
			clusterFail(w, errors.New("this server has no cluster support"))
			return
		}
		st, err := s.cfg.Cluster.ClusterStatus(req.Context())
		if err != nil {
			clusterFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	r.Post("/cluster/members", func(w http.ResponseWriter, req *http.Request) {
		var body AdminAddMember
		if err := readJSON(req, &body); err != nil {
			clusterFail(w, err)
			return
		}
		if s.cfg.Cluster == nil || body.Address == "" {
			clusterFail(w, errors.New("give the new node's S3 address (its --listen)"))
			return
		}
		m, err := s.cfg.Cluster.AddMember(req.Context(), body.Address)
		if err != nil {
			clusterFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, m)
	})
	r.Post("/cluster/snapshot", func(w http.ResponseWriter, req *http.Request) {
		if s.cfg.Cluster == nil {
			clusterFail(w, errors.New("this server has no cluster support"))
			return
		}
		idx, err := s.cfg.Cluster.Snapshot(req.Context())
		if err != nil {
			clusterFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]uint64{"index": idx})
	})
	r.Delete("/cluster/members/{id}", func(w http.ResponseWriter, req *http.Request) {
		if s.cfg.Cluster == nil {
			clusterFail(w, errors.New("this server has no cluster support"))
			return
		}
		if err := s.cfg.Cluster.RemoveMember(req.Context(), chi.URLParam(req, "id")); err != nil {
			clusterFail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func clusterFail(w http.ResponseWriter, err error) {
	status, code, msg := http.StatusBadRequest, "InvalidRequest", err.Error()
	if se := regionError(err); se != nil {
		status, code, msg = se.Status, se.Code, se.Message
	} else if errors.Is(err, context.DeadlineExceeded) {
		status, code = http.StatusGatewayTimeout, "Timeout"
	}
	writeJSON(w, status, AdminError{Error: msg, Code: code})
}
