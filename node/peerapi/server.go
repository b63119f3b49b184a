package peerapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Backend is the node's Raft side as the server answers for it.
type Backend interface {
	// Info describes this node.
	Info() Info
	// AddVoter adds a member as the leader; elsewhere it returns a
	// *regionstate.NotLeaderError.
	AddVoter(ctx context.Context, j JoinRequest) error
	// RemoveServer removes a member as the leader.
	RemoveServer(ctx context.Context, id string) error
	// ApplyEncoded applies an encoded command as the leader.
	ApplyEncoded(ctx context.Context, data []byte) (uint64, error)
	IsLeader() bool
	// ReadIndex is the leader's read index (regionstate.Node.ReadIndex).
	ReadIndex(ctx context.Context) (uint64, error)
	// KnownHTTP is a member's S3 address ("": unknown), for "not the
	// leader" answers.
	KnownHTTP(id string) string
}

// Data is what the staging and chunk routes serve: a
// *federation.Namespace.
type Data interface {
	StageHere(ctx context.Context, id string, body io.Reader, size int64) error
	OpenStaged(id string, off, length int64) (io.ReadCloser, int64, error)
	HoldStaged(ids []string, d time.Duration)
	ServeChunk(ctx context.Context, k cachetier.ChunkKey, off, length int64) (io.ReadCloser, error)
}

var _ Data = (*federation.Namespace)(nil)

// ServerConfig configures a Server.
type ServerConfig struct {
	// AccessKey and SecretKey are the region's root credentials: the only
	// ones the server accepts. SigningRegion is the S3 signing region.
	AccessKey, SecretKey, SigningRegion string
	Logger                              *slog.Logger
	// Backend is the node's Raft side, bound late: the server serves from
	// the moment it is built, before the node's Raft state is open, and
	// Backend returns nil until it is. Until then the server answers info
	// (on Discovery) and everything else with 503 and the code
	// regionstate.CodeClosed. Once it returns a Backend it must keep
	// returning that one.
	Backend func() Backend
	// Data is what the staging and chunk routes serve, bound late like
	// Backend: nil until the node's namespace is built (those routes
	// answer 503 until then); once non-nil, always the same.
	Data func() Data
}

// Server answers the internal API. It is built once, with everything it
// will serve given as late-bound funcs (ServerConfig.Backend and Data).
type Server struct {
	verifier *sigv4.Verifier
	log      *slog.Logger
	mux      *http.ServeMux
	getB     func() Backend
	getD     func() Data
}

// NewServer returns a server that answers 503 until cfg.Backend returns
// a Backend.
func NewServer(cfg ServerConfig) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ak, sk := cfg.AccessKey, cfg.SecretKey
	s := &Server{
		verifier: &sigv4.Verifier{Region: cfg.SigningRegion, Service: "s3", Lookup: func(k string) (string, bool) {
			return sk, k == ak
		}},
		log: log, getB: cfg.Backend, getD: cfg.Data,
	}
	if s.getB == nil {
		s.getB = func() Backend { return nil }
	}
	if s.getD == nil {
		s.getD = func() Data { return nil }
	}
	s.mux = s.routes()
	return s
}

func (s *Server) backend() (Backend, bool) {
	b := s.getB()
	return b, b != nil
}

// b is the Backend in a route: the routes run only once it is there.
func (s *Server) b() Backend { return s.getB() }

func (s *Server) data() (Data, bool) {
	d := s.getD()
	return d, d != nil
}

const deniedMsg = "the internal API needs a request signed with the root credentials given to this node"

func (s *Server) notStarted(w http.ResponseWriter) {
	writeJSON(w, http.StatusServiceUnavailable, ErrorBody{WireError: regionstate.WireError{Code: regionstate.CodeClosed,
		Message: "this node is still opening its Raft state"}})
}

// Handler serves the whole internal API (the internal port).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.verifier.Verify(r)
		if err != nil || res.Anonymous {
			msg := deniedMsg
			if err != nil {
				msg += ": " + err.Error()
			}
			writeJSON(w, http.StatusForbidden, ErrorBody{WireError: regionstate.WireError{Code: "access_denied", Message: msg}})
			return
		}
		if res.Body != nil {
			r.Body = res.Body
		}
		if _, ok := s.backend(); !ok {
			s.notStarted(w)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Discovery serves, on the S3 port, what a node started with --join
// S3-ADDRESS needs before it knows a peer's internal port: info.
func (s *Server) Discovery() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != Prefix+"info" {
			writeJSON(w, http.StatusNotFound, ErrorBody{WireError: regionstate.WireError{Code: "not_found",
				Message: "the internal API listens on each node's --internal-addr; the S3 port answers only " + Prefix + "info"}})
			return
		}
		if res, err := s.verifier.Verify(r); err != nil || res.Anonymous {
			writeJSON(w, http.StatusForbidden, ErrorBody{WireError: regionstate.WireError{Code: "access_denied", Message: deniedMsg}})
			return
		}
		b, ok := s.backend()
		if !ok {
			s.notStarted(w)
			return
		}
		writeJSON(w, http.StatusOK, b.Info())
	})
}

// routes are the internal API's routes; they run only once there is a
// Backend.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.b().Info())
	})
	mux.HandleFunc("POST "+Prefix+"join", func(w http.ResponseWriter, r *http.Request) {
		var j JoinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&j); err != nil {
			s.fail(w, fmt.Errorf("%w: malformed join request: %v", regionstate.ErrInvalid, err))
			return
		}
		if err := s.b().AddVoter(r.Context(), j); err != nil {
			s.fail(w, err)
			return
		}
		s.log.Info("cluster: added a member", "id", j.ID, "raft_addr", j.RaftAddr, "http_addr", j.HTTPAddr)
		writeJSON(w, http.StatusOK, s.b().Info())
	})
	mux.HandleFunc("POST "+Prefix+"remove", func(w http.ResponseWriter, r *http.Request) {
		var j RemoveRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&j); err != nil || j.ID == "" {
			s.fail(w, fmt.Errorf("%w: remove needs an id", regionstate.ErrInvalid))
			return
		}
		if err := s.b().RemoveServer(r.Context(), j.ID); err != nil {
			s.fail(w, err)
			return
		}
		s.log.Info("cluster: removed a member", "id", j.ID)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+Prefix+"apply", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			s.fail(w, err)
			return
		}
		idx, err := s.b().ApplyEncoded(r.Context(), data)
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, indexAnswer{Index: idx})
	})
	mux.HandleFunc("GET "+Prefix+"readindex", func(w http.ResponseWriter, r *http.Request) {
		if !s.b().IsLeader() {
			s.fail(w, &regionstate.NotLeaderError{})
			return
		}
		idx, err := s.b().ReadIndex(r.Context())
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, indexAnswer{Index: idx})
	})
	mux.HandleFunc("PUT "+Prefix+"stage/{id}", s.putStaged)
	mux.HandleFunc("GET "+Prefix+"stage/{id}", s.getStaged)
	mux.HandleFunc("POST "+Prefix+"hold", s.hold)
	mux.HandleFunc("GET "+Prefix+"chunk", s.getChunk)
	return mux
}

// fail answers err as an ErrorBody with a status that says what it is.
func (s *Server) fail(w http.ResponseWriter, err error) {
	eb := ErrorBody{WireError: *regionstate.ToWire(err)}
	status := http.StatusInternalServerError
	switch eb.Code {
	case regionstate.CodeNotLeader:
		status = http.StatusMisdirectedRequest
		if eb.LeaderID != "" {
			eb.LeaderHTTP = s.b().KnownHTTP(eb.LeaderID)
		}
	case regionstate.CodeNoLeader, regionstate.CodeClosed, regionstate.CodeLeadershipLost:
		status = http.StatusServiceUnavailable
	case regionstate.CodeInvalid, regionstate.CodeUnknownCommand:
		status = http.StatusBadRequest
	case regionstate.CodeCanceled, regionstate.CodeDeadlineExceeded:
		status = http.StatusGatewayTimeout
	case regionstate.CodeInternal:
	default: // a command's own error (bucket exists, no such user, ...)
		status = http.StatusConflict
	}
	writeJSON(w, status, eb)
}

func (s *Server) stillStarting(w http.ResponseWriter) {
	s.fail(w, fmt.Errorf("%w: this node is still starting", regionstate.ErrClosed))
}

func (s *Server) putStaged(w http.ResponseWriter, r *http.Request) {
	d, ok := s.data()
	if !ok {
		s.stillStarting(w)
		return
	}
	if r.ContentLength < 0 {
		http.Error(w, "a staged copy needs a Content-Length", http.StatusLengthRequired)
		return
	}
	err := d.StageHere(r.Context(), r.PathValue("id"), r.Body, r.ContentLength)
	switch {
	case errors.Is(err, federation.ErrStagingUnavailable):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, staging.ErrInvalidID), errors.Is(err, staging.ErrShortBody):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// hold keeps staged files for a peer's reader (HoldRequest).
func (s *Server) hold(w http.ResponseWriter, r *http.Request) {
	d, ok := s.data()
	if !ok {
		s.stillStarting(w)
		return
	}
	var req HoldRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Millis <= 0 || req.Millis > 10*60*1000 {
		http.Error(w, "want {\"ids\": [...], \"millis\": 1..600000}", http.StatusBadRequest)
		return
	}
	for _, id := range req.IDs {
		if !staging.ValidID(id) {
			http.Error(w, fmt.Sprintf("%v: %q", staging.ErrInvalidID, id), http.StatusBadRequest)
			return
		}
	}
	d.HoldStaged(req.IDs, time.Duration(req.Millis)*time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) getStaged(w http.ResponseWriter, r *http.Request) {
	d, ok := s.data()
	if !ok {
		s.stillStarting(w)
		return
	}
	off, err1 := strconv.ParseInt(r.URL.Query().Get("off"), 10, 64)
	n, err2 := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err1 != nil || err2 != nil {
		http.Error(w, "off and n must be integers", http.StatusBadRequest)
		return
	}
	rc, _, err := d.OpenStaged(r.PathValue("id"), off, n)
	switch {
	case errors.Is(err, staging.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// getChunk serves a peer's ReadChunk from this node's cache.
func (s *Server) getChunk(w http.ResponseWriter, r *http.Request) {
	d, ok := s.data()
	if !ok {
		s.stillStarting(w)
		return
	}
	q := r.URL.Query()
	var nums [4]int64
	for i, name := range []string{"size", "index", "off", "n"} {
		v, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil {
			http.Error(w, name+" must be an integer", http.StatusBadRequest)
			return
		}
		nums[i] = v
	}
	k := cachetier.ChunkKey{ObjectID: cachetier.ObjectID{Store: q.Get("store"), Key: q.Get("key"),
		Validator: store.Validator(q.Get("validator")), Size: nums[0]}, Index: nums[1]}
	off, n := nums[2], nums[3]
	rc, err := d.ServeChunk(r.Context(), k, off, n)
	if err != nil {
		status := http.StatusBadGateway
		switch {
		case errors.Is(err, store.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, store.ErrPreconditionFailed):
			status = http.StatusPreconditionFailed
		case errors.Is(err, cachetier.ErrInvalidRange):
			status = http.StatusRequestedRangeNotSatisfiable
		}
		http.Error(w, err.Error(), status)
		return
	}
	defer rc.Close()
	// Wait for the first byte before the status line, so an origin
	// failure on the owner is an error status, not a short body.
	br := bufio.NewReaderSize(rc, 64<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, br)
}
