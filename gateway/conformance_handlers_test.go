package gateway_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
