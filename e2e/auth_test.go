package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestCredentialsAndPresign(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("auth")})
	mustOK(t, err)
	put(t, c, "auth", "obj", []byte("presigned body"))

	_, err = s.s3Client("NOSUCHKEY0000000000", rootSK).ListBuckets(ctx(t), &s3.ListBucketsInput{})
	wantCode(t, err, "InvalidAccessKeyId")
	_, err = s.s3Client(rootAK, "wrong-secret-wrong-secret-wrong-secret").ListBuckets(ctx(t), &s3.ListBucketsInput{})
	wantCode(t, err, "SignatureDoesNotMatch")
	_, err = s.s3Client(rootAK, rootSK, func(o *s3.Options) { o.Region = "eu-west-1" }).ListBuckets(ctx(t), &s3.ListBucketsInput{})
	wantCode(t, err, "AuthorizationHeaderMalformed")

	ps := s3.NewPresignClient(c)
	req, err := ps.PresignGetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("auth"), Key: aws.String("obj")}, s3.WithPresignExpires(time.Minute))
	mustOK(t, err)
	resp, err := http.Get(req.URL)
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "presigned body" {
		t.Fatalf("presigned GET: %d %s", resp.StatusCode, body)
	}
	// Tampering with the key breaks the signature.
	resp, err = http.Get(strings.Replace(req.URL, "/auth/obj", "/auth/obk", 1))
	mustOK(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("SignatureDoesNotMatch")) {
		t.Fatalf("tampered presigned GET: %d %s", resp.StatusCode, body)
	}
	// A presigned PUT.
	preq, err := ps.PresignPutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("auth"), Key: aws.String("uploaded")}, s3.WithPresignExpires(time.Minute))
	mustOK(t, err)
	hr, _ := http.NewRequest(http.MethodPut, preq.URL, strings.NewReader("via presigned put"))
	for k, v := range preq.SignedHeader {
		hr.Header[k] = v
	}
	resp, err = http.DefaultClient.Do(hr)
	mustOK(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned PUT: %d", resp.StatusCode)
	}
	if got, _ := getBytes(t, c, "auth", "uploaded"); string(got) != "via presigned put" {
		t.Fatalf("presigned PUT stored %q", got)
	}
	// An expired URL: signed two seconds ago for one second (the SDK's
	// signer, given a signing time in the past).
	old, err := ps.PresignGetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("auth"), Key: aws.String("obj")}, func(o *s3.PresignOptions) {
		o.Expires = time.Second
		o.Presigner = pastSigner{v4.NewSigner(), 2 * time.Second}
	})
	mustOK(t, err)
	resp, err = http.Get(old.URL)
	mustOK(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("<Code>AccessDenied</Code>")) || !bytes.Contains(body, []byte("expired")) {
		t.Fatalf("expired presigned GET: %d %s", resp.StatusCode, body)
	}
}

// pastSigner presigns as if it were ago earlier.
type pastSigner struct {
	*v4.Signer
	ago time.Duration
}

func (p pastSigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string,
	at time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return p.Signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, at.Add(-p.ago), optFns...)
}

var keyRE = regexp.MustCompile(`AccessKey: (\S+)\nSecretKey: (\S+)`)

func TestUsersAndGrants(t *testing.T) {
	s := startServer(t)
	out, err := s.fedgate("user", "add", "alice")
	if err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	alice := s.s3Client(m[1], m[2])
	out, err = s.fedgate("user", "add", "bob", "--access-key", "BOBSOWNACCESSKEY0001", "--secret-key", "bobs-own-secret-key-123456")
	if err != nil {
		t.Fatalf("user add with keys: %v\n%s", err, out)
	}
	bob := s.s3Client("BOBSOWNACCESSKEY0001", "bobs-own-secret-key-123456")
	if out, err := s.fedgate("user", "add", "bob"); err == nil || !strings.Contains(out, "exists") {
		t.Fatalf("duplicate user add: %v %s", err, out)
	}

	_, err = alice.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("alices")})
	mustOK(t, err)
	put(t, alice, "alices", "data", []byte("alice's"))
	_, err = bob.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("alices"), Key: aws.String("data")})
	wantCode(t, err, "AccessDenied")
	_, err = bob.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("alices")})
	wantCode(t, err, "BucketAlreadyExists")
	lb, err := bob.ListBuckets(ctx(t), &s3.ListBucketsInput{})
	mustOK(t, err)
	if len(lb.Buckets) != 0 {
		t.Fatalf("bob sees %d buckets", len(lb.Buckets))
	}
	// Root sees and reads everything.
	if got, _ := getBytes(t, s.root(), "alices", "data"); string(got) != "alice's" {
		t.Fatal("root cannot read alice's bucket")
	}

	if out, err := s.fedgate("user", "grant", "bob", "alices", "read"); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	if got, _ := getBytes(t, bob, "alices", "data"); string(got) != "alice's" {
		t.Fatal("bob cannot read after grant")
	}
	_, err = bob.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("alices"), Key: aws.String("bobs"), Body: bytes.NewReader([]byte("x"))})
	wantCode(t, err, "AccessDenied")
	if out, err := s.fedgate("user", "grant", "bob", "alices", "write"); err != nil {
		t.Fatalf("grant write: %v %s", err, out)
	}
	put(t, bob, "alices", "bobs", []byte("x"))
	_, err = bob.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("alices")})
	wantCode(t, err, "AccessDenied")

	out, err = s.fedgate("user", "list")
	if err != nil || !strings.Contains(out, "alices:write") || !strings.Contains(out, "BOBSOWNACCESSKEY0001") {
		t.Fatalf("user list: %v\n%s", err, out)
	}
	if out, err := s.fedgate("user", "remove", "bob"); err != nil {
		t.Fatalf("remove: %v %s", err, out)
	}
	_, err = bob.ListBuckets(ctx(t), &s3.ListBucketsInput{})
	wantCode(t, err, "InvalidAccessKeyId")
	// Non-root keys cannot use the admin API.
	cmdOut, err := s.fedgateAs(m[1], m[2], "user", "list")
	if err == nil || !strings.Contains(cmdOut, "AccessDenied") {
		t.Fatalf("alice used the admin API: %v %s", err, cmdOut)
	}
	if out, err := s.fedgate("user", "remove", "nobody"); err == nil || !strings.Contains(out, "NoSuchUser") {
		t.Fatalf("remove unknown: %v %s", err, out)
	}
}
