package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/gateway"
)

// x-amz-expected-bucket-owner: fedgate's buckets all belong to account
// gateway.AccountID; another id is 403 AccessDenied on every bucket and
// object operation, as in S3.
func TestExpectedBucketOwner(t *testing.T) {
	e := newEnv(t)
	e.bucket("b")
	e.object("b", "k", "data")
	for _, owner := range []string{"111122223333", "", "alice", "root"} {
		o := aws.String(owner)
		_, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), ExpectedBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("new"), Body: strings.NewReader("x"), ExpectedBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b"), ExpectedBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("b"), ExpectedBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), ExpectedBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		_, err = e.root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("b"), Key: aws.String("copy"), CopySource: aws.String("b/k"), ExpectedSourceBucketOwner: o})
		wantErr(t, err, "AccessDenied", 403)
		resp, _ := e.rootSigned(http.MethodHead, "/b", nil, http.Header{"X-Amz-Expected-Bucket-Owner": {owner}})
		if resp.StatusCode != 403 {
			t.Errorf("HeadBucket, owner %q: %d", owner, resp.StatusCode)
		}
	}
	if _, _, ok := e.fake.Object("b", "new"); ok {
		t.Error("a PUT naming another owner stored the object")
	}
	if _, _, ok := e.fake.Object("b", "k"); !ok {
		t.Error("a DELETE naming another owner deleted the object")
	}

	// The account's id works, for root and for a user alike.
	o := aws.String(gateway.AccountID)
	out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), ExpectedBucketOwner: o})
	noErr(t, err)
	out.Body.Close()
	_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("new"), Body: strings.NewReader("x"), ExpectedBucketOwner: o})
	noErr(t, err)
	_, err = e.root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("b"), Key: aws.String("copy"), CopySource: aws.String("b/k"), ExpectedBucketOwner: o, ExpectedSourceBucketOwner: o})
	noErr(t, err)
	_, err = e.root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("b"), ExpectedBucketOwner: o})
	noErr(t, err)
	e.grant("b", "read")
	_, err = e.user.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b"), ExpectedBucketOwner: o})
	noErr(t, err)
	// ListBuckets names no bucket: the header changes nothing.
	resp, body := e.rootSigned(http.MethodGet, "/", nil, http.Header{"X-Amz-Expected-Bucket-Owner": {"111122223333"}})
	if resp.StatusCode != 200 {
		t.Errorf("ListBuckets: %d %s", resp.StatusCode, body)
	}
}
