package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/tags"

	"github.com/fedgate/fedgate/internal/wait"
)

// taggingPolicy declares a posix NAS with a write-through bucket
// "datasets" and a write-back bucket "ckpt"; S3-created buckets go to the
// NAS too.
func taggingPolicy(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	yaml := "stores:\n  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: datasets, placement: {single: nas}}\n" +
		"  - {name: ckpt, placement: {single: nas}, write: write-back}\n" +
		"defaults: {store: nas}\n"
	mustOK(t, os.WriteFile(p, []byte(yaml), 0o644))
	return p
}

func objectTagList(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObjectTagging(ctx(t), &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	mustOK(t, err)
	var kv []string
	for _, tg := range out.TagSet {
		kv = append(kv, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
	}
	return strings.Join(kv, "&")
}

// Object and bucket tags and GetObjectAttributes through the real binary,
// on a posix store written through and written back, with aws-sdk-go-v2
// and minio-go; tags survive a restart.
func TestTaggingAndAttributes(t *testing.T) {
	s := startServer(t, "--config", taggingPolicy(t))
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("made")})))
	buckets := []string{"datasets", "ckpt", "made"}
	for _, b := range buckets {
		t.Run(b, func(t *testing.T) {
			data := randBytes(t, 100<<10)
			_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("obj"), Body: bytes.NewReader(data),
				ContentType: aws.String("application/x-test"), Metadata: map[string]string{"run": "7"},
				Tagging: aws.String("stage=raw&owner=ml%20team%20%C3%BC"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
			mustOK(t, err)
			head, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("obj")})
			mustOK(t, err)
			if aws.ToInt32(head.TagCount) != 2 || len(head.Metadata) != 1 || head.Metadata["run"] != "7" {
				t.Fatalf("HEAD: tag count %d, metadata %v", aws.ToInt32(head.TagCount), head.Metadata)
			}
			if got := objectTagList(t, c, b, "obj"); got != "stage=raw&owner=ml team ü" {
				t.Fatalf("tags %q", got)
			}

			_, err = c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("obj"),
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("stage"), Value: aws.String("clean")}}}})
			mustOK(t, err)
			got, out := getBytes(t, c, b, "obj")
			if !bytes.Equal(got, data) || aws.ToInt32(out.TagCount) != 1 || aws.ToString(out.ContentType) != "application/x-test" ||
				out.Metadata["run"] != "7" || aws.ToString(out.ETag) != `"`+md5hex(data)+`"` {
				t.Fatalf("after PutObjectTagging: %d bytes, tag count %d, %q, %v, ETag %s", len(got), aws.ToInt32(out.TagCount),
					aws.ToString(out.ContentType), out.Metadata, aws.ToString(out.ETag))
			}
			if got := objectTagList(t, c, b, "obj"); got != "stage=clean" {
				t.Fatalf("tags after PutObjectTagging: %q", got)
			}

			// A copy takes the source's tags unless told otherwise.
			_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("copy"), CopySource: aws.String(b + "/obj")})
			mustOK(t, err)
			_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("retagged"), CopySource: aws.String(b + "/obj"),
				TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("copy=yes")})
			mustOK(t, err)
			if got := objectTagList(t, c, b, "copy") + " " + objectTagList(t, c, b, "retagged"); got != "stage=clean copy=yes" {
				t.Fatalf("tags of the copies: %q", got)
			}

			attrs, err := c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: aws.String(b), Key: aws.String("obj"),
				ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectSize,
					types.ObjectAttributesStorageClass, types.ObjectAttributesObjectParts}})
			mustOK(t, err)
			if aws.ToString(attrs.ETag) != md5hex(data) || aws.ToInt64(attrs.ObjectSize) != int64(len(data)) || attrs.StorageClass != types.StorageClassStandard ||
				attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumSHA256) == "" || attrs.ObjectParts != nil || attrs.LastModified == nil {
				t.Fatalf("GetObjectAttributes: %+v", attrs)
			}

			// A multipart upload carries its tags to the object.
			parts := [][]byte{randBytes(t, 5<<20), randBytes(t, 1000)}
			cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), Tagging: aws.String("kind=multipart")})
			mustOK(t, err)
			var done []types.CompletedPart
			for i, p := range parts {
				up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: cu.UploadId,
					PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
				mustOK(t, err)
				done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
			}
			_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: cu.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
			mustOK(t, err)
			if got := objectTagList(t, c, b, "mp"); got != "kind=multipart" {
				t.Fatalf("tags of the multipart object: %q", got)
			}
			attrs, err = c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: aws.String(b), Key: aws.String("mp"),
				ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectParts}})
			mustOK(t, err)
			if attrs.ObjectParts == nil || aws.ToInt32(attrs.ObjectParts.TotalPartsCount) != 2 || !strings.HasSuffix(aws.ToString(attrs.ETag), "-2") {
				t.Fatalf("attributes of the multipart object: ETag %q parts %+v", aws.ToString(attrs.ETag), attrs.ObjectParts)
			}
			// Deleting its tags writes it again: same bytes, ETag the MD5
			// of them (docs/s3-compatibility.md).
			_, err = c.DeleteObjectTagging(ctx(t), &s3.DeleteObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("mp")})
			mustOK(t, err)
			whole := bytes.Join(parts, nil)
			got, out = getBytes(t, c, b, "mp")
			if !bytes.Equal(got, whole) || out.TagCount != nil || aws.ToString(out.ETag) != `"`+md5hex(whole)+`"` {
				t.Fatalf("after DeleteObjectTagging: %d bytes, tag count %v, ETag %s", len(got), out.TagCount, aws.ToString(out.ETag))
			}

			// minio-go reads and writes the same tags.
			mc := s.minio(rootAK, rootSK)
			tg, err := tags.NewTags(map[string]string{"via": "minio-go"}, true)
			mustOK(t, err)
			mustOK(t, mc.PutObjectTagging(ctx(t), b, "copy", tg, minio.PutObjectTaggingOptions{}))
			mt, err := mc.GetObjectTagging(ctx(t), b, "copy", minio.GetObjectTaggingOptions{})
			mustOK(t, err)
			if m := mt.ToMap(); len(m) != 1 || m["via"] != "minio-go" {
				t.Fatalf("minio-go tags %v", m)
			}
			if got := objectTagList(t, c, b, "copy"); got != "via=minio-go" {
				t.Fatalf("tags put by minio-go, read by aws-sdk-go-v2: %q", got)
			}

			// Bucket tags.
			_, err = c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
			wantCode(t, err, "NoSuchTagSet")
			_, err = c.PutBucketTagging(ctx(t), &s3.PutBucketTaggingInput{Bucket: aws.String(b),
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("cost-center"), Value: aws.String("ml 42")}}}})
			mustOK(t, err)
			// Errors as S3 answers them.
			var eleven []types.Tag
			for i := range 11 {
				eleven = append(eleven, types.Tag{Key: aws.String(strings.Repeat("k", i+1)), Value: aws.String("v")})
			}
			_, err = c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("obj"), Tagging: &types.Tagging{TagSet: eleven}})
			wantCode(t, err, "BadRequest")
			_, err = c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("obj"),
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("v")}}}})
			wantCode(t, err, "InvalidTag")
			_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("bad"), Body: bytes.NewReader(nil), Tagging: aws.String("a=1&a=2")})
			wantCode(t, err, "InvalidArgument")
		})
	}

	// Everything is where it was after a restart.
	s.restart(syscall.SIGTERM)
	c = s.root()
	for _, b := range buckets {
		if got := objectTagList(t, c, b, "obj"); got != "stage=clean" {
			t.Errorf("%s/obj after a restart: tags %q", b, got)
		}
		out, err := c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
		mustOK(t, err)
		if len(out.TagSet) != 1 || aws.ToString(out.TagSet[0].Value) != "ml 42" {
			t.Errorf("%s bucket tags after a restart: %+v", b, out.TagSet)
		}
		_, err = c.DeleteBucketTagging(ctx(t), &s3.DeleteBucketTaggingInput{Bucket: aws.String(b)})
		mustOK(t, err)
		_, err = c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
		wantCode(t, err, "NoSuchTagSet")
	}
	// The write-back bucket's tagged object was drained with its tags.
	wait.For(t, 30*time.Second, "the write-back drain", func() bool { return s.metric("fedgate_writeback_backlog_objects") == 0 })
	if got := objectTagList(t, c, "ckpt", "obj"); got != "stage=clean" {
		t.Errorf("ckpt/obj after its drain: tags %q", got)
	}
}
