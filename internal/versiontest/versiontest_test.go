package versiontest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/versiontest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

// The suite against a real S3 implementation, MinIO: it validates the
// suite's checks, and where MinIO departs from AWS's documentation the
// check follows AWS and MinIO's target skips it with the reason.
func TestMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Region:       srv.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	versiontest.Run(t, func(t *testing.T) versiontest.Target {
		bucket := srv.NewBucket(t)
		return versiontest.Target{Client: c, Bucket: bucket, Skip: minioSkips,
			Enable: func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &bucket,
					VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
				if err != nil {
					t.Fatalf("enabling versioning on %s: %v", bucket, err)
				}
			},
		}
	})
}

// minioSkips are where MinIO departs from AWS's documented behaviour.
var minioSkips = map[string]string{
	versiontest.CapMarkerOverMarker: "MinIO: a DELETE of a key whose newest version is a delete marker answers that marker's id " +
		"and adds none (S3 user guide: a simple DELETE on a delete marker adds a new delete marker)",
	versiontest.CapDeleteAbsent: "MinIO: a DELETE of a key never written adds no delete marker in a versioned bucket (S3 adds one)",
	versiontest.CapHiddenPrefix: "MinIO: ListObjectsV2 with a delimiter lists a common prefix whose only keys are under delete markers",
	versiontest.CapSuspendedDelete: "MinIO: a DELETE while Suspended answers without x-amz-delete-marker: true and " +
		"x-amz-version-id: null (it does make the null delete marker, as the listing shows)",
	versiontest.CapCopyFromMarker: "MinIO: CopyObject naming a delete marker's id answers 405 MethodNotAllowed " +
		"(CopyObject reference: 400, a delete marker cannot be a copy source)",
	versiontest.CapDeleteObjectsDM: "MinIO: DeleteObjects removing a delete marker by id reports neither DeleteMarker " +
		"nor DeleteMarkerVersionId (DeletedObject reference: both)",
}
