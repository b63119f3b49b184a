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
		return versiontest.Target{Client: c, Bucket: bucket, Skip: versiontest.MinIOSkips,
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
