package e2e

import (
	"bytes"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
)

// What a web page does against a real server (docs/browser-uploads.md):
// the bucket's CORS configuration set with aws-sdk-go-v2, the browser's
// preflight and cross-origin requests as plain HTTP, and form uploads
// signed by minio-go's PresignedPostPolicy.
func TestBrowserCORSAndPostUploads(t *testing.T) {
	s := startServer(t)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("site")})))
	const origin = "https://app.example.com"
	mustOK(t, must(c.PutBucketCors(ctx(t), &s3.PutBucketCorsInput{Bucket: aws.String("site"), CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{
			AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"GET", "POST", "PUT"},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(300),
		}}}})))
	got, err := c.GetBucketCors(ctx(t), &s3.GetBucketCorsInput{Bucket: aws.String("site")})
	mustOK(t, err)
	if len(got.CORSRules) != 1 || got.CORSRules[0].AllowedOrigins[0] != "https://*.example.com" {
		t.Fatalf("GetBucketCors: %+v", got.CORSRules)
	}

	do := func(req *http.Request) (*http.Response, string) {
		t.Helper()
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		mustOK(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// The preflight, unauthenticated.
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodOptions, s.Endpoint+"/site/uploads/a.txt", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "PUT")
	req.Header.Set("Access-Control-Request-Headers", "authorization, x-amz-date, x-amz-content-sha256")
	resp, body := do(req)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST, PUT" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "authorization, x-amz-date, x-amz-content-sha256" || resp.Header.Get("Access-Control-Max-Age") != "300" {
		t.Fatalf("preflight: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	req, _ = http.NewRequestWithContext(ctx(t), http.MethodOptions, s.Endpoint+"/site/uploads/a.txt", nil)
	req.Header.Set("Origin", "https://evil.test")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	if resp, body = do(req); resp.StatusCode != 403 || !strings.Contains(body, "<Code>AccessForbidden</Code>") {
		t.Errorf("preflight from another origin: %d %s", resp.StatusCode, body)
	}

	// A form upload presigned by minio-go, posted as a browser does.
	mc := s.minio(rootAK, rootSK)
	p := minio.NewPostPolicy()
	mustOK(t, p.SetBucket("site"))
	mustOK(t, p.SetKeyStartsWith("uploads/"))
	mustOK(t, p.SetExpires(time.Now().Add(10*time.Minute)))
	mustOK(t, p.SetContentLengthRange(1, 8<<20))
	mustOK(t, p.SetContentType("text/plain"))
	mustOK(t, p.SetUserMetadata("owner", "ann"))
	mustOK(t, p.SetSuccessStatusAction("201"))
	u, form, err := mc.PresignedPostPolicy(ctx(t), p)
	mustOK(t, err)
	post := func(fields map[string]string, file []byte) (*http.Response, string) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			mustOK(t, mw.WriteField(k, fields[k]))
		}
		w, err := mw.CreateFormFile("file", "notes.txt")
		mustOK(t, err)
		_, _ = w.Write(file)
		mustOK(t, mw.Close())
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, u.String(), &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Origin", origin)
		return do(req)
	}
	with := func(change map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range form {
			out[k] = v
		}
		for k, v := range change {
			out[k] = v
		}
		return out
	}
	data := randBytes(t, 3<<20)
	resp, body = post(with(map[string]string{"key": "uploads/${filename}"}), data)
	var pr struct{ Bucket, Key, ETag string }
	if err := xml.Unmarshal([]byte(body), &pr); err != nil || resp.StatusCode != 201 || pr.Key != "uploads/notes.txt" || pr.ETag != `"`+md5hex(data)+`"` {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Access-Control-Expose-Headers") != "ETag" {
		t.Errorf("POST answer's CORS headers: %v", resp.Header)
	}
	stored, out := getBytes(t, c, "site", "uploads/notes.txt")
	if !bytes.Equal(stored, data) || aws.ToString(out.ContentType) != "text/plain" || out.Metadata["owner"] != "ann" {
		t.Errorf("stored %d bytes, %q, %v", len(stored), aws.ToString(out.ContentType), out.Metadata)
	}
	// The policy holds.
	for _, tc := range []struct {
		change map[string]string
		file   []byte
		status int
		code   string
	}{
		{map[string]string{"key": "elsewhere/x"}, []byte("x"), 403, "AccessDenied"},
		{map[string]string{"key": "uploads/x"}, nil, 400, "EntityTooSmall"},
		{map[string]string{"key": "uploads/x", "x-amz-meta-extra": "1"}, []byte("x"), 403, "AccessDenied"},
		{map[string]string{"key": "uploads/x", "x-amz-signature": strings.Repeat("0", 64)}, []byte("x"), 403, "SignatureDoesNotMatch"},
	} {
		if resp, body = post(with(tc.change), tc.file); resp.StatusCode != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
			t.Errorf("%v: %d %s, want %d %s", tc.change, resp.StatusCode, body, tc.status, tc.code)
		}
	}

	// A cross-origin GET of what was uploaded, as a page would read it.
	req, _ = http.NewRequestWithContext(ctx(t), http.MethodGet, s.Endpoint+"/site/uploads/notes.txt", nil)
	req.Header.Set("Origin", origin)
	if resp, _ = do(req); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("anonymous cross-origin GET of a private object: %d %v", resp.StatusCode, resp.Header)
	}

	// An anonymous drop box: refused until the bucket policy allows
	// everyone s3:PutObject.
	anon := func() (*http.Response, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mustOK(t, mw.WriteField("key", "drop/${filename}"))
		w, _ := mw.CreateFormFile("file", "anon.txt")
		_, _ = w.Write([]byte("anonymous"))
		mustOK(t, mw.Close())
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, s.Endpoint+"/site", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return do(req)
	}
	if resp, body = anon(); resp.StatusCode != 403 || !strings.Contains(body, "<Code>AccessDenied</Code>") {
		t.Errorf("anonymous POST without a policy: %d %s", resp.StatusCode, body)
	}
	mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("site"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::site/drop/*"}]}`)})))
	if resp, body = anon(); resp.StatusCode != 204 {
		t.Fatalf("anonymous POST allowed by the bucket policy: %d %s", resp.StatusCode, body)
	}
	if got, _ := getBytes(t, c, "site", "drop/anon.txt"); string(got) != "anonymous" {
		t.Errorf("anonymous upload stored %q", got)
	}
}
