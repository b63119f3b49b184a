package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// fakeS3 answers every request with status and an S3 error document of
// code, counting requests.
func fakeS3(t *testing.T, status int, code string) (*Store, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>fake</Message><RequestId>r1</RequestId></Error>`, code)
		}
	}))
	t.Cleanup(srv.Close)
	s, err := New(t.Context(), Config{
		Name: "fake", Location: testLoc, Bucket: "b", Region: "us-east-1", Endpoint: srv.URL, PathStyle: true,
		AccessKey: "AKIDFAKE", SecretKey: "fake-secret-value", MaxRetries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, &n
}

// TestErrorMapping drives the real SDK against canned S3 errors and checks
// the sentinel each operation returns.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   error
	}{
		{404, "NoSuchKey", store.ErrNotFound},
		{412, "PreconditionFailed", store.ErrPreconditionFailed},
		{409, "ConditionalRequestConflict", store.ErrPreconditionFailed},
		{503, "SlowDown", store.ErrThrottled},
		{429, "TooManyRequests", store.ErrThrottled},
		{403, "AccessDenied", store.ErrAccessDenied},
		{403, "SignatureDoesNotMatch", store.ErrAccessDenied},
		{404, "NoSuchUpload", store.ErrNoSuchUpload},
		{400, "InvalidPart", store.ErrInvalidPart},
		{400, "InvalidPartOrder", store.ErrInvalidPart},
		{400, "KeyTooLongError", store.ErrInvalidKey},
	} {
		t.Run(tc.code, func(t *testing.T) {
			s, _ := fakeS3(t, tc.status, tc.code)
			ctx := t.Context()
			var err error
			switch tc.want {
			case store.ErrNoSuchUpload:
				_, err = s.UploadPart(ctx, "k", "id", 1, strings.NewReader("x"), 1)
			case store.ErrInvalidPart:
				_, err = s.CompleteMultipart(ctx, "k", "id", []store.PartInfo{{Number: 1, ETag: md5hex([]byte("x"))}}, store.PutOptions{})
			default:
				_, err = s.Put(ctx, "k", strings.NewReader("x"), 1, store.PutOptions{})
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%d %s: %v, want %v", tc.status, tc.code, err, tc.want)
			}
			if !store.WasRetried(err) {
				t.Errorf("%d %s: %v not marked store.Retried (the SDK's retryer has had it)", tc.status, tc.code, err)
			}
		})
	}
}

func TestErrorMappingHead(t *testing.T) {
	// A HEAD answer has no body: the status decides.
	for status, want := range map[int]error{
		404: store.ErrNotFound, 412: store.ErrPreconditionFailed, 403: store.ErrAccessDenied, 503: store.ErrThrottled,
	} {
		s, _ := fakeS3(t, status, "")
		_, err := s.Stat(t.Context(), "k")
		if !errors.Is(err, want) {
			t.Errorf("HEAD %d: %v, want %v", status, err, want)
		}
	}
	s, _ := fakeS3(t, 404, "")
	if err := s.Delete(t.Context(), "k"); err != nil {
		t.Errorf("Delete answered 404: %v, want nil", err)
	}
	if err := s.AbortMultipart(t.Context(), "k", "id"); err != nil {
		t.Errorf("AbortMultipart answered 404: %v, want nil", err)
	}
	// A missing bucket is not a missing object.
	s, _ = fakeS3(t, 404, "NoSuchBucket")
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x"), 1, store.PutOptions{}); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("NoSuchBucket: %v, want an error that is not ErrNotFound", err)
	}
}

// TestRetries: throttling and 5xx are retried up to MaxRetries attempts;
// 4xx are not; a canceled ctx stops the retries.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		status   int
		code     string
		attempts int32
	}{{503, "SlowDown", 2}, {500, "InternalError", 2}, {403, "AccessDenied", 1}, {412, "PreconditionFailed", 1}} {
		s, n := fakeS3(t, tc.status, tc.code)
		_, _ = s.Stat(t.Context(), "k")
		if got := n.Load(); got != tc.attempts {
			t.Errorf("%d %s: %d attempts, want %d", tc.status, tc.code, got, tc.attempts)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	s2, _ := New(ctx, Config{Name: "x", Location: testLoc, Bucket: "b", Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b", MaxRetries: 50})
	_, err := s2.Stat(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("Stat with a 50ms ctx and 50 retries: %v after %v", err, time.Since(start))
	}
}

const leakSecret = "s3cr3t-MUST-NOT-LEAK-0123456789"

// TestSecretsNotLeaked: an authentication failure against MinIO with a
// wrong secret maps to ErrAccessDenied and its text holds no secret, and
// Config never prints its secrets.
func TestSecretsNotLeaked(t *testing.T) {
	s := newMinIO(t, func(c *Config) { c.SecretKey = leakSecret; c.SessionToken = "tok-" + leakSecret })
	ctx := t.Context()
	_, err := s.Put(ctx, "k", strings.NewReader("x"), 1, store.PutOptions{})
	if !errors.Is(err, store.ErrAccessDenied) {
		t.Errorf("Put with a wrong secret: %v, want ErrAccessDenied", err)
	}
	var errs []error
	errs = append(errs, err)
	_, err = s.Stat(ctx, "k")
	errs = append(errs, err)
	for _, err := range s.List(ctx, store.ListOptions{}) {
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err == nil || strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), leakSecret) {
			t.Errorf("error %v: nil or holds the secret", err)
		}
	}

	cfg := Config{Name: "n", AccessKey: "AKIDEXAMPLE", SecretKey: leakSecret, SessionToken: leakSecret}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("store", "cfg", cfg)
	for _, out := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logged.String()} {
		if strings.Contains(out, leakSecret) || strings.Contains(out, "AKIDEXAMPLE") {
			t.Errorf("Config printed a secret: %s", out)
		}
	}
	// Config errors name no secret either.
	_, err = New(ctx, Config{Name: "n", Location: testLoc, Bucket: "b", SecretKey: leakSecret})
	if err == nil || strings.Contains(err.Error(), leakSecret) {
		t.Errorf("New with only a secret: %v", err)
	}
}

func TestConfigChecks(t *testing.T) {
	ok := Config{Name: "n", Location: testLoc, Bucket: "b", AccessKey: "a", SecretKey: "s"}
	for name, c := range map[string]func(*Config){
		"no name":       func(c *Config) { c.Name = "" },
		"no bucket":     func(c *Config) { c.Bucket = "" },
		"no location":   func(c *Config) { c.Location = policies.Location{} },
		"part size":     func(c *Config) { c.PartSize = 1 << 20 },
		"buffer memory": func(c *Config) { c.MaxBufferMemory = 8 << 20 },
		"half keys":     func(c *Config) { c.SecretKey = "" },
	} {
		cfg := ok
		c(&cfg)
		if _, err := New(t.Context(), cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := New(t.Context(), ok); err != nil {
		t.Errorf("New(%v): %v", ok, err)
	}
}
