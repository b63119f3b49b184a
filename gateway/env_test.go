package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

// The handler tests drive a gateway.Server over a gatewaytest.Fake with the
// real aws-sdk-go-v2 client, through httptest: no region, no fixed port.

const (
	userAK = "USERACCESSKEY"
	userSK = "USERSECRETKEY"
)

// env is one test's server: a fresh fake, a gateway over it, and clients.
type env struct {
	t    *testing.T
	fake *gatewaytest.Fake
	url  string
	root *s3.Client
	// user is "alice", who owns nothing and has no grants until a test
	// gives her some.
	user *s3.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	f := gatewaytest.New()
	f.SetMinPartSize(5) // parts of a few bytes are enough to test the rules
	f.AddUser("alice", userAK, userSK)
	srv, err := gateway.New(gateway.Config{Backend: f})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{t: t, fake: f, url: hs.URL}
	e.root = e.client(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	e.user = e.client(userAK, userSK)
	return e
}

// client is an SDK client for the server with the given keys. It does not
// retry, so a test sees the first answer (and never waits on a backoff).
func (e *env) client(ak, sk string) *s3.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(e.url)
		o.UsePathStyle = true
	})
}

// bucket creates a bucket owned by root.
func (e *env) bucket(name string) {
	e.fake.AddBucket(name, backend.RootUser)
}

// object stores key in bucket directly in the fake.
func (e *env) object(bucket, key, body string) {
	e.fake.PutObject(bucket, key, []byte(body), store.Metadata{})
}

func (e *env) grant(bucket, perm string) {
	e.t.Helper()
	if err := e.fake.Users().Grant(context.Background(), backend.User{Name: backend.RootUser, Root: true}, "alice", bucket, perm); err != nil {
		e.t.Fatal(err)
	}
}

// signed sends a request signed with the given keys (payload hashed) and
// returns the response with its body read.
func (e *env) signed(method, path string, body []byte, hdr http.Header, ak, sk string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("x-amz-content-sha256", hash)
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, data
}

// rootSigned is signed with the root user's keys.
func (e *env) rootSigned(method, path string, body []byte, hdr http.Header) (*http.Response, []byte) {
	e.t.Helper()
	return e.signed(method, path, body, hdr, gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
}

// wantErr checks that err is an S3 error answer with code and HTTP status,
// and returns its response for further checks.
func wantErr(t *testing.T, err error, code string, status int) *http.Response {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s (%d)", code, status)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an S3 error answer, want %s (%d)", err, code, status)
	}
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v carries no HTTP response", err)
	}
	if ae.ErrorCode() != code || re.HTTPStatusCode() != status {
		t.Fatalf("error %s (%d), want %s (%d): %v", ae.ErrorCode(), re.HTTPStatusCode(), code, status, err)
	}
	return re.Response.Response
}

// noErr fails the test on err.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var ctx = context.Background()

func sha256sum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}
