package gateway_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// Presigned URLs made by aws-sdk-go-v2's presign client, checked as AWS
// answers them (and as s3-tests' test_object_raw_get_x_amz_expires_*,
// test_object_raw_put_authenticated_expired and
// test_object_raw_*_object_gone expect).

func getURL(t *testing.T, method, u string, body io.Reader) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	noErr(t, err)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	noErr(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct{ Code, Message string }
	_ = xml.Unmarshal(data, &e)
	return resp.StatusCode, e.Code, e.Message
}

func TestPresignExpiresRange(t *testing.T) {
	e := newEnv(t)
	e.bucket("b")
	e.object("b", "k", "data")
	ps := s3.NewPresignClient(e.root)
	req, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}, s3.WithPresignExpires(time.Hour))
	noErr(t, err)
	if !strings.Contains(req.URL, "X-Amz-Expires=3600") {
		t.Fatalf("presigned URL %s", req.URL)
	}
	if status, code, _ := getURL(t, http.MethodGet, req.URL, nil); status != 200 {
		t.Fatalf("presigned GET: %d %s", status, code)
	}
	// The expiry is judged before the signature: any value out of range
	// is AuthorizationQueryParametersError (400), as in AWS.
	for v, msg := range map[string]string{
		"-1":                   "X-Amz-Expires must be non-negative",
		"-7":                   "X-Amz-Expires must be non-negative",
		"604801":               "X-Amz-Expires must be less than a week (in seconds) that is 604800",
		"609901":               "X-Amz-Expires must be less than a week (in seconds) that is 604800",
		"99999999999999999999": "X-Amz-Expires must be less than a week (in seconds) that is 604800",
		"soon":                 "X-Amz-Expires should be a number",
		"1.5":                  "X-Amz-Expires should be a number",
		"":                     "X-Amz-Expires should be a number",
	} {
		u := strings.Replace(req.URL, "X-Amz-Expires=3600", "X-Amz-Expires="+v, 1)
		if status, code, m := getURL(t, http.MethodGet, u, nil); status != 400 || code != "AuthorizationQueryParametersError" || m != msg {
			t.Errorf("X-Amz-Expires=%s: %d %s %q, want 400 AuthorizationQueryParametersError %q", v, status, code, m, msg)
		}
	}
	// 0 is in range and already expired (AWS: 403 "Request has expired").
	// Signed so, not tampered with.
	r0, err := http.NewRequest(http.MethodGet, e.url+"/b/k?X-Amz-Expires=0", nil)
	noErr(t, err)
	u0, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey},
		r0, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now().Add(-time.Second))
	noErr(t, err)
	if status, code, m := getURL(t, http.MethodGet, u0, nil); status != 403 || code != "AccessDenied" || m != "Request has expired" {
		t.Errorf("X-Amz-Expires=0: %d %s %q", status, code, m)
	}
	// The most AWS allows works.
	req7, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}, s3.WithPresignExpires(7*24*time.Hour))
	noErr(t, err)
	if status, code, _ := getURL(t, http.MethodGet, req7.URL, nil); status != 200 {
		t.Errorf("7 days: %d %s", status, code)
	}
}

// stalledBody is a request body that does not arrive: its first read
// waits 3 seconds and fails. A server that reads it before answering
// answers late, or not at all.
type stalledBody struct{}

func (stalledBody) Read([]byte) (int, error) {
	time.Sleep(3 * time.Second) // pacing: a client whose body does not come (what the test sends, not a wait)
	return 0, io.ErrUnexpectedEOF
}

func TestPresignExpiredPutRefusedBeforeBody(t *testing.T) {
	e := newEnv(t)
	e.bucket("b")
	ps := s3.NewPresignClient(e.root)
	old := func(o *s3.PresignOptions) {
		o.Expires = time.Minute
		o.Presigner = presignAt{v4.NewSigner(), time.Now().Add(-time.Hour)}
	}
	req, err := ps.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}, old)
	noErr(t, err)
	hr, err := http.NewRequest(http.MethodPut, req.URL, stalledBody{})
	noErr(t, err)
	hr.ContentLength = 1 << 20
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(hr)
	if err != nil {
		t.Fatalf("expired presigned PUT with its body unsent: %v (after %v)", err, time.Since(start))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v: the body was waited for", d)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var se struct{ Code, Message string }
	_ = xml.Unmarshal(data, &se)
	if resp.StatusCode != 403 || se.Code != "AccessDenied" || se.Message != "Request has expired" {
		t.Errorf("expired presigned PUT: %d %s", resp.StatusCode, data)
	}
	if _, _, ok := e.fake.Object("b", "k"); ok {
		t.Error("an expired presigned PUT stored the object")
	}
}

// presignAt presigns as if at a fixed time.
type presignAt struct {
	s  *v4.Signer
	at time.Time
}

func (p presignAt) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, _ time.Time, opts ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return p.s.PresignHTTP(ctx, creds, r, payloadHash, service, region, p.at, opts...)
}

// A presigned GET of a missing key: 404 NoSuchKey when the signer may list
// the bucket, 403 AccessDenied when not (S3 hides which keys exist).
func TestPresignGetMissingObject(t *testing.T) {
	e := newEnv(t)
	e.bucket("b")
	e.object("b", "there", "x")
	presign := func(c *s3.Client, key string) string {
		req, err := s3.NewPresignClient(c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String(key)})
		noErr(t, err)
		return req.URL
	}
	if status, code, _ := getURL(t, http.MethodGet, presign(e.root, "gone"), nil); status != 404 || code != "NoSuchKey" {
		t.Errorf("root, missing key: %d %s", status, code)
	}
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/alice"},"Action":%s,"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}]}`
	_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("b"), Policy: aws.String(fmt.Sprintf(policy, `"s3:GetObject"`))})
	noErr(t, err)
	if status, code, _ := getURL(t, http.MethodGet, presign(e.user, "there"), nil); status != 200 {
		t.Errorf("alice, existing key: %d %s", status, code)
	}
	if status, code, _ := getURL(t, http.MethodGet, presign(e.user, "gone"), nil); status != 403 || code != "AccessDenied" {
		t.Errorf("alice without s3:ListBucket, missing key: %d %s", status, code)
	}
	_, err = e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("b"), Policy: aws.String(fmt.Sprintf(policy, `["s3:GetObject","s3:ListBucket"]`))})
	noErr(t, err)
	if status, code, _ := getURL(t, http.MethodGet, presign(e.user, "gone"), nil); status != 404 || code != "NoSuchKey" {
		t.Errorf("alice with s3:ListBucket, missing key: %d %s", status, code)
	}
}
