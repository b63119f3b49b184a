package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/federation/placement"
)

// AdminRepair is the body of POST /_fedgate/admin/repair.
type AdminRepair struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
}

// AdminRepairLine is one line of the answer, a stream of JSON lines:
// progress lines, then one with Stats (or Error).
type AdminRepairLine struct {
	Done  int64                  `json:"done"`
	Total int64                  `json:"total"`
	Stats *placement.RepairStats `json:"stats,omitempty"`
	Error string                 `json:"error,omitempty"`
}

func (s *Server) repairRoutes(r chi.Router) {
	r.Post("/repair", func(w http.ResponseWriter, req *http.Request) {
		var body AdminRepair
		if err := readJSON(req, &body); err != nil || body.Bucket == "" {
			writeJSON(w, http.StatusBadRequest, AdminError{Error: "give {\"bucket\": NAME, \"prefix\": PREFIX}", Code: "InvalidRequest"})
			return
		}
		if _, err := s.be.Bucket(body.Bucket); err != nil {
			writeJSON(w, http.StatusNotFound, AdminError{Error: "no bucket " + body.Bucket, Code: "NoSuchBucket"})
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w)
		var mu sync.Mutex
		last := time.Time{}
		progress := func(done, total int64) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < 200*time.Millisecond && done != total {
				return
			}
			last = time.Now()
			_ = enc.Encode(AdminRepairLine{Done: done, Total: total})
			_ = rc.Flush()
		}
		stats, err := s.admin.Repair(req.Context(), body.Bucket, body.Prefix, progress)
		mu.Lock()
		defer mu.Unlock()
		line := AdminRepairLine{Done: stats.Objects, Total: stats.Objects, Stats: &stats}
		if err != nil {
			line.Error = err.Error()
			if errors.Is(err, backend.ErrNothingToRepair) {
				line.Stats = nil
			}
		}
		_ = enc.Encode(line)
		_ = rc.Flush()
	})
}
