package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestBucketLifecycleConfiguration(t *testing.T) {
	e := newEnv(t)
	e.bucket("ckpt")
	b := aws.String("ckpt")

	_, err := e.root.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	wantErr(t, err, "NoSuchLifecycleConfiguration", 404)

	date := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		{ID: aws.String("old-checkpoints"), Status: types.ExpirationStatusEnabled,
			Filter:     &types.LifecycleRuleFilter{Prefix: aws.String("run-1/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(7)}},
		{ID: aws.String("scratch"), Status: types.ExpirationStatusDisabled,
			Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{
				Prefix: aws.String("tmp/"), Tags: []types.Tag{{Key: aws.String("keep"), Value: aws.String("no")}},
				ObjectSizeGreaterThan: aws.Int64(1024)}},
			Expiration: &types.LifecycleExpiration{Date: &date}},
		{ID: aws.String("uploads"), Status: types.ExpirationStatusEnabled,
			Filter:                         &types.LifecycleRuleFilter{},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)},
			NoncurrentVersionExpiration:    &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(30)}},
	}}
	_, err = e.root.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg})
	noErr(t, err)
	out, err := e.root.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	noErr(t, err)
	if len(out.Rules) != 3 {
		t.Fatalf("rules %+v", out.Rules)
	}
	r0, r1, r2 := out.Rules[0], out.Rules[1], out.Rules[2]
	if aws.ToString(r0.ID) != "old-checkpoints" || r0.Status != types.ExpirationStatusEnabled || aws.ToString(r0.Filter.Prefix) != "run-1/" || aws.ToInt32(r0.Expiration.Days) != 7 {
		t.Errorf("rule 0 read back as %+v", r0)
	}
	if r1.Status != types.ExpirationStatusDisabled || r1.Filter.And == nil || aws.ToString(r1.Filter.And.Prefix) != "tmp/" ||
		len(r1.Filter.And.Tags) != 1 || aws.ToInt64(r1.Filter.And.ObjectSizeGreaterThan) != 1024 || !r1.Expiration.Date.Equal(date) {
		t.Errorf("rule 1 read back as %+v", r1)
	}
	if aws.ToInt32(r2.AbortIncompleteMultipartUpload.DaysAfterInitiation) != 2 || aws.ToInt32(r2.NoncurrentVersionExpiration.NoncurrentDays) != 30 {
		t.Errorf("rule 2 read back as %+v", r2)
	}

	// S3's validation, with its codes and messages.
	put := func(rules ...types.LifecycleRule) error {
		_, err := e.root.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}})
		return err
	}
	all := &types.LifecycleRuleFilter{}
	wantErr(t, put(types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: all, Expiration: &types.LifecycleExpiration{Days: aws.Int32(0)}}), "InvalidArgument", 400)
	wantErr(t, put(types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: all}), "InvalidRequest", 400)
	wantErr(t, put(types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("k"), Value: aws.String("v")}},
		AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}}), "InvalidRequest", 400)
	wantErr(t, put(
		types.LifecycleRule{ID: aws.String("x"), Status: types.ExpirationStatusEnabled, Filter: all, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		types.LifecycleRule{ID: aws.String("x"), Status: types.ExpirationStatusEnabled, Filter: all, Expiration: &types.LifecycleExpiration{Days: aws.Int32(2)}}), "InvalidArgument", 400)
	wantErr(t, put(types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: all,
		Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassGlacier}}}), "NotImplemented", 501)
	badDate := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	wantErr(t, put(types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: all, Expiration: &types.LifecycleExpiration{Date: &badDate}}), "InvalidArgument", 400)

	doc := `<LifecycleConfiguration><Rule><Filter></Filter><Status>Enabled</Status><Expiration><Days>-1</Days></Expiration></Rule></LifecycleConfiguration>`
	r, data := e.rootSigned("PUT", "/ckpt?lifecycle", []byte(doc), http.Header{"Content-Md5": {md5b64(doc)}})
	if r.StatusCode != 400 || !strings.Contains(string(data), "<Message>&#39;Days&#39; for Expiration action must be a positive integer</Message>") {
		t.Errorf("Days -1: %d %s", r.StatusCode, data)
	}
	for _, doc := range []string{`<LifecycleConfiguration/>`, `<LifecycleConfiguration>`,
		`<LifecycleConfiguration><Rule><Filter></Filter><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>`} {
		r, data := e.rootSigned("PUT", "/ckpt?lifecycle", []byte(doc), http.Header{"Content-Md5": {md5b64(doc)}})
		if r.StatusCode != 400 || !strings.Contains(string(data), "<Code>MalformedXML</Code>") {
			t.Errorf("put %s: %d %s", doc, r.StatusCode, data)
		}
	}
	// S3 requires a digest of the body.
	doc = `<LifecycleConfiguration><Rule><Filter></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>`
	r, data = e.rootSigned("PUT", "/ckpt?lifecycle", []byte(doc), nil)
	if r.StatusCode != 400 || !strings.Contains(string(data), "Content-MD5") {
		t.Errorf("put without Content-MD5: %d %s", r.StatusCode, data)
	}
	// Refused configurations left the first one in place.
	if out, err := e.root.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b}); err != nil || len(out.Rules) != 3 {
		t.Fatalf("after refused puts: %v %+v", err, out)
	}

	// Only the owner (or a policy allowing s3:PutLifecycleConfiguration).
	e.grant("ckpt", "write")
	_, err = e.user.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b})
	wantErr(t, err, "AccessDenied", 403)

	_, err = e.root.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b})
	noErr(t, err)
	_, err = e.root.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	wantErr(t, err, "NoSuchLifecycleConfiguration", 404)
	_, err = e.root.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b})
	noErr(t, err)
	_, err = e.root.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("nope")})
	wantErr(t, err, "NoSuchBucket", 404)
}
