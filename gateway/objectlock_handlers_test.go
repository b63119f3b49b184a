package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestObjectLockOnBucketWithout: the object lock calls on a bucket without
// object lock answer S3's errors, not 501 (issue 35).
func TestObjectLockOnBucketWithout(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	b, k := aws.String("bkt"), aws.String("k")
	_, err := e.root.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: b})
	wantErr(t, err, "ObjectLockConfigurationNotFoundError", 404)
	_, err = e.root.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: b, Key: k})
	wantErr(t, err, "InvalidRequest", 400)
	_, err = e.root.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: b, Key: k})
	wantErr(t, err, "InvalidRequest", 400)
	_, err = e.root.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: b, Key: k,
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(time.Now().Add(time.Hour))}})
	wantErr(t, err, "InvalidRequest", 400)
	_, err = e.root.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: b, Key: k,
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	wantErr(t, err, "InvalidRequest", 400)
	_, err = e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k2"), Body: strings.NewReader("x"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	wantErr(t, err, "InvalidRequest", 400)
	// The fake keeps no versions: enabling object lock needs versioning.
	_, err = e.root.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: b,
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}})
	wantErr(t, err, "InvalidBucketState", 409)
	if _, _, ok := e.fake.Object("bkt", "k2"); ok {
		t.Error("a PUT with object lock headers on a bucket without object lock was stored")
	}
}
