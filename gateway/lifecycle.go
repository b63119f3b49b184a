package gateway

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/lifecycle"
)

// S3's bucket lifecycle configuration (docs/lifecycle.md). The document is
// parsed and validated by package lifecycle and stored, re-encoded, as the
// bucket's ConfLifecycle configuration; the region leader's runner
// (federation) applies it.

// maxLifecycleBody bounds a PutBucketLifecycleConfiguration body (1000
// rules of a few hundred bytes each).
const maxLifecycleBody = 1 << 20

// lifecycleError is the S3 error of a configuration package lifecycle
// refused.
func lifecycleError(err error) error {
	var e *lifecycle.Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Code == lifecycle.CodeMalformedXML {
		return errMalformedXML
	}
	return s3err.New(e.Code, e.Message)
}

func (s *Server) getBucketLifecycle(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	doc, ok := b.Config(backend.ConfLifecycle)
	if !ok {
		return s3err.Newf(s3err.CodeNoSuchLifecycleConfiguration, "The lifecycle configuration does not exist: bucket %q has none.", b.Name())
	}
	cfg, err := lifecycle.ParseXML([]byte(doc))
	if err != nil {
		return err // stored configurations were validated when put
	}
	out, err := cfg.XML(s3NS)
	if err != nil {
		return err
	}
	writeRawXML(q.w, out)
	return nil
}

func (s *Server) putBucketLifecycle(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	body, err := q.readDigested(maxLifecycleBody)
	if err != nil {
		return err
	}
	cfg, err := lifecycle.ParseXML(body)
	if err != nil {
		return lifecycleError(err)
	}
	doc, err := cfg.XML("")
	if err != nil {
		return err
	}
	if len(doc) > backend.MaxConfigSize {
		return s3err.Newf(s3err.CodeInvalidRequest, "The lifecycle configuration is %d bytes once encoded; fedgate keeps at most %d bytes per bucket configuration.", len(doc), backend.MaxConfigSize)
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfLifecycle, string(doc)); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// writeRawXML writes an encoded XML document after the XML header.
func writeRawXML(w http.ResponseWriter, doc []byte) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(doc)
}
