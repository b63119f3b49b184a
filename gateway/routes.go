package gateway

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
)

// The S3 operations are one table (s3Routes) that the router walks: each
// entry states, as data, which requests it takes. No two entries take the
// same request (TestRouteTable checks it, pair by pair), so their order in
// the table does not matter. A request no entry takes is refused (refuse).
//
// A request's subresource is the first query key, in the order of its
// level's list below, that it carries: when a request names several, that
// order decides which one it is about, and entries match the subresource
// rather than each excluding every other key.

// level is what an S3 request addresses: the service ("/"), a bucket or
// an object.
type level uint8

const (
	levelService level = iota
	levelBucket
	levelObject
)

func (l level) String() string {
	return [...]string{"service", "bucket", "object"}[l]
}

// anySub in s3Route.sub takes a request whatever its subresource.
const anySub = "*"

// subKey is a query key that makes a request about a subresource; with
// method set, only a request of that method (for the others the key is a
// plain parameter, e.g. GET ?versioning is a bucket GET that entries match
// by parameter, at the lowest precedence).
type subKey struct{ key, method string }

func subKeys(keys ...string) []subKey {
	out := make([]subKey, len(keys))
	for i, k := range keys {
		out[i] = subKey{key: k}
	}
	return out
}

// subresourceOrder lists, per level, the query keys that make a request
// about a subresource, in precedence order.
var subresourceOrder = [...][]subKey{
	levelService: subKeys(unsupportedSubresources...),
	levelBucket: slices.Concat(subKeys("cors", "acl", "policyStatus", "policy"),
		[]subKey{{"versioning", http.MethodPut}, {"requestPayment", http.MethodGet}},
		subKeys("lifecycle", "publicAccessBlock"), subKeys(unsupportedSubresources...),
		subKeys("object-lock", "retention", "legal-hold", "tagging")),
	levelObject: slices.Concat(subKeys("cors", "acl"), subKeys(unsupportedSubresources...),
		subKeys("retention", "legal-hold", "object-lock", "versionId", "tagging", "attributes")),
}

// Subresources S3 has and fedgate does not implement yet. A request naming
// one gets NotImplemented instead of being mistaken for a plain operation
// (GetBucketRequestPayment is the one the table answers).
var unsupportedSubresources = []string{
	"accelerate", "analytics", "encryption", "intelligent-tiering",
	"inventory", "logging", "metadataTable", "metrics", "notification",
	"ownershipControls",
	"replication", "requestPayment", "restore", "select", "torrent",
	"website", "renameObject", "session",
}

// subresourceOf returns the request's subresource ("" when none). A
// versionId of "null" names no subresource where it means the object
// itself: beside other subresources, and on a PUT that copies nothing.
func subresourceOf(lv level, method string, q url.Values, h http.Header) string {
	for _, sk := range subresourceOrder[lv] {
		k := sk.key
		if !q.Has(k) || sk.method != "" && sk.method != method {
			continue
		}
		if k == "versionId" && q.Get(k) == nullVersion &&
			(!onlyParams(q, versionParams) || method == http.MethodPut && h.Get(copySourceHeader) == "") {
			continue
		}
		return k
	}
	return ""
}

// param is a query parameter an entry needs: present, with value when
// value is not "".
type param struct{ key, value string }

// header is a request header an entry needs: present and not empty, or,
// when value is not "", a media type equal to value (Content-Type).
type header struct{ name, value string }

// s3Route is one S3 operation: what requests it takes, its name (metrics,
// logs, access log, bucket-policy evaluation), the IAM action a bucket
// policy, grant or ACL is checked for ("": owner and root only) and its
// handler.
type s3Route struct {
	op     string
	method string
	level  level
	// sub is the subresource (subresourceOf) the request has: "" none,
	// anySub any.
	sub     string
	query   []param  // parameters it needs
	noQuery []string // parameters it must not have
	// only, when not nil, lists the parameters it may have (besides the
	// signature's); a name ending in "*" is a prefix.
	only     []string
	header   []header // headers it needs
	noHeader []string // headers it must not have
	action   string
	handle   func(*Server, *request) error
}

const copySourceHeader = "X-Amz-Copy-Source"

// Parameter lists of s3Route.only.
var (
	plainParams   = []string{"x-id"} // what SDKs add to name the operation
	listV1Params  = []string{"prefix", "delimiter", "marker", "max-keys", "encoding-type", "x-id"}
	versionParams = []string{"versionId", "x-id", "partNumber", "response-*"}
)

// deleteConf is the handler of a configuration's Delete operation.
func deleteConf(kind string) func(*Server, *request) error {
	return func(s *Server, q *request) error { return s.deleteConfig(kind)(q) }
}

// s3Routes is every S3 operation fedgate answers. docs/s3-compatibility.md
// lists the same names (TestRouteTableDocumented).
var s3Routes = []s3Route{
	// The service.
	{op: "ListBuckets", method: http.MethodGet, level: levelService, action: "s3:ListAllMyBuckets", handle: (*Server).listBuckets},

	// Browsers: a preflight is never signed; a form POST is signed in its fields.
	{op: "PreflightCors", method: http.MethodOptions, level: levelBucket, sub: anySub, handle: (*Server).preflightCORS},
	{op: "PreflightCors", method: http.MethodOptions, level: levelObject, sub: anySub, handle: (*Server).preflightCORS},
	{op: "PostObject", method: http.MethodPost, level: levelBucket, sub: anySub, noQuery: []string{"delete"},
		header: []header{{"Content-Type", "multipart/form-data"}}, action: "s3:PutObject", handle: (*Server).postObject},

	// Buckets.
	{op: "GetBucketLocation", method: http.MethodGet, level: levelBucket, query: []param{{"location", ""}},
		action: "s3:GetBucketLocation", handle: (*Server).getBucketLocation},
	{op: "GetBucketVersioning", method: http.MethodGet, level: levelBucket, query: []param{{"versioning", ""}},
		noQuery: []string{"location"}, action: "s3:GetBucketVersioning", handle: (*Server).getBucketVersioning},
	{op: "PutBucketVersioning", method: http.MethodPut, level: levelBucket, sub: "versioning",
		action: "s3:PutBucketVersioning", handle: (*Server).putBucketVersioning},
	{op: "ListObjectVersions", method: http.MethodGet, level: levelBucket, query: []param{{"versions", ""}},
		noQuery: []string{"location", "versioning"}, action: "s3:ListBucketVersions", handle: (*Server).listObjectVersions},
	{op: "ListMultipartUploads", method: http.MethodGet, level: levelBucket, query: []param{{"uploads", ""}},
		noQuery: []string{"location", "versioning", "versions"}, action: "s3:ListBucketMultipartUploads", handle: (*Server).listMultipartUploads},
	{op: "ListObjectsV2", method: http.MethodGet, level: levelBucket, query: []param{{"list-type", "2"}},
		noQuery: []string{"location", "versioning", "versions", "uploads"}, action: "s3:ListBucket", handle: (*Server).listObjectsV2},
	{op: "ListObjects", method: http.MethodGet, level: levelBucket, only: listV1Params, action: "s3:ListBucket", handle: (*Server).listObjectsV1},
	{op: "CreateBucket", method: http.MethodPut, level: levelBucket, only: plainParams, action: "s3:CreateBucket", handle: (*Server).createBucket},
	{op: "HeadBucket", method: http.MethodHead, level: levelBucket, action: "s3:ListBucket", handle: (*Server).headBucket},
	{op: "DeleteBucket", method: http.MethodDelete, level: levelBucket, only: plainParams, action: "s3:DeleteBucket", handle: (*Server).deleteBucket},
	{op: "DeleteObjects", method: http.MethodPost, level: levelBucket, query: []param{{"delete", ""}}, action: "s3:DeleteObject", handle: (*Server).deleteObjects},

	// Bucket configurations.
	{op: "GetBucketCors", method: http.MethodGet, level: levelBucket, sub: "cors", action: "s3:GetBucketCORS", handle: (*Server).getBucketCORS},
	{op: "PutBucketCors", method: http.MethodPut, level: levelBucket, sub: "cors", action: "s3:PutBucketCORS", handle: (*Server).putBucketCORS},
	{op: "DeleteBucketCors", method: http.MethodDelete, level: levelBucket, sub: "cors", action: "s3:PutBucketCORS", handle: deleteConf(backend.ConfCORS)},
	{op: "GetBucketAcl", method: http.MethodGet, level: levelBucket, sub: "acl", action: "s3:GetBucketAcl", handle: (*Server).getBucketACL},
	{op: "PutBucketAcl", method: http.MethodPut, level: levelBucket, sub: "acl", action: "s3:PutBucketAcl", handle: (*Server).putBucketACL},
	{op: "GetBucketPolicyStatus", method: http.MethodGet, level: levelBucket, sub: "policyStatus", action: "s3:GetBucketPolicyStatus", handle: (*Server).getBucketPolicyStatus},
	{op: "GetBucketPolicy", method: http.MethodGet, level: levelBucket, sub: "policy", action: "s3:GetBucketPolicy", handle: (*Server).getBucketPolicy},
	{op: "PutBucketPolicy", method: http.MethodPut, level: levelBucket, sub: "policy", action: "s3:PutBucketPolicy", handle: (*Server).putBucketPolicy},
	{op: "DeleteBucketPolicy", method: http.MethodDelete, level: levelBucket, sub: "policy", action: "s3:DeleteBucketPolicy", handle: deleteConf(backend.ConfPolicy)},
	{op: "GetBucketLifecycleConfiguration", method: http.MethodGet, level: levelBucket, sub: "lifecycle", action: "s3:GetLifecycleConfiguration", handle: (*Server).getBucketLifecycle},
	{op: "PutBucketLifecycleConfiguration", method: http.MethodPut, level: levelBucket, sub: "lifecycle", action: "s3:PutLifecycleConfiguration", handle: (*Server).putBucketLifecycle},
	{op: "DeleteBucketLifecycle", method: http.MethodDelete, level: levelBucket, sub: "lifecycle", action: "s3:PutLifecycleConfiguration", handle: deleteConf(backend.ConfLifecycle)},
	{op: "GetPublicAccessBlock", method: http.MethodGet, level: levelBucket, sub: "publicAccessBlock", action: "s3:GetBucketPublicAccessBlock", handle: (*Server).getPublicAccessBlock},
	{op: "PutPublicAccessBlock", method: http.MethodPut, level: levelBucket, sub: "publicAccessBlock", action: "s3:PutBucketPublicAccessBlock", handle: (*Server).putPublicAccessBlock},
	{op: "DeletePublicAccessBlock", method: http.MethodDelete, level: levelBucket, sub: "publicAccessBlock", action: "s3:PutBucketPublicAccessBlock", handle: deleteConf(backend.ConfPublicAccess)},
	{op: "GetBucketRequestPayment", method: http.MethodGet, level: levelBucket, sub: "requestPayment", action: "s3:GetBucketRequestPayment", handle: (*Server).getBucketRequestPayment},
	{op: "GetObjectLockConfiguration", method: http.MethodGet, level: levelBucket, sub: "object-lock", action: "s3:GetBucketObjectLockConfiguration", handle: (*Server).getObjectLockConfiguration},
	{op: "PutObjectLockConfiguration", method: http.MethodPut, level: levelBucket, sub: "object-lock", action: "s3:PutBucketObjectLockConfiguration", handle: (*Server).putObjectLockConfiguration},
	{op: "GetBucketTagging", method: http.MethodGet, level: levelBucket, sub: "tagging", action: "s3:GetBucketTagging", handle: (*Server).getBucketTagging},
	{op: "PutBucketTagging", method: http.MethodPut, level: levelBucket, sub: "tagging", action: "s3:PutBucketTagging", handle: (*Server).putBucketTagging},
	{op: "DeleteBucketTagging", method: http.MethodDelete, level: levelBucket, sub: "tagging", action: "s3:PutBucketTagging", handle: deleteConf(backend.ConfTagging)},

	// Objects.
	{op: "GetObject", method: http.MethodGet, level: levelObject, noQuery: []string{"uploadId"}, action: "s3:GetObject", handle: (*Server).getObject},
	{op: "HeadObject", method: http.MethodHead, level: levelObject, action: "s3:GetObject", handle: (*Server).headObject},
	{op: "PutObject", method: http.MethodPut, level: levelObject, noQuery: []string{"partNumber", "uploadId"},
		noHeader: []string{copySourceHeader}, action: "s3:PutObject", handle: (*Server).putObject},
	{op: "CopyObject", method: http.MethodPut, level: levelObject, noQuery: []string{"partNumber", "uploadId"},
		header: []header{{copySourceHeader, ""}}, action: "s3:PutObject", handle: (*Server).copyObject},
	{op: "DeleteObject", method: http.MethodDelete, level: levelObject, noQuery: []string{"uploadId"}, action: "s3:DeleteObject", handle: (*Server).deleteObject},
	{op: "CreateMultipartUpload", method: http.MethodPost, level: levelObject, query: []param{{"uploads", ""}},
		action: "s3:PutObject", handle: (*Server).createMultipartUpload},
	{op: "UploadPart", method: http.MethodPut, level: levelObject, query: []param{{"partNumber", ""}, {"uploadId", ""}},
		noHeader: []string{copySourceHeader}, action: "s3:PutObject", handle: (*Server).uploadPart},
	{op: "UploadPartCopy", method: http.MethodPut, level: levelObject, query: []param{{"partNumber", ""}, {"uploadId", ""}},
		header: []header{{copySourceHeader, ""}}, action: "s3:PutObject", handle: (*Server).uploadPartCopy},
	{op: "CompleteMultipartUpload", method: http.MethodPost, level: levelObject, query: []param{{"uploadId", ""}},
		noQuery: []string{"uploads"}, action: "s3:PutObject", handle: (*Server).completeMultipartUpload},
	{op: "AbortMultipartUpload", method: http.MethodDelete, level: levelObject, query: []param{{"uploadId", ""}},
		action: "s3:AbortMultipartUpload", handle: (*Server).abortMultipartUpload},
	{op: "ListParts", method: http.MethodGet, level: levelObject, query: []param{{"uploadId", ""}}, action: "s3:ListMultipartUploadParts", handle: (*Server).listParts},

	// Object versions.
	{op: "GetObjectVersion", method: http.MethodGet, level: levelObject, sub: "versionId", only: versionParams,
		action: "s3:GetObjectVersion", handle: func(s *Server, q *request) error { return s.serveVersion(q, true) }},
	{op: "HeadObjectVersion", method: http.MethodHead, level: levelObject, sub: "versionId", only: versionParams,
		action: "s3:GetObjectVersion", handle: func(s *Server, q *request) error { return s.serveVersion(q, false) }},
	{op: "DeleteObjectVersion", method: http.MethodDelete, level: levelObject, sub: "versionId", only: versionParams,
		action: "s3:DeleteObjectVersion", handle: (*Server).deleteObjectVersion},

	// Object subresources.
	{op: "GetObjectAcl", method: http.MethodGet, level: levelObject, sub: "acl", noQuery: []string{"versionId"}, action: "s3:GetObjectAcl", handle: (*Server).getObjectACL},
	{op: "PutObjectAcl", method: http.MethodPut, level: levelObject, sub: "acl", noQuery: []string{"versionId"}, action: "s3:PutObjectAcl", handle: (*Server).putObjectACL},
	{op: "GetObjectVersionAcl", method: http.MethodGet, level: levelObject, sub: "acl", query: []param{{"versionId", ""}},
		action: "s3:GetObjectVersionAcl", handle: (*Server).getObjectVersionACL},
	{op: "PutObjectVersionAcl", method: http.MethodPut, level: levelObject, sub: "acl", query: []param{{"versionId", ""}},
		action: "s3:PutObjectVersionAcl", handle: (*Server).putObjectVersionACL},
	{op: "GetObjectRetention", method: http.MethodGet, level: levelObject, sub: "retention", action: "s3:GetObjectRetention", handle: (*Server).getObjectRetention},
	{op: "PutObjectRetention", method: http.MethodPut, level: levelObject, sub: "retention", action: "s3:PutObjectRetention", handle: (*Server).putObjectRetention},
	{op: "GetObjectLegalHold", method: http.MethodGet, level: levelObject, sub: "legal-hold", action: "s3:GetObjectLegalHold", handle: (*Server).getObjectLegalHold},
	{op: "PutObjectLegalHold", method: http.MethodPut, level: levelObject, sub: "legal-hold", action: "s3:PutObjectLegalHold", handle: (*Server).putObjectLegalHold},
	{op: "GetObjectTagging", method: http.MethodGet, level: levelObject, sub: "tagging", action: "s3:GetObjectTagging", handle: (*Server).getObjectTagging},
	{op: "PutObjectTagging", method: http.MethodPut, level: levelObject, sub: "tagging", action: "s3:PutObjectTagging", handle: (*Server).putObjectTagging},
	{op: "DeleteObjectTagging", method: http.MethodDelete, level: levelObject, sub: "tagging", action: "s3:DeleteObjectTagging", handle: (*Server).deleteObjectTagging},
	{op: "GetObjectAttributes", method: http.MethodGet, level: levelObject, sub: "attributes", action: "s3:GetObjectAttributes", handle: (*Server).getObjectAttributes},
}

// opActions maps each routed S3 operation to the action a bucket policy
// names for it (from s3Routes). An operation missing here is refused to
// anyone but the bucket's owner and root.
var opActions = func() map[string]string {
	m := make(map[string]string, len(s3Routes))
	for _, rt := range s3Routes {
		if rt.action != "" {
			m[rt.op] = rt.action
		}
	}
	return m
}()

// levelOf is the level of a request for bucket and key.
func levelOf(bucket, key string) level {
	switch {
	case bucket == "":
		return levelService
	case key == "":
		return levelBucket
	}
	return levelObject
}

// matches reports whether rt takes a request of method, level lv,
// subresource sub, query q and headers h.
func (rt *s3Route) matches(method string, lv level, sub string, q url.Values, h http.Header) bool {
	if rt.method != method || rt.level != lv || rt.sub != anySub && rt.sub != sub {
		return false
	}
	for _, p := range rt.query {
		if !q.Has(p.key) || p.value != "" && q.Get(p.key) != p.value {
			return false
		}
	}
	for _, k := range rt.noQuery {
		if q.Has(k) {
			return false
		}
	}
	if rt.only != nil && !onlyParams(q, rt.only) {
		return false
	}
	for _, hd := range rt.header {
		if !headerMatches(h, hd) {
			return false
		}
	}
	for _, k := range rt.noHeader {
		if h.Get(k) != "" {
			return false
		}
	}
	return true
}

func headerMatches(h http.Header, hd header) bool {
	v := h.Get(hd.name)
	if hd.value == "" || v == "" {
		return v != ""
	}
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == hd.value
}

// onlyParams reports whether every parameter of q is in allowed (a name
// ending in "*" a prefix) or belongs to a presigned URL's signature.
func onlyParams(q url.Values, allowed []string) bool {
	for k := range q {
		if authParam(k) || slices.ContainsFunc(allowed, func(a string) bool {
			if p, ok := strings.CutSuffix(a, "*"); ok {
				return strings.HasPrefix(k, p)
			}
			return a == k
		}) {
			continue
		}
		return false
	}
	return true
}

// findRoute returns the entry of s3Routes that takes the request, or nil.
func findRoute(r *http.Request, q url.Values, bucket, key string) *s3Route {
	lv := levelOf(bucket, key)
	sub := subresourceOf(lv, r.Method, q, r.Header)
	for i := range s3Routes {
		if rt := &s3Routes[i]; rt.matches(r.Method, lv, sub, q, r.Header) {
			return rt
		}
	}
	return nil
}

// refuse names and answers a request no operation takes: a subresource
// fedgate does not implement (501), a method a known subresource does not
// have (405), a half-given UploadPart (400), or an operation S3 may have
// and fedgate does not (501).
func refuse(r *http.Request, q url.Values, bucket, key string) (string, handlerFunc) {
	m := r.Method
	lv := levelOf(bucket, key)
	sub := subresourceOf(lv, m, q, r.Header)
	switch {
	case slices.Contains(unsupportedSubresources, sub):
		return m + "-" + sub, func(*request) error { return errNotImplemented("The " + sub + " subresource") }
	case sub == "versionId":
		return m + "-version", func(*request) error {
			return errNotImplemented("This operation on a specific object version")
		}
	case sub != "":
		return "Unsupported", func(*request) error { return errMethodNotAllowed }
	case lv == levelObject && m == http.MethodPut && q.Has("partNumber") != q.Has("uploadId"):
		return "UploadPart", func(*request) error {
			return s3err.New(s3err.CodeInvalidRequest, "UploadPart needs both partNumber and uploadId.")
		}
	case lv == levelBucket && m == http.MethodGet:
		return "GetBucket-unknown", func(*request) error { return errNotImplemented("This bucket GET subresource") }
	}
	return "Unsupported", func(*request) error {
		return errNotImplemented("The operation " + m + " on this resource")
	}
}
