package gcs

// Tests that need no server.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/fedgate/fedgate/store"
)

func TestETagOf(t *testing.T) {
	sum := md5.Sum([]byte("x"))
	for _, c := range []struct {
		name string
		a    storage.ObjectAttrs
		want string
	}{
		{"md5", storage.ObjectAttrs{MD5: sum[:]}, md5hex([]byte("x"))},
		{"md5 over a stale plain etag", storage.ObjectAttrs{MD5: sum[:], Metadata: map[string]string{metaETag: "00"}}, md5hex([]byte("x"))},
		{"multipart etag", storage.ObjectAttrs{MD5: sum[:], Metadata: map[string]string{metaETag: "ab-2"}}, "ab-2"},
		{"composite", storage.ObjectAttrs{Metadata: map[string]string{metaETag: "cd-3"}, ComponentCount: 3}, "cd-3"},
	} {
		if got := etagOf(&c.a); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	a := storage.ObjectAttrs{Generation: 7, CRC32C: 0xdeadbeef, ComponentCount: 5}
	got := etagOf(&a)
	if got != etagOf(&a) || !strings.HasSuffix(got, "-5") || len(got) != 34 {
		t.Errorf("foreign composite ETag %q: want stable <32 hex>-5", got)
	}
	a.Generation = 8
	if etagOf(&a) == got {
		t.Error("foreign composite ETag did not change with the generation")
	}
}

func TestMapErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{storage.ErrObjectNotExist, store.ErrNotFound},
		{storage.ErrBucketNotExist, store.ErrNotFound},
		{&googleapi.Error{Code: 404}, store.ErrNotFound},
		{&googleapi.Error{Code: 412}, store.ErrPreconditionFailed},
		{&googleapi.Error{Code: 429}, store.ErrThrottled},
		{&googleapi.Error{Code: 503}, store.ErrThrottled},
		{&googleapi.Error{Code: 403}, store.ErrAccessDenied},
		{&googleapi.Error{Code: 401}, store.ErrAccessDenied},
		{&googleapi.Error{Code: 400, Message: "Invalid object name: 'x'"}, store.ErrInvalidKey},
		{fmt.Errorf("x: %w", context.Canceled), context.Canceled},
	} {
		if got := mapErr("op", "k", c.err); !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("mapErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := mapErr("op", "k", &googleapi.Error{Code: 500}); errors.Is(err, store.ErrThrottled) {
		t.Errorf("500 mapped to %v", err)
	}
}

func TestRedact(t *testing.T) {
	inner := &url.Error{Op: "Put", URL: "https://storage.googleapis.com/upload/storage/v1/b/x/o?uploadType=resumable&upload_id=SECRET123&name=k", Err: context.DeadlineExceeded}
	err := mapErr("put", "k", fmt.Errorf("storage: %w; Authorization: Bearer ya29.SECRET", inner))
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("secret in %q", err)
	}
	var ue *url.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ue) {
		t.Errorf("redacted error lost its chain: %v", err)
	}
	if !store.WasRetried(err) {
		t.Errorf("mapErr(%v) not marked store.Retried (the SDK's retryer has had it)", err)
	}
}

func TestSuccessor(t *testing.T) {
	for p, want := range map[string]string{"a/": "a0", ".fedgate/": ".fedgate0", "é": "ê", "a\x7f": "", "": "", "a//": "a/0",
		"a\uFFFD": "a\uFFFE", // a trailing U+FFFD is a character, not a byte to trim
	} {
		if got := successor(p); got != want {
			t.Errorf("successor(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"", "a\x00", "a\nb", "a\rb", ".", "..", "\xff", ".fedgate/x", ".well-known/acme-challenge/t", strings.Repeat("k", 1025)} {
		if err := checkKey(k); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("checkKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, k := range []string{"a", "./x", "a/..", ".fedgate", ".fedgate-x", "/", strings.Repeat("é", 512)} {
		if err := checkKey(k); err != nil {
			t.Errorf("checkKey(%q) = %v", k, err)
		}
	}
}

func TestNew(t *testing.T) {
	for ep, want := range map[string]string{
		"http://127.0.0.1:1":             "http://127.0.0.1:1/storage/v1/",
		"http://127.0.0.1:1/":            "http://127.0.0.1:1/storage/v1/",
		"http://127.0.0.1:1/storage/v1/": "http://127.0.0.1:1/storage/v1/",
		"https://example.com/storage/v1": "https://example.com/storage/v1/",
	} {
		if got, err := normEndpoint(ep); err != nil || got != want {
			t.Errorf("normEndpoint(%q) = %q, %v; want %q", ep, got, err, want)
		}
	}
	for _, cfg := range []Config{
		{Bucket: "b"},
		{Name: "n"},
		{Name: "n", Bucket: "b", CredentialsFile: "f", WithoutAuthentication: true},
		{Name: "n", Bucket: "b", Endpoint: "127.0.0.1:1", WithoutAuthentication: true},
	} {
		if _, err := New(t.Context(), cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	s, err := New(t.Context(), Config{Name: "n", Bucket: "b", Endpoint: "http://127.0.0.1:1", WithoutAuthentication: true, ChunkSize: 1})
	if err != nil || s.chunk != 256<<10 {
		t.Fatalf("New: chunk %d, %v", s.chunk, err)
	}
	s.Close()
}
