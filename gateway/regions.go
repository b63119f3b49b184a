package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/go-chi/chi/v5"
)

// Regions is what `fedgate region status` asks of a node of a peered
// region (docs/regions.md); nil on a server without the catalog.
type Regions interface {
	RegionStatus(ctx context.Context) (adminapi.Regions, error)
}

func (s *Server) regionRoutes(r chi.Router) {
	r.Get("/regions", func(w http.ResponseWriter, req *http.Request) {
		if s.cfg.Regions == nil {
			clusterFail(w, errors.New("this server has no region support"))
			return
		}
		st, err := s.cfg.Regions.RegionStatus(req.Context())
		if err != nil {
			clusterFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}
