package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

const mib = 1 << 20

// multipartETag is S3's "<md5 of the parts' binary md5s>-N".
func multipartETag(parts ...[]byte) string {
	var all []byte
	for _, p := range parts {
		s := md5.Sum(p)
		all = append(all, s[:]...)
	}
	s := md5.Sum(all)
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(s[:]), len(parts))
}

func uploadPart(t *testing.T, c *s3.Client, bucket, key, id string, n int32, data []byte) types.CompletedPart {
	t.Helper()
	out, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id),
		PartNumber: aws.Int32(n), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("UploadPart %d: %v", n, err)
	}
	return types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
}

func TestMultipart(t *testing.T) {
	s := startServer(t)
	c := s.root()
	const b = "mp"
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("mpu")})
	mustOK(t, err)
	_ = b
	bucket := "mpu"
	create := func(key string) string {
		out, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
			ContentType: aws.String("application/x-ckpt"), Metadata: map[string]string{"step": "100"}})
		mustOK(t, err)
		return *out.UploadId
	}
	p1, p2, p3 := randBytes(t, 5*mib), randBytes(t, 5*mib+3), randBytes(t, 1234)
	id := create("ckpt/model.bin")
	// Parts may arrive out of order and be re-uploaded.
	c3 := uploadPart(t, c, bucket, "ckpt/model.bin", id, 3, p3)
	uploadPart(t, c, bucket, "ckpt/model.bin", id, 1, randBytes(t, 100))
	c1 := uploadPart(t, c, bucket, "ckpt/model.bin", id, 1, p1)
	c2 := uploadPart(t, c, bucket, "ckpt/model.bin", id, 2, p2)

	lp, err := c.ListParts(ctx(t), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("ckpt/model.bin"), UploadId: aws.String(id)})
	mustOK(t, err)
	if len(lp.Parts) != 3 || *lp.Parts[0].Size != 5*mib || *lp.Parts[2].PartNumber != 3 {
		t.Fatalf("ListParts: %+v", lp.Parts)
	}
	lu, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	mustOK(t, err)
	if len(lu.Uploads) != 1 || *lu.Uploads[0].UploadId != id {
		t.Fatalf("ListMultipartUploads: %+v", lu.Uploads)
	}
	// (DeleteBucket would abort this upload with the bucket, as S3 does:
	// TestToolDefaultsCompat.)

	complete := func(key, id string, parts ...types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
		return c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
			UploadId: aws.String(id), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	}
	_, err = complete("ckpt/model.bin", id, c2, c1, c3)
	wantCode(t, err, "InvalidPartOrder")
	_, err = complete("ckpt/model.bin", id, c1, types.CompletedPart{PartNumber: aws.Int32(2), ETag: aws.String(`"00000000000000000000000000000000"`)})
	wantCode(t, err, "InvalidPart")
	_, err = complete("ckpt/model.bin", id, c1, types.CompletedPart{PartNumber: aws.Int32(7), ETag: c2.ETag})
	wantCode(t, err, "InvalidPart")
	_, err = complete("ckpt/model.bin", id, c3, types.CompletedPart{PartNumber: aws.Int32(4), ETag: c3.ETag})
	if apiCode(err) != "EntityTooSmall" && apiCode(err) != "InvalidPart" {
		t.Fatalf("small non-last part: %v", err)
	}
	out, err := complete("ckpt/model.bin", id, c1, c2, c3)
	mustOK(t, err)
	if want := multipartETag(p1, p2, p3); *out.ETag != want {
		t.Fatalf("multipart ETag %s, want %s", *out.ETag, want)
	}
	got, g := getBytes(t, c, bucket, "ckpt/model.bin")
	if !bytes.Equal(got, append(append(append([]byte{}, p1...), p2...), p3...)) {
		t.Fatal("completed object bytes differ")
	}
	if *g.ContentType != "application/x-ckpt" || g.Metadata["step"] != "100" || *g.ETag != *out.ETag {
		t.Fatalf("completed object metadata: %s %v %s", *g.ContentType, g.Metadata, *g.ETag)
	}
	// The session is gone.
	_, err = c.ListParts(ctx(t), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("ckpt/model.bin"), UploadId: aws.String(id)})
	wantCode(t, err, "NoSuchUpload")
	_, err = c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("ckpt/model.bin"), UploadId: aws.String(id),
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("x"))})
	wantCode(t, err, "NoSuchUpload")

	// Conditional completion: a checkpoint writer must not overwrite.
	id2 := create("ckpt/model.bin")
	p := uploadPart(t, c, bucket, "ckpt/model.bin", id2, 1, []byte("late writer"))
	_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("ckpt/model.bin"),
		UploadId: aws.String(id2), IfNoneMatch: aws.String("*"), MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{p}}})
	wantCode(t, err, "PreconditionFailed")
	if h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("ckpt/model.bin")}); err != nil || *h.ETag != *out.ETag {
		t.Fatalf("conditional completion changed the object: %v", err)
	}

	// UploadPartCopy from an existing object, and abort.
	id3 := create("copy")
	cp, err := c.UploadPartCopy(ctx(t), &s3.UploadPartCopyInput{Bucket: aws.String(bucket), Key: aws.String("copy"), UploadId: aws.String(id3),
		PartNumber: aws.Int32(1), CopySource: aws.String(bucket + "/ckpt/model.bin"), CopySourceRange: aws.String("bytes=0-5242879")})
	mustOK(t, err)
	last := uploadPart(t, c, bucket, "copy", id3, 2, []byte("tail"))
	_, err = complete("copy", id3, types.CompletedPart{PartNumber: aws.Int32(1), ETag: cp.CopyPartResult.ETag}, last)
	mustOK(t, err)
	if got, _ := getBytes(t, c, bucket, "copy"); !bytes.Equal(got, append(append([]byte{}, p1...), "tail"...)) {
		t.Fatal("UploadPartCopy bytes differ")
	}
	id4 := create("aborted")
	uploadPart(t, c, bucket, "aborted", id4, 1, []byte("x"))
	_, err = c.AbortMultipartUpload(ctx(t), &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("aborted"), UploadId: aws.String(id4)})
	mustOK(t, err)
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("aborted")})
	wantCode(t, err, "NotFound")
	_, err = c.ListParts(ctx(t), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("aborted"), UploadId: aws.String(id4)})
	wantCode(t, err, "NoSuchUpload")
	_, err = c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("x"), UploadId: aws.String(id2),
		PartNumber: aws.Int32(10001), Body: bytes.NewReader([]byte("x"))})
	wantCode(t, err, "InvalidArgument")
}

// TestMultipartListingAndParts: ListMultipartUploads pages through several
// uploads of one key and through common prefixes without repeating or
// losing any; partNumber and copy-source ranges are checked strictly.
func TestMultipartListingAndParts(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("mpl")})
	mustOK(t, err)
	want := map[string]bool{}
	for _, k := range []string{"same", "same", "same", "same", "same", "d1/x", "d1/y", "d2/z", "e"} {
		out, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("mpl"), Key: aws.String(k)})
		mustOK(t, err)
		want[k+" "+*out.UploadId] = true
	}
	got := map[string]bool{}
	var km, im *string
	for range 20 {
		out, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: aws.String("mpl"), MaxUploads: aws.Int32(2), KeyMarker: km, UploadIdMarker: im})
		mustOK(t, err)
		for _, u := range out.Uploads {
			if got[*u.Key+" "+*u.UploadId] {
				t.Fatalf("upload %s %s listed twice", *u.Key, *u.UploadId)
			}
			got[*u.Key+" "+*u.UploadId] = true
		}
		if !*out.IsTruncated {
			break
		}
		km, im = out.NextKeyMarker, out.NextUploadIdMarker
	}
	if len(got) != len(want) {
		t.Fatalf("paged listing found %d uploads, want %d", len(got), len(want))
	}
	var prefixes []string
	km = nil
	for range 10 {
		out, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: aws.String("mpl"), Prefix: aws.String("d"),
			Delimiter: aws.String("/"), MaxUploads: aws.Int32(1), KeyMarker: km})
		mustOK(t, err)
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, *p.Prefix)
		}
		if !*out.IsTruncated {
			break
		}
		km = out.NextKeyMarker
	}
	if fmt.Sprint(prefixes) != "[d1/ d2/]" {
		t.Fatalf("prefix pages: %v", prefixes)
	}

	put(t, c, "mpl", "ten", []byte("0123456789"))
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("mpl"), Key: aws.String("ten"), PartNumber: aws.Int32(2)})
	wantCode(t, err, "InvalidPartNumber")
	if got, _ := getBytes(t, c, "mpl", "ten", func(in *s3.GetObjectInput) { in.PartNumber = aws.Int32(1) }); string(got) != "0123456789" {
		t.Fatalf("partNumber=1 of a single-part object: %q", got)
	}
	up, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("mpl"), Key: aws.String("cp")})
	mustOK(t, err)
	_, err = c.UploadPartCopy(ctx(t), &s3.UploadPartCopyInput{Bucket: aws.String("mpl"), Key: aws.String("cp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String("mpl/ten"), CopySourceRange: aws.String("bytes=0-21")})
	wantCode(t, err, "InvalidRange")
	_, err = c.UploadPartCopy(ctx(t), &s3.UploadPartCopyInput{Bucket: aws.String("mpl"), Key: aws.String("cp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String("mpl/ten"), CopySourceRange: aws.String("bytes=5-")})
	wantCode(t, err, "InvalidArgument")

	// Deleting a version the key does not have succeeds (as in S3) and
	// deletes nothing.
	st, body := s.signed(t, http.MethodDelete, "/mpl/ten?versionId=3HL4kqtJlcpXroDTDmJ", nil, nil)
	if st != 204 {
		t.Fatalf("DELETE with an unknown versionId: %d %s", st, body)
	}
	if got, _ := getBytes(t, c, "mpl", "ten"); string(got) != "0123456789" {
		t.Fatal("DELETE with a versionId removed the object")
	}
	// Bucket-level presigned URLs (ListObjects v1) are not mistaken for subresources.
	ps := s3.NewPresignClient(c)
	preq, err := ps.PresignHeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("mpl")})
	mustOK(t, err)
	hr, _ := http.NewRequest(http.MethodHead, preq.URL, nil)
	if st, _ := do(t, hr); st != 200 {
		t.Fatalf("presigned HeadBucket: %d", st)
	}
}
