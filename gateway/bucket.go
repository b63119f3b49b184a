package gateway

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/access"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/store"
)

// maxBucketsPage is the largest max-buckets S3 accepts, and the page size
// S3 applies when a paging parameter comes without max-buckets.
const maxBucketsPage = 10000

// listBuckets answers ListBuckets as S3 pages it: without any of
// max-buckets, continuation-token, prefix and bucket-region every bucket is
// returned in one response (what old clients expect); with any of them a
// page holds at most max-buckets (default 10,000) and ContinuationToken
// names where the next page starts.
func (s *Server) listBuckets(q *request) error {
	qs := q.query
	prefix, region := qs.Get("prefix"), qs.Get("bucket-region")
	paged := qs.Has("max-buckets") || qs.Has("continuation-token") || qs.Has("prefix") || qs.Has("bucket-region")
	limit := -1
	if paged {
		limit = maxBucketsPage
	}
	if qs.Has("max-buckets") {
		n, err := strconv.Atoi(qs.Get("max-buckets"))
		if err != nil || n < 1 || n > maxBucketsPage {
			return s3err.Newf(s3err.CodeInvalidArgument, "Argument max-buckets must be an integer between 1 and %d", maxBucketsPage)
		}
		limit = n
	}
	after := ""
	if tok := qs.Get("continuation-token"); tok != "" {
		name, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(name) == 0 {
			return s3err.New(s3err.CodeInvalidArgument, "The continuation token provided is incorrect")
		}
		after = string(name)
	}
	res := listAllMyBucketsResult{Xmlns: s3NS, Owner: owner{ID: q.user.Name, DisplayName: q.user.Name}}
	if paged {
		res.Prefix = &prefix
	}
	res.Buckets = []bucketElem{}
	if region != "" && region != s.cfg.Region {
		writeXML(q.w, http.StatusOK, res) // every bucket here is in s.cfg.Region
		return nil
	}
	page, more := s.be.ListBucketsPage(q.user, prefix, after, limit)
	for _, b := range page {
		res.Buckets = append(res.Buckets, bucketElem{Name: b.Name(), CreationDate: s3Time(b.Created()), BucketRegion: s.cfg.Region})
	}
	if more && len(page) > 0 {
		res.ContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(page[len(page)-1].Name()))
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

func (s *Server) createBucket(q *request) error {
	if q.size != 0 || q.r.ContentLength > 0 {
		var cfg createBucketConfiguration
		data, err := io.ReadAll(io.LimitReader(q.body, maxXMLBody+1))
		if err != nil {
			return err
		}
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := decodeXML(data, &cfg); err != nil {
				return err
			}
			if lc := cfg.LocationConstraint; lc != "" && lc != s.cfg.Region && !(lc == sigv4.LegacyUSRegion && s.cfg.Region == "us-east-1") {
				return s3err.Newf(s3err.CodeInvalidLocationConstraint, "The specified location-constraint %q is not valid: this endpoint serves %q.", lc, s.cfg.Region)
			}
		}
	}
	if err := s.be.CreateBucket(q.r.Context(), q.user, q.bucket); err != nil {
		var exists *backend.BucketExistsError
		if errors.As(err, &exists) && exists.OwnedByCaller && s.cfg.Region == "us-east-1" {
			// S3's legacy us-east-1 behaviour: creating a bucket you own
			// already succeeds there (409 BucketAlreadyOwnedByYou in every
			// other region). Scripts that "mb" before each run rely on it.
			q.w.Header().Set("Location", "/"+q.bucket)
			q.w.WriteHeader(http.StatusOK)
			return nil
		}
		if errors.Is(err, backend.ErrInvalidBucketName) {
			return s3err.Newf(s3err.CodeInvalidBucketName, "The specified bucket is not valid: %s", strings.TrimPrefix(err.Error(), backend.ErrInvalidBucketName.Error()+": "))
		}
		return err
	}
	if err := s.createdBucketACL(q); err != nil {
		return err
	}
	if err := s.createdBucketLock(q); err != nil {
		return err
	}
	q.w.Header().Set("Location", "/"+q.bucket)
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// createdBucketLock enables object lock (and with it versioning) on a
// bucket created with x-amz-bucket-object-lock-enabled: true.
func (s *Server) createdBucketLock(q *request) error {
	if !strings.EqualFold(strings.TrimSpace(q.r.Header.Get("x-amz-bucket-object-lock-enabled")), "true") {
		return nil
	}
	b, err := s.be.Bucket(q.bucket)
	if err != nil {
		return err
	}
	if err := b.SetVersioning(q.r.Context(), "Enabled"); err != nil {
		return err
	}
	return b.SetConfig(q.r.Context(), backend.ConfObjectLock, enabledLockConfig())
}

// createdBucketACL keeps the ACL a CreateBucket sets with x-amz-acl or
// x-amz-grant-* headers.
func (s *Server) createdBucketACL(q *request) error {
	if !access.HasACLHeaders(q.r.Header) {
		return nil
	}
	b, err := s.be.Bucket(q.bucket)
	if err != nil {
		return err
	}
	a, ok, err := s.aclFromHeaders(q, b)
	if err != nil || !ok {
		return err
	}
	return b.SetConfig(q.r.Context(), backend.ConfACL, a.Encode())
}

func (s *Server) headBucket(q *request) error {
	if _, err := s.bucketFor(q); err != nil {
		return err
	}
	q.w.Header().Set("x-amz-bucket-region", s.cfg.Region)
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucket(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	if err := s.be.DeleteBucket(q.r.Context(), b.Name()); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getBucketLocation(q *request) error {
	if _, err := s.bucketFor(q); err != nil {
		return err
	}
	loc := s.cfg.Region
	if loc == "us-east-1" {
		loc = "" // S3 answers an empty constraint for us-east-1
	}
	writeXML(q.w, http.StatusOK, locationConstraint{Xmlns: s3NS, Value: loc})
	return nil
}

// maxDeleteObjects is S3's limit on keys per DeleteObjects request.
const maxDeleteObjects = 1000

func (s *Server) deleteObjects(q *request) error {
	// Each key is authorized on its own (a policy may allow or deny
	// s3:DeleteObject per prefix); a key refused is an AccessDenied entry.
	b, err := s.be.Bucket(q.bucket)
	if err != nil {
		return err
	}
	// S3 requires an integrity check of this body: Content-MD5 or an
	// x-amz-checksum-* (header or trailer); the checksum reader verifies
	// whichever came.
	if !hasBodyDigest(q.r.Header) {
		return s3err.New(s3err.CodeInvalidRequest, "Missing required header for this request: Content-MD5 (or an x-amz-checksum-* header).")
	}
	body, err := checksum.NewReader(q.r.Header, q.body, q.trailer)
	if err != nil {
		return err
	}
	var req deleteRequest
	if err := readXML(body, &req); err != nil {
		return err
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteObjects {
		return errMalformedXML
	}
	res := deleteResult{Xmlns: s3NS}
	ctx := q.r.Context()
	for _, o := range req.Objects {
		err := checkKey(o.Key)
		if err == nil && o.Key == "" {
			err = s3err.New(s3err.CodeInvalidArgument, "An object key may not be empty.")
		}
		action := "s3:DeleteObject"
		if o.VersionID != "" {
			action = "s3:DeleteObjectVersion"
		}
		if err == nil {
			if v := s.decide(q, b, action, o.Key); v != vAllow {
				err = s.denied(q, b, action, v)
			}
		}
		done := deletedElem{Key: o.Key, VersionID: o.VersionID}
		if err == nil {
			if o.VersionID != "" {
				done.DeleteMarker, err = b.DeleteVersion(s.bypassContext(ctx, q, b, o.Key), o.Key, o.VersionID)
				if done.DeleteMarker {
					done.DeleteMarkerVersionID = o.VersionID
				}
			} else {
				done.DeleteMarkerVersionID, err = b.DeleteLatest(ctx, o.Key)
				done.DeleteMarker = done.DeleteMarkerVersionID != ""
			}
		}
		if err != nil {
			se := toS3(err)
			res.Errors = append(res.Errors, deleteErrorElem{Key: o.Key, VersionID: o.VersionID, Code: se.Code, Message: se.Message})
			continue
		}
		if !req.Quiet {
			res.Deleted = append(res.Deleted, done)
		}
	}
	writeXML(q.w, http.StatusOK, res)
	return nil
}

// hasBodyDigest reports whether a request carries a digest of its body:
// Content-MD5, an x-amz-checksum-<algorithm> header, or a checksum
// trailer it announces.
func hasBodyDigest(h http.Header) bool {
	if h.Get("Content-MD5") != "" || strings.Contains(strings.ToLower(h.Get("x-amz-trailer")), "x-amz-checksum-") {
		return true
	}
	for _, a := range checksum.Algorithms {
		if h.Get(a.Header()) != "" {
			return true
		}
	}
	return false
}

// listPage is one page of a listing: objects and common prefixes in key
// order, at most max of them together.
type listPage struct {
	objects   []store.Entry
	prefixes  []string
	truncated bool
	last      string // key or prefix of the last entry on the page
}

// listBucket reads one page after marker. The store may yield a common
// prefix equal to marker again (a page that ended on a prefix); anything not
// strictly after marker is skipped.
func listBucket(q *request, b backend.Bucket, prefix, delim, marker string, max int) (listPage, error) {
	var p listPage
	start := marker
	if start != "" && start < prefix {
		start = ""
	}
	n := 0
	for e, err := range b.List(q.r.Context(), store.ListOptions{Prefix: prefix, Delimiter: delim, StartAfter: start}) {
		if err != nil {
			return p, err
		}
		if marker != "" && e.Key <= marker {
			continue
		}
		if n == max {
			p.truncated = true
			break
		}
		n++
		p.last = e.Key
		if e.IsPrefix {
			p.prefixes = append(p.prefixes, e.Key)
		} else {
			p.objects = append(p.objects, e)
		}
	}
	return p, nil
}
