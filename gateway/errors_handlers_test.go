package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	get := &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}

	_, err := e.client("NOSUCHKEY", gatewaytest.RootSecretKey).GetObject(ctx, get)
	wantErr(t, err, "InvalidAccessKeyId", 403)
	_, err = e.client(gatewaytest.RootAccessKey, "wrong secret").GetObject(ctx, get)
	wantErr(t, err, "SignatureDoesNotMatch", 403)
	_, err = e.client(userAK, "wrong secret").ListBuckets(ctx, &s3.ListBucketsInput{})
	wantErr(t, err, "SignatureDoesNotMatch", 403)
	_, err = e.user.GetObject(ctx, get)
	wantErr(t, err, "AccessDenied", 403)

	// Anonymous requests are refused.
	resp, err := http.Get(e.url + "/bkt/k")
	noErr(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous GET: %d, want 403", resp.StatusCode)
	}
	// A grant opens the bucket to its user.
	e.grant("bkt", "read")
	out, err := e.user.GetObject(ctx, get)
	noErr(t, err)
	out.Body.Close()
}

func TestUnsupportedSubresources(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	b := aws.String("bkt")
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"GetBucketEncryption", func() error {
			_, err := e.root.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: b})
			return err
		}},
		{"PutBucketVersioning", func() error {
			_, err := e.root.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b,
				VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.call(), "NotImplemented", 501)
		})
	}
	if _, _, ok := e.fake.Object("bkt", "k"); !ok {
		t.Error("an unsupported request removed the object")
	}
}

// TestErrorMapping injects each error the backend may return into
// PutObject and checks the S3 answer: code, status, and Retry-After on
// every 503.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   string
		status int
	}{
		{backend.ErrNoLeader, "SlowDown", 503},
		{backend.ErrOutcomeUnknown, "SlowDown", 503},
		{backend.ErrClosed, "ServiceUnavailable", 503},
		{fmt.Errorf("forwarding to the leader: %w", backend.ErrNoLeader), "SlowDown", 503},
		{backend.ErrStagingUnavailable, "SlowDown", 503},
		{backend.ErrCatalogUnavailable, "ServiceUnavailable", 503},
		{backend.ErrNotHomeRegion, "InvalidBucketState", 409},
		{store.ErrThrottled, "SlowDown", 503},
		{backend.ErrEgressBudget, "EgressBudgetExceeded", 403},
		{context.DeadlineExceeded, "RequestTimeout", 400},
		{context.Canceled, "RequestTimeout", 400},
		{store.ErrNotFound, "NoSuchKey", 404},
		{store.ErrPreconditionFailed, "PreconditionFailed", 412},
		{store.ErrInvalidPart, "InvalidPart", 400},
		{store.ErrInvalidKey, "InvalidArgument", 400},
		{store.ErrAccessDenied, "AccessDenied", 403},
		{store.ErrNotSupported, "NotImplemented", 501},
		{store.ErrNoSuchUpload, "NoSuchUpload", 404},
		{backend.ErrNoSuchUpload, "NoSuchUpload", 404},
		{backend.ErrNoSuchBucket, "NoSuchBucket", 404},
		{backend.ErrBucketNotEmpty, "BucketNotEmpty", 409},
		{backend.ErrPolicyBucket, "InvalidBucketState", 409},
		{backend.ErrInvalidBucketName, "InvalidBucketName", 400},
		{&backend.BucketExistsError{Bucket: "x", OwnedByCaller: true}, "BucketAlreadyOwnedByYou", 409},
		{&backend.BucketExistsError{Bucket: "x"}, "BucketAlreadyExists", 409},
		{errors.New("disk on fire"), "InternalError", 500},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			e.fake.Fail(gatewaytest.OpPut, tc.err)
			_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("body")})
			resp := wantErr(t, err, tc.code, tc.status)
			if ra := resp.Header.Get("Retry-After"); (tc.status == 503) != (ra != "") {
				t.Errorf("status %d with Retry-After %q", tc.status, ra)
			}
			if resp.Header.Get("ETag") != "" {
				t.Errorf("error answer carries ETag %q", resp.Header.Get("ETag"))
			}
			if _, _, ok := e.fake.Object("bkt", "k"); ok {
				t.Error("object stored although Put failed")
			}
		})
	}
}

// TestErrorMappingPerOperation injects a region error into the backend
// call behind each operation: every one answers 503 SlowDown.
func TestErrorMappingPerOperation(t *testing.T) {
	b, k := aws.String("bkt"), aws.String("k")
	for _, tc := range []struct {
		op   string
		call func(e *env, uploadID string) error
	}{
		{gatewaytest.OpCreateBucket, func(e *env, _ string) error {
			_, err := e.root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("new")})
			return err
		}},
		{gatewaytest.OpDeleteBucket, func(e *env, _ string) error {
			_, err := e.root.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("empty")})
			return err
		}},
		{gatewaytest.OpStat, func(e *env, _ string) error {
			_, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: k})
			return err
		}},
		{gatewaytest.OpOpen, func(e *env, _ string) error {
			_, err := e.root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy"), CopySource: aws.String("bkt/k")})
			return err
		}},
		{gatewaytest.OpList, func(e *env, _ string) error {
			_, err := e.root.ListObjects(ctx, &s3.ListObjectsInput{Bucket: b})
			return err
		}},
		{gatewaytest.OpCreateUpload, func(e *env, _ string) error {
			_, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
			return err
		}},
		{gatewaytest.OpUploadPart, func(e *env, id string) error {
			_, err := e.root.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: aws.String(id), PartNumber: aws.Int32(1),
				Body: strings.NewReader("x")})
			return err
		}},
		{gatewaytest.OpCompleteUpload, func(e *env, id string) error {
			_, err := e.root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: aws.String(id),
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"x"`)}}}})
			return err
		}},
		{gatewaytest.OpAbortUpload, func(e *env, id string) error {
			_, err := e.root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: k, UploadId: aws.String(id)})
			return err
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			e.bucket("empty")
			e.object("bkt", "k", "v")
			id := e.createUpload("k")
			e.fake.Fail(tc.op, backend.ErrNoLeader)
			resp := wantErr(t, tc.call(e, id), "SlowDown", 503)
			if resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}

// admin sends a root-signed admin API request and decodes its JSON answer.
func (e *env) admin(method, path string, body any) (int, adminapi.Error) {
	e.t.Helper()
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	resp, out := e.rootSigned(method, "/_fedgate/admin"+path, data, http.Header{"Content-Type": {"application/json"}})
	var ae adminapi.Error
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(out, &ae); err != nil {
			e.t.Fatalf("%s %s: %d with body %q: %v", method, path, resp.StatusCode, out, err)
		}
	}
	return resp.StatusCode, ae
}

func TestAdminErrors(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")

	status, _ := e.admin(http.MethodPost, "/users", adminapi.AddUser{Name: "bob"})
	if status != http.StatusCreated {
		t.Fatalf("add user: %d, want 201", status)
	}
	status, ae := e.admin(http.MethodPost, "/users", adminapi.AddUser{Name: "bob"})
	if status != http.StatusConflict || ae.Code != "Conflict" {
		t.Errorf("add an existing user: %d %s, want 409 Conflict", status, ae.Code)
	}
	status, ae = e.admin(http.MethodDelete, "/users/nobody", nil)
	if status != http.StatusNotFound || ae.Code != "NoSuchUser" {
		t.Errorf("remove a missing user: %d %s, want 404 NoSuchUser", status, ae.Code)
	}
	status, ae = e.admin(http.MethodPost, "/users/bob/grants", adminapi.Grant{Bucket: "nope", Perm: "read"})
	if status != http.StatusNotFound || ae.Code != "NoSuchBucket" {
		t.Errorf("grant on a missing bucket: %d %s, want 404 NoSuchBucket", status, ae.Code)
	}

	// Only root may use the admin API.
	resp, _ := e.signed(http.MethodGet, "/_fedgate/admin/users", nil, nil, userAK, userSK)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("admin API as alice: %d, want 403", resp.StatusCode)
	}
	resp, _ = e.signed(http.MethodGet, "/_fedgate/admin/users", nil, nil, gatewaytest.RootAccessKey, "wrong")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("admin API with a wrong secret: %d, want 403", resp.StatusCode)
	}

	// A region without a leader answers 503 SlowDown on every admin route
	// that writes, as on the S3 routes.
	for _, tc := range []struct {
		op, method, path string
		body             any
	}{
		{gatewaytest.OpUsersAdd, http.MethodPost, "/users", adminapi.AddUser{Name: "carol"}},
		{gatewaytest.OpUsersRemove, http.MethodDelete, "/users/bob", nil},
		{gatewaytest.OpUsersGrant, http.MethodPost, "/users/bob/grants", adminapi.Grant{Bucket: "bkt", Perm: "read"}},
		{gatewaytest.OpUsersRevoke, http.MethodDelete, "/users/bob/grants/bkt", nil},
		{gatewaytest.OpStartPreload, http.MethodPost, "/cache/jobs", map[string]any{"bucket": "bkt"}},
		{gatewaytest.OpPin, http.MethodPost, "/cache/pins", map[string]any{"bucket": "bkt", "prefix": "p/"}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			e.fake.Fail(tc.op, backend.ErrNoLeader)
			defer e.fake.Fail(tc.op, nil)
			status, ae := e.admin(tc.method, tc.path, tc.body)
			if status != http.StatusServiceUnavailable || ae.Code != "SlowDown" {
				t.Errorf("%s %s with no leader: %d %s (%s), want 503 SlowDown", tc.method, tc.path, status, ae.Code, ae.Error)
			}
		})
	}
}

// TestRequestChecks covers what serveS3 refuses before any handler runs.
func TestRequestChecks(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	put := func(key string, opt ...func(*s3.Options)) error {
		_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("x")}, opt...)
		return err
	}
	wantErr(t, put("a/../b"), "InvalidArgument", 400)
	wantErr(t, put("./b"), "InvalidArgument", 400)
	wantErr(t, put(strings.Repeat("k", 1025)), "KeyTooLongError", 400)
	noErr(t, put(strings.Repeat("k", 1024)))
	big := func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Padding", strings.Repeat("p", 9000)))
	}
	wantErr(t, put("k", big), "RequestHeaderSectionTooLarge", 400)
	if _, _, ok := e.fake.Object("bkt", "k"); ok {
		t.Error("object stored despite a refused request")
	}
}
