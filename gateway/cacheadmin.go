package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/backend"
)

// The admin API's cache routes (what `fedgate cache ...` talks to):
//
//	POST   /_fedgate/admin/cache/jobs       AdminPreload -> AdminJob (201)
//	GET    /_fedgate/admin/cache/jobs       -> []AdminJob, oldest first
//	GET    /_fedgate/admin/cache/jobs/{id}  -> AdminJob
//	DELETE /_fedgate/admin/cache/jobs/{id}  -> AdminCancel: cancels a running
//	                                           job, forgets a finished one
//	GET    /_fedgate/admin/cache/pins       -> []AdminPin
//	POST   /_fedgate/admin/cache/pins       AdminPin -> AdminPin (201)
//	DELETE /_fedgate/admin/cache/pins       AdminPin -> 204

// AdminPreload is the body of POST /_fedgate/admin/cache/jobs.
type AdminPreload struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	// Pin pins bucket/prefix before the job starts.
	Pin bool `json:"pin,omitempty"`
}

// AdminJob is one preload job with its progress summed over the region.
type AdminJob struct {
	ID      string `json:"id"`
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Pin     bool   `json:"pin,omitempty"`
	Created string `json:"created"`
	// State is "running", "done" or "canceled".
	State    string `json:"state"`
	Done     bool   `json:"done"`
	Canceled bool   `json:"canceled,omitempty"`
	// Objects is how many objects every node has finished; TotalObjects
	// and TotalBytes are what the job found to read (0 while unknown).
	Objects      int64 `json:"objects"`
	TotalObjects int64 `json:"total_objects"`
	// Bytes is the bytes of chunks warmed, over all nodes.
	Bytes      int64 `json:"bytes"`
	TotalBytes int64 `json:"total_bytes"`
	// Errors counts chunks that could not be cached.
	Errors int64 `json:"errors,omitempty"`
	// Pending names the members that have not finished their share.
	Pending []string `json:"pending,omitempty"`
	// Note says why there is nothing to do, when so.
	Note  string                  `json:"note,omitempty"`
	Nodes map[string]AdminJobNode `json:"nodes,omitempty"`
}

// AdminJobNode is one node's share of a preload job.
type AdminJobNode struct {
	After   string `json:"after,omitempty"` // the last key it finished
	Objects int64  `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Errors  int64  `json:"errors,omitempty"`
	Done    bool   `json:"done"`
	Updated string `json:"updated"`
}

// AdminCancel is the answer of DELETE /_fedgate/admin/cache/jobs/{id}.
type AdminCancel struct {
	ID string `json:"id"`
	// Removed: the job had finished (or was canceled) and is forgotten;
	// otherwise it is now canceled.
	Removed bool `json:"removed"`
}

// AdminPin is a cache pin (and the body of POST and DELETE
// /_fedgate/admin/cache/pins).
type AdminPin struct {
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Created string `json:"created,omitempty"`
}

func (s *Server) cacheRoutes(r chi.Router) {
	r.Post("/cache/jobs", s.adminStartPreload)
	r.Get("/cache/jobs", s.adminListJobs)
	r.Get("/cache/jobs/{id}", s.adminGetJob)
	r.Delete("/cache/jobs/{id}", s.adminCancelJob)
	r.Get("/cache/pins", s.adminListPins)
	r.Post("/cache/pins", s.adminPin)
	r.Delete("/cache/pins", s.adminUnpin)
}

func adminJob(st backend.PreloadStatus) AdminJob {
	j := AdminJob{ID: st.ID, Bucket: st.Bucket, Prefix: st.Prefix, Pin: st.Pin, Created: s3Time(st.Created),
		State: st.State(), Done: st.Done, Canceled: st.Canceled, Objects: st.Objects, TotalObjects: st.TotalObjects,
		Bytes: st.Bytes, TotalBytes: st.TotalBytes, Errors: st.Errors, Pending: st.Pending}
	if st.Uncached {
		j.Note = fmt.Sprintf("bucket %q is read directly from a local directory and never cached: there is nothing to preload", st.Bucket)
	}
	if len(st.Nodes) > 0 {
		j.Nodes = make(map[string]AdminJobNode, len(st.Nodes))
		for id, p := range st.Nodes {
			j.Nodes[id] = AdminJobNode{After: p.After, Objects: p.Objects, Bytes: p.Bytes, Errors: p.Errors, Done: p.Done, Updated: s3Time(p.Updated)}
		}
	}
	return j
}

// cacheFail answers err of a cache route; bucket, prefix and id name what
// the request was about.
func cacheFail(w http.ResponseWriter, err error, bucket, prefix, id string) {
	switch {
	case errors.Is(err, backend.ErrNoSuchJob):
		writeJSON(w, http.StatusNotFound, AdminError{Error: fmt.Sprintf("preload job %q does not exist", id), Code: "NoSuchJob"})
	case errors.Is(err, backend.ErrNoSuchPin):
		writeJSON(w, http.StatusNotFound, AdminError{Error: fmt.Sprintf("bucket %q has no pin with prefix %q", bucket, prefix), Code: "NoSuchPin"})
	case errors.Is(err, backend.ErrInvalidPrefix):
		writeJSON(w, http.StatusBadRequest, AdminError{Error: fmt.Sprintf("prefix %q: want at most 1024 bytes and no NUL", prefix), Code: "InvalidArgument"})
	case regionError(err) != nil, errors.Is(err, context.DeadlineExceeded):
		clusterFail(w, err)
	default:
		adminFail(w, err, "", bucket)
	}
}

func (s *Server) adminStartPreload(w http.ResponseWriter, r *http.Request) {
	var req AdminPreload
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
	out := []AdminJob{}
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
	writeJSON(w, http.StatusOK, AdminCancel{ID: id, Removed: removed})
}

func (s *Server) adminListPins(w http.ResponseWriter, _ *http.Request) {
	out := []AdminPin{}
	for _, p := range s.admin.Pins() {
		out = append(out, AdminPin{Bucket: p.Bucket, Prefix: p.Prefix, Created: s3Time(p.Created)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Bucket < out[j].Bucket || out[i].Bucket == out[j].Bucket && out[i].Prefix < out[j].Prefix
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminPin(w http.ResponseWriter, r *http.Request) {
	var req AdminPin
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
	writeJSON(w, http.StatusCreated, AdminPin{Bucket: p.Bucket, Prefix: p.Prefix, Created: s3Time(p.Created)})
}

func (s *Server) adminUnpin(w http.ResponseWriter, r *http.Request) {
	var req AdminPin
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
