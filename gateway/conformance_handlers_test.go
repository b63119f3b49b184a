package gateway_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

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
