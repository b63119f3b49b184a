package gateway_test

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

func bucketNames(out *s3.ListBucketsOutput) []string {
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

func TestListBuckets(t *testing.T) {
	e := newEnv(t)
	e.bucket("zeta")
	e.bucket("alpha")
	e.bucket("mid")
	e.grant("mid", "read")

	out, err := e.root.ListBuckets(ctx, &s3.ListBucketsInput{})
	noErr(t, err)
	if got, want := bucketNames(out), []string{"alpha", "mid", "zeta"}; !slices.Equal(got, want) {
		t.Errorf("root lists %q, want %q", got, want)
	}
	if got := aws.ToString(out.Owner.ID); got != backend.RootUser {
		t.Errorf("owner %q, want %q", got, backend.RootUser)
	}
	if r := aws.ToString(out.Buckets[0].BucketRegion); r != "us-east-1" {
		t.Errorf("bucket region %q, want us-east-1", r)
	}

	out, err = e.user.ListBuckets(ctx, &s3.ListBucketsInput{})
	noErr(t, err)
	if got, want := bucketNames(out), []string{"mid"}; !slices.Equal(got, want) {
		t.Errorf("alice (read on mid) lists %q, want %q", got, want)
	}
}

func TestCreateBucket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		as     func(e *env) *s3.Client
		bucket string
		loc    types.BucketLocationConstraint
		code   string
		status int
	}{
		{name: "created", bucket: "fresh"},
		{name: "created with our region", bucket: "fresh", loc: "us-east-1"},
		{name: "created by a user", bucket: "fresh", as: func(e *env) *s3.Client { return e.user }},
		{name: "other region", bucket: "fresh", loc: "eu-west-1", code: "InvalidLocationConstraint", status: 400},
		{name: "invalid name", bucket: "no_underscores", code: "InvalidBucketName", status: 400},
		{name: "too short", bucket: "ab", code: "InvalidBucketName", status: 400},
		// S3 answers 200 to the owner in us-east-1 (409 BucketAlreadyOwnedByYou
		// in other regions: TestCreateOwnedBucketElsewhere).
		{name: "owned by caller", bucket: "taken", setup: func(e *env) { e.bucket("taken") }},
		{name: "legacy US location", bucket: "fresh", loc: "US"},
		{name: "owned by another", bucket: "taken", setup: func(e *env) { e.bucket("taken") },
			as: func(e *env) *s3.Client { return e.user }, code: "BucketAlreadyExists", status: 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			c, owner := e.root, backend.RootUser
			if tc.as != nil {
				c = tc.as(e)
				if c == e.user {
					owner = "alice"
				}
			}
			in := &s3.CreateBucketInput{Bucket: aws.String(tc.bucket)}
			if tc.loc != "" {
				in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: tc.loc}
			}
			out, err := c.CreateBucket(ctx, in)
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
				if tc.setup == nil {
					if _, err := e.fake.Bucket(tc.bucket); err == nil {
						t.Errorf("bucket %q exists after a refused CreateBucket", tc.bucket)
					}
				}
				return
			}
			noErr(t, err)
			if got := aws.ToString(out.Location); got != "/"+tc.bucket {
				t.Errorf("Location %q, want %q", got, "/"+tc.bucket)
			}
			b, err := e.fake.Bucket(tc.bucket)
			noErr(t, err)
			if b.Owner() != owner {
				t.Errorf("owner %q, want %q", b.Owner(), owner)
			}
		})
	}
}

// Outside us-east-1, creating a bucket the caller owns answers 409
// BucketAlreadyOwnedByYou, and "US" is no location of this endpoint.
func TestCreateOwnedBucketElsewhere(t *testing.T) {
	f := gatewaytest.New()
	srv, err := gateway.New(gateway.Config{Backend: f, Region: "eu-west-1"})
	noErr(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := s3.NewFromConfig(aws.Config{Region: "eu-west-1", Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		Credentials: credentials.NewStaticCredentialsProvider(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(hs.URL); o.UsePathStyle = true })
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("taken")})
	noErr(t, err)
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("taken")})
	wantErr(t, err, "BucketAlreadyOwnedByYou", 409)
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("fresh"),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: "US"}})
	wantErr(t, err, "InvalidLocationConstraint", 400)
}

func TestHeadBucket(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	out, err := e.root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if r := aws.ToString(out.BucketRegion); r != "us-east-1" {
		t.Errorf("x-amz-bucket-region %q, want us-east-1", r)
	}
	// HEAD answers carry no body: the SDK names the error after the status.
	_, err = e.root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("missing")})
	wantErr(t, err, "NotFound", 404)
	_, err = e.user.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "Forbidden", 403)
	e.grant("bkt", "read")
	_, err = e.user.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bkt")})
	noErr(t, err)
}

func TestDeleteBucket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		user   bool
		code   string
		status int
	}{
		{name: "empty"},
		{name: "missing", setup: func(e *env) {}, code: "NoSuchBucket", status: 404},
		{name: "not empty", setup: func(e *env) { e.bucket("bkt"); e.object("bkt", "k", "v") },
			code: "BucketNotEmpty", status: 409},
		{name: "policy bucket", setup: func(e *env) { e.bucket("bkt"); e.fake.SetPolicy("bkt") },
			code: "InvalidBucketState", status: 409},
		{name: "no grant", user: true, code: "AccessDenied", status: 403},
		// Only the owner (or root) deletes a bucket, even with write on it.
		{name: "write grant", setup: func(e *env) { e.bucket("bkt"); e.grant("bkt", "write") },
			user: true, code: "AccessDenied", status: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			} else {
				e.bucket("bkt")
			}
			c := e.root
			if tc.user {
				c = e.user
			}
			_, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("bkt")})
			_, stillThere := e.fake.Bucket("bkt")
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
				return
			}
			noErr(t, err)
			if stillThere == nil {
				t.Error("bucket still exists after DeleteBucket")
			}
		})
	}
}

func TestGetBucketLocationAndVersioning(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	loc, err := e.root.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if loc.LocationConstraint != "" {
		t.Errorf("location %q, want \"\" (us-east-1)", loc.LocationConstraint)
	}
	ver, err := e.root.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if ver.Status != "" || ver.MFADelete != "" {
		t.Errorf("versioning %q/%q, want never enabled", ver.Status, ver.MFADelete)
	}

	_, err = e.root.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("missing")})
	wantErr(t, err, "NoSuchBucket", 404)
	_, err = e.root.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("missing")})
	wantErr(t, err, "NoSuchBucket", 404)
	_, err = e.user.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "AccessDenied", 403)
}
