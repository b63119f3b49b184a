package node_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node/nodetest"
	"github.com/fedgate/fedgate/store"
)

// blockPrefix makes every write under prefix (a directory of the shared
// store) fail until the returned func is called: a regular file stands
// where the directory goes. Like blockDrain, for keys not known in advance.
func blockPrefix(t *testing.T, r *nodetest.Region, prefix string) (unblock func()) {
	t.Helper()
	s := storeOf(t, r)
	probeKey := prefix + "nodetest-probe"
	probe := []byte("nodetest probe " + probeKey)
	if _, err := s.Put(context.Background(), probeKey, bytes.NewReader(probe), int64(len(probe)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var path string
	err := filepath.WalkDir(r.StoreDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, probe) {
				path = p
			}
		}
		return err
	})
	if err != nil || path == "" {
		t.Fatalf("the probe of %s is not in the store directory (%v)", probeKey, err)
	}
	if err := s.Delete(context.Background(), probeKey); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path) // the store may have removed it with the probe
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("blocker"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// getVersion reads one version of bucket/key through c.
func getVersion(ctx context.Context, c *s3.Client, bucket, key, id string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(id)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// Issue 12: versions of a write-back bucket keep their ids and order from
// staging to the store. Three versions written through three nodes are
// listed in one order everywhere and read by id while staged and after
// the drain; a write-back object staged before versioning was turned on
// becomes the null version; a version deleted before it drained never
// reaches the store; a multipart completion is a version too.
func TestWriteBackVersions(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 3*time.Minute)
	r.WaitForLeader()
	const bucket = "ckpt"
	bk := aws.String(bucket)

	// Staged before versioning, and kept staged.
	unblockOld := blockDrain(t, r, "ckpt/old.pt")
	oldData := randomBytes(40<<10, 100)
	if _, err := r.Client(0).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: aws.String("old.pt"), Body: bytes.NewReader(oldData)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Client(1).PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	unblockVersions := blockPrefix(t, r, "_fedgate/versions/ckpt/")

	var ids []string
	datas := map[string][]byte{}
	for i := range 3 {
		data := randomBytes(100<<10+i, uint64(i))
		out, err := r.Client(i).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: aws.String("latest.pt"), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		id := aws.ToString(out.VersionId)
		if id == "" || id == "null" || aws.ToString(out.ETag) != `"`+md5hex(data)+`"` {
			t.Fatalf("PUT %d: version %q, ETag %s", i, id, aws.ToString(out.ETag))
		}
		ids = append(ids, id)
		datas[id] = data
	}
	newOld := randomBytes(10<<10, 101)
	out, err := r.Client(2).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: aws.String("old.pt"), Body: bytes.NewReader(newOld)})
	if err != nil {
		t.Fatal(err)
	}
	datas[aws.ToString(out.VersionId)] = newOld

	// A multipart completion: two parts staged on different nodes.
	part1, part2 := randomBytes(5<<20, 7), randomBytes(1<<20, 8)
	up, err := r.Client(0).CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bk, Key: aws.String("big.pt")})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i, p := range [][]byte{part1, part2} {
		po, err := r.Client(i+1).UploadPart(ctx, &s3.UploadPartInput{Bucket: bk, Key: aws.String("big.pt"), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: po.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	done, err := r.Client(2).CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bk, Key: aws.String("big.pt"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil || aws.ToString(done.VersionId) == "" {
		t.Fatalf("completion: %v, version %q", err, aws.ToString(done.VersionId))
	}
	bigID := aws.ToString(done.VersionId)
	datas[bigID] = append(slices.Clone(part1), part2...)

	listed := func(i int, key string) []string {
		out, err := r.Client(i).ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: bk, Prefix: aws.String(key)})
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
	checkAll := func(when string) {
		t.Helper()
		for i := range r.Len() {
			if got, want := listed(i, "latest.pt"), []string{ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
				t.Fatalf("%s: node %d lists %v, want %v", when, i, got, want)
			}
			if got := listed(i, "old.pt"); len(got) != 2 || got[1] != "null" {
				t.Fatalf("%s: node %d lists old.pt as %v, want a new version and the null one", when, i, got)
			}
			for id, want := range datas {
				key := "latest.pt"
				switch {
				case id == bigID:
					key = "big.pt"
				case !slices.Contains(ids, id):
					key = "old.pt"
				}
				got, err := getVersion(ctx, r.Client(i), bucket, key, id)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: node %d GET %s?versionId=%s: %v, %d bytes, want %d", when, i, key, id, err, len(got), len(want))
				}
			}
			got, err := getVersion(ctx, r.Client(i), bucket, "old.pt", "null")
			if err != nil || !bytes.Equal(got, oldData) {
				t.Fatalf("%s: node %d GET old.pt?versionId=null: %v, %d bytes", when, i, err, len(got))
			}
		}
	}
	// Everything is staged: the store holds none of it yet.
	r.WaitForReplication()
	for _, v := range r.Node(0).Raft().State().Versions(bucket, "latest.pt") {
		if v.Staged == 0 {
			t.Fatalf("version %s is not staged while the store refuses it: %+v", v.ID, v)
		}
	}
	checkAll("staged")

	// A delete marker hides the key everywhere; removing it brings it back.
	del, err := r.Client(1).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("latest.pt")})
	if err != nil || !aws.ToBool(del.DeleteMarker) {
		t.Fatalf("DELETE: %v %+v", err, del)
	}
	for i := range r.Len() {
		if _, _, err := getAll(ctx, r.Client(i), bucket, "latest.pt"); err == nil {
			t.Fatalf("node %d serves latest.pt behind its delete marker", i)
		}
	}
	if _, err := r.Client(2).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("latest.pt"), VersionId: del.VersionId}); err != nil {
		t.Fatal(err)
	}

	// Deleting a staged version by id: its journal entry becomes a delete.
	gone := randomBytes(1000, 99)
	gout, err := r.Client(0).PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: aws.String("gone.pt"), Body: bytes.NewReader(gone)})
	if err != nil {
		t.Fatal(err)
	}
	goneKey := r.Node(0).Raft().State().Versions(bucket, "gone.pt")[0].StoreKey
	if _, err := r.Client(1).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: aws.String("gone.pt"), VersionId: gout.VersionId}); err != nil {
		t.Fatal(err)
	}
	r.WaitForReplication()
	// A tombstone, or nothing once the tombstone drained: a delete under
	// the blocked prefix succeeds (nothing is there), only writes fail.
	// Either way the bytes never reach the store (checked after the drain).
	if e, ok := journaled(r, 0, bucket, goneKey); ok && !e.Tombstone {
		t.Fatalf("journal entry of the deleted staged version: %+v; want a tombstone", e)
	}

	unblockOld()
	unblockVersions()
	wait.For(t, nodetest.Timeout, "the backlog to drain", func() bool {
		for i := range r.Len() {
			if r.Node(i).Namespace().Backlog().Entries != 0 {
				return false
			}
		}
		return true
	})
	st := storeOf(t, r)
	for i := range r.Len() {
		for _, key := range []string{"latest.pt", "old.pt", "big.pt"} {
			for _, v := range r.Node(i).Raft().State().Versions(bucket, key) {
				if v.Staged != 0 || v.Validator == "" {
					t.Fatalf("node %d: version %s of %s after the drain: %+v", i, v.ID, key, v)
				}
				if i == 0 {
					got, ok := storeHolds(t, st, v.StoreKey)
					want := datas[v.ID]
					if v.ID == "null" {
						want = oldData
					}
					if !ok || !bytes.Equal(got, want) {
						t.Fatalf("the store holds %d bytes at %s (present %v), want version %s's %d", len(got), v.StoreKey, ok, v.ID, len(want))
					}
				}
			}
		}
	}
	if _, ok := storeHolds(t, st, goneKey); ok {
		t.Fatalf("the version deleted before its drain reached the store at %s", goneKey)
	}
	checkAll("drained")

	r.Stop(1)
	r.Restart(1)
	r.WaitForLeader()
	r.WaitForReplication()
	checkAll("after a restart")
}
