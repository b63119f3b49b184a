package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/policies"
)

// anon sends an unsigned request and returns its status and body.
func (e *env) anon(method, path string, hdr http.Header) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (e *env) putPolicy(bucket, doc string) error {
	_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(doc)})
	return err
}

const publicPrefixPolicy = `{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Allow","Principal":"*",
	"Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/public/*"}]}`

func TestPolicyOpensOnlyItsPrefix(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	e.object("datasets", "public/x", "open")
	e.object("datasets", "private/y", "closed")
	if code, _ := e.anon("GET", "/datasets/public/x", nil); code != 403 {
		t.Fatalf("anonymous GET before any policy: %d", code)
	}
	noErr(t, e.putPolicy("datasets", publicPrefixPolicy))
	if code, body := e.anon("GET", "/datasets/public/x", nil); code != 200 || body != "open" {
		t.Errorf("anonymous GET public/x = %d %q", code, body)
	}
	if code, _ := e.anon("HEAD", "/datasets/public/x", nil); code != 200 {
		t.Errorf("anonymous HEAD public/x = %d", code)
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/datasets/private/y"},
		{"GET", "/datasets/public/missing"}, // 403, not 404: no s3:ListBucket
		{"GET", "/datasets?list-type=2"},
		{"GET", "/datasets?policy"},
		{"PUT", "/datasets/public/new"},
		{"DELETE", "/datasets/public/x"},
		{"GET", "/"},
	} {
		code, body := e.anon(tc.method, tc.path, nil)
		if code != 403 || !strings.Contains(body, "AccessDenied") {
			t.Errorf("anonymous %s %s = %d %s, want 403 AccessDenied", tc.method, tc.path, code, body)
		}
	}
	// alice, without grants, reads through the policy too, and nothing else.
	out, err := e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("public/x")})
	noErr(t, err)
	out.Body.Close()
	_, err = e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("private/y")})
	wantErr(t, err, "AccessDenied", 403)

	st, err := e.root.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	if !aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Error("policy status is not public")
	}
	got, err := e.root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	if aws.ToString(got.Policy) != publicPrefixPolicy {
		t.Errorf("GetBucketPolicy = %s", aws.ToString(got.Policy))
	}
	_, err = e.root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	if code, _ := e.anon("GET", "/datasets/public/x", nil); code != 403 {
		t.Errorf("anonymous GET after DeleteBucketPolicy: %d", code)
	}
	_, err = e.root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("datasets")})
	wantErr(t, err, "NoSuchBucketPolicy", 404)
}

func TestDenyBeatsGrant(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	e.object("datasets", "train/a", "a")
	e.object("datasets", "secret/b", "b")
	e.grant("datasets", "write")
	noErr(t, e.putPolicy("datasets", `{"Version":"2012-10-17","Statement":[{"Effect":"Deny",
		"Principal":{"AWS":"arn:aws:iam::000000000000:user/alice"},"Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],
		"Resource":"arn:aws:s3:::datasets/secret/*"}]}`))
	get := func(key string) error {
		out, err := e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String(key)})
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	noErr(t, get("train/a"))
	resp := wantErr(t, get("secret/b"), "AccessDenied", 403)
	_ = resp
	_, err := e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("secret/c"), Body: strings.NewReader("x")})
	wantErr(t, err, "AccessDenied", 403)
	// DeleteObjects refuses the denied key and deletes the other.
	out, err := e.user.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("datasets"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("train/a")}, {Key: aws.String("secret/b")}}}})
	noErr(t, err)
	if len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "train/a" || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Errorf("DeleteObjects = deleted %v, errors %v", out.Deleted, out.Errors)
	}
	if _, _, ok := e.fake.Object("datasets", "secret/b"); !ok {
		t.Error("the denied key was deleted")
	}
	// The policy applies to root too, except that root can still change it.
	_, err = e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("secret/b")})
	noErr(t, err) // the statement names alice only
	noErr(t, e.putPolicy("datasets", `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::datasets","arn:aws:s3:::datasets/*"]}]}`))
	_, err = e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("secret/b")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String("datasets"), ACL: types.BucketCannedACLPrivate})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("datasets")})
	noErr(t, err)
}

func TestPutBucketPolicyErrors(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	for _, tc := range []struct{ doc, want string }{
		{`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObjet","Resource":"arn:aws:s3:::datasets/*"}]}`, `did you mean "s3:GetObject"`},
		{`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}]}`, "can only name resources in it"},
		{`not json`, "invalid Json"},
	} {
		err := e.putPolicy("datasets", tc.doc)
		wantErr(t, err, "MalformedPolicy", 400)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v lacks %q", err, tc.want)
		}
	}
	if _, ok := e.fake.Bucket("datasets"); ok == nil {
		b, _ := e.fake.Bucket("datasets")
		if _, set := b.Config("policy"); set {
			t.Error("a refused policy was stored")
		}
	}
	// Only the owner and root manage policies: a write grant is not enough.
	e.grant("datasets", "write")
	_, err := e.user.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(publicPrefixPolicy)})
	wantErr(t, err, "AccessDenied", 403)
}

func TestACLs(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("pub"), Body: strings.NewReader("p"), ACL: types.ObjectCannedACLPublicRead})
	noErr(t, err)
	e.object("datasets", "priv", "q")
	if code, body := e.anon("GET", "/datasets/pub", nil); code != 200 || body != "p" {
		t.Errorf("anonymous GET of a public-read object = %d %q", code, body)
	}
	if code, _ := e.anon("GET", "/datasets/priv", nil); code != 403 {
		t.Errorf("anonymous GET of a private object = %d", code)
	}
	// The ACL is not user metadata.
	head, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("datasets"), Key: aws.String("pub")})
	noErr(t, err)
	if len(head.Metadata) != 0 {
		t.Errorf("metadata = %v", head.Metadata)
	}
	acl, err := e.root.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("pub")})
	noErr(t, err)
	var groups []string
	for _, g := range acl.Grants {
		if g.Grantee.Type == types.TypeGroup {
			groups = append(groups, aws.ToString(g.Grantee.URI)+":"+string(g.Permission))
		}
	}
	if len(groups) != 1 || groups[0] != "http://acs.amazonaws.com/groups/global/AllUsers:READ" || aws.ToString(acl.Owner.ID) != "root" {
		t.Errorf("GetObjectAcl = owner %v, groups %v", aws.ToString(acl.Owner.ID), groups)
	}
	// PutObjectAcl makes it private again; the bytes stay.
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("pub"), ACL: types.ObjectCannedACLPrivate})
	noErr(t, err)
	if code, _ := e.anon("GET", "/datasets/pub", nil); code != 403 {
		t.Errorf("anonymous GET after PutObjectAcl private = %d", code)
	}
	if data, _, _ := e.fake.Object("datasets", "pub"); string(data) != "p" {
		t.Errorf("object after PutObjectAcl = %q", data)
	}
	// A bucket ACL: public-read lets anyone list; a grant by id lets alice read objects? No: bucket READ is listing only.
	_, err = e.root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String("datasets"), ACL: types.BucketCannedACLPublicRead})
	noErr(t, err)
	if code, body := e.anon("GET", "/datasets?list-type=2", nil); code != 200 || !strings.Contains(body, "<Key>priv</Key>") {
		t.Errorf("anonymous list of a public-read bucket = %d %s", code, body)
	}
	if code, _ := e.anon("GET", "/datasets/priv", nil); code != 403 {
		t.Errorf("bucket public-read opened an object: %d", code)
	}
	bacl, err := e.root.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	if len(bacl.Grants) != 2 {
		t.Errorf("bucket ACL grants = %+v", bacl.Grants)
	}
	// Grants by id in headers; unknown ids and e-mail grantees are refused.
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("priv"), GrantRead: aws.String(`id="alice"`)})
	noErr(t, err)
	out, err := e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("priv")})
	noErr(t, err)
	out.Body.Close()
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("priv"), GrantRead: aws.String(`id="mallory"`)})
	wantErr(t, err, "InvalidArgument", 400)
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("priv"), GrantRead: aws.String(`emailAddress="a@b.c"`)})
	wantErr(t, err, "UnresolvableGrantByEmailAddress", 400)
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("datasets"), Key: aws.String("priv"),
		AccessControlPolicy: &types.AccessControlPolicy{Owner: &types.Owner{ID: aws.String("root")}, Grants: []types.Grant{{
			Grantee: &types.Grantee{Type: types.TypeGroup, URI: aws.String("http://acs.amazonaws.com/groups/global/AllUsers")}, Permission: types.PermissionRead}}}})
	noErr(t, err)
	if code, _ := e.anon("GET", "/datasets/priv", nil); code != 200 {
		t.Errorf("anonymous GET after an XML ACL for AllUsers = %d", code)
	}
	// x-amz-meta-fedgate-* is reserved.
	_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("m"), Body: strings.NewReader("m"), Metadata: map[string]string{"fedgate-acl": "{}"}})
	wantErr(t, err, "InvalidArgument", 400)
	// A copy does not carry the source's ACL.
	_, err = e.root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("datasets"), Key: aws.String("copy"), CopySource: aws.String("datasets/priv")})
	noErr(t, err)
	if code, _ := e.anon("GET", "/datasets/copy", nil); code != 403 {
		t.Errorf("a copy of a public object is public: %d", code)
	}
}

func TestPublicAccessBlock(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	e.object("datasets", "public/x", "x")
	_, err := e.root.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("datasets")})
	wantErr(t, err, "NoSuchPublicAccessBlockConfiguration", 404)
	_, err = e.root.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String("datasets"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true), BlockPublicAcls: aws.Bool(true)}})
	noErr(t, err)
	got, err := e.root.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	if c := got.PublicAccessBlockConfiguration; !aws.ToBool(c.BlockPublicPolicy) || !aws.ToBool(c.BlockPublicAcls) || aws.ToBool(c.IgnorePublicAcls) {
		t.Errorf("GetPublicAccessBlock = %+v", c)
	}
	wantErr(t, e.putPolicy("datasets", publicPrefixPolicy), "AccessDenied", 403)
	// A policy limited to a network is not public.
	noErr(t, e.putPolicy("datasets", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject",
		"Resource":"arn:aws:s3:::datasets/public/*","Condition":{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}}]}`))
	if code, _ := e.anon("GET", "/datasets/public/x", nil); code != 200 {
		t.Errorf("anonymous GET from 127.0.0.1 under an IpAddress policy = %d", code)
	}
	_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("y"), Body: strings.NewReader("y"), ACL: types.ObjectCannedACLPublicRead})
	wantErr(t, err, "AccessDenied", 403)
	if _, _, ok := e.fake.Object("datasets", "y"); ok {
		t.Error("a refused public-read PUT stored the object")
	}
	_, err = e.root.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String("datasets")})
	noErr(t, err)
	noErr(t, e.putPolicy("datasets", publicPrefixPolicy))

	// The region's default (policy file) applies on top of the bucket's:
	// RestrictPublicBuckets keeps a public policy from serving anonymous
	// callers, IgnorePublicAcls makes public ACLs count for nothing.
	e.fake.SetPublicAccessDefault(policies.PublicAccessBlock{RestrictPublicBuckets: true, IgnorePublicACLs: true})
	if code, _ := e.anon("GET", "/datasets/public/x", nil); code != 403 {
		t.Errorf("anonymous GET under RestrictPublicBuckets = %d", code)
	}
	out, err := e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("public/x")})
	noErr(t, err) // users of the region still read through the policy
	out.Body.Close()
	e.fake.SetPublicAccessDefault(policies.PublicAccessBlock{})
	if code, _ := e.anon("GET", "/datasets/public/x", nil); code != 200 {
		t.Errorf("anonymous GET after the default is lifted = %d", code)
	}
}

// A user allowed to write objects may send the ACLs tools send by default,
// but granting to others needs s3:PutObjectAcl too.
func TestWriterACLNeedsPutObjectAcl(t *testing.T) {
	e := newEnv(t)
	e.bucket("datasets")
	e.grant("datasets", "write")
	_, err := e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("a"), Body: strings.NewReader("a"), ACL: types.ObjectCannedACLPrivate})
	noErr(t, err)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("b"), Body: strings.NewReader("b"), ACL: types.ObjectCannedACLBucketOwnerFullControl})
	noErr(t, err)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("c"), Body: strings.NewReader("c"), ACL: types.ObjectCannedACLPublicRead})
	wantErr(t, err, "AccessDenied", 403)
	if _, _, ok := e.fake.Object("datasets", "c"); ok {
		t.Error("a refused public-read PUT stored the object")
	}
	noErr(t, e.putPolicy("datasets", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/alice"},
		"Action":"s3:PutObjectAcl","Resource":"arn:aws:s3:::datasets/*"}]}`))
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("c"), Body: strings.NewReader("c"), ACL: types.ObjectCannedACLPublicRead})
	noErr(t, err)
	if code, _ := e.anon("GET", "/datasets/c", nil); code != 200 {
		t.Errorf("anonymous GET of alice's public-read object = %d", code)
	}
}
