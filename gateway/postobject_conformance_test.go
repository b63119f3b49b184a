package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// The POST Object cases a public S3 conformance suite (ceph's s3-tests)
// checks, as AWS documents them.

// rootPostDoc is a root-signed form whose policy document is doc, as is.
func rootPostDoc(doc string) []field {
	date := time.Now().UTC().Format("20060102T150405Z")
	cred := gatewaytest.RootAccessKey + "/" + date[:8] + "/us-east-1/s3/aws4_request"
	doc = strings.NewReplacer("$CRED", cred, "$DATE", date).Replace(doc)
	return signPostDoc(gatewaytest.RootSecretKey, cred, date, []byte(doc))
}

func TestPostObjectSuccessActionStatus(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	conds := []any{map[string]string{"bucket": "up"}, []any{"starts-with", "$key", ""}, []any{"starts-with", "$success_action_status", ""}}
	// AWS: a value other than 200, 201 or 204 is answered as 204.
	for _, status := range []string{"404", "hello", "2010", ""} {
		fields := append([]field{{"key", "s" + status}, {"success_action_status", status}}, rootPost(conds...)...)
		if resp, body := e.postForm("/up", fields, "f", strings.NewReader("x")); resp.StatusCode != 204 || body != "" {
			t.Errorf("success_action_status %q: %d %s", status, resp.StatusCode, body)
		}
	}
	fields := append([]field{{"key", "c"}, {"success_action_status", "201"}}, rootPost(conds...)...)
	resp, body := e.postForm("/up", fields, "f", strings.NewReader("abc"))
	want := `<PostResponse><Location>` + e.url + `/up/c</Location><Bucket>up</Bucket><Key>c</Key><ETag>&#34;` + md5hex("abc") + `&#34;</ETag></PostResponse>`
	if resp.StatusCode != 201 || !strings.HasSuffix(body, want) || resp.Header.Get("Content-Type") != "application/xml" {
		t.Errorf("201: %d %s %s, want %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
	}
}

func TestPostObjectRedirect(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	for _, name := range []string{"success_action_redirect", "redirect"} {
		conds := []any{map[string]string{"bucket": "up"}, map[string]string{"key": "foo.txt"}, []any{"eq", "$" + name, e.url + "/up"}}
		fields := append([]field{{"key", "foo.txt"}, {name, e.url + "/up"}}, rootPost(conds...)...)
		resp, body := e.postForm("/up", fields, "f", strings.NewReader("bar"))
		// s3-tests compares the whole URL: bucket, key, etag in that order.
		want := fmt.Sprintf("%s/up?bucket=up&key=foo.txt&etag=%%22%s%%22", e.url, md5hex("bar"))
		if resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("%s: %d Location %q, want %q (%s)", name, resp.StatusCode, resp.Header.Get("Location"), want, body)
		}
	}
	// A redirect that is not an absolute URL falls back to the status.
	conds := []any{map[string]string{"bucket": "up"}, map[string]string{"key": "k"}, map[string]string{"success_action_redirect": "nowhere"}}
	fields := append([]field{{"key", "k"}, {"success_action_redirect", "nowhere"}}, rootPost(conds...)...)
	if resp, body := e.postForm("/up", fields, "f", strings.NewReader("x")); resp.StatusCode != 204 {
		t.Errorf("relative redirect: %d %s", resp.StatusCode, body)
	}
}

func TestPostObjectPolicyCase(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	exp := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z")
	sig := `{"x-amz-algorithm": "AWS4-HMAC-SHA256"}, {"x-amz-credential": "$CRED"}, {"x-amz-date": "$DATE"}`
	// Operators and field names match whatever their case; the form's
	// field names too.
	doc := `{"expiration": "` + exp + `", "conditions": [{"BUCKET": "up"}, ["StArTs-WiTh", "$KeY", "foo"], {"acl": "private"},
		["EQ", "$CoNtEnT-TyPe", "text/plain"], ["content-length-range", 0, 1024], ` + sig + `]}`
	fields := append([]field{{"kEy", "foo.txt"}, {"ACL", "private"}, {"Content-Type", "text/plain"}}, rootPostDoc(doc)...)
	if resp, body := e.postForm("/up", fields, "f", strings.NewReader("bar")); resp.StatusCode != 204 {
		t.Errorf("mixed-case conditions and fields: %d %s", resp.StatusCode, body)
	}
	// The document's own keys are case-sensitive.
	for _, d := range []string{
		`{"EXPIRATION": "` + exp + `", "conditions": [{"bucket": "up"}, ["starts-with", "$key", ""], ` + sig + `]}`,
		`{"Expiration": "` + exp + `", "conditions": [{"bucket": "up"}, ["starts-with", "$key", ""], ` + sig + `]}`,
		`{"expiration": "` + exp + `", "CONDITIONS": [{"bucket": "up"}, ["starts-with", "$key", ""], ` + sig + `]}`,
		`{"expiration": "` + exp + `", "Conditions": [{"bucket": "up"}, ["starts-with", "$key", ""], ` + sig + `]}`,
	} {
		resp, body := e.postForm("/up", append([]field{{"key", "bad.txt"}}, rootPostDoc(d)...), "f", strings.NewReader("bar"))
		wantPostErr(t, resp, body, 400, "InvalidPolicyDocument", "Invalid Policy: Policy missing ")
	}
	if _, _, ok := e.fake.Object("up", "bad.txt"); ok {
		t.Error("a form with a malformed policy was stored")
	}
}

func TestPostObjectTagging(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	xmlTags := "<Tagging><TagSet><Tag><Key>0</Key><Value>0</Value></Tag><Tag><Key>a b</Key><Value>x+y</Value></Tag></TagSet></Tagging>"
	conds := []any{map[string]string{"bucket": "up"}, []any{"starts-with", "$key", ""}, []any{"starts-with", "$tagging", ""}}
	resp, body := e.postForm("/up", append([]field{{"key", "t"}, {"tagging", xmlTags}}, rootPost(conds...)...), "f", strings.NewReader("x"))
	if resp.StatusCode != 204 {
		t.Fatalf("POST with tagging: %d %s", resp.StatusCode, body)
	}
	got, err := e.root.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("up"), Key: aws.String("t")})
	noErr(t, err)
	if len(got.TagSet) != 2 || aws.ToString(got.TagSet[0].Key) != "0" || aws.ToString(got.TagSet[1].Key) != "a b" || aws.ToString(got.TagSet[1].Value) != "x+y" {
		t.Errorf("tags %+v", got.TagSet)
	}
	head, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("up"), Key: aws.String("t")})
	noErr(t, err)
	if len(head.Metadata) != 0 {
		t.Errorf("tags showed as user metadata: %v", head.Metadata)
	}

	bad := map[string]string{
		"<Tagging><TagSet><Tag><Key>a</Key>": "MalformedXML",
		"<Tagging></Tagging>":                "MalformedXML",
		"<Tagging><TagSet><Tag><Key>aws:x</Key><Value>1</Value></Tag></TagSet></Tagging>": "InvalidTag",
	}
	for doc, code := range bad {
		resp, body := e.postForm("/up", append([]field{{"key", "bad"}, {"tagging", doc}}, rootPost(conds...)...), "f", strings.NewReader("x"))
		wantPostErr(t, resp, body, 400, code, "")
	}
	many := "<Tagging><TagSet>"
	for i := range 11 {
		many += fmt.Sprintf("<Tag><Key>k%d</Key><Value>v</Value></Tag>", i)
	}
	many += "</TagSet></Tagging>"
	resp, body = e.postForm("/up", append([]field{{"key", "bad"}, {"tagging", many}}, rootPost(conds...)...), "f", strings.NewReader("x"))
	wantPostErr(t, resp, body, 400, "BadRequest", "")
	if _, _, ok := e.fake.Object("up", "bad"); ok {
		t.Error("a form with bad tags was stored")
	}

	// Tagging with a write needs s3:PutObjectTagging, as x-amz-tagging
	// on a PUT does.
	e.bucket("drop")
	put := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":%s,"Resource":"arn:aws:s3:::drop/*"}]}`
	_, err = e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("drop"), Policy: aws.String(fmt.Sprintf(put, `"s3:PutObject"`))})
	noErr(t, err)
	resp, body = e.postForm("/drop", []field{{"key", "a"}, {"tagging", xmlTags}}, "f", strings.NewReader("x"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "s3:PutObjectTagging")
	_, err = e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("drop"), Policy: aws.String(fmt.Sprintf(put, `["s3:PutObject","s3:PutObjectTagging"]`))})
	noErr(t, err)
	if resp, body = e.postForm("/drop", []field{{"key", "a"}, {"tagging", xmlTags}}, "f", strings.NewReader("x")); resp.StatusCode != 204 {
		t.Fatalf("anonymous POST with tagging allowed: %d %s", resp.StatusCode, body)
	}
	got, err = e.root.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("drop"), Key: aws.String("a")})
	noErr(t, err)
	if len(got.TagSet) != 2 {
		t.Errorf("anonymous upload's tags %+v", got.TagSet)
	}
}

// A form without policy and signature is anonymous: it needs the bucket to
// let everyone write, here by a public-read-write ACL (s3-tests'
// test_post_object_anonymous_request).
func TestPostObjectAnonymousACL(t *testing.T) {
	e := newEnv(t)
	e.bucket("pub")
	form := []field{{"key", "foo.txt"}, {"acl", "private"}, {"Content-Type", "text/plain"}}
	resp, body := e.postForm("/pub", form, "f", strings.NewReader("bar"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "anonymous s3:PutObject ")
	_, err := e.root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String("pub"), ACL: types.BucketCannedACLPublicReadWrite})
	noErr(t, err)
	// An ACL granting others needs s3:PutObjectAcl besides the write, as
	// on a PUT (docs/security.md): the bucket ACL's WRITE is not that.
	pubForm := []field{{"key", "foo.txt"}, {"acl", "public-read"}, {"Content-Type", "text/plain"}}
	resp, body = e.postForm("/pub", pubForm, "f", strings.NewReader("bar"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "anonymous s3:PutObjectAcl")
	if resp, body = e.postForm("/pub", form, "f", strings.NewReader("bar")); resp.StatusCode != 204 {
		t.Fatalf("anonymous POST to a public-read-write bucket: %d %s", resp.StatusCode, body)
	}
	out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("pub"), Key: aws.String("foo.txt")})
	noErr(t, err)
	out.Body.Close()
	if aws.ToString(out.ContentType) != "text/plain" {
		t.Errorf("Content-Type %q", aws.ToString(out.ContentType))
	}
	// A form with a policy but no signature is not anonymous.
	resp, body = e.postForm("/pub", append(form, field{"policy", "e30="}), "f", strings.NewReader("bar"))
	wantPostErr(t, resp, body, 400, "InvalidArgument", "must contain a field named")
}
