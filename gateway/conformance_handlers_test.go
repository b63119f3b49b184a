package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// A caller a bucket policy allows s3:GetObject on a prefix and
// s3:ListBucket on the bucket learns that a key is missing (404), as in
// S3; without s3:ListBucket the answer stays 403.
func TestMissingKeyWithPrefixPolicyAndListBucket(t *testing.T) {
	e := newEnv(t)
	e.bucket("pb")
	e.object("pb", "prefix/x", "x")
	noErr(t, e.putPolicy("pb", `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pb/prefix/*"},
		{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::pb"}]}`))
	for _, m := range []string{"HEAD", "GET"} {
		if code, body := e.anon(m, "/pb/prefix/missing", nil); code != 404 {
			t.Errorf("anonymous %s of a missing key = %d %s, want 404", m, code, body)
		}
	}
	_, err := e.user.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("pb"), Key: aws.String("prefix/missing")})
	wantErr(t, err, "NotFound", 404)
	_, err = e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("pb"), Key: aws.String("prefix/missing")})
	wantErr(t, err, "NoSuchKey", 404)
}

// An empty continuation-token= lists from the start and is echoed as an
// empty ContinuationToken, as S3 does (s3-tests
// test_bucket_listv2_continuationtoken_empty); without one there is none.
func TestListObjectsV2EmptyContinuationTokenEchoed(t *testing.T) {
	e := newEnv(t)
	e.bucket("lb")
	for _, k := range []string{"bar", "baz", "foo", "quxx"} {
		e.object("lb", k, k)
	}
	out, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lb"), ContinuationToken: aws.String("")})
	noErr(t, err)
	if out.ContinuationToken == nil || *out.ContinuationToken != "" || aws.ToBool(out.IsTruncated) || len(out.Contents) != 4 {
		t.Fatalf("ContinuationToken %v, truncated %v, %d keys; want an empty token echoed, 4 keys", out.ContinuationToken, aws.ToBool(out.IsTruncated), len(out.Contents))
	}
	resp, body := e.rootSigned("GET", "/lb?list-type=2&continuation-token=", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<ContinuationToken></ContinuationToken>") {
		t.Fatalf("GET ?list-type=2&continuation-token= = %d %s, want <ContinuationToken></ContinuationToken>", resp.StatusCode, body)
	}
	resp, body = e.rootSigned("GET", "/lb?list-type=2", nil, nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), "ContinuationToken") {
		t.Fatalf("GET ?list-type=2 = %d %s, want no ContinuationToken", resp.StatusCode, body)
	}
}

// awsChunkedPut PUTs body as an aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER
// upload (one chunk, no trailer), signed by root, with Content-Encoding enc.
func (e *env) awsChunkedPut(path, body, enc string) *http.Response {
	e.t.Helper()
	wire := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	req, err := http.NewRequest("PUT", e.url+path, strings.NewReader(wire))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", enc)
	req.Header.Set("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
	req.Header.Set("x-amz-decoded-content-length", strconv.Itoa(len(body)))
	creds := aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "s3", "us-east-1", time.Now()); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("aws-chunked PUT %s with Content-Encoding %q = %d %s", path, enc, resp.StatusCode, msg)
	}
	return resp
}

// Content-Encoding is stored and returned as the client sent it, less the
// aws-chunked token (s3-tests test_object_content_encoding_aws_chunked);
// with nothing left there is no Content-Encoding at all.
func TestContentEncodingWithoutAWSChunked(t *testing.T) {
	e := newEnv(t)
	e.bucket("ce")
	for _, tc := range []struct{ sent, want string }{
		{"gzip", "gzip"},
		{"deflate, gzip", "deflate, gzip"},
		{"gzip, aws-chunked", "gzip"},
		{"aws-chunked, gzip", "gzip"},
		{"aws-chunked,gzip", "gzip"},
		{"deflate, aws-chunked, gzip", "deflate, gzip"},
		{"aws-chunked", ""},
		{"AWS-Chunked", ""},
	} {
		for _, via := range []string{"aws-chunked body", "plain body"} {
			if via == "plain body" {
				resp, body := e.rootSigned("PUT", "/ce/k", []byte("data"), http.Header{"Content-Encoding": {tc.sent}})
				if resp.StatusCode != 200 {
					t.Fatalf("PUT with Content-Encoding %q = %d %s", tc.sent, resp.StatusCode, body)
				}
			} else {
				if !strings.Contains(strings.ToLower(tc.sent), "aws-chunked") {
					continue
				}
				e.awsChunkedPut("/ce/k", "data", tc.sent)
			}
			for _, m := range []string{"HEAD", "GET"} {
				// identity: net/http would otherwise ungzip the answer itself
				resp, body := e.rootSigned(m, "/ce/k", nil, http.Header{"Accept-Encoding": {"identity"}})
				got, present := resp.Header["Content-Encoding"]
				switch {
				case resp.StatusCode != 200:
					t.Fatalf("%s = %d %s", m, resp.StatusCode, body)
				case tc.want == "" && present:
					t.Errorf("%s: sent %q (%s): Content-Encoding %q, want none", via, tc.sent, m, got)
				case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
					t.Errorf("%s: sent %q (%s): Content-Encoding %q, want %q", via, tc.sent, m, got, tc.want)
				case m == "GET" && string(body) != "data":
					t.Errorf("%s: sent %q: body %q", via, tc.sent, body)
				}
			}
		}
	}
}

// The condition keys s3:x-amz-grant-* are the request's x-amz-grant-*
// headers, as in S3 (s3-tests test_bucket_policy_put_obj_grant: a bucket
// that takes objects only if they grant its owner full control).
func TestPolicyGrantConditionKeys(t *testing.T) {
	e := newEnv(t)
	e.bucket("gk")
	noErr(t, e.putPolicy("gk", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:PutObject",
		"Resource":"arn:aws:s3:::gk/*","Condition":{"StringEquals":{"s3:x-amz-grant-full-control":"id=root"}}}]}`))
	_, err := e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("gk"), Key: aws.String("k1"), Body: strings.NewReader("x"),
		GrantFullControl: aws.String("id=root")})
	noErr(t, err)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("gk"), Key: aws.String("k2"), Body: strings.NewReader("x")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("gk"), Key: aws.String("k3"), Body: strings.NewReader("x"),
		GrantFullControl: aws.String("id=alice")})
	wantErr(t, err, "AccessDenied", 403)

	// Each key, in a Deny that even root is subject to.
	for _, h := range []string{"x-amz-grant-read", "x-amz-grant-write", "x-amz-grant-read-acp", "x-amz-grant-write-acp", "x-amz-grant-full-control"} {
		e.bucket("gd")
		noErr(t, e.putPolicy("gd", `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":["s3:PutObject","s3:PutObjectAcl"],
			"Resource":"arn:aws:s3:::gd/*","Condition":{"StringLike":{"s3:`+h+`":"*alice*"}}}]}`))
		resp, body := e.rootSigned("PUT", "/gd/k", []byte("x"), http.Header{http.CanonicalHeaderKey(h): {"id=alice"}})
		if resp.StatusCode != 403 || !strings.Contains(string(body), "AccessDenied") {
			t.Errorf("PUT with %s: id=alice under a Deny on s3:%s = %d %s, want 403 AccessDenied", h, h, resp.StatusCode, body)
		}
		if resp, body := e.rootSigned("PUT", "/gd/k", []byte("x"), nil); resp.StatusCode != 200 {
			t.Fatalf("PUT without %s = %d %s", h, resp.StatusCode, body)
		}
		resp, body = e.rootSigned("PUT", "/gd/k?acl", nil, http.Header{http.CanonicalHeaderKey(h): {"id=alice"}})
		if resp.StatusCode != 403 || !strings.Contains(string(body), "AccessDenied") {
			t.Errorf("PutObjectAcl with %s: id=alice under a Deny on s3:%s = %d %s, want 403 AccessDenied", h, h, resp.StatusCode, body)
		}
		_, err := e.root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("gd")})
		noErr(t, err)
	}
}

// Keys that are not UTF-8 are refused (400 InvalidURI, as AWS answers),
// however they come: PUT, CopyObject's destination and source, multipart
// uploads and POST forms. Before, they were stored and then listed as
// another, unreadable name.
func TestKeyNotUTF8Refused(t *testing.T) {
	e := newEnv(t)
	e.bucket("u8")
	e.object("u8", "ok", "ok")
	want := func(what string, resp *http.Response, body []byte) {
		t.Helper()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>InvalidURI</Code>") || !utf8.Valid(body) {
			t.Errorf("%s = %d %q, want 400 InvalidURI in UTF-8 XML", what, resp.StatusCode, body)
		}
	}
	resp, body := e.rootSigned("PUT", "/u8/bad%FFkey", []byte("x"), nil)
	want("PUT of a key with byte 0xFF", resp, body)
	resp, body = e.rootSigned("PUT", "/u8/half%C3", []byte("x"), nil)
	want("PUT of a key ending in half a UTF-8 sequence", resp, body)
	resp, body = e.rootSigned("PUT", "/u8/copy%FF", nil, http.Header{"X-Amz-Copy-Source": {"/u8/ok"}})
	want("CopyObject to a non-UTF-8 key", resp, body)
	resp, body = e.rootSigned("PUT", "/u8/copy", nil, http.Header{"X-Amz-Copy-Source": {"/u8/src%FF"}})
	want("CopyObject from a non-UTF-8 key", resp, body)
	resp, body = e.rootSigned("POST", "/u8/mp%FF?uploads", nil, nil)
	want("CreateMultipartUpload of a non-UTF-8 key", resp, body)
	resp, body = e.rootSigned("PUT", "/u8/mp%FF?partNumber=1&uploadId=x", []byte("x"), nil)
	want("UploadPart to a non-UTF-8 key", resp, body)
	resp, _ = e.rootSigned("HEAD", "/u8/bad%FFkey", nil, nil)
	if resp.StatusCode != 400 {
		t.Errorf("HEAD of a non-UTF-8 key = %d, want 400", resp.StatusCode)
	}
	post, msg := e.postForm("/u8", append([]field{{"key", "form\xffkey"}}, rootPost(map[string]string{"bucket": "u8"}, []any{"starts-with", "$key", ""})...), "f", strings.NewReader("abc"))
	wantPostErr(t, post, msg, 400, "InvalidURI", "not valid UTF-8")
	post, msg = e.postForm("/u8", append([]field{{"key", "dir/${filename}"}}, rootPost(map[string]string{"bucket": "u8"}, []any{"starts-with", "$key", "dir/"})...), "name\xfe.txt", strings.NewReader("abc"))
	wantPostErr(t, post, msg, 400, "InvalidURI", "not valid UTF-8")

	out, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("u8")})
	noErr(t, err)
	if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "ok" {
		t.Errorf("bucket holds %d objects, want only ok", len(out.Contents))
	}
	// Valid UTF-8 beyond ASCII is a key like any other.
	_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("u8"), Key: aws.String("données/ü€😀"), Body: strings.NewReader("x")})
	noErr(t, err)
}

// GetObjectAcl and PutObjectAcl with ?versionId= act on that version (in
// the fake, as in any unversioned bucket, the null version is the object
// itself). Before, ?acl&versionId=null was routed as a plain GetObject and
// PutObject: the ACL request read the object, or overwrote it with the ACL
// document.
func TestObjectACLOfVersion(t *testing.T) {
	e := newEnv(t)
	e.bucket("va")
	e.object("va", "k", "content")
	b, k := aws.String("va"), aws.String("k")
	_, err := e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: k, VersionId: aws.String("null"), ACL: types.ObjectCannedACLPublicRead})
	noErr(t, err)
	acl, err := e.root.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: k, VersionId: aws.String("null")})
	noErr(t, err)
	public := false
	for _, g := range acl.Grants {
		if g.Grantee != nil && strings.HasSuffix(aws.ToString(g.Grantee.URI), "/AllUsers") && g.Permission == types.PermissionRead {
			public = true
		}
	}
	if !public || acl.Owner == nil {
		t.Errorf("GetObjectAcl ?versionId=null after public-read: owner %v, grants %+v", acl.Owner, acl.Grants)
	}
	if code, body := e.anon("GET", "/va/k", nil); code != 200 || body != "content" {
		t.Errorf("anonymous GET after PutObjectAcl public-read on the null version = %d %q, want 200 content", code, body)
	}
	// PutObjectAcl with an AccessControlPolicy body on the version too.
	resp, body := e.rootSigned("PUT", "/va/k?acl&versionId=null", []byte(`<AccessControlPolicy><Owner><ID>root</ID></Owner><AccessControlList>`+
		`<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>root</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant>`+
		`</AccessControlList></AccessControlPolicy>`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT ?acl&versionId=null with a body = %d %s", resp.StatusCode, body)
	}
	if code, _ := e.anon("GET", "/va/k", nil); code != 403 {
		t.Errorf("anonymous GET after a private ACL on the null version = %d, want 403", code)
	}
	out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: k})
	noErr(t, err)
	data, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(data) != "content" {
		t.Errorf("object after ACL calls on its version = %q, want content", data)
	}
	_, err = e.root.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: k, VersionId: aws.String("3f2a0000000000000000000000000000")})
	wantErr(t, err, "NoSuchVersion", 404)
	_, err = e.root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: k, VersionId: aws.String("3f2a0000000000000000000000000000"), ACL: types.ObjectCannedACLPrivate})
	wantErr(t, err, "NoSuchVersion", 404)
	// alice, without READ_ACP, may not read the version's ACL.
	_, err = e.user.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: k, VersionId: aws.String("null")})
	wantErr(t, err, "AccessDenied", 403)
}
