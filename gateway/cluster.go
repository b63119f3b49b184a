package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/fedgate/fedgate/adminapi"
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
	ClusterStatus(ctx context.Context) (adminapi.Cluster, error)
	// AddMember asks the node serving S3 at address for its id and Raft
	// address and has the leader add it as a voter.
	AddMember(ctx context.Context, address string) (adminapi.Member, error)
	// RemoveMember has the leader remove the member with this id.
	RemoveMember(ctx context.Context, id string) error
	// Snapshot takes a Raft snapshot on this node now (and compacts its
	// log), returning the index it covers.
	Snapshot(ctx context.Context) (uint64, error)
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
		var body adminapi.AddMember
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
	writeJSON(w, status, adminapi.Error{Error: msg, Code: code})
}
