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
	// DryRun checks only: nothing is written; each object that needs
	// repair comes as a line with Found.
	DryRun bool `json:"dry_run,omitempty"`
}

// AdminRepairLine is one line of the answer, a stream of JSON lines:
// progress lines, then one with Stats (or Error).
type AdminRepairLine struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// BytesRead is the bytes read so far to check and rebuild.
	BytesRead int64                  `json:"bytes_read,omitempty"`
	Stats     *placement.RepairStats `json:"stats,omitempty"`
	Error     string                 `json:"error,omitempty"`
	// Found is an object a dry run found in need of repair (the stores
	// lacking its copy, shards or manifest); Seen is not set.
	Found *AdminDegradedObject `json:"found,omitempty"`
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
		// The answer starts with the first line, so a repair refused at
		// once (a single-store bucket) gets a plain error status instead.
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w)
		var mu sync.Mutex
		started := false
		send := func(l AdminRepairLine) {
			if !started {
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			_ = enc.Encode(l)
			_ = rc.Flush()
		}
		last := time.Time{}
		progress := func(p placement.RepairProgress) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < 200*time.Millisecond && p.Objects != p.Total {
				return
			}
			last = time.Now()
			send(AdminRepairLine{Done: p.Objects, Total: p.Total, BytesRead: p.BytesRead})
		}
		ctx := req.Context()
		if body.DryRun {
			ctx = placement.DryRun(ctx, func(key string, stores []string) {
				mu.Lock()
				defer mu.Unlock()
				send(AdminRepairLine{Found: &AdminDegradedObject{Bucket: body.Bucket, Key: key, Stores: stores}})
			})
		}
		stats, err := s.admin.Repair(ctx, body.Bucket, body.Prefix, progress)
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, backend.ErrNothingToRepair) && !started {
			writeJSON(w, http.StatusConflict, AdminError{Error: err.Error() + ": only replicated and erasure-coded buckets have copies or shards to rebuild", Code: "NothingToRepair"})
			return
		}
		line := AdminRepairLine{Done: stats.Objects, Total: stats.Objects, Stats: &stats}
		if err != nil {
			line.Error = err.Error()
			if errors.Is(err, backend.ErrNothingToRepair) {
				line.Stats = nil
			}
		}
		send(line)
	})
}
