package gateway_test

import (
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

// tagList renders tags as "k=v" in the order S3 returned them.
func tagList(tags []types.Tag) string {
	var out []string
	for _, t := range tags {
		out = append(out, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
	}
	return strings.Join(out, "&")
}

func tagSet(kv ...string) *types.Tagging {
	t := &types.Tagging{TagSet: []types.Tag{}}
	for i := 0; i+1 < len(kv); i += 2 {
		t.TagSet = append(t.TagSet, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return t
}

// objectTags returns the tags of bucket/key as tagList renders them.
func (e *env) objectTags(c *s3.Client, bucket, key string) string {
	e.t.Helper()
	out, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	noErr(e.t, err)
	if out.TagSet == nil {
		e.t.Fatal("GetObjectTagging answered no TagSet")
	}
	return tagList(out.TagSet)
}

func (e *env) putTags(c *s3.Client, bucket, key string, kv ...string) error {
	_, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key), Tagging: tagSet(kv...)})
	return err
}

// wantTagCount checks x-amz-tagging-count on HEAD and GET, and that the
// reserved entry never shows as user metadata.
func (e *env) wantTagCount(bucket, key string, n int32) {
	e.t.Helper()
	head, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	noErr(e.t, err)
	get, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	noErr(e.t, err)
	get.Body.Close()
	for op, got := range map[string]*int32{"HEAD": head.TagCount, "GET": get.TagCount} {
		if n == 0 && got != nil || n > 0 && aws.ToInt32(got) != n {
			e.t.Errorf("%s x-amz-tagging-count %v, want %d", op, aws.ToInt32(got), n)
		}
	}
	for op, meta := range map[string]map[string]string{"HEAD": head.Metadata, "GET": get.Metadata} {
		for k := range meta {
			if strings.HasPrefix(strings.ToLower(k), "fedgate-") {
				e.t.Errorf("%s shows reserved metadata x-amz-meta-%s", op, k)
			}
		}
	}
}

func TestObjectTagging(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("hello"),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"color": "blue"}})
	noErr(t, err)

	// No tags: an empty TagSet, 200.
	if got := e.objectTags(e.root, "bkt", "k"); got != "" {
		t.Fatalf("tags of an untagged object: %q", got)
	}
	e.wantTagCount("bkt", "k", 0)

	noErr(t, e.putTags(e.root, "bkt", "k", "project", "fedgate", "owner name", "ml team ü", "path", "a/b:c=d+e-f_g.h@i", "empty", ""))
	if got, want := e.objectTags(e.root, "bkt", "k"), "project=fedgate&owner name=ml team ü&path=a/b:c=d+e-f_g.h@i&empty="; got != want {
		t.Fatalf("tags %q, want %q (in the order put)", got, want)
	}
	e.wantTagCount("bkt", "k", 4)
	// The object is what it was: bytes, content type, user metadata.
	data, info, _ := e.fake.Object("bkt", "k")
	if string(data) != "hello" || info.ContentType != "text/plain" || info.User["color"] != "blue" {
		t.Fatalf("after PutObjectTagging: %q %q %v", data, info.ContentType, info.User)
	}
	head, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	if len(head.Metadata) != 1 || head.Metadata["color"] != "blue" {
		t.Fatalf("HEAD metadata %v, want only color=blue", head.Metadata)
	}

	// Replacing replaces the whole set.
	noErr(t, e.putTags(e.root, "bkt", "k", "only", "one"))
	if got := e.objectTags(e.root, "bkt", "k"); got != "only=one" {
		t.Fatalf("tags after replace: %q", got)
	}
	e.wantTagCount("bkt", "k", 1)

	// The same set again does not write the object again.
	_, before, _ := e.fake.Object("bkt", "k")
	noErr(t, e.putTags(e.root, "bkt", "k", "only", "one"))
	if _, after, _ := e.fake.Object("bkt", "k"); after.Validator != before.Validator {
		t.Error("putting the tags the object has rewrote it")
	}

	_, err = e.root.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	if got := e.objectTags(e.root, "bkt", "k"); got != "" {
		t.Fatalf("tags after DeleteObjectTagging: %q", got)
	}
	e.wantTagCount("bkt", "k", 0)
	if _, info, _ := e.fake.Object("bkt", "k"); len(info.User) != 1 {
		t.Fatalf("metadata after DeleteObjectTagging: %v", info.User)
	}
	// Deleting no tags: 204, nothing written.
	_, before, _ = e.fake.Object("bkt", "k")
	resp, _ := e.rootSigned(http.MethodDelete, "/bkt/k?tagging", nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DeleteObjectTagging: %d, want 204", resp.StatusCode)
	}
	if _, after, _ := e.fake.Object("bkt", "k"); after.Validator != before.Validator {
		t.Error("deleting absent tags rewrote the object")
	}

	// A missing object.
	wantErr(t, e.putTags(e.root, "bkt", "nope", "a", "b"), "NoSuchKey", 404)
	_, err = e.root.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("nope")})
	wantErr(t, err, "NoSuchKey", 404)
	_, err = e.root.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("nope")})
	wantErr(t, err, "NoSuchKey", 404)
	_, err = e.root.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("nobkt"), Key: aws.String("k")})
	wantErr(t, err, "NoSuchBucket", 404)
}

func TestObjectTaggingLimits(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	_, before, _ := e.fake.Object("bkt", "k")
	eleven := []string{}
	for i := range 11 {
		eleven = append(eleven, fmt.Sprint("k", i), "v")
	}
	for _, tc := range []struct {
		name string
		kv   []string
		code string
	}{
		{"11 tags", eleven, "BadRequest"},
		{"empty key", []string{"", "v"}, "InvalidTag"},
		{"key of 129 characters", []string{strings.Repeat("k", 129), "v"}, "InvalidTag"},
		{"value of 257 characters", []string{"k", strings.Repeat("ü", 257)}, "InvalidTag"},
		{"duplicate key", []string{"k", "1", "k", "2"}, "InvalidTag"},
		{"aws: prefix", []string{"aws:createdBy", "me"}, "InvalidTag"},
		{"AWS: prefix", []string{"AWS:x", "me"}, "InvalidTag"},
		{"key with &", []string{"a&b", "v"}, "InvalidTag"},
		{"value with *", []string{"k", "a*"}, "InvalidTag"},
		{"value with a tab", []string{"k", "a\tb"}, "InvalidTag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, e.putTags(e.root, "bkt", "k", tc.kv...), tc.code, 400)
		})
	}
	if _, after, _ := e.fake.Object("bkt", "k"); after.Validator != before.Validator {
		t.Fatal("a refused PutObjectTagging wrote the object")
	}
	// The limits are in characters, not bytes; ten tags are fine.
	noErr(t, e.putTags(e.root, "bkt", "k", strings.Repeat("é", 128), strings.Repeat("ü", 256)))
	noErr(t, e.putTags(e.root, "bkt", "k", eleven[:20]...))
	e.wantTagCount("bkt", "k", 10)
}

func TestObjectTaggingBody(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	md5b64 := func(b []byte) string { s := md5.Sum(b); return base64.StdEncoding.EncodeToString(s[:]) }
	good := []byte(`<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>`)
	for _, tc := range []struct {
		name   string
		body   []byte
		hdr    http.Header
		status int
		code   string
	}{
		{"not XML", []byte("tags"), nil, 400, "MalformedXML"},
		{"no TagSet", []byte("<Tagging></Tagging>"), nil, 400, "MalformedXML"},
		{"other root", []byte("<TagSet></TagSet>"), nil, 400, "MalformedXML"},
		{"wrong Content-MD5", good, http.Header{"Content-Md5": {md5b64([]byte("x"))}}, 400, "BadDigest"},
		{"right Content-MD5", good, http.Header{"Content-Md5": {md5b64(good)}}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.rootSigned(http.MethodPut, "/bkt/k?tagging", tc.body, tc.hdr)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.code) {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
	if got := e.objectTags(e.root, "bkt", "k"); got != "a=1" {
		t.Fatalf("tags %q", got)
	}
	resp, body := e.rootSigned(http.MethodPost, "/bkt/k?tagging", nil, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST ?tagging: %d %s", resp.StatusCode, body)
	}
	// GetObjectTagging's XML as S3 writes it.
	resp, body = e.rootSigned(http.MethodGet, "/bkt/k?tagging", nil, nil)
	want := `<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>`
	if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
		t.Fatalf("GetObjectTagging: %d %s", resp.StatusCode, body)
	}
}

// The object was replaced between the Stat and the rewrite: nothing is
// changed and the answer says to retry.
func TestObjectTaggingRace(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	e.fake.Fail(gatewaytest.OpPut, store.ErrPreconditionFailed)
	wantErr(t, e.putTags(e.root, "bkt", "k", "a", "b"), "OperationAborted", 409)
}

func TestPutObjectTaggingHeader(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	put := func(key, tagging string) error {
		_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("x"),
			Tagging: aws.String(tagging)})
		return err
	}
	noErr(t, put("a", "project=fedgate&owner+name=ml%20team%20%C3%BC&empty="))
	if got := e.objectTags(e.root, "bkt", "a"); got != "project=fedgate&owner name=ml team ü&empty=" {
		t.Fatalf("tags of x-amz-tagging: %q", got)
	}
	e.wantTagCount("bkt", "a", 3)
	// As S3: empty parameters are skipped, a name alone has an empty value.
	noErr(t, put("b", "k&&x=1&"))
	if got := e.objectTags(e.root, "bkt", "b"); got != "k=&x=1" {
		t.Fatalf("tags of k&&x=1&: %q", got)
	}
	noErr(t, put("c", ""))
	if got := e.objectTags(e.root, "bkt", "c"); got != "" {
		t.Fatalf("tags of an empty x-amz-tagging: %q", got)
	}
	var eleven []string
	for i := range 11 {
		eleven = append(eleven, fmt.Sprintf("k%d=v", i))
	}
	for _, tc := range []struct{ tagging, code string }{
		{"a=%zz", "InvalidArgument"},
		{"=", "InvalidArgument"},
		{"=v", "InvalidArgument"},
		{"a=1&a=2", "InvalidArgument"},
		{"a=%FF", "InvalidArgument"},
		{strings.Join(eleven, "&"), "BadRequest"},
		{"aws:k=v", "InvalidTag"},
		{"k=a%2Ab", "InvalidTag"},
		{strings.Repeat("k", 129) + "=v", "InvalidTag"},
	} {
		wantErr(t, put("bad", tc.tagging), tc.code, 400)
	}
	if _, _, ok := e.fake.Object("bkt", "bad"); ok {
		t.Fatal("a PUT with a bad x-amz-tagging stored the object")
	}
	// x-amz-meta-fedgate-tagging is not the client's to set.
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d"), Body: strings.NewReader("x"),
		Metadata: map[string]string{"fedgate-tagging": "a=b"}})
	wantErr(t, err, "InvalidArgument", 400)
}

func TestCopyObjectTaggingDirective(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("src"), Body: strings.NewReader("data"),
		Tagging: aws.String("a=1&b=2"), Metadata: map[string]string{"m": "v"}})
	noErr(t, err)
	copyTo := func(key string, in s3.CopyObjectInput) error {
		in.Bucket, in.Key, in.CopySource = aws.String("bkt"), aws.String(key), aws.String("bkt/src")
		_, err := e.root.CopyObject(ctx, &in)
		return err
	}
	noErr(t, copyTo("default", s3.CopyObjectInput{Tagging: aws.String("ignored=1")}))
	noErr(t, copyTo("copy", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveCopy, MetadataDirective: types.MetadataDirectiveReplace}))
	noErr(t, copyTo("replace", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("x=y")}))
	noErr(t, copyTo("replace-none", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace}))
	for key, want := range map[string]string{"default": "a=1&b=2", "copy": "a=1&b=2", "replace": "x=y", "replace-none": ""} {
		if got := e.objectTags(e.root, "bkt", key); got != want {
			t.Errorf("copy %s: tags %q, want %q", key, got, want)
		}
	}
	e.wantTagCount("bkt", "replace", 1)
	wantErr(t, copyTo("bad", s3.CopyObjectInput{TaggingDirective: "MERGE"}), "InvalidArgument", 400)
	wantErr(t, copyTo("bad", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("a=1&a=2")}), "InvalidArgument", 400)
	// Copying an object onto itself to change only its tags is still
	// refused, as in S3 (use PutObjectTagging).
	_, err = e.root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("src"), CopySource: aws.String("bkt/src"),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("z=1")})
	wantErr(t, err, "InvalidRequest", 400)
}

// Tags given to CreateMultipartUpload are the completed object's; tagging
// a multipart object writes it again, so its ETag becomes the MD5 of its
// bytes.
func TestMultipartCarriesTags(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	cu, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		Tagging: aws.String("stage=raw&team=ml")})
	noErr(t, err)
	id := aws.ToString(cu.UploadId)
	p1, p2 := e.uploadPart("mp", id, 1, "first part"), e.uploadPart("mp", id, 2, "second")
	out, err := e.root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(p1)}, {PartNumber: aws.Int32(2), ETag: aws.String(p2)}}}})
	noErr(t, err)
	if aws.ToString(out.ETag) != `"`+multipartETag("first part", "second")+`"` {
		t.Fatalf("multipart ETag %s", aws.ToString(out.ETag))
	}
	if got := e.objectTags(e.root, "bkt", "mp"); got != "stage=raw&team=ml" {
		t.Fatalf("tags of the completed upload: %q", got)
	}
	e.wantTagCount("bkt", "mp", 2)
	_, err = e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp2"),
		Tagging: aws.String("a=1&a=2")})
	wantErr(t, err, "InvalidArgument", 400)

	noErr(t, e.putTags(e.root, "bkt", "mp", "stage", "clean"))
	get, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
	noErr(t, err)
	data, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(data) != "first partsecond" || aws.ToString(get.ETag) != `"`+md5hex("first partsecond")+`"` {
		t.Fatalf("after tagging the multipart object: %q ETag %s, want its bytes and their MD5", data, aws.ToString(get.ETag))
	}
}

func TestTaggingAccess(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("x"),
		Tagging: aws.String("a=1")})
	noErr(t, err)
	noErr(t, e.putBucketTags(e.root, "bkt", "env", "prod"))

	// No grant: nothing.
	_, err = e.user.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "AccessDenied", 403)

	// Read: reads tags, changes none.
	e.grant("bkt", "read")
	if got := e.objectTags(e.user, "bkt", "k"); got != "a=1" {
		t.Fatalf("tags read with a read grant: %q", got)
	}
	bt, err := e.user.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if tagList(bt.TagSet) != "env=prod" {
		t.Fatalf("bucket tags read with a read grant: %q", tagList(bt.TagSet))
	}
	wantErr(t, e.putTags(e.user, "bkt", "k", "a", "2"), "AccessDenied", 403)
	_, err = e.user.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "AccessDenied", 403)
	if got := e.objectTags(e.root, "bkt", "k"); got != "a=1" {
		t.Fatalf("a reader changed the tags: %q", got)
	}

	// Write: tags objects (and writes tagged ones); bucket tags stay the
	// owner's.
	e.grant("bkt", "write")
	noErr(t, e.putTags(e.user, "bkt", "k", "a", "2"))
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mine"), Body: strings.NewReader("x"),
		Tagging: aws.String("by=alice")})
	noErr(t, err)
	_, err = e.user.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	wantErr(t, e.putBucketTags(e.user, "bkt", "env", "dev"), "AccessDenied", 403)
	_, err = e.user.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "AccessDenied", 403)
}

// A bucket policy that allows s3:PutObject but not s3:PutObjectTagging:
// a PUT with x-amz-tagging is refused, one without is not.
func TestPutObjectTaggingNeedsPermission(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123456789012:user/alice"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::bkt/*"}]}`
	_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("bkt"), Policy: aws.String(policy)})
	noErr(t, err)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("x")})
	noErr(t, err)
	_, err = e.user.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("t"), Body: strings.NewReader("x"),
		Tagging: aws.String("a=1")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("t"), Tagging: aws.String("a=1")})
	wantErr(t, err, "AccessDenied", 403)
}

func (e *env) putBucketTags(c *s3.Client, bucket string, kv ...string) error {
	_, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(bucket), Tagging: tagSet(kv...)})
	return err
}

func TestBucketTagging(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	_, err := e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "NoSuchTagSet", 404)

	noErr(t, e.putBucketTags(e.root, "bkt", "env", "prod", "cost center", "ml 42", "empty", ""))
	out, err := e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if got := tagList(out.TagSet); got != "env=prod&cost center=ml 42&empty=" {
		t.Fatalf("bucket tags %q", got)
	}
	if doc, ok := e.fake.MustBucket("bkt").Config("tagging"); !ok || !strings.HasPrefix(doc, "<Tagging") {
		t.Fatalf("stored configuration %q %v, want the Tagging document", doc, ok)
	}

	var fifty, fiftyOne []string
	for i := range 51 {
		fiftyOne = append(fiftyOne, fmt.Sprint("k", i), "v")
	}
	fifty = fiftyOne[:100]
	for _, tc := range []struct {
		name string
		kv   []string
		code string
	}{
		{"51 tags", fiftyOne, "BadRequest"},
		{"duplicate key", []string{"k", "1", "k", "2"}, "InvalidTag"},
		{"aws: prefix", []string{"aws:cloudformation:stack-name", "x"}, "InvalidTag"},
		{"bad character", []string{"k", "a;b"}, "InvalidTag"},
		{"key of 129 characters", []string{strings.Repeat("k", 129), "v"}, "InvalidTag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, e.putBucketTags(e.root, "bkt", tc.kv...), tc.code, 400)
		})
	}
	noErr(t, e.putBucketTags(e.root, "bkt", fifty...))
	out, err = e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if len(out.TagSet) != 50 {
		t.Fatalf("%d bucket tags, want 50", len(out.TagSet))
	}

	resp, _ := e.rootSigned(http.MethodDelete, "/bkt?tagging", nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DeleteBucketTagging: %d, want 204", resp.StatusCode)
	}
	_, err = e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "NoSuchTagSet", 404)
	// Deleting again is fine; an empty TagSet leaves no tags.
	_, err = e.root.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	noErr(t, e.putBucketTags(e.root, "bkt", "a", "b"))
	noErr(t, e.putBucketTags(e.root, "bkt"))
	_, err = e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "NoSuchTagSet", 404)

	resp, body := e.rootSigned(http.MethodPut, "/bkt?tagging", []byte("<Tagging/>"), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "MalformedXML") {
		t.Fatalf("PutBucketTagging without a TagSet: %d %s", resp.StatusCode, body)
	}
	resp, _ = e.rootSigned(http.MethodPut, "/bkt?tagging", []byte("<Tagging><TagSet/></Tagging>"), nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PutBucketTagging: %d, want 204", resp.StatusCode)
	}
	wantErr(t, e.putBucketTags(e.root, "nobkt", "a", "b"), "NoSuchBucket", 404)
}

// The query of a tagged object's key: a "?tagging" inside a key is part
// of the key, not the subresource.
func TestTaggingKeyEscaping(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	key := "dir/a b?tagging&x=1"
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("x"),
		Tagging: aws.String(url.Values{"k": {"v w"}}.Encode())})
	noErr(t, err)
	if got := e.objectTags(e.root, "bkt", key); got != "k=v w" {
		t.Fatalf("tags %q", got)
	}
}
