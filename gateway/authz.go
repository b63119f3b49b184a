package gateway

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/access"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// grantActions are what `fedgate user grant` levels allow: read, and what
// write adds to it. Everything else (policies, ACLs, Block Public Access,
// deleting the bucket) is for the owner and root.
var (
	readActions = set("s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads",
		"s3:ListMultipartUploadParts", "s3:GetBucketLocation", "s3:GetBucketVersioning", "s3:GetObjectTagging",
		"s3:GetObjectAttributes", "s3:GetBucketTagging", "s3:GetBucketCORS", "s3:GetObjectRetention", "s3:GetObjectLegalHold",
		"s3:GetBucketObjectLockConfiguration")
	writeActions = set("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:PutObjectTagging",
		"s3:DeleteObjectTagging")
)

// bucketACLPerms and objectACLPerms are the ACL permission each action
// needs on the bucket's or the object's ACL.
var (
	bucketACLPerms = map[string]string{
		"s3:ListBucket": access.PermRead, "s3:ListBucketVersions": access.PermRead,
		"s3:ListBucketMultipartUploads": access.PermRead,
		"s3:PutObject":                  access.PermWrite, "s3:DeleteObject": access.PermWrite,
		"s3:AbortMultipartUpload": access.PermWrite,
		"s3:GetBucketAcl":         access.PermReadACP, "s3:PutBucketAcl": access.PermWriteACP,
	}
	objectACLPerms = map[string]string{
		"s3:GetObject": access.PermRead, "s3:GetObjectVersion": access.PermRead, "s3:GetObjectAttributes": access.PermRead,
		"s3:GetObjectAcl": access.PermReadACP, "s3:PutObjectAcl": access.PermWriteACP,
		"s3:GetObjectVersionAcl": access.PermReadACP, "s3:PutObjectVersionAcl": access.PermWriteACP,
	}
)

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}

// metaACL is the reserved user-metadata entry that holds an object's ACL
// (access.ACL.Encode) with the object. Clients cannot set or read
// x-amz-meta-fedgate-* entries.
const (
	metaACL      = "fedgate-acl"
	reservedMeta = "fedgate-"
)

// principal is the caller as policies and ACLs see it.
func (q *request) principal() access.Principal {
	if q.anonymous {
		return access.Principal{Anonymous: true}
	}
	return access.Principal{User: q.user.Name, Root: q.user.Root}
}

// conditionKeys are the request's values of the condition keys a policy
// may test.
func (q *request) conditionKeys() map[string]string {
	if q.keys != nil {
		return q.keys
	}
	r := q.r
	k := map[string]string{
		"aws:securetransport": strconv.FormatBool(r.TLS != nil),
		"aws:currenttime":     time.Now().UTC().Format(time.RFC3339),
		"aws:epochtime":       strconv.FormatInt(time.Now().Unix(), 10),
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		k["aws:sourceip"] = host
	}
	switch {
	case q.anonymous:
		k["aws:principaltype"] = "Anonymous"
	case q.user.Root:
		k["aws:principaltype"] = "Account"
		k["aws:userid"] = q.user.Name
	default:
		k["aws:principaltype"] = "User"
		k["aws:username"] = q.user.Name
		k["aws:userid"] = q.user.Name
	}
	for _, h := range [][2]string{{"aws:useragent", "User-Agent"}, {"aws:referer", "Referer"},
		{"s3:x-amz-acl", "x-amz-acl"}, {"s3:x-amz-content-sha256", "x-amz-content-sha256"},
		{"s3:x-amz-copy-source", "x-amz-copy-source"}, {"s3:x-amz-metadata-directive", "x-amz-metadata-directive"},
		{"s3:x-amz-grant-read", "x-amz-grant-read"}, {"s3:x-amz-grant-write", "x-amz-grant-write"},
		{"s3:x-amz-grant-read-acp", "x-amz-grant-read-acp"}, {"s3:x-amz-grant-write-acp", "x-amz-grant-write-acp"},
		{"s3:x-amz-grant-full-control", "x-amz-grant-full-control"}} {
		if v := r.Header.Get(h[1]); v != "" {
			k[h[0]] = v
		}
	}
	for _, p := range [][2]string{{"s3:prefix", "prefix"}, {"s3:delimiter", "delimiter"}, {"s3:max-keys", "max-keys"}, {"s3:versionid", "versionId"}} {
		if q.query.Has(p[1]) {
			k[p[0]] = q.query.Get(p[1])
		}
	}
	switch {
	case q.postForm:
		k["s3:authtype"] = "POST"
	case q.query.Has("X-Amz-Signature"):
		k["s3:authtype"] = "REST-QUERY-STRING"
	case !q.anonymous:
		k["s3:authtype"] = "REST-HEADER"
	}
	if !q.anonymous {
		k["s3:signatureversion"] = "AWS4-HMAC-SHA256"
	}
	q.keys = k
	return k
}

// policyCache holds parsed bucket policies by their text, so a request
// does not parse its bucket's policy again.
type policyCache struct {
	mu sync.Mutex
	m  map[string]*access.Policy
}

func (c *policyCache) get(bucket, doc string) *access.Policy {
	key := bucket + "\x00" + doc
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[key]; ok {
		return p
	}
	p, err := access.ParsePolicy([]byte(doc), bucket)
	if err != nil {
		// Stored policies were validated when put; one this build cannot
		// read (written by a newer node) grants nothing and denies
		// everything but root, rather than being ignored.
		p = denyAll
	}
	if len(c.m) >= 1024 {
		clear(c.m)
	}
	if c.m == nil {
		c.m = map[string]*access.Policy{}
	}
	c.m[key] = p
	return p
}

// denyAll stands in for a stored policy this node cannot read.
var denyAll = func() *access.Policy {
	p, err := access.ParsePolicy([]byte(`{"Statement":{"Effect":"Deny","Principal":"*","Action":"*","Resource":"*"}}`), "any")
	if err != nil {
		panic(err)
	}
	return p
}()

// bucketPolicy returns b's parsed policy, nil without one.
func (s *Server) bucketPolicy(b backend.Bucket) *access.Policy {
	doc, ok := b.Config(backend.ConfPolicy)
	if !ok {
		return nil
	}
	return s.policies.get(b.Name(), doc)
}

// publicAccess is the Block Public Access in force for b: its own setting
// or'ed with the region's default.
func (s *Server) publicAccess(b backend.Bucket) access.PublicAccessBlock {
	d := s.be.PublicAccessDefault()
	region := access.PublicAccessBlock{BlockPublicAcls: d.BlockPublicACLs, IgnorePublicAcls: d.IgnorePublicACLs,
		BlockPublicPolicy: d.BlockPublicPolicy, RestrictPublicBuckets: d.RestrictPublicBuckets}
	doc, ok := b.Config(backend.ConfPublicAccess)
	if !ok {
		return region
	}
	own, err := access.ParsePublicAccessBlock([]byte(doc))
	if err != nil {
		own = access.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
	}
	return own.Or(region)
}

// bucketACL returns b's ACL (private to its owner without one).
func bucketACL(b backend.Bucket) access.ACL {
	if doc, ok := b.Config(backend.ConfACL); ok {
		if a, err := access.DecodeACL(doc); err == nil {
			return a
		}
	}
	return access.Private(b.Owner())
}

// objectACL returns the ACL stored with an object (private to the
// bucket's owner without one).
func objectACL(b backend.Bucket, info store.ObjectInfo) access.ACL {
	if doc, ok := info.User[metaACL]; ok {
		if a, err := access.DecodeACL(doc); err == nil {
			return a
		}
	}
	return access.Private(b.Owner())
}

// verdict is what the bucket-level evaluation decided.
type verdict int

const (
	vAllow verdict = iota
	vDeny          // default deny
	vExplicitDeny
	vObjectACL // only the object's ACL could still allow it
)

// decide evaluates action on bucket b (and key) for q's caller, in S3's
// order: an explicit Deny in the bucket policy wins; then root, the
// owner, `fedgate user grant`, an Allow of the policy (unless Block Public
// Access restricts a public policy to the account) and the ACLs.
func (s *Server) decide(q *request, b backend.Bucket, action, key string) verdict {
	pr := q.principal()
	pol := s.bucketPolicy(b)
	d := access.NoOpinion
	if pol != nil {
		d = pol.Evaluate(access.Request{Principal: pr, Action: action, Resource: access.Resource(b.Name(), key), Keys: q.conditionKeys()})
	}
	if d == access.Denied {
		// Root can always manage the policy: a policy that denies
		// everything must not lock the bucket forever.
		if pr.Root && (action == "s3:GetBucketPolicy" || action == "s3:PutBucketPolicy" || action == "s3:DeleteBucketPolicy") {
			return vAllow
		}
		return vExplicitDeny
	}
	if !pr.Anonymous {
		if pr.Root || b.Owner() == pr.User {
			return vAllow
		}
		if readActions[action] && b.Authorize(q.user, false) == nil || writeActions[action] && b.Authorize(q.user, true) == nil {
			return vAllow
		}
	}
	var pab *access.PublicAccessBlock
	pabOf := func() access.PublicAccessBlock {
		if pab == nil {
			p := s.publicAccess(b)
			pab = &p
		}
		return *pab
	}
	if d == access.Allowed && !(pr.Anonymous && pol.Public() && pabOf().RestrictPublicBuckets) {
		return vAllow
	}
	if perm, ok := bucketACLPerms[action]; ok && bucketACL(b).Permits(pr, perm, pabOf().IgnorePublicAcls) {
		return vAllow
	}
	if _, ok := objectACLPerms[action]; ok && key != "" {
		return vObjectACL
	}
	return vDeny
}

// bucketFor looks up the request's bucket and checks the caller may do the
// request's action on it (and its key). A request that only an object's
// ACL could allow is refused here: handlers that read such objects use
// objectFor.
func (s *Server) bucketFor(q *request) (backend.Bucket, error) {
	b, check, err := s.objectFor(q)
	if err != nil {
		return nil, err
	}
	if check != nil {
		return nil, s.denied(q, b, q.action, vDeny)
	}
	return b, nil
}

// objectCheck decides a request that an object's ACL may allow, once the
// handler has the object's info (or its Stat error).
type objectCheck func(info store.ObjectInfo, statErr error) error

// objectFor is bucketFor for the object reads an object ACL may allow: the
// returned check (nil when already allowed) must pass before the object is
// served. A missing object is AccessDenied then, as S3 answers a caller
// without s3:ListBucket.
func (s *Server) objectFor(q *request) (backend.Bucket, objectCheck, error) {
	return s.objectNamed(q, q.bucket, q.key, q.action)
}

func (s *Server) objectNamed(q *request, name, key, action string) (backend.Bucket, objectCheck, error) {
	b, err := s.be.Bucket(name)
	if err != nil {
		return nil, nil, err
	}
	switch v := s.decide(q, b, action, key); v {
	case vAllow:
		return b, nil, nil
	case vObjectACL:
		perm := objectACLPerms[action]
		return b, func(info store.ObjectInfo, statErr error) error {
			if statErr != nil {
				if isNotFound(statErr) {
					return s.denied(q, b, action, vDeny)
				}
				return statErr
			}
			if objectACL(b, info).Permits(q.principal(), perm, s.publicAccess(b).IgnorePublicAcls) {
				return nil
			}
			return s.denied(q, b, action, vDeny)
		}, nil
	default:
		return nil, nil, s.denied(q, b, action, v)
	}
}

// statObject authorizes the request's action on its object and returns the
// object's info: objectFor, the Stat, the object ACL check, and a missing
// key hidden from a caller who may not list the bucket.
func (s *Server) statObject(q *request) (backend.Bucket, store.ObjectInfo, error) {
	b, check, err := s.objectFor(q)
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	info, err := b.Stat(q.r.Context(), q.key)
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

// hideMissing turns a missing object into AccessDenied for a caller who
// may not list the bucket, as S3 does: only a caller allowed
// s3:ListBucket learns that a key does not exist.
func (s *Server) hideMissing(q *request, b backend.Bucket, err error) error {
	if !isNotFound(err) || s.decide(q, b, "s3:ListBucket", "") == vAllow {
		return err
	}
	return s.denied(q, b, q.action, vDeny)
}

// denied is the AccessDenied answer, with a hint for the caller.
func (s *Server) denied(q *request, b backend.Bucket, action string, v verdict) error {
	switch {
	case v == vExplicitDeny:
		return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: %s on bucket %q is refused by an explicit deny in the bucket's policy", action, b.Name())
	case q.anonymous:
		return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: anonymous %s on bucket %q is not allowed by its policy or ACLs; sign the request with an access key", action, b.Name())
	case readActions[action] || writeActions[action]:
		return deniedOn(q.user.Name, b.Name(), writeActions[action])
	}
	return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: %s on bucket %q is for its owner (%s) and the root user, or whom the bucket policy allows", action, b.Name(), b.Owner())
}

// deniedOn is AccessDenied for a user without a grant on bucket, with a
// hint of how to get one.
func deniedOn(user, bucket string, write bool) error {
	perm := "read"
	if write {
		perm = "write"
	}
	return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: user %q has no %s grant on bucket %q; the root user can give one with: fedgate user grant %s %s %s",
		user, perm, bucket, user, bucket, perm)
}

// objectACLFrom returns the ACL a write sets with headers, encoded for the
// object's metadata ("" when it sets none). Block Public Access refuses a
// public one.
func (s *Server) objectACLFrom(q *request, b backend.Bucket) (string, error) {
	a, ok, err := s.aclFromHeaders(q, b)
	if err != nil || !ok {
		return "", err
	}
	// An ACL that grants to anyone but the owner needs s3:PutObjectAcl
	// as well as the write (as in S3); "private" and the bucket-owner
	// ACLs that tools send by default need only the write.
	if a.GrantsBeyondOwner() {
		if v := s.decide(q, b, "s3:PutObjectAcl", q.key); v != vAllow {
			return "", s.denied(q, b, "s3:PutObjectAcl", v)
		}
	}
	return a.Encode(), nil
}

func (s *Server) aclFromHeaders(q *request, b backend.Bucket) (access.ACL, bool, error) {
	if !access.HasACLHeaders(q.r.Header) {
		return access.ACL{}, false, nil
	}
	a, ok, err := access.FromHeaders(q.r.Header, b.Owner(), b.Owner(), s.knownUser)
	if err != nil {
		return a, false, aclError(err)
	}
	if ok && a.Public() && s.publicAccess(b).BlockPublicAcls {
		return a, false, s3err.Newf(s3err.CodeAccessDenied, "Access Denied: bucket %q blocks public ACLs (Block Public Access: BlockPublicAcls)", b.Name())
	}
	return a, ok, nil
}

// knownUser reports a fedgate user name (an ACL grantee's canonical id).
func (s *Server) knownUser(name string) bool {
	for _, u := range s.be.Users().List() {
		if u.Name == name {
			return true
		}
	}
	return false
}

// aclError maps an access package error to its S3 answer.
func aclError(err error) error {
	switch e := err.(type) {
	case *access.InvalidGranteeError:
		return s3err.New(s3err.CodeInvalidArgument, e.Error())
	case *access.UnresolvableEmailError:
		return s3err.New(s3err.CodeUnresolvableGrantByEmailAddress, e.Error())
	case *access.Error:
		if strings.HasPrefix(e.Message, "Specifying both") || strings.HasPrefix(e.Message, "unknown canned") {
			return s3err.New(s3err.CodeInvalidArgument, e.Message)
		}
		return s3err.New(s3err.CodeMalformedACLError, e.Message)
	}
	return err
}

// checkReservedMeta refuses x-amz-meta-fedgate-* entries: fedgate keeps
// an object's ACL and tags there.
func checkReservedMeta(m store.Metadata) error {
	for k := range m.User {
		if strings.HasPrefix(k, reservedMeta) {
			return s3err.Newf(s3err.CodeInvalidArgument, "User metadata x-amz-meta-%s is reserved: fedgate keeps an object's ACL and tags under x-amz-meta-%s*.", k, reservedMeta)
		}
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
