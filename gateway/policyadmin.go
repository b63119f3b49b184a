package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/policies"
)

// PolicyAdmin is what the admin API's policy routes need; cmd/fedgate
// implements it (it opens stores, which the gateway knows nothing about).
// Errors of the region's replicated state are the backend sentinels;
// a refused change wraps backend.ErrPolicyChange or backend.ErrStalePolicy.
type PolicyAdmin interface {
	// ActivePolicy returns the region's active policy file.
	ActivePolicy(ctx context.Context) (adminapi.Policy, error)
	// ApplyPolicy validates a policy file and makes it the region's active
	// policy through Raft, or changes nothing and says why.
	ApplyPolicy(ctx context.Context, req adminapi.PolicyApply) (adminapi.Policy, error)
}

func (s *Server) policyRoutes(r chi.Router) {
	r.Get("/policy", func(w http.ResponseWriter, req *http.Request) {
		if s.cfg.Policy == nil {
			policyFail(w, errors.New("this server has no policy administration"))
			return
		}
		p, err := s.cfg.Policy.ActivePolicy(req.Context())
		if err != nil {
			policyFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
	r.Put("/policy", func(w http.ResponseWriter, req *http.Request) {
		var body adminapi.PolicyApply
		if err := readJSON(req, &body); err != nil {
			policyFail(w, err)
			return
		}
		if s.cfg.Policy == nil {
			policyFail(w, errors.New("this server has no policy administration"))
			return
		}
		p, err := s.cfg.Policy.ApplyPolicy(req.Context(), body)
		if err != nil {
			policyFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
}

func policyFail(w http.ResponseWriter, err error) {
	var perr policies.ErrorList
	switch {
	case errors.As(err, &perr):
		writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: err.Error(), Code: "InvalidPolicy"})
	case errors.Is(err, backend.ErrStalePolicy), errors.Is(err, backend.ErrPolicyChange):
		writeJSON(w, http.StatusConflict, adminapi.Error{Error: err.Error(), Code: "PolicyConflict"})
	default:
		clusterFail(w, err)
	}
}
