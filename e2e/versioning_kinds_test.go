package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
)

// The same versioning checks on every bucket kind fedgate versions: an
// S3-created bucket on the default (posix) store, a policy bucket on an S3
// store (MinIO), one on a GCS store, a replicated bucket (posix + Azure)
// and an erasure-coded one (2+1 over three stores).
func TestVersioningBucketKinds(t *testing.T) {
	minio := testenv.MinIO(t)
	s3Bucket := minio.NewBucket(t)
	t.Setenv("FG_E2E_AK", minio.AccessKey)
	t.Setenv("FG_E2E_SK", minio.SecretKey)
	var stores strings.Builder
	stores.WriteString("  - name: s3\n    kind: s3\n    location: aws:us-east-1\n    bucket: " + s3Bucket +
		"\n    endpoint: " + minio.Endpoint + "\n    path_style: true\n    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n")
	for name, o := range map[string]originKind{"gcs": gcsOrigin(t), "az": azureOrigin(t)} {
		y, env := o.store(t)
		stores.WriteString("  - name: " + name + "\n" + y)
		for k, v := range env {
			t.Setenv(k, v)
		}
	}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" + stores.String() +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"  - {name: nas2, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n" +
		"  - {name: on-s3, placement: {single: s3}}\n" +
		"  - {name: on-gcs, placement: {single: gcs}}\n" +
		"  - {name: mirrored, placement: {replicate: [nas2, az]}}\n" +
		"  - {name: coded, placement: {erasure: {data: 2, parity: 1, stores: [s3, gcs, nas2]}}}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("created")})))

	for _, bucket := range []string{"created", "on-s3", "on-gcs", "mirrored", "coded"} {
		t.Run(bucket, func(t *testing.T) {
			bk := aws.String(bucket)
			put(t, c, bucket, "pre.bin", []byte("from before versioning"))
			mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
				VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
			var ids []string
			var datas [][]byte
			for i := range 3 {
				data := randBytes(t, 300<<10+i)
				ids, datas = append(ids, aws.ToString(put(t, c, bucket, "k.bin", data).VersionId)), append(datas, data)
			}
			put(t, c, bucket, "pre.bin", []byte("after"))
			cold := s.metric("fedgate_cache_origin_bytes_total")
			for i, id := range ids {
				got, _ := getBytes(t, c, bucket, "k.bin", func(in *s3.GetObjectInput) { in.VersionId = aws.String(id) })
				if !bytes.Equal(got, datas[i]) {
					t.Fatalf("version %d reads back different bytes", i)
				}
			}
			if bucket == "on-s3" {
				// A cloud bucket's versions go through the chunk cache: an old
				// version read again comes from it, not from the cloud.
				before := s.metric("fedgate_cache_origin_bytes_total")
				if before <= cold {
					t.Fatal("the first reads of the versions did not go through the cache")
				}
				got, _ := getBytes(t, c, bucket, "k.bin", func(in *s3.GetObjectInput) { in.VersionId = aws.String(ids[0]) })
				if after := s.metric("fedgate_cache_origin_bytes_total"); !bytes.Equal(got, datas[0]) || after != before {
					t.Fatalf("an old version read again: %d origin bytes (want 0)", int64(after-before))
				}
			}
			if got, _ := getBytes(t, c, bucket, "pre.bin", func(in *s3.GetObjectInput) { in.VersionId = aws.String("null") }); string(got) != "from before versioning" {
				t.Fatalf("the null version reads %q", got)
			}
			del, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("k.bin")})
			mustOK(t, err)
			lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: bk})
			mustOK(t, err)
			if len(lo.Contents) != 1 || aws.ToString(lo.Contents[0].Key) != "pre.bin" {
				t.Fatalf("listing after the delete marker: %+v", lo.Contents)
			}
			mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("k.bin"), VersionId: del.VersionId})))
			mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("k.bin"), VersionId: aws.String(ids[2])})))
			if got, _ := getBytes(t, c, bucket, "k.bin"); !bytes.Equal(got, datas[1]) {
				t.Fatal("after deleting the newest version, GET is not the one before it")
			}
			lv, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: bk})
			mustOK(t, err)
			if len(lv.Versions) != 4 || len(lv.DeleteMarkers) != 0 { // k.bin x2, pre.bin x2
				t.Fatalf("%d versions and %d markers listed", len(lv.Versions), len(lv.DeleteMarkers))
			}
		})
	}
}
