package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
)

// The admin API (what `fedgate user ...` talks to). Requests are SigV4-signed
// with root credentials; bodies and answers are JSON.

func (s *Server) adminRoutes(r chi.Router) {
	r.Use(s.adminAuth)
	r.Get("/users", s.adminListUsers)
	r.Post("/users", s.adminAddUser)
	r.Delete("/users/{name}", s.adminRemoveUser)
	r.Post("/users/{name}/grants", s.adminGrant)
	r.Delete("/users/{name}/grants/{bucket}", s.adminRevoke)
	s.clusterRoutes(r)
	s.regionRoutes(r)
	s.policyRoutes(r)
	s.chartsRoutes(r)
	if s.admin != nil {
		s.cacheRoutes(r)
		s.egressRoutes(r)
		s.repairRoutes(r)
	}
	r.Get("/version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
	})
}

// adminAuth admits only SigV4 requests signed by the root user.
func (s *Server) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := infoFrom(r.Context())
		ri.op = "Admin"
		res, err := s.verifier.Verify(r)
		if err != nil {
			se := toS3(err)
			writeJSON(w, se.Status, adminapi.Error{Error: se.Message, Code: se.Code})
			return
		}
		u, ok := s.be.Users().ByAccessKey(res.AccessKey)
		if res.Anonymous || !ok || !u.Root {
			writeJSON(w, http.StatusForbidden, adminapi.Error{Error: "the admin API needs the root user's credentials", Code: "AccessDenied"})
			return
		}
		ri.setUser(u.Name)
		if res.Body != nil {
			r.Body = res.Body
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1") // as the S3 routes' 503s
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// adminFail answers err; user and bucket name what the request was about,
// so the message can say which one is missing.
func adminFail(w http.ResponseWriter, err error, user, bucket string) {
	status, code, msg := http.StatusBadRequest, "InvalidRequest", err.Error()
	switch se := regionError(err); {
	case se != nil:
		status, code, msg = se.Status, se.Code, se.Message
	case errors.Is(err, backend.ErrNoSuchUser):
		status, code, msg = http.StatusNotFound, "NoSuchUser", fmt.Sprintf("user %q does not exist", user)
	case errors.Is(err, backend.ErrNoSuchBucket):
		status, code, msg = http.StatusNotFound, "NoSuchBucket", fmt.Sprintf("bucket %q does not exist", bucket)
	case errors.Is(err, backend.ErrUserExists):
		status, code, msg = http.StatusConflict, "Conflict", fmt.Sprintf("user %q already exists", user)
	case errors.Is(err, backend.ErrUserOwnsBuckets):
		status, code, msg = http.StatusConflict, "UserOwnsBuckets", strings.TrimPrefix(msg, backend.ErrUserOwnsBuckets.Error()+": ")
	case errors.Is(err, backend.ErrAccessKeyInUse):
		status, code, msg = http.StatusConflict, "Conflict", "that access key belongs to another user"
	case errors.Is(err, backend.ErrAccessDenied):
		status, code = http.StatusForbidden, "AccessDenied"
	}
	writeJSON(w, status, adminapi.Error{Error: msg, Code: code})
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("malformed JSON body: " + err.Error())
	}
	return nil
}

func (s *Server) adminListUsers(w http.ResponseWriter, _ *http.Request) {
	out := []adminapi.User{}
	for _, u := range s.be.Users().List() {
		out = append(out, adminapi.User{Name: u.Name, AccessKey: u.AccessKey, Root: u.Root, Created: s3Time(u.Created), Grants: u.Grants})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminAddUser(w http.ResponseWriter, r *http.Request) {
	var req adminapi.AddUser
	if err := readJSON(r, &req); err != nil {
		adminFail(w, err, "", "")
		return
	}
	c, err := s.be.Users().Add(r.Context(), req.Name, backend.Credentials{AccessKey: req.AccessKey, SecretKey: req.SecretKey})
	if err != nil {
		adminFail(w, err, req.Name, "")
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) adminRemoveUser(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := s.be.Users().Remove(r.Context(), name); err != nil {
		adminFail(w, err, name, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rootUser() backend.User {
	return backend.User{Name: backend.RootUser, Root: true}
}

func (s *Server) adminGrant(w http.ResponseWriter, r *http.Request) {
	var req adminapi.Grant
	name := chi.URLParam(r, "name")
	if err := readJSON(r, &req); err != nil {
		adminFail(w, err, name, "")
		return
	}
	if err := s.be.Users().Grant(r.Context(), s.rootUser(), name, req.Bucket, req.Perm); err != nil {
		adminFail(w, err, name, req.Bucket)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) adminRevoke(w http.ResponseWriter, r *http.Request) {
	name, bucket := chi.URLParam(r, "name"), chi.URLParam(r, "bucket")
	if err := s.be.Users().Revoke(r.Context(), s.rootUser(), name, bucket); err != nil {
		adminFail(w, err, name, bucket)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
