package gateway_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
	"github.com/fedgate/fedgate/store"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func md5b64(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestPutObject(t *testing.T) {
	const body = "hello, fedgate"
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		user   bool
		in     s3.PutObjectInput
		code   string
		status int
		// stored is the object's body afterwards ("" when absent).
		stored string
	}{
		{name: "created", stored: body},
		{name: "overwrite", setup: func(e *env) { e.object("bkt", "k", "old") }, stored: body},
		{name: "content-md5", in: s3.PutObjectInput{ContentMD5: aws.String(md5b64(body))}, stored: body},
		{name: "content-md5 mismatch", in: s3.PutObjectInput{ContentMD5: aws.String(md5b64("something else"))},
			code: "BadDigest", status: 400},
		{name: "content-md5 mismatch keeps the old object", setup: func(e *env) { e.object("bkt", "k", "old") },
			in: s3.PutObjectInput{ContentMD5: aws.String(md5b64("something else"))}, code: "BadDigest", status: 400, stored: "old"},
		{name: "content-md5 malformed", in: s3.PutObjectInput{ContentMD5: aws.String("not base64!")},
			code: "InvalidDigest", status: 400},
		{name: "if-none-match absent", in: s3.PutObjectInput{IfNoneMatch: aws.String("*")}, stored: body},
		{name: "if-none-match present", setup: func(e *env) { e.object("bkt", "k", "old") },
			in: s3.PutObjectInput{IfNoneMatch: aws.String("*")}, code: "PreconditionFailed", status: 412, stored: "old"},
		{name: "if-match", setup: func(e *env) { e.object("bkt", "k", "old") },
			in: s3.PutObjectInput{IfMatch: aws.String(`"` + md5hex("old") + `"`)}, stored: body},
		{name: "if-match differs", setup: func(e *env) { e.object("bkt", "k", "old") },
			in: s3.PutObjectInput{IfMatch: aws.String(`"` + md5hex("other") + `"`)}, code: "PreconditionFailed", status: 412, stored: "old"},
		{name: "if-match missing", in: s3.PutObjectInput{IfMatch: aws.String(`"` + md5hex("other") + `"`)},
			code: "NoSuchKey", status: 404},
		{name: "missing bucket", setup: func(e *env) { noErr(e.t, e.fake.DeleteBucket(ctx, "bkt")) }, code: "NoSuchBucket", status: 404},
		{name: "no grant", user: true, code: "AccessDenied", status: 403},
		{name: "read grant", setup: func(e *env) { e.grant("bkt", "read") }, user: true,
			code: "AccessDenied", status: 403},
		{name: "write grant", setup: func(e *env) { e.grant("bkt", "write") }, user: true, stored: body},
		{name: "sse-c", in: s3.PutObjectInput{SSECustomerAlgorithm: aws.String("AES256"),
			SSECustomerKey:    aws.String(base64.StdEncoding.EncodeToString(make([]byte, 32))),
			SSECustomerKeyMD5: aws.String(md5b64(string(make([]byte, 32))))}, code: "NotImplemented", status: 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			if tc.setup != nil {
				tc.setup(e)
			}
			c := e.root
			if tc.user {
				c = e.user
			}
			in := tc.in
			in.Bucket, in.Key, in.Body = aws.String("bkt"), aws.String("k"), strings.NewReader(body)
			out, err := c.PutObject(ctx, &in)
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
			} else {
				noErr(t, err)
				if got := aws.ToString(out.ETag); got != `"`+md5hex(body)+`"` {
					t.Errorf("ETag %s, want %q", got, md5hex(body))
				}
			}
			data, _, ok := e.fake.Object("bkt", "k")
			if string(data) != tc.stored || ok != (tc.stored != "") {
				t.Errorf("stored %q (present %v), want %q", data, ok, tc.stored)
			}
		})
	}
}

func TestPutObjectMetadata(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dir/k"),
		Body: strings.NewReader("payload"), ContentType: aws.String("text/plain"), CacheControl: aws.String("max-age=60"),
		ContentDisposition: aws.String("attachment"), ContentLanguage: aws.String("fr"),
		Metadata: map[string]string{"Color": "blue", "shape": "round"}, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	noErr(t, err)
	_, info, ok := e.fake.Object("bkt", "dir/k")
	if !ok {
		t.Fatal("object not stored")
	}
	want := store.Metadata{ContentType: "text/plain", CacheControl: "max-age=60", ContentDisposition: "attachment",
		ContentLanguage: "fr", User: map[string]string{"color": "blue", "shape": "round"}}
	got := info.Metadata
	got.Checksums = nil
	if got.ContentType != want.ContentType || got.CacheControl != want.CacheControl || got.ContentDisposition != want.ContentDisposition ||
		got.ContentLanguage != want.ContentLanguage || got.ContentEncoding != "" || !maps.Equal(got.User, want.User) {
		t.Errorf("stored metadata %+v, want %+v", got, want)
	}
	sum := sha256sum("payload")
	if v := info.Checksums["SHA256"]; v != sum {
		t.Errorf("stored SHA256 checksum %q, want %q (all: %v)", v, sum, info.Checksums)
	}
	if info.Size != 7 || info.ETag != md5hex("payload") {
		t.Errorf("size %d ETag %s, want 7 %s", info.Size, info.ETag, md5hex("payload"))
	}

	t.Run("too large", func(t *testing.T) {
		_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big-meta"),
			Body: strings.NewReader("x"), Metadata: map[string]string{"m": strings.Repeat("v", 2100)}})
		wantErr(t, err, "MetadataTooLarge", 400)
	})
}

// getEnv stores one object "bkt/k" with body 0123456789 and metadata.
func getEnv(t *testing.T) (*env, store.ObjectInfo) {
	e := newEnv(t)
	e.bucket("bkt")
	info := e.fake.PutObject("bkt", "k", []byte("0123456789"), store.Metadata{ContentType: "text/plain",
		ContentEncoding: "identity", User: map[string]string{"color": "blue"}})
	return e, info
}

func TestGetObject(t *testing.T) {
	e, info := getEnv(t)
	etag := `"` + info.ETag + `"`
	past, future := info.ModTime.Add(-time.Hour), info.ModTime.Add(time.Hour)
	for _, tc := range []struct {
		name         string
		in           s3.GetObjectInput
		body         string
		contentRange string
		code         string
		status       int
	}{
		{name: "whole", body: "0123456789"},
		{name: "range", in: s3.GetObjectInput{Range: aws.String("bytes=2-5")}, body: "2345", contentRange: "bytes 2-5/10"},
		{name: "open range", in: s3.GetObjectInput{Range: aws.String("bytes=7-")}, body: "789", contentRange: "bytes 7-9/10"},
		{name: "suffix range", in: s3.GetObjectInput{Range: aws.String("bytes=-3")}, body: "789", contentRange: "bytes 7-9/10"},
		{name: "range past the end clamped", in: s3.GetObjectInput{Range: aws.String("bytes=8-100")}, body: "89", contentRange: "bytes 8-9/10"},
		{name: "range syntax ignored", in: s3.GetObjectInput{Range: aws.String("bytes=5-2")}, body: "0123456789"},
		{name: "range unsatisfiable", in: s3.GetObjectInput{Range: aws.String("bytes=10-")}, code: "InvalidRange", status: 416},
		{name: "if-match", in: s3.GetObjectInput{IfMatch: aws.String(etag)}, body: "0123456789"},
		{name: "if-match differs", in: s3.GetObjectInput{IfMatch: aws.String(`"abc"`)}, code: "PreconditionFailed", status: 412},
		{name: "if-none-match matches", in: s3.GetObjectInput{IfNoneMatch: aws.String(etag)}, code: "NotModified", status: 304},
		{name: "if-none-match differs", in: s3.GetObjectInput{IfNoneMatch: aws.String(`"abc"`)}, body: "0123456789"},
		{name: "if-modified-since later", in: s3.GetObjectInput{IfModifiedSince: aws.Time(future)}, code: "NotModified", status: 304},
		{name: "if-modified-since earlier", in: s3.GetObjectInput{IfModifiedSince: aws.Time(past)}, body: "0123456789"},
		{name: "if-unmodified-since earlier", in: s3.GetObjectInput{IfUnmodifiedSince: aws.Time(past)}, code: "PreconditionFailed", status: 412},
		// If-Match true wins over If-Unmodified-Since false (RFC 7232, as S3).
		{name: "if-match beats if-unmodified-since", in: s3.GetObjectInput{IfMatch: aws.String(etag), IfUnmodifiedSince: aws.Time(past)},
			body: "0123456789"},
		{name: "part 1", in: s3.GetObjectInput{PartNumber: aws.Int32(1)}, body: "0123456789"},
		{name: "part 2", in: s3.GetObjectInput{PartNumber: aws.Int32(2)}, code: "InvalidPartNumber", status: 416},
		{name: "missing key", in: s3.GetObjectInput{Key: aws.String("nope")}, code: "NoSuchKey", status: 404},
		{name: "missing bucket", in: s3.GetObjectInput{Bucket: aws.String("nope")}, code: "NoSuchBucket", status: 404},
		{name: "version", in: s3.GetObjectInput{VersionId: aws.String("v1")}, code: "NoSuchVersion", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Bucket == nil {
				in.Bucket = aws.String("bkt")
			}
			if in.Key == nil {
				in.Key = aws.String("k")
			}
			out, err := e.root.GetObject(ctx, &in)
			if tc.code != "" {
				resp := wantErr(t, err, tc.code, tc.status)
				switch tc.status {
				case 416:
					if tc.code == "InvalidRange" && resp.Header.Get("Content-Range") != "bytes */10" {
						t.Errorf("Content-Range %q, want bytes */10", resp.Header.Get("Content-Range"))
					}
				case 304:
					if resp.Header.Get("ETag") != etag {
						t.Errorf("304 ETag %q, want %q", resp.Header.Get("ETag"), etag)
					}
				}
				return
			}
			noErr(t, err)
			defer out.Body.Close()
			data, err := io.ReadAll(out.Body)
			noErr(t, err)
			if string(data) != tc.body {
				t.Errorf("body %q, want %q", data, tc.body)
			}
			if aws.ToString(out.ContentRange) != tc.contentRange {
				t.Errorf("Content-Range %q, want %q", aws.ToString(out.ContentRange), tc.contentRange)
			}
			if aws.ToInt64(out.ContentLength) != int64(len(tc.body)) || aws.ToString(out.ETag) != etag ||
				aws.ToString(out.ContentType) != "text/plain" || aws.ToString(out.ContentEncoding) != "identity" ||
				out.Metadata["color"] != "blue" || !aws.ToTime(out.LastModified).Equal(info.ModTime.Truncate(time.Second)) ||
				aws.ToString(out.AcceptRanges) != "bytes" {
				t.Errorf("headers: length %d ETag %s type %s encoding %s meta %v modified %v accept-ranges %s",
					aws.ToInt64(out.ContentLength), aws.ToString(out.ETag), aws.ToString(out.ContentType),
					aws.ToString(out.ContentEncoding), out.Metadata, out.LastModified, aws.ToString(out.AcceptRanges))
			}
		})
	}

	t.Run("response overrides", func(t *testing.T) {
		out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
			ResponseContentType: aws.String("application/x-test"), ResponseContentDisposition: aws.String(`attachment; filename="k.txt"`),
			ResponseCacheControl: aws.String("no-store"), ResponseContentLanguage: aws.String("de"),
			ResponseContentEncoding: aws.String("gzip"), ResponseExpires: aws.Time(future.UTC().Truncate(time.Second))})
		noErr(t, err)
		out.Body.Close()
		if aws.ToString(out.ContentType) != "application/x-test" || aws.ToString(out.ContentDisposition) != `attachment; filename="k.txt"` ||
			aws.ToString(out.CacheControl) != "no-store" || aws.ToString(out.ContentLanguage) != "de" ||
			aws.ToString(out.ContentEncoding) != "gzip" || aws.ToString(out.ExpiresString) != future.UTC().Format(http.TimeFormat) {
			t.Errorf("overrides not applied: type %s disposition %s cache %s language %s encoding %s expires %s",
				aws.ToString(out.ContentType), aws.ToString(out.ContentDisposition), aws.ToString(out.CacheControl),
				aws.ToString(out.ContentLanguage), aws.ToString(out.ContentEncoding), aws.ToString(out.ExpiresString))
		}
	})

	t.Run("access", func(t *testing.T) {
		_, err := e.user.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		wantErr(t, err, "AccessDenied", 403)
	})

	t.Run("object changed after stat", func(t *testing.T) {
		e, _ := getEnv(t)
		e.fake.Fail(gatewaytest.OpOpen, store.ErrPreconditionFailed)
		_, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		resp := wantErr(t, err, "SlowDown", 503)
		if resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		if n := e.fake.Forgotten("bkt", "k"); n != 1 {
			t.Errorf("Forget called %d times, want 1", n)
		}
	})

	t.Run("egress budget", func(t *testing.T) {
		e, _ := getEnv(t)
		e.fake.Fail(gatewaytest.OpOpen, backend.ErrEgressBudget)
		_, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		wantErr(t, err, "EgressBudgetExceeded", 403)
	})
}

func TestHeadObject(t *testing.T) {
	e, info := getEnv(t)
	out, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	if aws.ToInt64(out.ContentLength) != 10 || aws.ToString(out.ETag) != `"`+info.ETag+`"` ||
		aws.ToString(out.ContentType) != "text/plain" || out.Metadata["color"] != "blue" {
		t.Errorf("HeadObject: length %d ETag %s type %s meta %v", aws.ToInt64(out.ContentLength), aws.ToString(out.ETag),
			aws.ToString(out.ContentType), out.Metadata)
	}
	out, err = e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Range: aws.String("bytes=0-3")})
	noErr(t, err)
	if aws.ToInt64(out.ContentLength) != 4 || aws.ToString(out.ContentRange) != "bytes 0-3/10" {
		t.Errorf("HeadObject with range: length %d range %s", aws.ToInt64(out.ContentLength), aws.ToString(out.ContentRange))
	}

	for _, tc := range []struct {
		name   string
		in     s3.HeadObjectInput
		code   string
		status int
	}{
		{name: "missing key", in: s3.HeadObjectInput{Key: aws.String("nope")}, code: "NotFound", status: 404},
		{name: "missing bucket", in: s3.HeadObjectInput{Bucket: aws.String("nope")}, code: "NotFound", status: 404},
		{name: "if-match differs", in: s3.HeadObjectInput{IfMatch: aws.String(`"abc"`)}, code: "PreconditionFailed", status: 412},
		{name: "if-none-match", in: s3.HeadObjectInput{IfNoneMatch: aws.String(`"` + info.ETag + `"`)}, code: "NotModified", status: 304},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Bucket == nil {
				in.Bucket = aws.String("bkt")
			}
			if in.Key == nil {
				in.Key = aws.String("k")
			}
			_, err := e.root.HeadObject(ctx, &in)
			wantErr(t, err, tc.code, tc.status)
		})
	}

	// An error answer to HEAD has no body and keeps none of the object's
	// headers (its length above all).
	for _, path := range []string{"/bkt/nope", "/bkt/k"} {
		hdr := http.Header{"If-Match": {`"abc"`}}
		resp, body := e.rootSigned(http.MethodHead, path, nil, hdr)
		if resp.StatusCode < 400 || len(body) != 0 || resp.Header.Get("ETag") != "" || resp.ContentLength > 0 {
			t.Errorf("HEAD %s: status %d body %q ETag %q Content-Length %d, want an error with no body nor object headers",
				path, resp.StatusCode, body, resp.Header.Get("ETag"), resp.ContentLength)
		}
	}
}

func TestDeleteObject(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "v")
	_, err := e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	if _, _, ok := e.fake.Object("bkt", "k"); ok {
		t.Error("object still there after DeleteObject")
	}
	// Deleting a missing key succeeds (204), as in S3.
	_, err = e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	noErr(t, err)
	resp, _ := e.rootSigned(http.MethodDelete, "/bkt/k", nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE status %d, want 204", resp.StatusCode)
	}

	e.object("bkt", "k", "v")
	e.grant("bkt", "read")
	_, err = e.user.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("nope"), Key: aws.String("k")})
	wantErr(t, err, "NoSuchBucket", 404)
	// Deleting a version that does not exist succeeds, as in S3.
	_, err = e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), VersionId: aws.String("3")})
	noErr(t, err)
	e.fake.Fail(gatewaytest.OpDelete, backend.ErrNoLeader)
	_, err = e.root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "SlowDown", 503)
	if _, _, ok := e.fake.Object("bkt", "k"); !ok {
		t.Error("object gone after a refused DeleteObject")
	}
}

func TestDeleteObjects(t *testing.T) {
	objs := func(keys ...string) *types.Delete {
		d := &types.Delete{}
		for _, k := range keys {
			d.Objects = append(d.Objects, types.ObjectIdentifier{Key: aws.String(k)})
		}
		return d
	}
	for _, tc := range []struct {
		name     string
		del      *types.Delete
		fail     error
		deleted  []string
		errs     []string // "key:Code"
		remains  []string
		code     string
		status   int
		userRead bool
	}{
		{name: "some", del: objs("a", "c", "missing"), deleted: []string{"a", "c", "missing"}, remains: []string{"b"}},
		{name: "quiet", del: &types.Delete{Quiet: aws.Bool(true), Objects: objs("a", "b").Objects}, remains: []string{"c"}},
		{name: "bad keys", del: objs("a", "x/../y", "b"), deleted: []string{"a", "b"},
			errs: []string{"x/../y:InvalidArgument"}, remains: []string{"c"}},
		{name: "version", del: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("a"), VersionId: aws.String("7")}}},
			deleted: []string{"a"}, remains: []string{"a", "b", "c"}},
		{name: "per-key backend errors", del: objs("a", "b"), fail: store.ErrThrottled,
			errs: []string{"a:SlowDown", "b:SlowDown"}, remains: []string{"a", "b", "c"}},
		{name: "quiet keeps errors", del: &types.Delete{Quiet: aws.Bool(true), Objects: objs("a").Objects}, fail: store.ErrAccessDenied,
			errs: []string{"a:AccessDenied"}, remains: []string{"a", "b", "c"}},
		// S3 authorizes s3:DeleteObject per key: a refused key is an
		// AccessDenied entry of a 200 answer.
		{name: "no write grant", del: objs("a"), userRead: true, errs: []string{"a:AccessDenied"}, remains: []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			for _, k := range []string{"a", "b", "c"} {
				e.object("bkt", k, k)
			}
			e.fake.Fail(gatewaytest.OpDelete, tc.fail)
			c := e.root
			if tc.userRead {
				e.grant("bkt", "read")
				c = e.user
			}
			out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: tc.del})
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
			} else {
				noErr(t, err)
				var deleted, errs []string
				for _, d := range out.Deleted {
					deleted = append(deleted, aws.ToString(d.Key))
				}
				for _, x := range out.Errors {
					errs = append(errs, aws.ToString(x.Key)+":"+aws.ToString(x.Code))
				}
				if !slices.Equal(deleted, tc.deleted) || !slices.Equal(errs, tc.errs) {
					t.Errorf("deleted %q errors %q, want %q %q", deleted, errs, tc.deleted, tc.errs)
				}
			}
			var remains []string
			for _, k := range []string{"a", "b", "c"} {
				if _, _, ok := e.fake.Object("bkt", k); ok {
					remains = append(remains, k)
				}
			}
			if !slices.Equal(remains, tc.remains) {
				t.Errorf("remaining %q, want %q", remains, tc.remains)
			}
		})
	}

	t.Run("malformed", func(t *testing.T) {
		e := newEnv(t)
		e.bucket("bkt")
		body := []byte("<Delete><Object><Key>a</Key></Object>")
		resp, data := e.rootSigned(http.MethodPost, "/bkt?delete", body, http.Header{"Content-Md5": {md5b64(string(body))}})
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>MalformedXML</Code>") {
			t.Errorf("truncated XML: %d %s, want 400 MalformedXML", resp.StatusCode, data)
		}
		body = []byte("<Delete></Delete>")
		resp, data = e.rootSigned(http.MethodPost, "/bkt?delete", body, http.Header{"Content-Md5": {md5b64(string(body))}})
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>MalformedXML</Code>") {
			t.Errorf("no objects: %d %s, want 400 MalformedXML", resp.StatusCode, data)
		}
		body = []byte("<Delete><Object><Key>a</Key></Object></Delete>")
		resp, data = e.rootSigned(http.MethodPost, "/bkt?delete", body, http.Header{"Content-Md5": {md5b64("other")}})
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>BadDigest</Code>") {
			t.Errorf("wrong Content-MD5: %d %s, want 400 BadDigest", resp.StatusCode, data)
		}
		// S3 requires a digest of the body: none is InvalidRequest, and
		// nothing is deleted; a wrong x-amz-checksum-crc32 is refused too.
		e.object("bkt", "a", "v")
		resp, data = e.rootSigned(http.MethodPost, "/bkt?delete", body, nil)
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>InvalidRequest</Code>") || !strings.Contains(string(data), "Content-MD5") {
			t.Errorf("no digest: %d %s, want 400 InvalidRequest naming Content-MD5", resp.StatusCode, data)
		}
		resp, data = e.rootSigned(http.MethodPost, "/bkt?delete", body, http.Header{"X-Amz-Checksum-Crc32": {"AAAAAA=="}})
		if resp.StatusCode != 400 {
			t.Errorf("wrong x-amz-checksum-crc32: %d %s, want 400", resp.StatusCode, data)
		}
		if _, err := e.fake.Bucket("bkt"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a")}); err != nil {
			t.Errorf("a refused DeleteObjects deleted the object: %v", err)
		}
		resp, data = e.rootSigned(http.MethodPost, "/bkt?delete", body, http.Header{"X-Amz-Checksum-Crc32": {checksum.CRC32.Sum(body)}})
		if resp.StatusCode != 200 || !strings.Contains(string(data), "<Deleted><Key>a</Key></Deleted>") {
			t.Errorf("with x-amz-checksum-crc32: %d %s", resp.StatusCode, data)
		}
	})
}

func TestCopyObject(t *testing.T) {
	srcMeta := store.Metadata{ContentType: "text/plain", User: map[string]string{"color": "blue"}}
	for _, tc := range []struct {
		name      string
		in        s3.CopyObjectInput
		userGrant string // alice's grant on "src" (she owns "dst")
		code      string
		status    int
		// wantType and wantUser are the copy's metadata.
		wantType string
		wantUser map[string]string
	}{
		{name: "copy metadata", wantType: "text/plain", wantUser: map[string]string{"color": "blue"}},
		{name: "copy directive", in: s3.CopyObjectInput{MetadataDirective: types.MetadataDirectiveCopy,
			Metadata: map[string]string{"ignored": "yes"}}, wantType: "text/plain", wantUser: map[string]string{"color": "blue"}},
		{name: "replace", in: s3.CopyObjectInput{MetadataDirective: types.MetadataDirectiveReplace,
			ContentType: aws.String("application/json"), Metadata: map[string]string{"shape": "round"}},
			wantType: "application/json", wantUser: map[string]string{"shape": "round"}},
		{name: "onto itself", in: s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("obj")},
			code: "InvalidRequest", status: 400},
		{name: "onto itself replacing metadata", in: s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("obj"),
			MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"v": "2"}},
			wantUser: map[string]string{"v": "2"}},
		{name: "bad directive", in: s3.CopyObjectInput{MetadataDirective: "MERGE"}, code: "InvalidArgument", status: 400},
		{name: "source if-match", in: s3.CopyObjectInput{CopySourceIfMatch: aws.String(`"` + md5hex("source bytes") + `"`)},
			wantType: "text/plain", wantUser: map[string]string{"color": "blue"}},
		{name: "source if-match differs", in: s3.CopyObjectInput{CopySourceIfMatch: aws.String(`"abc"`)},
			code: "PreconditionFailed", status: 412},
		// A copy source never answers 304: If-None-Match matching is 412.
		{name: "source if-none-match", in: s3.CopyObjectInput{CopySourceIfNoneMatch: aws.String(`"` + md5hex("source bytes") + `"`)},
			code: "PreconditionFailed", status: 412},
		{name: "source if-modified-since", in: s3.CopyObjectInput{CopySourceIfModifiedSince: aws.Time(time.Now().Add(time.Hour))},
			code: "PreconditionFailed", status: 412},
		{name: "source if-unmodified-since", in: s3.CopyObjectInput{CopySourceIfUnmodifiedSince: aws.Time(time.Now().Add(-time.Hour))},
			code: "PreconditionFailed", status: 412},
		{name: "missing source key", in: s3.CopyObjectInput{CopySource: aws.String("src/nope")}, code: "NoSuchKey", status: 404},
		{name: "missing source bucket", in: s3.CopyObjectInput{CopySource: aws.String("nope/obj")}, code: "NoSuchBucket", status: 404},
		{name: "bad source", in: s3.CopyObjectInput{CopySource: aws.String("srconly")}, code: "InvalidArgument", status: 400},
		{name: "source version", in: s3.CopyObjectInput{CopySource: aws.String("src/obj?versionId=3")}, code: "NoSuchVersion", status: 404},
		{name: "missing destination bucket", in: s3.CopyObjectInput{Bucket: aws.String("nope")}, code: "NoSuchBucket", status: 404},
		{name: "source not readable", in: s3.CopyObjectInput{Bucket: aws.String("dst")}, userGrant: "none", code: "AccessDenied", status: 403},
		{name: "source readable", in: s3.CopyObjectInput{Bucket: aws.String("dst")}, userGrant: "read",
			wantType: "text/plain", wantUser: map[string]string{"color": "blue"}},
		{name: "destination if-none-match", in: s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("obj"),
			MetadataDirective: types.MetadataDirectiveReplace, IfNoneMatch: aws.String("*")}, code: "PreconditionFailed", status: 412},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("src")
			e.fake.AddBucket("dst", "alice")
			e.fake.PutObject("src", "obj", []byte("source bytes"), srcMeta)
			c := e.root
			if tc.userGrant != "" {
				c = e.user
				if tc.userGrant != "none" {
					e.grant("src", tc.userGrant)
				}
			}
			in := tc.in
			if in.Bucket == nil {
				in.Bucket = aws.String("dst")
			}
			if in.Key == nil {
				in.Key = aws.String("copy")
			}
			if in.CopySource == nil {
				in.CopySource = aws.String("src/obj")
			}
			out, err := c.CopyObject(ctx, &in)
			data, info, ok := e.fake.Object(*in.Bucket, *in.Key)
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
				if ok && *in.Key == "copy" {
					t.Errorf("copy stored after a refused CopyObject")
				}
				return
			}
			noErr(t, err)
			if !ok || string(data) != "source bytes" {
				t.Fatalf("copy holds %q (present %v), want the source's bytes", data, ok)
			}
			if aws.ToString(out.CopyObjectResult.ETag) != `"`+md5hex("source bytes")+`"` || info.ETag != md5hex("source bytes") {
				t.Errorf("ETag %s (stored %s), want the source's MD5", aws.ToString(out.CopyObjectResult.ETag), info.ETag)
			}
			if info.ContentType != tc.wantType || !maps.Equal(info.User, tc.wantUser) {
				t.Errorf("copy's metadata %q %v, want %q %v", info.ContentType, info.User, tc.wantType, tc.wantUser)
			}
		})
	}
}
