package e2e

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/versiontest"
)

// versionedKind is one kind of bucket fedgate versions, as the conformance
// suite runs on it.
type versionedKind struct {
	name string
	// placement is the policy entry's placement; "" is a bucket created
	// through S3 on the default (posix) store.
	placement string
	// write is the entry's write mode ("": write-through).
	write string
	// skip: the suite's capabilities this kind lacks, with the reasons
	// ("fedgate bug: ..." for a failure waiting for a fix).
	skip map[string]string
}

// versionedKinds are the bucket kinds of one fedgate (startVersionedKinds's
// stores): an S3-created bucket on the default posix store, policy buckets
// on an S3 store (MinIO) and a GCS store (fake-gcs-server), a replicated
// one (posix + Azure), an erasure-coded one (2+1 over S3, GCS, posix) and
// a write-back one draining to the S3 store.
var versionedKinds = []versionedKind{
	{name: "created"},
	{name: "on-s3", placement: "{single: s3}"},
	{name: "on-gcs", placement: "{single: gcs}"},
	{name: "mirrored", placement: "{replicate: [nas2, az]}"},
	{name: "coded", placement: "{erasure: {data: 2, parity: 1, stores: [s3, gcs, nas2]}}"},
	{name: "staged", placement: "{single: s3}", write: "write-back"},
}

// startVersionedKinds starts one fedgate with the stores the kinds use
// (s3: a MinIO bucket, gcs, az: Azurite, nas: the default, nas2) and the
// given bucket entries (policy YAML flow maps).
func startVersionedKinds(t *testing.T, buckets []string, moreStores ...string) *server {
	t.Helper()
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
	for _, st := range moreStores {
		stores.WriteString(st)
	}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" + stores.String() +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"  - {name: nas2, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n"
	for _, b := range buckets {
		policy += "  - " + b + "\n"
	}
	policy += "defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	return startServer(t, "--config", pf)
}

// Issue 12: the versioning conformance suite on every bucket kind fedgate
// versions, all in one server. Policy buckets cannot be created at run
// time and the suite needs a fresh bucket per subtest (versioning is a
// bucket's state: enabling, suspending, objects from before it), so the
// policy declares one bucket per subtest per kind, named
// <kind>-<subtest>; an S3-created kind creates its bucket by that name.
func TestVersioningConformance(t *testing.T) {
	var buckets []string
	for _, k := range versionedKinds {
		if k.placement == "" {
			continue
		}
		for _, sub := range versiontest.Subtests() {
			entry := "{name: " + k.name + "-" + sub + ", placement: " + k.placement
			if k.write != "" {
				entry += ", write: " + k.write
			}
			buckets = append(buckets, entry+"}")
		}
	}
	// Mounted origins: one versioned MinIO bucket per subtest, each its
	// own store, mounted under a prefix (so keys and markers are mapped
	// both ways).
	origins, originStores := versionedOrigins(t)
	buckets = append(buckets, origins...)
	s := startVersionedKinds(t, buckets, originStores...)
	c := s.root()
	t.Run("origin", func(t *testing.T) {
		versiontest.Run(t, func(t *testing.T) versiontest.Target {
			return versiontest.Target{Client: c, Bucket: "origin-" + path.Base(t.Name()), Skip: originSkips}
		})
	})
	for _, k := range versionedKinds {
		t.Run(k.name, func(t *testing.T) {
			versiontest.Run(t, func(t *testing.T) versiontest.Target {
				bucket := k.name + "-" + path.Base(t.Name())
				if k.placement == "" {
					mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(bucket)})))
				}
				return versiontest.Target{Client: c, Bucket: bucket, Skip: k.skip,
					Enable: func(t *testing.T) {
						mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
							VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
					}}
			})
		})
	}
}

// originSkips are what the suite checks that a bucket mounted from a
// versioned MinIO bucket does not do: what the origin manages, and
// MinIO's own departures from AWS that fedgate passes through as they are.
var originSkips = map[string]string{
	versiontest.CapSuspend:          "versioning of a mounted origin is managed at the origin (PutBucketVersioning: 409)",
	versiontest.CapMarkerOverMarker: versiontest.MinIOSkips[versiontest.CapMarkerOverMarker],
	versiontest.CapDeleteAbsent:     versiontest.MinIOSkips[versiontest.CapDeleteAbsent],
	versiontest.CapHiddenPrefix:     versiontest.MinIOSkips[versiontest.CapHiddenPrefix],
}

// versionedOrigins makes one MinIO bucket with versioning on per subtest
// of the suite and returns the policy's bucket entries mounting each under
// the prefix data/ (named origin-<subtest>) and their store entries.
func versionedOrigins(t *testing.T) (buckets, stores []string) {
	t.Helper()
	minio := testenv.MinIO(t)
	mc := clientFor(minio.Endpoint, minio.AccessKey, minio.SecretKey)
	for _, sub := range versiontest.Subtests() {
		mb := minio.NewBucket(t)
		mustOK(t, must(mc.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(mb),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
		stores = append(stores, "  - name: o-"+sub+"\n    kind: s3\n    location: aws:us-east-1\n    bucket: "+mb+
			"\n    endpoint: "+minio.Endpoint+"\n    path_style: true\n    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n")
		buckets = append(buckets, "{name: origin-"+sub+", origin: o-"+sub+"/data/}")
	}
	return buckets, stores
}

// A cloud-store bucket's versions go through the chunk cache: the first
// read of each version fetches from the cloud, an old version read again
// fetches nothing (the conformance suite sees only S3 answers, not where
// the bytes came from).
func TestVersionsThroughChunkCache(t *testing.T) {
	s := startVersionedKinds(t, []string{"{name: on-s3, placement: {single: s3}}"})
	c := s.root()
	const bucket = "on-s3"
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
	var ids []string
	var datas [][]byte
	for i := range 3 {
		data := randBytes(t, 300<<10+i)
		ids, datas = append(ids, aws.ToString(put(t, c, bucket, "k.bin", data).VersionId)), append(datas, data)
	}
	cold := s.metric("fedgate_cache_origin_bytes_total")
	for i, id := range ids {
		got, _ := getBytes(t, c, bucket, "k.bin", func(in *s3.GetObjectInput) { in.VersionId = aws.String(id) })
		if !bytes.Equal(got, datas[i]) {
			t.Fatalf("version %d reads back different bytes", i)
		}
	}
	before := s.metric("fedgate_cache_origin_bytes_total")
	if before <= cold {
		t.Fatal("the first reads of the versions did not go through the cache")
	}
	got, _ := getBytes(t, c, bucket, "k.bin", func(in *s3.GetObjectInput) { in.VersionId = aws.String(ids[0]) })
	if after := s.metric("fedgate_cache_origin_bytes_total"); !bytes.Equal(got, datas[0]) || after != before {
		t.Fatalf("an old version read again: %d origin bytes (want 0)", int64(after-before))
	}
}
