package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
)

func (s *Server) repairRoutes(r chi.Router) {
	r.Post("/repair", func(w http.ResponseWriter, req *http.Request) {
		var body adminapi.Repair
		if err := readJSON(req, &body); err != nil || body.Bucket == "" {
			writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "give {\"bucket\": NAME, \"prefix\": PREFIX}", Code: "InvalidRequest"})
			return
		}
		if _, err := s.be.Bucket(body.Bucket); err != nil {
			writeJSON(w, http.StatusNotFound, adminapi.Error{Error: "no bucket " + body.Bucket, Code: "NoSuchBucket"})
			return
		}
		// The answer starts with the first line, so a repair refused at
		// once (a single-store bucket) gets a plain error status instead.
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w)
		var mu sync.Mutex
		started := false
		send := func(l adminapi.RepairLine) {
			if !started {
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			_ = enc.Encode(l)
			_ = rc.Flush()
		}
		last := time.Time{}
		progress := func(p backend.RepairProgress) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < 200*time.Millisecond && p.Objects != p.Total {
				return
			}
			last = time.Now()
			send(adminapi.RepairLine{Done: p.Objects, Total: p.Total, BytesRead: p.BytesRead})
		}
		var found func(key string, stores []string)
		if body.DryRun {
			found = func(key string, stores []string) {
				mu.Lock()
				defer mu.Unlock()
				send(adminapi.RepairLine{Found: &adminapi.DegradedObject{Bucket: body.Bucket, Key: key, Stores: stores}})
			}
		}
		stats, err := s.admin.Repair(req.Context(), body.Bucket, body.Prefix, progress, found)
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, backend.ErrNothingToRepair) && !started {
			writeJSON(w, http.StatusConflict, adminapi.Error{Error: err.Error() + ": only replicated and erasure-coded buckets have copies or shards to rebuild", Code: "NothingToRepair"})
			return
		}
		line := adminapi.RepairLine{Done: stats.Objects, Total: stats.Objects, Stats: &stats}
		if err != nil {
			line.Error = err.Error()
			if errors.Is(err, backend.ErrNothingToRepair) {
				line.Stats = nil
			}
		}
		send(line)
	})
}
