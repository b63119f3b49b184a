package gateway

import (
	"bufio"
	"errors"
	"io"
	"net/http"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// serveVersion answers GET and HEAD of one version.
func (s *Server) serveVersion(q *request, withBody bool) error {
	b, check, err := s.objectFor(q)
	if err != nil {
		return err
	}
	ctx := q.r.Context()
	info, err := b.StatVersion(ctx, q.key, q.query.Get("versionId"))
	var dm *backend.DeleteMarkerError
	if errors.As(err, &dm) {
		// S3: a delete marker asked for by id is 405, with the marker's
		// headers.
		h := q.w.Header()
		h.Set("x-amz-delete-marker", "true")
		h.Set("x-amz-version-id", dm.VersionID)
		h.Set("Allow", "DELETE")
		return s3err.New(s3err.CodeMethodNotAllowed, "The specified method is not allowed against this resource: the version is a delete marker.")
	}
	if check != nil {
		if err := check(info, err); err != nil {
			return err
		}
	}
	if err != nil {
		return s.hideMissing(q, b, err)
	}
	return s.sendObject(q, info, withBody, s.opener(q, b, info))
}

// deleteObjectVersion removes one version for good.
func (s *Server) deleteObjectVersion(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	id := q.query.Get("versionId")
	marker, err := b.DeleteVersion(s.bypassContext(q.r.Context(), q, b, q.key), q.key, id)
	if err != nil {
		return err
	}
	h := q.w.Header()
	h.Set("x-amz-version-id", id)
	if marker {
		h.Set("x-amz-delete-marker", "true")
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getBucketVersioning(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, versioningConfiguration{Xmlns: s3NS, Status: b.Versioning()})
	return nil
}

func (s *Server) putBucketVersioning(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	var cfg versioningConfiguration
	if err := readXML(q.body, &cfg); err != nil {
		return err
	}
	if cfg.MfaDelete == "Enabled" {
		return errNotImplemented("MFA delete")
	}
	switch cfg.Status {
	case "Enabled", "Suspended":
	case "":
		if b.Versioning() == "" {
			q.w.WriteHeader(http.StatusOK) // nothing to change
			return nil
		}
		return s3err.New(s3err.CodeIllegalVersioningConfigurationException, "The Versioning element must be specified: Enabled or Suspended (versioning cannot be turned off, only suspended).")
	default:
		return s3err.Newf(s3err.CodeMalformedXML, "The Versioning Status %q is not valid: Enabled or Suspended.", cfg.Status)
	}
	if _, locked := lockConfig(b); locked && cfg.Status != "Enabled" {
		return s3err.New(s3err.CodeInvalidBucketState, "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.")
	}
	if err := b.SetVersioning(q.r.Context(), cfg.Status); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// deleteMarkerAnswer sets the headers of a read whose key's newest version
// is a delete marker (S3 answers 404 with them).
func deleteMarkerAnswer(w http.ResponseWriter, err error) {
	var dm *backend.DeleteMarkerError
	if errors.As(err, &dm) {
		w.Header().Set("x-amz-delete-marker", "true")
		w.Header().Set("x-amz-version-id", dm.VersionID)
	}
}

// opener is how sendObject reads the bytes of info from b.
func (s *Server) opener(q *request, b backend.Bucket, info store.ObjectInfo) func(start, n int64) (io.Reader, func(), error) {
	ctx := q.r.Context()
	return func(start, n int64) (io.Reader, func(), error) {
		rc, err := b.Open(ctx, info, start, n)
		if err == nil {
			// Wait for the first bytes before the status line: an origin
			// that keeps failing becomes a clean S3 error, not a short 200.
			br := bufio.NewReaderSize(rc, 64<<10)
			if _, err = br.Peek(1); err == nil || errors.Is(err, io.EOF) {
				return br, func() { rc.Close() }, nil
			}
			rc.Close()
		}
		if errors.Is(err, store.ErrPreconditionFailed) {
			b.Forget(q.key) // the next request looks the object up afresh
			return nil, nil, errObjectChanged
		}
		return nil, nil, err
	}
}
