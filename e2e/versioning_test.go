package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// versionIDs lists bucket/key's versions, newest first, as "id" or
// "id(marker)".
func versionIDs(t *testing.T, c *s3.Client, bucket, prefix string) []string {
	t.Helper()
	out, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	mustOK(t, err)
	var rows []string
	for _, v := range out.Versions {
		rows = append(rows, fmt.Sprintf("%s@%s%s", aws.ToString(v.Key), aws.ToString(v.VersionId), latestMark(aws.ToBool(v.IsLatest))))
	}
	for _, m := range out.DeleteMarkers {
		rows = append(rows, fmt.Sprintf("%s@%s(marker)%s", aws.ToString(m.Key), aws.ToString(m.VersionId), latestMark(aws.ToBool(m.IsLatest))))
	}
	return rows
}

func cpID(c *s3.CopyObjectOutput) string { return aws.ToString(c.VersionId) }

func latestMark(l bool) string {
	if l {
		return "*"
	}
	return ""
}

// Issue 12's story on one node: versions of a checkpoint, delete markers,
// reading and restoring old versions, objects from before versioning.
func TestVersioning(t *testing.T) {
	s := startServer(t)
	c := s.root()
	bk := aws.String("ckpt")
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: bk})))
	put(t, c, "ckpt", "old.pt", []byte("before versioning"))
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
	gv, err := c.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: bk})
	mustOK(t, err)
	if gv.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning = %q", gv.Status)
	}

	var ids []string
	var datas [][]byte
	for i := range 3 {
		data := randBytes(t, 100<<10+i)
		out := put(t, c, "ckpt", "latest.pt", data)
		if aws.ToString(out.VersionId) == "" {
			t.Fatal("PUT to a versioned bucket returned no version id")
		}
		ids, datas = append(ids, aws.ToString(out.VersionId)), append(datas, data)
	}
	want := []string{"latest.pt@" + ids[2] + "*", "latest.pt@" + ids[1], "latest.pt@" + ids[0]}
	if got := versionIDs(t, c, "ckpt", "latest"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("versions = %v, want %v", got, want)
	}
	if got, out := getBytes(t, c, "ckpt", "latest.pt"); !bytes.Equal(got, datas[2]) || aws.ToString(out.VersionId) != ids[2] {
		t.Fatal("GET latest is not the last PUT")
	}
	got, _ := getBytes(t, c, "ckpt", "latest.pt", func(in *s3.GetObjectInput) { in.VersionId = aws.String(ids[0]) })
	if !bytes.Equal(got, datas[0]) {
		t.Fatal("GET of the first version by id differs")
	}

	// DELETE adds a marker; the key is gone, its versions are not.
	del, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("latest.pt")})
	mustOK(t, err)
	if !aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) == "" {
		t.Fatalf("DELETE: marker %v id %q", aws.ToBool(del.DeleteMarker), aws.ToString(del.VersionId))
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: bk, Key: aws.String("latest.pt")})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 404 || re.Response.Header.Get("x-amz-delete-marker") != "true" {
		t.Fatalf("GET after DELETE: %v", err)
	}
	got, _ = getBytes(t, c, "ckpt", "latest.pt", func(in *s3.GetObjectInput) { in.VersionId = aws.String(ids[1]) })
	if !bytes.Equal(got, datas[1]) {
		t.Fatal("GET by id after the delete marker differs")
	}
	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: bk})
	mustOK(t, err)
	if len(lo.Contents) != 1 || aws.ToString(lo.Contents[0].Key) != "old.pt" {
		t.Fatalf("listing after the delete marker: %+v", lo.Contents)
	}
	// Deleting the marker brings the object back.
	mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("latest.pt"), VersionId: del.VersionId})))
	if got, _ := getBytes(t, c, "ckpt", "latest.pt"); !bytes.Equal(got, datas[2]) {
		t.Fatal("the object did not come back when its delete marker was removed")
	}

	// Roll back: copy the first version onto the key.
	cp, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: bk, Key: aws.String("latest.pt"),
		CopySource: aws.String("ckpt/latest.pt?versionId=" + ids[0])})
	mustOK(t, err)
	if got, _ := getBytes(t, c, "ckpt", "latest.pt"); !bytes.Equal(got, datas[0]) || aws.ToString(cp.VersionId) == "" {
		t.Fatal("copying an old version onto the key did not restore it")
	}

	// An object from before versioning is its null version; a PUT keeps it.
	put(t, c, "ckpt", "old.pt", []byte("after"))
	old, _ := getBytes(t, c, "ckpt", "old.pt", func(in *s3.GetObjectInput) { in.VersionId = aws.String("null") })
	if string(old) != "before versioning" {
		t.Fatalf("null version = %q", old)
	}
	if rows := versionIDs(t, c, "ckpt", "old.pt"); len(rows) != 2 || !strings.HasSuffix(rows[1], "@null") {
		t.Fatalf("old.pt versions = %v", rows)
	}

	// A multipart upload creates a version.
	cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: bk, Key: aws.String("mp.bin")})
	mustOK(t, err)
	part := randBytes(t, 1<<20)
	up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: bk, Key: aws.String("mp.bin"), UploadId: cu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	mustOK(t, err)
	done, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: aws.String("mp.bin"), UploadId: cu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}})
	mustOK(t, err)
	if got, out := getBytes(t, c, "ckpt", "mp.bin"); !bytes.Equal(got, part) || aws.ToString(out.VersionId) != aws.ToString(done.VersionId) || aws.ToString(done.VersionId) == "" {
		t.Fatal("a completed upload is not the key's newest version")
	}

	// DeleteObjects by version id; paging through versions one at a time.
	dob, err := c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: bk, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("latest.pt"), VersionId: aws.String(ids[1])}}}})
	mustOK(t, err)
	if len(dob.Deleted) != 1 || len(dob.Errors) != 0 {
		t.Fatalf("DeleteObjects by version: %+v %+v", dob.Deleted, dob.Errors)
	}
	var paged []string
	in := &s3.ListObjectVersionsInput{Bucket: bk, MaxKeys: aws.Int32(1)}
	for {
		out, err := c.ListObjectVersions(ctx(t), in)
		mustOK(t, err)
		for _, v := range out.Versions {
			paged = append(paged, aws.ToString(v.Key)+"@"+aws.ToString(v.VersionId))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	// latest.pt: 3 PUTs + the restoring copy - the one deleted; mp.bin; old.pt twice.
	if len(paged) != 6 || paged[0] != "latest.pt@"+cpID(cp) || paged[5] != "old.pt@null" {
		t.Fatalf("paged versions = %v", paged)
	}

	// Suspended: a PUT is the null version, and answers no version id
	// (as S3: the id is returned only with versioning enabled).
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})))
	if out := put(t, c, "ckpt", "s.pt", []byte("a")); out.VersionId != nil {
		t.Fatalf("PUT under Suspended: version %q, want none", aws.ToString(out.VersionId))
	}
	if ids := versionIDs(t, c, "ckpt", "s.pt"); len(ids) != 1 || !strings.HasPrefix(ids[0], "s.pt@null") {
		t.Fatalf("PUT under Suspended: versions %v, want the null version", ids)
	}
	put(t, c, "ckpt", "s.pt", []byte("b"))
	if rows := versionIDs(t, c, "ckpt", "s.pt"); len(rows) != 1 {
		t.Fatalf("two PUTs under Suspended left %v", rows)
	}
	// A bucket with versions is not empty.
	if _, err := c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: bk}); apiCode(err) != "BucketNotEmpty" {
		t.Fatalf("DeleteBucket of a versioned bucket: %v", err)
	}
}

// A bucket mounted from an origin keeps the origin's versioning.
func TestVersioningRefusedOnOrigin(t *testing.T) {
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: mounted, origin: nas/data/}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	_, err := s.root().PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String("mounted"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
	if apiCode(err) != "InvalidBucketState" || !strings.Contains(err.Error(), "origin") {
		t.Fatalf("enabling versioning on an origin bucket: %v", err)
	}
}
