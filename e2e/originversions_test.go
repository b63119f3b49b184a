package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
)

// Issue 12: a bucket mounted from a cloud bucket with versioning on shows
// the origin's own versions (written there by other tools), reads them by
// id through the chunk cache (an old version read twice crosses the cloud
// boundary once, and counts as egress the first time), deletes them by id
// at the origin, and reports the ids of what it writes there. Versioning
// and expiration stay the origin's to manage. A mounted bucket without
// versioning reports unversioned.
func TestOriginVersions(t *testing.T) {
	srv := testenv.MinIO(t)
	mc := clientFor(srv.Endpoint, srv.AccessKey, srv.SecretKey)
	versioned, plain := srv.NewBucket(t), srv.NewBucket(t)
	mustOK(t, must(mc.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(versioned),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
	const key = "latest.pt"
	var ids []string
	var datas [][]byte
	for i := range 3 {
		data := randBytes(t, 700<<10+i)
		out := put(t, mc, versioned, "runs/a/"+key, data)
		ids, datas = append(ids, aws.ToString(out.VersionId)), append(datas, data)
	}
	put(t, mc, plain, "datasets/a.bin", []byte("plain"))

	t.Setenv("FG_E2E_AK", srv.AccessKey)
	t.Setenv("FG_E2E_SK", srv.SecretKey)
	store := func(name, bucket string) string {
		return "  - name: " + name + "\n    kind: s3\n    location: aws:us-east-1\n    bucket: " + bucket + "\n    endpoint: " + srv.Endpoint +
			"\n    path_style: true\n    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n"
	}
	policy := "regions:\n  - {name: lab, location: onprem:lab}\nstores:\n" + store("ckpt-s3", versioned) + store("data-s3", plain) +
		"  - {name: nas, kind: posix, location: onprem:lab, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: ckpts, origin: ckpt-s3/runs/}\n  - {name: data, origin: data-s3/datasets/}\ndefaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf, "--cache-size", "1GiB")
	c := s.root()
	k := "a/" + key

	// Versioning is the origin's.
	gv, err := c.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: aws.String("ckpts")})
	if err != nil || gv.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning of the versioned origin: %v %v; want Enabled", gv.Status, err)
	}
	_, err = c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String("ckpts"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	wantCode(t, err, "InvalidBucketState")

	// The origin's versions, newest first, with its ids.
	listed := func() (vids []string, latest []bool, markers []string) {
		out, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("ckpts")})
		mustOK(t, err)
		for _, v := range out.Versions {
			if aws.ToString(v.Key) != k {
				t.Fatalf("listed key %q; want %q", aws.ToString(v.Key), k)
			}
			vids, latest = append(vids, aws.ToString(v.VersionId)), append(latest, aws.ToBool(v.IsLatest))
		}
		for _, m := range out.DeleteMarkers {
			markers = append(markers, aws.ToString(m.VersionId))
		}
		return vids, latest, markers
	}
	vids, latest, _ := listed()
	if want := []string{ids[2], ids[1], ids[0]}; !slices.Equal(vids, want) || !slices.Equal(latest, []bool{true, false, false}) {
		t.Fatalf("listed versions %v (latest %v); want %v, the newest latest", vids, latest, want)
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k)})
	if err != nil || aws.ToString(h.VersionId) != ids[2] {
		t.Fatalf("HEAD of the key: version %q (%v); want the origin's newest, %s", aws.ToString(h.VersionId), err, ids[2])
	}

	// Each version by id; the first reads come from the cloud and count as
	// egress, a second read of an old version comes from the cache.
	egress := `fedgate_egress_bytes_total{direction="read",dst="onprem:lab",src="aws:us-east-1"}`
	for i, id := range ids {
		got, out := getBytes(t, c, "ckpts", k, func(in *s3.GetObjectInput) { in.VersionId = aws.String(id) })
		if !bytes.Equal(got, datas[i]) || aws.ToString(out.VersionId) != id {
			t.Fatalf("GET of version %d: %d bytes, version %q; want its %d bytes", i, len(got), aws.ToString(out.VersionId), len(datas[i]))
		}
	}
	fromCloud, egressed := s.metric("fedgate_cache_origin_bytes_total"), s.metric(egress)
	if total := float64(len(datas[0]) + len(datas[1]) + len(datas[2])); fromCloud < total || egressed < total {
		t.Fatalf("first reads of the versions: %v bytes from the origin, %v counted as egress; want at least %v", fromCloud, egressed, total)
	}
	got, _ := getBytes(t, c, "ckpts", k, func(in *s3.GetObjectInput) { in.VersionId = aws.String(ids[0]) })
	if !bytes.Equal(got, datas[0]) || s.metric("fedgate_cache_origin_bytes_total") != fromCloud || s.metric(egress) != egressed {
		t.Fatal("an old version read again was fetched from the origin again")
	}
	// A ranged read of an old version.
	got, _ = getBytes(t, c, "ckpts", k, func(in *s3.GetObjectInput) {
		in.VersionId, in.Range = aws.String(ids[1]), aws.String("bytes=100-199")
	})
	if !bytes.Equal(got, datas[1][100:200]) {
		t.Fatal("ranged GET of an old version differs")
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k), VersionId: aws.String("not-an-id")})
	wantCode(t, err, "NoSuchVersion")

	// DELETE by id removes the version at the origin.
	mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k), VersionId: aws.String(ids[1])})))
	ov, err := mc.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String(versioned)})
	mustOK(t, err)
	if len(ov.Versions) != 2 || aws.ToString(ov.Versions[1].VersionId) != ids[0] {
		t.Fatalf("the origin holds %d versions after a DELETE by id; want 2, %s and %s", len(ov.Versions), ids[2], ids[0])
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k), VersionId: aws.String(ids[1])})
	wantCode(t, err, "NoSuchVersion")

	// A plain DELETE adds the origin's delete marker and answers its id;
	// the key reads as deleted, its versions stay.
	del, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k)})
	mustOK(t, err)
	if _, _, markers := listed(); !aws.ToBool(del.DeleteMarker) || len(markers) != 1 || markers[0] != aws.ToString(del.VersionId) {
		t.Fatalf("DELETE answered marker=%v id %q; the origin lists markers %v", aws.ToBool(del.DeleteMarker), aws.ToString(del.VersionId), markers)
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k)})
	wantCode(t, err, "NoSuchKey")
	// Rollback: copy the old version over the key.
	cp, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k),
		CopySource: aws.String("ckpts/" + k + "?versionId=" + ids[0])})
	mustOK(t, err)
	got, out := getBytes(t, c, "ckpts", k)
	if !bytes.Equal(got, datas[0]) || aws.ToString(out.VersionId) != aws.ToString(cp.VersionId) || aws.ToString(cp.VersionId) == "" {
		t.Fatalf("after the rollback the key reads %d bytes, version %q (the copy answered %q); want the first version's bytes",
			len(got), aws.ToString(out.VersionId), aws.ToString(cp.VersionId))
	}
	// A PUT through fedgate is a version at the origin, answered with its id.
	pout := put(t, c, "ckpts", k, []byte("step 4"))
	if vids, _, _ := listed(); len(vids) != 4 || vids[0] != aws.ToString(pout.VersionId) {
		t.Fatalf("the PUT answered version %q; the origin lists %v", aws.ToString(pout.VersionId), vids)
	}

	// Expiring the origin's objects is the origin's business; aborting
	// uploads started through fedgate is not.
	_, err = c.PutBucketLifecycleConfiguration(ctx(t), &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("ckpts"),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("old"), Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(7)}}}}})
	wantCode(t, err, "InvalidRequest")
	mustOK(t, must(c.PutBucketLifecycleConfiguration(ctx(t), &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("ckpts"),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("uploads"), Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)}}}}})))

	// The origin without versioning: unversioned, every object its null version.
	gv, err = c.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: aws.String("data")})
	if err != nil || gv.Status != "" {
		t.Fatalf("GetBucketVersioning of the unversioned origin: %q %v; want none", gv.Status, err)
	}
	pv, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("data")})
	mustOK(t, err)
	if len(pv.Versions) != 1 || aws.ToString(pv.Versions[0].VersionId) != "null" || aws.ToString(pv.Versions[0].Key) != "a.bin" {
		t.Fatalf("versions of the unversioned origin: %+v; want a.bin's null version", pv.Versions)
	}
	if out := put(t, c, "data", "b.bin", []byte("x")); aws.ToString(out.VersionId) != "" {
		t.Fatalf("a PUT to the unversioned origin answered version %q", aws.ToString(out.VersionId))
	}
}

// The same through a GCS origin (fake-gcs-server) with object versioning:
// generations are the version ids, and a DELETE leaves the key's versions
// with none of them latest (GCS has no delete markers).
func TestOriginVersionsGCS(t *testing.T) {
	srv := testenv.FakeGCS(t)
	bucket := srv.NewBucket(t)
	gc, err := storage.NewClient(context.Background(), option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	mustOK(t, err)
	t.Cleanup(func() { gc.Close() })
	_, err = gc.Bucket(bucket).Update(ctx(t), storage.BucketAttrsToUpdate{VersioningEnabled: true})
	mustOK(t, err)
	var gens []string
	var datas [][]byte
	for i := range 2 {
		data := randBytes(t, 200<<10+i)
		w := gc.Bucket(bucket).Object("runs/b/latest.pt").NewWriter(ctx(t))
		_, err := w.Write(data)
		mustOK(t, err)
		mustOK(t, w.Close())
		gens, datas = append(gens, strconv.FormatInt(w.Attrs().Generation, 10)), append(datas, data)
	}
	policy := "regions:\n  - {name: lab, location: onprem:lab}\nstores:\n" +
		"  - {name: ckpt-gcs, kind: gcs, location: gcp:us-central1, bucket: " + bucket + ", endpoint: " + srv.Endpoint + "}\n" +
		"  - {name: nas, kind: posix, location: onprem:lab, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: ckpts, origin: ckpt-gcs/runs/}\ndefaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf, "--cache-size", "1GiB")
	c := s.root()
	const k = "b/latest.pt"

	gv, err := c.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: aws.String("ckpts")})
	if err != nil || gv.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning: %q %v; want Enabled", gv.Status, err)
	}
	list := func() (ids []string, latest []bool) {
		out, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("ckpts")})
		mustOK(t, err)
		for _, v := range out.Versions {
			ids, latest = append(ids, aws.ToString(v.VersionId)), append(latest, aws.ToBool(v.IsLatest))
		}
		if len(out.DeleteMarkers) != 0 {
			t.Fatalf("a GCS origin listed delete markers: %+v", out.DeleteMarkers)
		}
		return ids, latest
	}
	if ids, latest := list(); !slices.Equal(ids, []string{gens[1], gens[0]}) || !slices.Equal(latest, []bool{true, false}) {
		t.Fatalf("listed generations %v (latest %v); want %v, the newest latest", ids, latest, []string{gens[1], gens[0]})
	}
	for i, g := range gens {
		got, out := getBytes(t, c, "ckpts", k, func(in *s3.GetObjectInput) { in.VersionId = aws.String(g) })
		if !bytes.Equal(got, datas[i]) || aws.ToString(out.VersionId) != g {
			t.Fatalf("GET of generation %s: %d bytes, version %q", g, len(got), aws.ToString(out.VersionId))
		}
	}
	if _, out := getBytes(t, c, "ckpts", k); aws.ToString(out.VersionId) != gens[1] {
		t.Fatalf("GET of the key answered version %q; want the live generation %s", aws.ToString(out.VersionId), gens[1])
	}
	del, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k)})
	mustOK(t, err)
	if aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) != "" {
		t.Fatalf("DELETE on a GCS origin answered marker=%v id %q; GCS adds no marker", aws.ToBool(del.DeleteMarker), aws.ToString(del.VersionId))
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k)})
	wantCode(t, err, "NoSuchKey")
	if ids, latest := list(); !slices.Equal(ids, []string{gens[1], gens[0]}) || !slices.Equal(latest, []bool{false, false}) {
		t.Fatalf("after the DELETE: generations %v (latest %v); want both kept, neither latest", ids, latest)
	}
	mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("ckpts"), Key: aws.String(k), VersionId: aws.String(gens[0])})))
	if ids, _ := list(); !slices.Equal(ids, []string{gens[1]}) {
		t.Fatalf("after deleting generation %s: %v", gens[0], ids)
	}
}
