package e2e

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PutObject and CompleteMultipartUpload answer a version id only in a
// bucket with versioning enabled: none in a bucket never versioned or
// suspended (where the write is the null version), as S3 does (s3-tests
// test_versioning_bucket_atomic_upload_return_version_id and
// test_versioning_bucket_multipart_upload_return_version_id).
func TestWriteVersionIDOnlyWhenEnabled(t *testing.T) {
	s := startServer(t)
	c := s.root()
	setVersioning := func(bucket string, st types.BucketVersioningStatus) {
		t.Helper()
		mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
			VersioningConfiguration: &types.VersioningConfiguration{Status: st}})))
	}
	complete := func(bucket, key string) *s3.CompleteMultipartUploadOutput {
		t.Helper()
		bk, k := aws.String(bucket), aws.String(key)
		cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: bk, Key: k})
		mustOK(t, err)
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: bk, Key: k, UploadId: cu.UploadId, PartNumber: aws.Int32(1),
			Body: bytes.NewReader([]byte("one part"))})
		mustOK(t, err)
		out, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: k, UploadId: cu.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}})
		mustOK(t, err)
		return out
	}
	for _, tc := range []struct {
		bucket string
		states []types.BucketVersioningStatus
		want   bool
	}{
		{"never-versioned", nil, false},
		{"suspended-only", []types.BucketVersioningStatus{types.BucketVersioningStatusSuspended}, false},
		{"enabled", []types.BucketVersioningStatus{types.BucketVersioningStatusEnabled}, true},
		{"suspended-later", []types.BucketVersioningStatus{types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended}, false},
	} {
		mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(tc.bucket)})))
		for _, st := range tc.states {
			setVersioning(tc.bucket, st)
		}
		po := put(t, c, tc.bucket, "k", []byte("x"))
		mo := complete(tc.bucket, "mp")
		if got := po.VersionId != nil; got != tc.want {
			t.Errorf("%s: PutObject VersionId %q, want one: %v", tc.bucket, aws.ToString(po.VersionId), tc.want)
		}
		if got := mo.VersionId != nil; got != tc.want {
			t.Errorf("%s: CompleteMultipartUpload VersionId %q, want one: %v", tc.bucket, aws.ToString(mo.VersionId), tc.want)
		}
		if tc.want && (aws.ToString(po.VersionId) == "null" || aws.ToString(mo.VersionId) == "null") {
			t.Errorf("%s: version ids %q, %q in an enabled bucket", tc.bucket, aws.ToString(po.VersionId), aws.ToString(mo.VersionId))
		}
	}
}
