package gateway

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// S3 Object Lock (docs/versioning.md, Object Lock): the bucket's
// ObjectLockConfiguration (ConfObjectLock), each version's retention and
// legal hold (Bucket.SetObjectLock; a new version's in the reserved
// metadata entry backend.MetaObjectLock), enforced below the gateway by the
// region state.

type objectLockConfiguration struct {
	XMLName           xml.Name        `xml:"ObjectLockConfiguration"`
	Xmlns             string          `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string          `xml:"ObjectLockEnabled,omitempty"`
	Rule              *objectLockRule `xml:"Rule,omitempty"`
}

type objectLockRule struct {
	DefaultRetention *defaultRetention `xml:"DefaultRetention"`
}

type defaultRetention struct {
	Mode  string `xml:"Mode,omitempty"`
	Days  *int   `xml:"Days,omitempty"`
	Years *int   `xml:"Years,omitempty"`
}

type retentionDoc struct {
	XMLName         xml.Name `xml:"Retention"`
	Xmlns           string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

type legalHoldDoc struct {
	XMLName xml.Name `xml:"LegalHold"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:"Status"`
}

var errNoLockConfig = s3err.New(s3err.CodeInvalidRequest, "Bucket is missing Object Lock Configuration")

// lockConfig returns the bucket's object lock configuration (ok false:
// object lock is not enabled).
func lockConfig(b backend.Bucket) (objectLockConfiguration, bool) {
	doc, ok := b.Config(backend.ConfObjectLock)
	if !ok {
		return objectLockConfiguration{}, false
	}
	var c objectLockConfiguration
	_ = decodeXML([]byte(doc), &c) // validated when put
	return c, true
}

// enabledLockConfig is the configuration CreateBucket with
// x-amz-bucket-object-lock-enabled sets.
func enabledLockConfig() string {
	return encodeLockConfig(objectLockConfiguration{ObjectLockEnabled: "Enabled"})
}

func encodeLockConfig(c objectLockConfiguration) string {
	c.Xmlns = s3NS
	var sb strings.Builder
	_ = xml.NewEncoder(&sb).Encode(c)
	return sb.String()
}

func (s *Server) getObjectLockConfiguration(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	c, ok := lockConfig(b)
	if !ok {
		return s3err.New(s3err.CodeObjectLockConfigurationNotFoundError, "")
	}
	c.Xmlns = s3NS
	writeXML(q.w, http.StatusOK, c)
	return nil
}

// readLockBody reads a PutObjectLockConfiguration, PutObjectRetention or
// PutObjectLegalHold body: S3 requires Content-MD5 (the aws CLI sends it);
// an x-amz-checksum-* of an SDK's flexible checksums does as well. The
// digest is verified.
func (q *request) readLockBody(v any) error {
	if !hasBodyDigest(q.r.Header) {
		return s3err.New(s3err.CodeInvalidRequest, "Missing required header for this request: Content-MD5 (or an x-amz-checksum-* header).")
	}
	body, err := checksum.NewReader(q.r.Header, q.body, q.trailer)
	if err != nil {
		return err
	}
	return readXML(body, v)
}

func (s *Server) putObjectLockConfiguration(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	var c objectLockConfiguration
	if err := q.readLockBody(&c); err != nil {
		return err
	}
	if c.ObjectLockEnabled != "Enabled" {
		return errMalformedXML
	}
	if c.Rule != nil {
		d := c.Rule.DefaultRetention
		switch {
		case d == nil, d.Mode != backend.LockGovernance && d.Mode != backend.LockCompliance, (d.Days == nil) == (d.Years == nil):
			return errMalformedXML
		case d.Days != nil && *d.Days <= 0, d.Years != nil && *d.Years <= 0:
			return s3err.New(s3err.CodeInvalidArgument, "Default retention period must be a positive integer value.")
		case d.Days != nil && *d.Days > 36500, d.Years != nil && *d.Years > 100:
			return s3err.New(s3err.CodeInvalidArgument, "Default retention period is too large.")
		}
	}
	if b.Versioning() != "Enabled" {
		if _, ok := lockConfig(b); !ok {
			return s3err.New(s3err.CodeInvalidBucketState, "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration")
		}
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfObjectLock, encodeLockConfig(c)); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// lockedVersion stats the version a ?retention or ?legal-hold request
// names (its versionId, else the current one) and returns its lock.
func (s *Server) lockedVersion(q *request, b backend.Bucket) (backend.ObjectLock, error) {
	if _, ok := lockConfig(b); !ok {
		return backend.ObjectLock{}, errNoLockConfig
	}
	var info store.ObjectInfo
	var err error
	if id := q.query.Get("versionId"); id != "" {
		info, err = b.StatVersion(q.r.Context(), q.key, id)
	} else {
		info, err = b.Stat(q.r.Context(), q.key)
	}
	if err != nil {
		return backend.ObjectLock{}, err
	}
	return backend.ParseObjectLock(info.User[backend.MetaObjectLock])
}

func (s *Server) getObjectRetention(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	l, err := s.lockedVersion(q, b)
	if err != nil {
		return err
	}
	if l.Mode == "" {
		return s3err.New(s3err.CodeNoSuchObjectLockConfiguration, "")
	}
	writeXML(q.w, http.StatusOK, retentionDoc{Xmlns: s3NS, Mode: l.Mode, RetainUntilDate: lockTime(l.RetainUntil)})
	return nil
}

func (s *Server) getObjectLegalHold(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	l, err := s.lockedVersion(q, b)
	if err != nil {
		return err
	}
	if !l.LegalHold {
		return s3err.New(s3err.CodeNoSuchObjectLockConfiguration, "")
	}
	writeXML(q.w, http.StatusOK, legalHoldDoc{Xmlns: s3NS, Status: "ON"})
	return nil
}

func lockTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// parseLockTime reads a retain-until date (ISO 8601, as S3 takes it).
func parseLockTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z0700"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, s3err.Newf(s3err.CodeInvalidArgument, "The retain until date %q is not a valid ISO 8601 date.", v)
}

var errPastRetention = s3err.New(s3err.CodeInvalidArgument, "The retain until date must be in the future!")

// bypasses reports whether the request asks to bypass governance-mode
// retention (x-amz-bypass-governance-retention: true) and its caller is
// allowed to (s3:BypassGovernanceRetention: root, the bucket's owner, or a
// bucket policy). A caller without the permission is treated as not
// bypassing: a change or delete that needs it is refused as locked.
func (s *Server) bypasses(q *request, b backend.Bucket, key string) bool {
	if !strings.EqualFold(strings.TrimSpace(q.r.Header.Get("x-amz-bypass-governance-retention")), "true") {
		return false
	}
	return s.decide(q, b, "s3:BypassGovernanceRetention", key) == vAllow
}

// bypassContext marks ctx for Bucket.DeleteVersion when the request may
// bypass governance retention.
func (s *Server) bypassContext(ctx context.Context, q *request, b backend.Bucket, key string) context.Context {
	if s.bypasses(q, b, key) {
		return backend.WithBypassGovernance(ctx)
	}
	return ctx
}

// lockRequest authorizes a Put of a version's retention or legal hold,
// checks the bucket has object lock, and reads the request's document
// into doc.
func (s *Server) lockRequest(q *request, doc any) (backend.Bucket, error) {
	b, err := s.bucketFor(q)
	if err != nil {
		return nil, err
	}
	if _, ok := lockConfig(b); !ok {
		return nil, errNoLockConfig
	}
	if err := q.readLockBody(doc); err != nil {
		return nil, err
	}
	return b, nil
}

func (s *Server) putObjectRetention(q *request) error {
	var doc retentionDoc
	b, err := s.lockRequest(q, &doc)
	if err != nil {
		return err
	}
	c := backend.LockChange{Retention: true, Mode: doc.Mode, BypassGovernance: s.bypasses(q, b, q.key)}
	switch {
	case doc.Mode == "" && doc.RetainUntilDate == "":
		// No retention: removes it (a governance one, with bypass).
	case doc.Mode != backend.LockGovernance && doc.Mode != backend.LockCompliance, doc.RetainUntilDate == "":
		return errMalformedXML
	default:
		if c.RetainUntil, err = parseLockTime(doc.RetainUntilDate); err != nil {
			return err
		}
		if !c.RetainUntil.After(time.Now()) {
			return errPastRetention
		}
	}
	if err := b.SetObjectLock(q.r.Context(), q.key, q.query.Get("versionId"), c); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) putObjectLegalHold(q *request) error {
	var doc legalHoldDoc
	b, err := s.lockRequest(q, &doc)
	if err != nil {
		return err
	}
	if doc.Status != "ON" && doc.Status != "OFF" {
		return errMalformedXML
	}
	c := backend.LockChange{SetLegalHold: true, LegalHold: doc.Status == "ON"}
	if err := b.SetObjectLock(q.r.Context(), q.key, q.query.Get("versionId"), c); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// errLockNeedsDigest is S3's answer to a PutObject with x-amz-object-lock-*
// headers but neither Content-MD5 nor an x-amz-checksum-* (header or
// trailer): S3 wants the locked bytes checked. SDKs and the aws CLI send
// a checksum by default.
var errLockNeedsDigest = s3err.New(s3err.CodeInvalidRequest, "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters")

// hasLockHeaders reports whether a write sets a lock with its
// x-amz-object-lock-* headers.
func hasLockHeaders(h http.Header) bool {
	return h.Get("x-amz-object-lock-mode") != "" || h.Get("x-amz-object-lock-retain-until-date") != "" || h.Get("x-amz-object-lock-legal-hold") != ""
}

// setWriteLock sets the lock of a new version in meta: the request's
// x-amz-object-lock-* headers (which need s3:PutObjectRetention or
// s3:PutObjectLegalHold), else the bucket's default retention, computed
// from now. Any of those headers on a bucket without object lock is
// InvalidRequest.
func (s *Server) setWriteLock(q *request, b backend.Bucket, meta *store.Metadata) error {
	h := q.r.Header
	mode, until, hold := h.Get("x-amz-object-lock-mode"), h.Get("x-amz-object-lock-retain-until-date"), h.Get("x-amz-object-lock-legal-hold")
	conf, enabled := lockConfig(b)
	if !enabled {
		if mode != "" || until != "" || hold != "" {
			return errNoLockConfig
		}
		return nil
	}
	var l backend.ObjectLock
	switch {
	case mode == "" && until == "":
	case mode == "" || until == "":
		return s3err.New(s3err.CodeInvalidArgument, "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	case mode != backend.LockGovernance && mode != backend.LockCompliance:
		return s3err.New(s3err.CodeInvalidArgument, "Unknown wormMode directive.")
	default:
		t, err := parseLockTime(until)
		if err != nil {
			return err
		}
		if !t.After(time.Now()) {
			return errPastRetention
		}
		if v := s.decide(q, b, "s3:PutObjectRetention", q.key); v != vAllow {
			return s.denied(q, b, "s3:PutObjectRetention", v)
		}
		l.Mode, l.RetainUntil = mode, t
	}
	switch hold {
	case "", "OFF":
	case "ON":
		if v := s.decide(q, b, "s3:PutObjectLegalHold", q.key); v != vAllow {
			return s.denied(q, b, "s3:PutObjectLegalHold", v)
		}
		l.LegalHold = true
	default:
		return s3err.New(s3err.CodeInvalidArgument, "Legal Hold must be either of 'ON' or 'OFF'")
	}
	if l.Mode == "" && conf.Rule != nil && conf.Rule.DefaultRetention != nil {
		d := conf.Rule.DefaultRetention
		now := time.Now()
		switch {
		case d.Days != nil:
			l.Mode, l.RetainUntil = d.Mode, now.AddDate(0, 0, *d.Days)
		case d.Years != nil:
			l.Mode, l.RetainUntil = d.Mode, now.AddDate(*d.Years, 0, 0)
		}
	}
	if meta.User == nil {
		meta.User = map[string]string{}
	}
	delete(meta.User, backend.MetaObjectLock)
	if !l.IsZero() {
		meta.User[backend.MetaObjectLock] = backend.EncodeObjectLock(l)
	}
	return nil
}

// setLockHeaders answers a version's lock on GET and HEAD.
func setLockHeaders(h http.Header, info store.ObjectInfo) {
	l, err := backend.ParseObjectLock(info.User[backend.MetaObjectLock])
	if err != nil || l.IsZero() {
		return
	}
	if l.Mode != "" {
		h.Set("x-amz-object-lock-mode", l.Mode)
		h.Set("x-amz-object-lock-retain-until-date", lockTime(l.RetainUntil))
	}
	if l.LegalHold {
		h.Set("x-amz-object-lock-legal-hold", "ON")
	}
}
