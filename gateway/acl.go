package gateway

import (
	"errors"
	"io"
	"maps"
	"net/http"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/access"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// deleteConfig is the handler of DeleteBucketPolicy, DeletePublicAccessBlock,
// DeleteBucketTagging and DeleteBucketCors: it removes one configuration
// of the bucket (204 also when there was none, as in S3).
func (s *Server) deleteConfig(kind string) handlerFunc {
	return func(q *request) error {
		b, err := s.bucketFor(q)
		if err != nil {
			return err
		}
		if err := b.SetConfig(q.r.Context(), kind, ""); err != nil {
			return err
		}
		q.w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// readConfig reads a configuration body of at most limit bytes.
func (q *request) readConfig(limit int) ([]byte, error) { return readBounded(q.body, limit) }

// readBounded reads body whole, refusing one longer than limit bytes.
func readBounded(body io.Reader, limit int) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, s3err.Newf(s3err.CodeInvalidRequest, "The request body is larger than %d bytes.", limit)
	}
	return data, nil
}

func (s *Server) getBucketACL(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, bucketACL(b).XML(s3NS))
	return nil
}

// aclFromRequest reads the ACL of a Put*Acl request: its headers or its
// XML body (not both).
func (s *Server) aclFromRequest(q *request, b backend.Bucket) (access.ACL, error) {
	a, ok, err := s.aclFromHeaders(q, b)
	if err != nil {
		return a, err
	}
	body, err := q.readConfig(maxXMLBody)
	if err != nil {
		return a, err
	}
	switch {
	case ok && len(body) > 0:
		return a, s3err.New(s3err.CodeUnexpectedContent, "This request does not support content: give the ACL in headers or in the body, not both.")
	case ok:
		return a, nil
	case len(body) == 0:
		return a, s3err.New(s3err.CodeMissingSecurityHeader, "Your request was missing a required header: x-amz-acl, an x-amz-grant-* header or an AccessControlPolicy body.")
	}
	a, err = access.ParseACLXML(body, b.Owner(), s.knownUser)
	if err != nil {
		return a, aclError(err)
	}
	if a.Public() && s.publicAccess(b).BlockPublicAcls {
		return a, s3err.Newf(s3err.CodeAccessDenied, "Access Denied: bucket %q blocks public ACLs (Block Public Access: BlockPublicAcls)", b.Name())
	}
	return a, nil
}

func (s *Server) putBucketACL(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	a, err := s.aclFromRequest(q, b)
	if err != nil {
		return err
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfACL, a.Encode()); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectACL(q *request) error {
	b, info, err := s.statObject(q)
	if err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, objectACL(b, info).XML(s3NS))
	return nil
}

// statVersion is statObject for the version ?versionId= names: a delete
// marker is 405 as on GET, an unknown id 404 NoSuchVersion.
func (s *Server) statVersion(q *request) (backend.Bucket, store.ObjectInfo, error) {
	b, check, err := s.objectFor(q)
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	info, err := b.StatVersion(q.r.Context(), q.key, q.query.Get("versionId"))
	var dm *backend.DeleteMarkerError
	if errors.As(err, &dm) {
		q.w.Header().Set("x-amz-delete-marker", "true")
		q.w.Header().Set("x-amz-version-id", dm.VersionID)
		return nil, store.ObjectInfo{}, s3err.New(s3err.CodeMethodNotAllowed, "The specified method is not allowed against this resource: the version is a delete marker.")
	}
	if check != nil {
		if err := check(info, err); err != nil {
			return nil, store.ObjectInfo{}, err
		}
	}
	if err != nil {
		return nil, store.ObjectInfo{}, s.hideMissing(q, b, err)
	}
	return b, info, nil
}

// getObjectVersionACL answers GetObjectAcl ?versionId=: the ACL stored
// with that version.
func (s *Server) getObjectVersionACL(q *request) error {
	b, info, err := s.statVersion(q)
	if err != nil {
		return err
	}
	q.w.Header().Set("x-amz-version-id", info.VersionID)
	writeXML(q.w, http.StatusOK, objectACL(b, info).XML(s3NS))
	return nil
}

// putObjectVersionACL answers PutObjectAcl ?versionId=. The ACL is kept
// with the version's bytes, and changing it writes the object again
// (updateMetadata): that can only be done to the key's current version
// (in an unversioned bucket its null version, the object itself). A
// noncurrent version's ACL cannot be changed yet (501).
func (s *Server) putObjectVersionACL(q *request) error {
	b, info, err := s.statVersion(q)
	if err != nil {
		return err
	}
	cur, err := b.Stat(q.r.Context(), q.key)
	if err != nil && !isNotFound(err) {
		return err
	}
	id := q.query.Get("versionId")
	if err != nil || !(cur.VersionID == info.VersionID || id == nullVersion && cur.VersionID == "") {
		return errNotImplemented("PutObjectAcl on a noncurrent object version")
	}
	if err := s.setACL(q, b, cur); err != nil {
		return err
	}
	q.w.Header().Set("x-amz-version-id", id)
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) putObjectACL(q *request) error {
	b, info, err := s.statObject(q)
	if err != nil {
		return err
	}
	if err := s.setACL(q, b, info); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

// setACL stores the ACL of a PutObjectAcl request with the object info
// describes.
func (s *Server) setACL(q *request, b backend.Bucket, info store.ObjectInfo) error {
	a, err := s.aclFromRequest(q, b)
	if err != nil {
		return err
	}
	enc := a.Encode()
	return s.updateMetadata(q, b, info, func(m *store.Metadata) bool {
		if m.User[metaACL] == enc {
			return false
		}
		m.User[metaACL] = enc
		return true
	})
}

// updateMetadata changes the metadata fedgate keeps with an object (its
// ACL or tags): change edits a copy of it and reports whether anything
// changed. The object is written again with the new metadata, conditional
// on it still being the version info describes; when that changed meanwhile
// (another write, or a write-back version drained to its store, which
// changes its validator but not its bytes) the current version is updated
// instead, up to rewriteAttempts tries in all. Stores have no in-place
// metadata update that every kind shares, so this costs a copy of the
// object's bytes (docs/s3-compatibility.md).
func (s *Server) updateMetadata(q *request, b backend.Bucket, info store.ObjectInfo, change func(*store.Metadata) bool) error {
	for attempt := 1; ; attempt++ {
		meta := info.Metadata
		meta.User = maps.Clone(info.User)
		if meta.User == nil {
			meta.User = map[string]string{}
		}
		meta.Checksums = maps.Clone(info.Checksums)
		if !change(&meta) {
			return nil
		}
		err := s.rewriteMetadata(q, b, info, meta)
		if !errors.Is(err, errRewriteRaced) || attempt == rewriteAttempts {
			return err
		}
		if info, err = b.Stat(q.r.Context(), q.key); err != nil {
			return err
		}
	}
}

const rewriteAttempts = 3

// errRewriteRaced matches rewriteMetadata's answer when the object changed
// under it.
var errRewriteRaced = s3err.New(s3err.CodeOperationAborted, "")

// rewriteMetadata writes the object info describes again with meta, if it
// is still that version.
func (s *Server) rewriteMetadata(q *request, b backend.Bucket, info store.ObjectInfo, meta store.Metadata) error {
	ctx := q.r.Context()
	rc, err := b.Open(ctx, info, 0, info.Size)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = b.Put(ctx, q.key, rc, info.Size, store.PutOptions{Metadata: meta, IfMatch: info.Validator})
	if errors.Is(err, store.ErrPreconditionFailed) {
		return s3err.New(s3err.CodeOperationAborted, "The object was replaced while its metadata was being changed; nothing was changed. Try again.")
	}
	return err
}

func (s *Server) getBucketPolicy(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	doc, ok := b.Config(backend.ConfPolicy)
	if !ok {
		return s3err.Newf(s3err.CodeNoSuchBucketPolicy, "The bucket policy does not exist: bucket %q has none.", b.Name())
	}
	h := q.w.Header()
	h.Set("Content-Type", "application/json")
	q.w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(q.w, doc)
	return nil
}

func (s *Server) putBucketPolicy(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	doc, err := q.readConfig(access.MaxPolicySize)
	if err != nil {
		return s3err.Newf(s3err.CodeMalformedPolicy, "Policies must be at most %d bytes.", access.MaxPolicySize)
	}
	p, err := access.ParsePolicy(doc, b.Name())
	if err != nil {
		return s3err.New(s3err.CodeMalformedPolicy, err.Error())
	}
	if p.Public() && s.publicAccess(b).BlockPublicPolicy {
		return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: bucket %q blocks public policies (Block Public Access: BlockPublicPolicy), and this policy allows everyone (Principal \"*\" without a condition on aws:SourceIp or aws:username)", b.Name())
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfPolicy, string(doc)); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

type policyStatus struct {
	XMLName  struct{} `xml:"PolicyStatus"`
	Xmlns    string   `xml:"xmlns,attr"`
	IsPublic bool     `xml:"IsPublic"`
}

// getBucketPolicyStatus answers whether the bucket is public: its policy
// allows everyone (access.Policy.Public), or its ACL grants AllUsers or
// AuthenticatedUsers and Block Public Access does not ignore public ACLs.
// A bucket without a policy answers IsPublic false, not
// NoSuchBucketPolicy, and public ACLs count: this is what S3 conformance
// suites (ceph's s3-tests) expect, where AWS looks at the policy alone
// (docs/s3-compatibility.md).
func (s *Server) getBucketPolicyStatus(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	public := s.bucketPolicy(b).Public() || bucketACL(b).Public() && !s.publicAccess(b).IgnorePublicAcls
	writeXML(q.w, http.StatusOK, policyStatus{Xmlns: s3NS, IsPublic: public})
	return nil
}

func (s *Server) getPublicAccessBlock(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	doc, ok := b.Config(backend.ConfPublicAccess)
	if !ok {
		return s3err.Newf(s3err.CodeNoSuchPublicAccessBlockConfiguration, "The public access block configuration was not found: bucket %q has none (the region's default from the policy file still applies).", b.Name())
	}
	p, err := access.ParsePublicAccessBlock([]byte(doc))
	if err != nil {
		return err
	}
	p.Xmlns = s3NS
	writeXML(q.w, http.StatusOK, p)
	return nil
}

func (s *Server) putPublicAccessBlock(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	body, err := q.readConfig(maxXMLBody)
	if err != nil {
		return err
	}
	var p access.PublicAccessBlock
	if err := decodeXML(body, &p); err != nil {
		return err
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfPublicAccess, p.Encode()); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

type requestPaymentConfiguration struct {
	XMLName struct{} `xml:"RequestPaymentConfiguration"`
	Xmlns   string   `xml:"xmlns,attr"`
	Payer   string   `xml:"Payer"`
}

// getBucketRequestPayment answers that the bucket's owner pays, which is
// all fedgate has (s3cmd info asks).
func (s *Server) getBucketRequestPayment(q *request) error {
	if _, err := s.bucketFor(q); err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, requestPaymentConfiguration{Xmlns: s3NS, Payer: "BucketOwner"})
	return nil
}
