package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
)

// The admin API's cache routes (what `fedgate cache ...` talks to):
//
//	POST   /_fedgate/admin/cache/jobs       adminapi.Preload -> adminapi.Job (201)
//	GET    /_fedgate/admin/cache/jobs       -> []adminapi.Job, oldest first
//	GET    /_fedgate/admin/cache/jobs/{id}  -> adminapi.Job
//	DELETE /_fedgate/admin/cache/jobs/{id}  -> adminapi.Cancel: cancels a running
//	                                           job, forgets a finished one
//	GET    /_fedgate/admin/cache/pins       -> []adminapi.Pin
//	POST   /_fedgate/admin/cache/pins       adminapi.Pin -> adminapi.Pin (201)
//	DELETE /_fedgate/admin/cache/pins       adminapi.Pin -> 204

func (s *Server) cacheRoutes(r chi.Router) {
	r.Post("/cache/jobs", s.adminStartPreload)
	r.Get("/cache/jobs", s.adminListJobs)
	r.Get("/cache/jobs/{id}", s.adminGetJob)
	r.Delete("/cache/jobs/{id}", s.adminCancelJob)
	r.Get("/cache/pins", s.adminListPins)
	r.Post("/cache/pins", s.adminPin)
	r.Delete("/cache/pins", s.adminUnpin)
}

func adminJob(st backend.PreloadStatus) adminapi.Job {
	j := adminapi.Job{ID: st.ID, Bucket: st.Bucket, Prefix: st.Prefix, Pin: st.Pin, Created: s3Time(st.Created),
		State: st.State(), Done: st.Done, Canceled: st.Canceled, Objects: st.Objects, TotalObjects: st.TotalObjects,
		Bytes: st.Bytes, TotalBytes: st.TotalBytes, Errors: st.Errors, Pending: st.Pending}
	if st.Uncached {
		j.Note = fmt.Sprintf("bucket %q is read directly from a local directory and never cached: there is nothing to preload", st.Bucket)
	}
	if len(st.Nodes) > 0 {
		j.Nodes = make(map[string]adminapi.JobNode, len(st.Nodes))
		for id, p := range st.Nodes {
			j.Nodes[id] = adminapi.JobNode{After: p.After, Objects: p.Objects, Bytes: p.Bytes, Errors: p.Errors, Done: p.Done, Updated: s3Time(p.Updated)}
		}
	}
	return j
}

// cacheFail answers err of a cache route; bucket, prefix and id name what
// the request was about.
func cacheFail(w http.ResponseWriter, err error, bucket, prefix, id string) {
	switch {
	case errors.Is(err, backend.ErrNoSuchJob):
		writeJSON(w, http.StatusNotFound, adminapi.Error{Error: fmt.Sprintf("preload job %q does not exist", id), Code: "NoSuchJob"})
	case errors.Is(err, backend.ErrNoSuchPin):
		writeJSON(w, http.StatusNotFound, adminapi.Error{Error: fmt.Sprintf("bucket %q has no pin with prefix %q", bucket, prefix), Code: "NoSuchPin"})
	case errors.Is(err, backend.ErrInvalidPrefix):
		writeJSON(w, http.StatusBadRequest, adminapi.Error{Error: fmt.Sprintf("prefix %q: want at most 1024 bytes and no NUL", prefix), Code: "InvalidArgument"})
	case regionError(err) != nil, errors.Is(err, context.DeadlineExceeded):
		clusterFail(w, err)
	default:
		adminFail(w, err, "", bucket)
	}
}

func (s *Server) adminStartPreload(w http.ResponseWriter, r *http.Request) {
	var req adminapi.Preload
	if err := readJSON(r, &req); err != nil {
		cacheFail(w, err, "", "", "")
		return
	}
	if req.Bucket == "" {
		cacheFail(w, errors.New("give the bucket to preload"), "", "", "")
		return
	}
	st, err := s.admin.StartPreload(r.Context(), req.Bucket, req.Prefix, req.Pin)
	if err != nil {
		cacheFail(w, err, req.Bucket, req.Prefix, "")
		return
	}
	writeJSON(w, http.StatusCreated, adminJob(st))
}

func (s *Server) adminListJobs(w http.ResponseWriter, _ *http.Request) {
	out := []adminapi.Job{}
	for _, st := range s.admin.Jobs() {
		out = append(out, adminJob(st))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminGetJob(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	st, err := s.admin.Job(id)
	if err != nil {
		cacheFail(w, err, "", "", id)
		return
	}
	writeJSON(w, http.StatusOK, adminJob(st))
}

func (s *Server) adminCancelJob(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	removed, err := s.admin.CancelPreload(r.Context(), id)
	if err != nil {
		cacheFail(w, err, "", "", id)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Cancel{ID: id, Removed: removed})
}

func (s *Server) adminListPins(w http.ResponseWriter, _ *http.Request) {
	out := []adminapi.Pin{}
	for _, p := range s.admin.Pins() {
		out = append(out, adminapi.Pin{Bucket: p.Bucket, Prefix: p.Prefix, Created: s3Time(p.Created)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Bucket < out[j].Bucket || out[i].Bucket == out[j].Bucket && out[i].Prefix < out[j].Prefix
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminPin(w http.ResponseWriter, r *http.Request) {
	var req adminapi.Pin
	if err := readJSON(r, &req); err != nil {
		cacheFail(w, err, "", "", "")
		return
	}
	if req.Bucket == "" {
		cacheFail(w, errors.New("give the bucket to pin"), "", "", "")
		return
	}
	p, err := s.admin.Pin(r.Context(), req.Bucket, req.Prefix)
	if err != nil {
		cacheFail(w, err, req.Bucket, req.Prefix, "")
		return
	}
	writeJSON(w, http.StatusCreated, adminapi.Pin{Bucket: p.Bucket, Prefix: p.Prefix, Created: s3Time(p.Created)})
}

func (s *Server) adminUnpin(w http.ResponseWriter, r *http.Request) {
	var req adminapi.Pin
	if err := readJSON(r, &req); err != nil {
		cacheFail(w, err, "", "", "")
		return
	}
	if req.Bucket == "" {
		cacheFail(w, errors.New("give the bucket to unpin"), "", "", "")
		return
	}
	if err := s.admin.Unpin(r.Context(), req.Bucket, req.Prefix); err != nil {
		cacheFail(w, err, req.Bucket, req.Prefix, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
