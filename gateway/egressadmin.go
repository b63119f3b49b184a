package gateway

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/store"
)

func (s *Server) egressRoutes(r chi.Router) {
	r.Get("/usage", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		out := adminapi.Usage{Bucket: q.Get("bucket"), Prefix: q.Get("prefix"), Direct: q.Get("direct") == "true"}
		if out.Bucket == "" {
			writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "bucket: required", Code: "InvalidArgument"})
			return
		}
		b, err := s.be.Bucket(out.Bucket)
		if err != nil {
			adminFail(w, err, "", out.Bucket)
			return
		}
		opts := store.ListOptions{Prefix: out.Prefix}
		if out.Direct {
			opts.Delimiter = "/"
		}
		for e, err := range b.List(req.Context(), opts) {
			if err != nil {
				clusterFail(w, err)
				return
			}
			if !e.IsPrefix {
				out.Objects++
				out.Bytes += e.Info.Size
			}
		}
		writeJSON(w, http.StatusOK, out)
	})

	r.Get("/egress", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		until := time.Now().UTC()
		since := until.Add(-30 * 24 * time.Hour)
		var err error
		if v := q.Get("since"); v != "" {
			if since, err = time.Parse(time.RFC3339, v); err != nil {
				writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "since: want an RFC 3339 time such as 2026-12-01T00:00:00Z", Code: "InvalidArgument"})
				return
			}
		}
		if v := q.Get("until"); v != "" {
			if until, err = time.Parse(time.RFC3339, v); err != nil {
				writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "until: want an RFC 3339 time such as 2026-12-02T00:00:00Z", Code: "InvalidArgument"})
				return
			}
		}
		if !since.Before(until) {
			writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: "since must be before until", Code: "InvalidArgument"})
			return
		}
		rows, err := s.admin.EgressLedger(req.Context(), since, until)
		if err != nil {
			clusterFail(w, err)
			return
		}
		out := adminapi.Egress{Region: s.cfg.RegionName, Location: s.admin.RegionLocation(), Since: since.UTC(), Until: until.UTC(), Rows: rows}
		if out.Rows == nil {
			out.Rows = []egress.Row{}
		}
		if s.admin.HasPolicy() && s.cfg.Policy != nil {
			if a, err := s.cfg.Policy.ActivePolicy(req.Context()); err == nil {
				out.PolicyYAML = a.YAML
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
}
