package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

var allAttributes = []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum,
	types.ObjectAttributesObjectParts, types.ObjectAttributesStorageClass, types.ObjectAttributesObjectSize}

func (e *env) attributes(c *s3.Client, key string, attrs ...types.ObjectAttributes) (*s3.GetObjectAttributesOutput, error) {
	return c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bkt"), Key: aws.String(key), ObjectAttributes: attrs})
}

func TestGetObjectAttributes(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	body := "attributes of this object"
	_, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("one"), Body: strings.NewReader(body),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	noErr(t, err)
	out, err := e.attributes(e.root, "one", allAttributes...)
	noErr(t, err)
	if aws.ToString(out.ETag) != md5hex(body) {
		t.Errorf("ETag %q, want %q without quotes", aws.ToString(out.ETag), md5hex(body))
	}
	if aws.ToInt64(out.ObjectSize) != int64(len(body)) || out.StorageClass != types.StorageClassStandard {
		t.Errorf("size %d class %q", aws.ToInt64(out.ObjectSize), out.StorageClass)
	}
	if out.Checksum == nil || aws.ToString(out.Checksum.ChecksumSHA256) != sha256sum(body) || out.Checksum.ChecksumType != types.ChecksumTypeFullObject {
		t.Errorf("checksum %+v, want SHA256 %s FULL_OBJECT", out.Checksum, sha256sum(body))
	}
	if out.ObjectParts != nil {
		t.Errorf("ObjectParts %+v for an object of one PUT", out.ObjectParts)
	}
	_, info, _ := e.fake.Object("bkt", "one")
	if out.LastModified == nil || !out.LastModified.Equal(info.ModTime.Truncate(time.Second)) {
		t.Errorf("Last-Modified %v, want %v", out.LastModified, info.ModTime)
	}

	// Only what was asked for.
	out, err = e.attributes(e.root, "one", types.ObjectAttributesObjectSize)
	noErr(t, err)
	if out.ETag != nil || out.Checksum != nil || out.StorageClass != "" || aws.ToInt64(out.ObjectSize) != int64(len(body)) {
		t.Errorf("ObjectSize alone: %+v", out)
	}
	// An empty object has size 0, not none.
	e.object("bkt", "empty", "")
	out, err = e.attributes(e.root, "empty", types.ObjectAttributesObjectSize, types.ObjectAttributesChecksum)
	noErr(t, err)
	if out.ObjectSize == nil || *out.ObjectSize != 0 || out.Checksum != nil {
		t.Errorf("empty object: size %v checksum %+v", out.ObjectSize, out.Checksum)
	}

	// A multipart object: its number of parts, no Part list, no checksum.
	id := e.createUpload("mp")
	p1, p2, p3 := e.uploadPart("mp", id, 1, "aaaaa"), e.uploadPart("mp", id, 2, "bbbbb"), e.uploadPart("mp", id, 3, "c")
	_, err = e.root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(p1)},
			{PartNumber: aws.Int32(2), ETag: aws.String(p2)}, {PartNumber: aws.Int32(3), ETag: aws.String(p3)}}}})
	noErr(t, err)
	out, err = e.root.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		ObjectAttributes: allAttributes, MaxParts: aws.Int32(1), PartNumberMarker: aws.String("1")})
	noErr(t, err)
	if out.ObjectParts == nil || aws.ToInt32(out.ObjectParts.TotalPartsCount) != 3 || len(out.ObjectParts.Parts) != 0 {
		t.Errorf("ObjectParts %+v, want PartsCount 3", out.ObjectParts)
	}
	if aws.ToString(out.ETag) != multipartETag("aaaaa", "bbbbb", "c") || aws.ToInt64(out.ObjectSize) != 11 || out.Checksum != nil {
		t.Errorf("multipart object: ETag %q size %d checksum %+v", aws.ToString(out.ETag), aws.ToInt64(out.ObjectSize), out.Checksum)
	}
	// S3 ignores x-amz-max-parts it cannot read.
	resp, data := e.rootSigned(http.MethodGet, "/bkt/mp?attributes", nil, http.Header{"X-Amz-Object-Attributes": {"ObjectParts"}, "X-Amz-Max-Parts": {"lots"}})
	if resp.StatusCode != 200 || !strings.Contains(string(data), "<ObjectParts><PartsCount>3</PartsCount></ObjectParts>") {
		t.Errorf("GetObjectAttributes with a bad x-amz-max-parts: %d %s", resp.StatusCode, data)
	}

	// The header: missing or empty, or naming what S3 does not know.
	for _, tc := range []struct {
		hdr  http.Header
		code string
	}{
		{nil, "InvalidRequest"},
		{http.Header{"X-Amz-Object-Attributes": {" , "}}, "InvalidRequest"},
		{http.Header{"X-Amz-Object-Attributes": {"ETag,ETags"}}, "InvalidArgument"},
		{http.Header{"X-Amz-Object-Attributes": {"etag"}}, "InvalidArgument"},
	} {
		resp, data := e.rootSigned(http.MethodGet, "/bkt/one?attributes", nil, tc.hdr)
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>"+tc.code+"</Code>") {
			t.Errorf("x-amz-object-attributes %q: %d %s, want 400 %s", tc.hdr.Get("X-Amz-Object-Attributes"), resp.StatusCode, data, tc.code)
		}
	}
	resp, data = e.rootSigned(http.MethodGet, "/bkt/one?attributes", nil, http.Header{"X-Amz-Object-Attributes": {"ETag", "ObjectSize"}})
	want := `<GetObjectAttributesResponse xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag>` + md5hex(body) + `</ETag><ObjectSize>25</ObjectSize></GetObjectAttributesResponse>`
	if resp.StatusCode != 200 || !strings.Contains(string(data), want) {
		t.Errorf("GetObjectAttributes XML: %d %s, want %s", resp.StatusCode, data, want)
	}

	_, err = e.attributes(e.root, "nope", types.ObjectAttributesEtag)
	wantErr(t, err, "NoSuchKey", 404)
	_, err = e.attributes(e.user, "one", types.ObjectAttributesEtag)
	wantErr(t, err, "AccessDenied", 403)
	e.grant("bkt", "read")
	_, err = e.attributes(e.user, "one", types.ObjectAttributesEtag)
	noErr(t, err)
}
