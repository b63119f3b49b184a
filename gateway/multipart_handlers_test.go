package gateway_test

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// multipartETag is S3's ETag of a multipart object.
func multipartETag(parts ...string) string {
	var sums []byte
	for _, p := range parts {
		sum := md5.Sum([]byte(p))
		sums = append(sums, sum[:]...)
	}
	sum := md5.Sum(sums)
	return fmt.Sprintf("%s-%d", hex.EncodeToString(sum[:]), len(parts))
}

func (e *env) createUpload(key string) string {
	e.t.Helper()
	out, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"color": "blue"}})
	noErr(e.t, err)
	return aws.ToString(out.UploadId)
}

func (e *env) uploadPart(key, id string, n int32, body string) string {
	e.t.Helper()
	out, err := e.root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: aws.String(id),
		PartNumber: aws.Int32(n), Body: strings.NewReader(body)})
	noErr(e.t, err)
	return aws.ToString(out.ETag)
}

func TestMultipartUpload(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	out, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"color": "blue"}})
	noErr(t, err)
	id := aws.ToString(out.UploadId)
	if id == "" || aws.ToString(out.Bucket) != "bkt" || aws.ToString(out.Key) != "big" {
		t.Fatalf("CreateMultipartUpload: id %q bucket %q key %q", id, aws.ToString(out.Bucket), aws.ToString(out.Key))
	}
	parts := []string{"first part", "second part", "end"}
	var etags []string
	for i, p := range parts {
		etag := e.uploadPart("big", id, int32(i+1), p)
		if etag != `"`+md5hex(p)+`"` {
			t.Errorf("part %d ETag %s, want %q", i+1, etag, md5hex(p))
		}
		etags = append(etags, etag)
	}

	lp, err := e.root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: aws.String(id)})
	noErr(t, err)
	if len(lp.Parts) != 3 || aws.ToBool(lp.IsTruncated) || aws.ToString(lp.Initiator.ID) != backend.RootUser {
		t.Fatalf("ListParts: %d parts, truncated %v, initiator %+v", len(lp.Parts), aws.ToBool(lp.IsTruncated), lp.Initiator)
	}
	for i, p := range lp.Parts {
		if aws.ToInt32(p.PartNumber) != int32(i+1) || aws.ToString(p.ETag) != etags[i] || aws.ToInt64(p.Size) != int64(len(parts[i])) {
			t.Errorf("part %d: number %d ETag %s size %d", i+1, aws.ToInt32(p.PartNumber), aws.ToString(p.ETag), aws.ToInt64(p.Size))
		}
	}
	lp, err = e.root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: aws.String(id),
		MaxParts: aws.Int32(1), PartNumberMarker: aws.String("1")})
	noErr(t, err)
	if len(lp.Parts) != 1 || aws.ToInt32(lp.Parts[0].PartNumber) != 2 || !aws.ToBool(lp.IsTruncated) ||
		aws.ToString(lp.NextPartNumberMarker) != "2" {
		t.Errorf("ListParts after 1, max 1: %d parts, truncated %v, next %q", len(lp.Parts), aws.ToBool(lp.IsTruncated),
			aws.ToString(lp.NextPartNumberMarker))
	}

	lu, err := e.root.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	noErr(t, err)
	if len(lu.Uploads) != 1 || aws.ToString(lu.Uploads[0].UploadId) != id || aws.ToString(lu.Uploads[0].Key) != "big" {
		t.Fatalf("ListMultipartUploads: %+v", lu.Uploads)
	}

	var completed []types.CompletedPart
	for i, etag := range etags {
		completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(etag)})
	}
	co, err := e.root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		UploadId: aws.String(id), MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
	noErr(t, err)
	want := multipartETag(parts...)
	if aws.ToString(co.ETag) != `"`+want+`"` || aws.ToString(co.Bucket) != "bkt" || aws.ToString(co.Key) != "big" {
		t.Errorf("CompleteMultipartUpload: ETag %s bucket %s key %s, want ETag %q", aws.ToString(co.ETag), aws.ToString(co.Bucket),
			aws.ToString(co.Key), want)
	}
	data, info, ok := e.fake.Object("bkt", "big")
	if !ok || string(data) != strings.Join(parts, "") || info.ContentType != "text/plain" || info.User["color"] != "blue" {
		t.Errorf("object %q (present %v) type %q meta %v", data, ok, info.ContentType, info.User)
	}

	// The upload is gone once complete.
	_, err = e.root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: aws.String(id)})
	wantErr(t, err, "NoSuchUpload", 404)
	// GetObject of one part of a multipart object is not implemented.
	_, err = e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(1)})
	wantErr(t, err, "NotImplemented", 501)
}

func TestCreateMultipartUploadErrors(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.grant("bkt", "read")
	_, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("nope"), Key: aws.String("k")})
	wantErr(t, err, "NoSuchBucket", 404)
	_, err = e.user.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "AccessDenied", 403)
	e.fake.Fail(gatewaytest.OpCreateUpload, backend.ErrOutcomeUnknown)
	_, err = e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	wantErr(t, err, "SlowDown", 503)
	e.fake.Fail(gatewaytest.OpCreateUpload, nil)
	out, err := e.root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	noErr(t, err)
	if out.ChecksumAlgorithm != types.ChecksumAlgorithmCrc32c {
		t.Errorf("checksum algorithm %q, want CRC32C", out.ChecksumAlgorithm)
	}
}

func TestUploadPartErrors(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	id := e.createUpload("k")
	for _, tc := range []struct {
		name   string
		key    string
		id     string
		num    int32
		code   string
		status int
	}{
		{name: "part 0", num: 0, code: "InvalidArgument", status: 400},
		{name: "part 10001", num: 10001, code: "InvalidArgument", status: 400},
		{name: "unknown upload", id: "nope", num: 1, code: "NoSuchUpload", status: 404},
		{name: "upload of another key", key: "other", num: 1, code: "NoSuchUpload", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id),
				PartNumber: aws.Int32(tc.num), Body: strings.NewReader("data")}
			if tc.key != "" {
				in.Key = aws.String(tc.key)
			}
			if tc.id != "" {
				in.UploadId = aws.String(tc.id)
			}
			_, err := e.root.UploadPart(ctx, in)
			wantErr(t, err, tc.code, tc.status)
		})
	}
	t.Run("content-md5 mismatch", func(t *testing.T) {
		_, err := e.root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id),
			PartNumber: aws.Int32(1), Body: strings.NewReader("data"), ContentMD5: aws.String(md5b64("atad"))})
		wantErr(t, err, "BadDigest", 400)
		up, err := e.fake.MustBucket("bkt").Upload(id, "k")
		noErr(t, err)
		if len(up.Parts) != 0 {
			t.Errorf("a part with a bad digest was stored: %+v", up.Parts)
		}
	})
	t.Run("partNumber without uploadId", func(t *testing.T) {
		resp, data := e.rootSigned("PUT", "/bkt/k?partNumber=1", []byte("x"), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>InvalidRequest</Code>") {
			t.Errorf("%d %s, want 400 InvalidRequest", resp.StatusCode, data)
		}
	})
}

func TestUploadPartCopy(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "src", "0123456789")
	id := e.createUpload("k")
	for _, tc := range []struct {
		name   string
		rng    string
		src    string
		part   string // the part's bytes
		code   string
		status int
	}{
		{name: "whole", part: "0123456789"},
		{name: "range", rng: "bytes=2-6", part: "23456"},
		{name: "range to the last byte", rng: "bytes=9-9", part: "9"},
		{name: "range past the end", rng: "bytes=5-10", code: "InvalidRange", status: 416},
		{name: "open range", rng: "bytes=5-", code: "InvalidArgument", status: 400},
		{name: "reversed range", rng: "bytes=6-2", code: "InvalidArgument", status: 400},
		{name: "missing source", src: "bkt/nope", code: "NoSuchKey", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &s3.UploadPartCopyInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id),
				PartNumber: aws.Int32(3), CopySource: aws.String("bkt/src")}
			if tc.rng != "" {
				in.CopySourceRange = aws.String(tc.rng)
			}
			if tc.src != "" {
				in.CopySource = aws.String(tc.src)
			}
			out, err := e.root.UploadPartCopy(ctx, in)
			if tc.code != "" {
				wantErr(t, err, tc.code, tc.status)
				return
			}
			noErr(t, err)
			if got := aws.ToString(out.CopyPartResult.ETag); got != `"`+md5hex(tc.part)+`"` {
				t.Errorf("part ETag %s, want %q", got, md5hex(tc.part))
			}
			up, err := e.fake.MustBucket("bkt").Upload(id, "k")
			noErr(t, err)
			if len(up.Parts) != 1 || up.Parts[0].Number != 3 || up.Parts[0].Size != int64(len(tc.part)) {
				t.Errorf("upload parts %+v, want part 3 of %d bytes", up.Parts, len(tc.part))
			}
		})
	}
	_, err := e.root.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String("nope"),
		PartNumber: aws.Int32(1), CopySource: aws.String("bkt/src")})
	wantErr(t, err, "NoSuchUpload", 404)
}

func TestCompleteMultipartUploadErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parts   func(etags []string) []types.CompletedPart
		minPart int64
		inm     bool
		code    string
		status  int
	}{
		{name: "wrong etag", parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"` + md5hex("other") + `"`)}}
		}, code: "InvalidPart", status: 400},
		{name: "unknown part", parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(et[0])}, {PartNumber: aws.Int32(7), ETag: aws.String(et[1])}}
		}, code: "InvalidPart", status: 400},
		{name: "descending", parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(2), ETag: aws.String(et[1])}, {PartNumber: aws.Int32(1), ETag: aws.String(et[0])}}
		}, code: "InvalidPartOrder", status: 400},
		{name: "repeated", parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(et[0])}, {PartNumber: aws.Int32(1), ETag: aws.String(et[0])}}
		}, code: "InvalidPartOrder", status: 400},
		{name: "small part", minPart: 100, parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(et[0])}, {PartNumber: aws.Int32(2), ETag: aws.String(et[1])}}
		}, code: "EntityTooSmall", status: 400},
		// Only parts before the last must be large enough.
		{name: "small last part", minPart: 100, parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(2), ETag: aws.String(et[1])}}
		}},
		{name: "no parts", parts: func([]string) []types.CompletedPart { return nil }, code: "MalformedXML", status: 400},
		{name: "if-none-match on an existing key", inm: true, parts: func(et []string) []types.CompletedPart {
			return []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(et[0])}}
		}, code: "PreconditionFailed", status: 412},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			if tc.minPart > 0 {
				e.fake.SetMinPartSize(tc.minPart)
			}
			if tc.inm {
				e.object("bkt", "k", "already here")
			}
			id := e.createUpload("k")
			etags := []string{e.uploadPart("k", id, 1, "part one"), e.uploadPart("k", id, 2, "part two")}
			in := &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id),
				MultipartUpload: &types.CompletedMultipartUpload{Parts: tc.parts(etags)}}
			if tc.inm {
				in.IfNoneMatch = aws.String("*")
			}
			_, err := e.root.CompleteMultipartUpload(ctx, in)
			if tc.code == "" {
				noErr(t, err)
				if data, _, _ := e.fake.Object("bkt", "k"); string(data) != "part two" {
					t.Errorf("object %q, want %q", data, "part two")
				}
				return
			}
			wantErr(t, err, tc.code, tc.status)
			// A failed completion leaves the upload usable.
			if _, err := e.fake.MustBucket("bkt").Upload(id, "k"); err != nil {
				t.Errorf("upload gone after a failed completion: %v", err)
			}
		})
	}
	t.Run("unknown upload", func(t *testing.T) {
		e := newEnv(t)
		e.bucket("bkt")
		_, err := e.root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
			UploadId: aws.String("nope"), MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: aws.String(`"x"`)}}}})
		wantErr(t, err, "NoSuchUpload", 404)
	})
}

func TestAbortMultipartUpload(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	id := e.createUpload("k")
	e.uploadPart("k", id, 1, "data")
	_, err := e.root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id)})
	noErr(t, err)
	if ups := slices.Collect(e.fake.MustBucket("bkt").Uploads("", "", "")); len(ups) != 0 {
		t.Errorf("uploads after abort: %+v", ups)
	}
	_, err = e.root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id)})
	wantErr(t, err, "NoSuchUpload", 404)
	_, err = e.root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("nope"), Key: aws.String("k"), UploadId: aws.String(id)})
	wantErr(t, err, "NoSuchBucket", 404)
	id = e.createUpload("k")
	e.grant("bkt", "read")
	_, err = e.user.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: aws.String(id)})
	wantErr(t, err, "AccessDenied", 403)
}

func TestListMultipartUploads(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	ids := map[string]string{}
	for _, k := range []string{"a", "b/1", "b/2", "c"} {
		ids[k] = e.createUpload(k)
	}
	second := e.createUpload("a") // two uploads of one key, by creation

	render := func(out *s3.ListMultipartUploadsOutput) []string {
		var got []string
		for _, u := range out.Uploads {
			got = append(got, aws.ToString(u.Key))
		}
		for _, p := range out.CommonPrefixes {
			got = append(got, aws.ToString(p.Prefix)+"(p)")
		}
		return got
	}
	for _, tc := range []struct {
		name      string
		in        s3.ListMultipartUploadsInput
		want      []string
		truncated bool
		nextKey   string
	}{
		{name: "all", want: []string{"a", "a", "b/1", "b/2", "c"}},
		{name: "prefix", in: s3.ListMultipartUploadsInput{Prefix: aws.String("b/")}, want: []string{"b/1", "b/2"}},
		{name: "delimiter", in: s3.ListMultipartUploadsInput{Delimiter: aws.String("/")}, want: []string{"a", "a", "c", "b/(p)"}},
		{name: "max", in: s3.ListMultipartUploadsInput{MaxUploads: aws.Int32(1)}, want: []string{"a"}, truncated: true, nextKey: "a"},
		{name: "key marker", in: s3.ListMultipartUploadsInput{KeyMarker: aws.String("a")}, want: []string{"b/1", "b/2", "c"}},
		{name: "key and upload id marker", in: s3.ListMultipartUploadsInput{KeyMarker: aws.String("a"), UploadIdMarker: aws.String(ids["a"])},
			want: []string{"a", "b/1", "b/2", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Bucket = aws.String("bkt")
			out, err := e.root.ListMultipartUploads(ctx, &in)
			noErr(t, err)
			if got := render(out); !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			if aws.ToBool(out.IsTruncated) != tc.truncated || (tc.truncated && aws.ToString(out.NextKeyMarker) != tc.nextKey) {
				t.Errorf("truncated %v next key %q, want %v %q", aws.ToBool(out.IsTruncated), aws.ToString(out.NextKeyMarker), tc.truncated, tc.nextKey)
			}
		})
	}
	out, err := e.root.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt"), Prefix: aws.String("a")})
	noErr(t, err)
	if len(out.Uploads) != 2 || aws.ToString(out.Uploads[0].UploadId) != ids["a"] || aws.ToString(out.Uploads[1].UploadId) != second {
		t.Errorf("uploads of a: %+v, want %s then %s", out.Uploads, ids["a"], second)
	}
	_, err = e.root.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("nope")})
	wantErr(t, err, "NoSuchBucket", 404)
	_, err = e.user.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("a"), UploadId: aws.String("nope")})
	wantErr(t, err, "NoSuchUpload", 404)
	_, err = e.user.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("a"), UploadId: aws.String(ids["a"])})
	wantErr(t, err, "AccessDenied", 403)
}
