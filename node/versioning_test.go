package node_test

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/node/nodetest"
)

// Issue 12's story on a 3-node region: versions written through different
// nodes are listed in the same order on every node; a delete marker and
// its removal are seen everywhere; the versions survive a restart.
func TestVersionsAcrossNodes(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	r.WaitForLeader()
	bk, key := aws.String("models"), aws.String("latest.pt")
	if _, err := r.Client(0).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bk}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Client(1).PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var datas [][]byte
	for i := range 3 {
		data := randomBytes(64<<10, uint64(i))
		out, err := r.Client(i).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: key, Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		ids, datas = append(ids, aws.ToString(out.VersionId)), append(datas, data)
	}
	want := []string{ids[2], ids[1], ids[0]}
	listed := func(i int) []string {
		out, err := r.Client(i).ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: bk})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range out.Versions {
			got = append(got, aws.ToString(v.VersionId))
		}
		for _, m := range out.DeleteMarkers {
			got = append(got, "marker:"+aws.ToString(m.VersionId))
		}
		return got
	}
	for i := range r.Len() {
		if got := listed(i); !slices.Equal(got, want) {
			t.Fatalf("node %d lists %v, want %v", i, got, want)
		}
		out, err := r.Client(i).GetObject(ctx, &s3.GetObjectInput{Bucket: bk, Key: key, VersionId: aws.String(ids[0])})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, datas[0]) {
			t.Fatalf("node %d: the first version by id differs", i)
		}
	}
	del, err := r.Client(2).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: key})
	if err != nil || !aws.ToBool(del.DeleteMarker) {
		t.Fatalf("DELETE: %v %+v", err, del)
	}
	for i := range r.Len() {
		if _, err := r.Client(i).HeadObject(ctx, &s3.HeadObjectInput{Bucket: bk, Key: key}); err == nil {
			t.Fatalf("node %d still serves the key after its delete marker", i)
		}
	}
	if _, err := r.Client(0).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: key, VersionId: del.VersionId}); err != nil {
		t.Fatal(err)
	}
	r.Stop(1)
	r.Restart(1)
	r.WaitForLeader()
	r.WaitForReplication()
	for i := range r.Len() {
		if got := listed(i); !slices.Equal(got, want) {
			t.Fatalf("after the marker's removal and a restart, node %d lists %v, want %v", i, got, want)
		}
		out, err := r.Client(i).GetObject(ctx, &s3.GetObjectInput{Bucket: bk, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, datas[2]) {
			t.Fatalf("node %d: GET after the marker's removal is not the newest version", i)
		}
	}
}

// In an unversioned write-back bucket the null version of a key is the
// object, wherever it is (staged or drained): GET and DELETE with
// versionId=null go through the bucket's write path.
func TestNullVersionOfWriteBackObject(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, time.Minute)
	r.WaitForLeader()
	bk, key := aws.String("ckpt"), aws.String("staged.pt")
	data := randomBytes(32<<10, 9)
	if _, err := r.Client(0).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: key, Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	out, err := r.Client(1).GetObject(ctx, &s3.GetObjectInput{Bucket: bk, Key: key, VersionId: aws.String("null")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, data) || aws.ToString(out.VersionId) != "null" {
		t.Fatalf("GET versionId=null of a write-back object: %d bytes, version %q", len(got), aws.ToString(out.VersionId))
	}
	if _, err := r.Client(2).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: key, VersionId: aws.String("null")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Client(0).HeadObject(ctx, &s3.HeadObjectInput{Bucket: bk, Key: key}); err == nil {
		t.Fatal("the object is still there after DELETE versionId=null")
	}
}
