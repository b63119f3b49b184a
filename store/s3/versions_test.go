package s3

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

var s3VersionCaps = storetest.VersionCapabilities{DeleteMarkers: true, LatestFallsBack: true}

// setVersioning sets the bucket's versioning status through the SDK.
func setVersioning(t *testing.T, s *Store, status types.BucketVersioningStatus) {
	t.Helper()
	_, err := s.client.PutBucketVersioning(t.Context(), &awss3.PutBucketVersioningInput{
		Bucket: &s.bucket, VersioningConfiguration: &types.VersioningConfiguration{Status: status},
	})
	if err != nil {
		t.Fatalf("PutBucketVersioning(%s): %v", status, err)
	}
}

func enableVersioning(t *testing.T, s store.Store) {
	setVersioning(t, s.(*Store), types.BucketVersioningStatusEnabled)
}

func TestVersions(t *testing.T) {
	storetest.RunVersions(t, func(t *testing.T) store.Store { return newMinIO(t, nil) }, enableVersioning, s3VersionCaps)
}

// TestVersionsSmallPages runs the suite with ListObjectVersions pages of 3
// rows, so that listings resume from the server's NextKeyMarker and
// NextVersionIdMarker, inside a key's versions too.
func TestVersionsSmallPages(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.RunVersions(t, func(t *testing.T) store.Store {
		s := newMinIO(t, nil)
		s.versionPage = 3
		return s
	}, enableVersioning, s3VersionCaps)
}

// TestVersioningSuspended: a suspended bucket says so, and a write then is
// the key's "null" version, listed and read like any.
func TestVersioningSuspended(t *testing.T) {
	s := newMinIO(t, nil)
	setVersioning(t, s, types.BucketVersioningStatusEnabled)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("v1"), 2, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	setVersioning(t, s, types.BucketVersioningStatusSuspended)
	if st, err := s.NativeVersioning(t.Context()); err != nil || st != store.VersioningSuspended {
		t.Errorf("NativeVersioning() = %q, %v; want %q", st, err, store.VersioningSuspended)
	}
	if _, err := s.Put(t.Context(), "k", strings.NewReader("v2!"), 3, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for e, err := range s.ListVersions(t.Context(), store.VersionListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.Info.VersionID)
		if e.IsLatest != (len(ids) == 1) {
			t.Errorf("row %d (%s): IsLatest %t", len(ids), e.Info.VersionID, e.IsLatest)
		}
	}
	if len(ids) != 2 || ids[0] != store.NoVersionID || ids[1] == store.NoVersionID {
		t.Fatalf("versions %q; want the null version, then v1's", ids)
	}
	for id, want := range map[string]string{ids[0]: "v2!", ids[1]: "v1"} {
		rc, err := s.ReadVersionRange(t.Context(), "k", id, 0, -1)
		if err != nil {
			t.Fatalf("ReadVersionRange(%s): %v", id, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != want {
			t.Errorf("version %s = %q, want %q", id, b, want)
		}
	}
}

// rawVersions lists every version and delete marker in the bucket, staging
// keys included, bypassing ListVersions.
func rawVersions(t *testing.T, s *Store) (versions, markers []string) {
	t.Helper()
	p := awss3.NewListObjectVersionsPaginator(s.client, &awss3.ListObjectVersionsInput{Bucket: &s.bucket})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			versions = append(versions, aws.ToString(v.Key))
		}
		for _, m := range out.DeleteMarkers {
			markers = append(markers, aws.ToString(m.Key))
		}
	}
	return versions, markers
}

// TestVersionedWritesLeaveOneVersion: in a versioned bucket every write
// path leaves exactly one version of its key: a large Put (one multipart
// upload to the key, plus its sidecar), a conditional one, and a multipart
// upload whose completion sets metadata (a copy of the object onto itself,
// whose first version is removed).
func TestVersionedWritesLeaveOneVersion(t *testing.T) {
	s := newMinIO(t, func(c *Config) { c.PartSize = minPartSize })
	setVersioning(t, s, types.BucketVersioningStatusEnabled)
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), (minPartSize+minPartSize/2)/16)
	if _, err := s.Put(ctx, "large", bytes.NewReader(big), int64(len(big)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "large-cond", bytes.NewReader(big), -1, store.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	id, err := s.CreateMultipart(ctx, "mp", store.PutOptions{Metadata: store.Metadata{ContentType: "text/first"}})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s.UploadPart(ctx, "mp", id, 1, bytes.NewReader(big[:minPartSize]), minPartSize)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.UploadPart(ctx, "mp", id, 2, strings.NewReader("tail"), 4)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.CompleteMultipart(ctx, "mp", id, []store.PartInfo{p1, p2}, store.PutOptions{
		Metadata: store.Metadata{ContentType: "text/second"},
	})
	if err != nil {
		t.Fatal(err)
	}
	versions, markers := rawVersions(t, s)
	var objects, side []string
	for _, v := range versions {
		if strings.HasPrefix(v, MetaPrefix) {
			side = append(side, v)
		} else {
			objects = append(objects, v)
		}
	}
	if strings.Join(objects, ",") != "large,large-cond,mp" || len(side) != 2 || len(markers) != 0 {
		t.Errorf("versions in the bucket: %q, delete markers: %q; want one version each of large, large-cond, mp and two sidecars", versions, markers)
	}
	for _, k := range []string{"large", "large-cond"} {
		if st, err := s.Stat(ctx, k); err != nil || st.ETag != md5hex(big) {
			t.Errorf("Stat(%s) = %+v, %v; want ETag %s", k, st, err, md5hex(big))
		}
	}
	st, err := s.Stat(ctx, "mp")
	if err != nil || st.ContentType != "text/second" || st.ETag != info.ETag || st.Size != minPartSize+4 {
		t.Errorf("Stat(mp) = %+v, %v; want content type text/second, ETag %s", st, err, info.ETag)
	}
}

// TestDeleteMarkerErrors: a delete marker is a *store.DeleteMarker, which
// matches ErrNotFound and is not ErrNoSuchVersion.
func TestDeleteMarkerErrors(t *testing.T) {
	s := newMinIO(t, nil)
	setVersioning(t, s, types.BucketVersioningStatusEnabled)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	var marker string
	for e, err := range s.ListVersions(t.Context(), store.VersionListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.DeleteMarker {
			marker = e.Info.VersionID
		}
	}
	_, err := s.StatVersion(t.Context(), "k", marker)
	if dm, ok := store.IsDeleteMarker(err); !ok || !dm.Latest || !errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrNoSuchVersion) || !store.WasRetried(err) {
		t.Errorf("StatVersion(marker) = %v; want a latest *store.DeleteMarker matching ErrNotFound, marked Retried", err)
	}
}

// TestVersionOrderRecorded: the deserialize middleware sees MinIO's
// ListObjectVersions body and records every version and delete marker in
// the body's order, which is S3's: keys ascending, newest first.
func TestVersionOrderRecorded(t *testing.T) {
	s := newMinIO(t, nil)
	setVersioning(t, s, types.BucketVersioningStatusEnabled)
	for _, k := range []string{"a", "b", "a", "b"} {
		if _, err := s.Put(t.Context(), k, strings.NewReader(k), 1, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	var order versionOrder
	out, err := s.client.ListObjectVersions(t.Context(), &awss3.ListObjectVersionsInput{Bucket: &s.bucket},
		func(o *awss3.Options) {
			o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
				return st.Deserialize.Insert(&order, "OperationDeserializer", middleware.After)
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Versions) != 4 || len(out.DeleteMarkers) != 1 {
		t.Fatalf("%d versions, %d markers; want 4 and 1 (the SDK must still parse the body)", len(out.Versions), len(out.DeleteMarkers))
	}
	pos := func(key, id *string) int {
		p, ok := order.pos[versionRef{aws.ToString(key), aws.ToString(id)}]
		if !ok {
			t.Fatalf("%s version %s not recorded", aws.ToString(key), aws.ToString(id))
		}
		return p
	}
	m := out.DeleteMarkers[0]
	// The marker is a's newest, before a's versions, which are before b's.
	if pm, pa0, pa1, pb0 := pos(m.Key, m.VersionId), pos(out.Versions[0].Key, out.Versions[0].VersionId),
		pos(out.Versions[1].Key, out.Versions[1].VersionId), pos(out.Versions[2].Key, out.Versions[2].VersionId); !(pm < pa0 && pa0 < pa1 && pa1 < pb0) {
		t.Errorf("positions: marker %d, a %d and %d, b %d", pm, pa0, pa1, pb0)
	}
}

// TestVersionEntriesTies: rows of one key with the same LastModified (S3
// lists to the second) come in the body's order, whichever list (versions
// or delete markers) the SDK put them in; prefixes and keys in key order.
func TestVersionEntriesTies(t *testing.T) {
	s := &Store{}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := &awss3.ListObjectVersionsOutput{
		Versions: []types.ObjectVersion{
			{Key: aws.String("k"), VersionId: aws.String("v2"), LastModified: &at, ETag: aws.String(`"e2"`)},
			{Key: aws.String("k"), VersionId: aws.String("v1"), LastModified: &at, ETag: aws.String(`"e1"`)},
			{Key: aws.String("z"), VersionId: aws.String("z1"), LastModified: &at, IsLatest: aws.Bool(true)},
		},
		DeleteMarkers: []types.DeleteMarkerEntry{
			{Key: aws.String("k"), VersionId: aws.String("m2"), LastModified: &at, IsLatest: aws.Bool(true)},
			{Key: aws.String("k"), VersionId: aws.String("m1"), LastModified: &at},
		},
		CommonPrefixes: []types.CommonPrefix{{Prefix: aws.String("p/")}},
	}
	// The body had: m2, v2, m1, v1 (k), then z; p/ apart.
	order := &versionOrder{pos: map[versionRef]int{{"k", "m2"}: 0, {"k", "v2"}: 1, {"k", "m1"}: 2, {"k", "v1"}: 3, {"z", "z1"}: 4}}
	es, err := s.versionEntries(nil, out, order)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Key+":"+e.Info.VersionID)
	}
	if want := "k:m2,k:v2,k:m1,k:v1,p/:,z:z1"; strings.Join(got, ",") != want {
		t.Errorf("order %s, want %s", strings.Join(got, ","), want)
	}
}
