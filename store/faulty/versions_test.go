package faulty

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/s3"
	"github.com/fedgate/fedgate/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

// newVersioned is a store on a fresh MinIO bucket (a store that keeps
// versions of its own), and the function that enables its versioning.
func newVersioned(t *testing.T) (*s3.Store, func(t *testing.T)) {
	t.Helper()
	srv := testenv.MinIO(t)
	bucket := srv.NewBucket(t)
	s, err := s3.New(t.Context(), s3.Config{
		Name: "minio", Location: policies.Location{Cloud: "onprem", Region: "minio"}, Bucket: bucket,
		Region: srv.Region, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, MinIOKeyRules: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	enable := func(t *testing.T) {
		c := awss3.New(awss3.Options{
			BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true, Region: srv.Region,
			Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		})
		if _, err := c.PutBucketVersioning(t.Context(), &awss3.PutBucketVersioningInput{
			Bucket: &bucket, VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return s, enable
}

// With no faults the wrapper keeps the Versioner of the store it wraps: it
// passes the version suite.
func TestVersionsWithoutFaults(t *testing.T) {
	enables := map[store.Store]func(*testing.T){}
	storetest.RunVersions(t, func(t *testing.T) store.Store {
		s, enable := newVersioned(t)
		f := Wrap(s, Config{})
		enables[f] = enable
		return f
	}, func(t *testing.T, s store.Store) { enables[s](t) },
		storetest.VersionCapabilities{DeleteMarkers: true, LatestFallsBack: true, Short: true})
}

// The version calls get the faults of the others: injected failures, and
// resets of ReadVersionRange bodies.
func TestVersionFaults(t *testing.T) {
	inner, enable := newVersioned(t)
	enable(t)
	data := bytes.Repeat([]byte("v"), 1<<20)
	if _, err := inner.Put(t.Context(), "k", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var id string
	for e, err := range inner.ListVersions(t.Context(), store.VersionListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		id = e.Info.VersionID
	}
	f := Wrap(inner, Config{Seed: 3, ErrorRate: 1, Retried: true})
	_, err := f.NativeVersioning(t.Context())
	wantInjected(t, "NativeVersioning", err)
	listed := 0
	for _, err := range f.ListVersions(t.Context(), store.VersionListOptions{}) {
		wantInjected(t, "ListVersions", err)
		listed++
	}
	if listed != 1 {
		t.Errorf("ListVersions yielded %d times, want once (the failure)", listed)
	}
	_, err = f.StatVersion(t.Context(), "k", id)
	wantInjected(t, "StatVersion", err)
	_, err = f.ReadVersionRange(t.Context(), "k", id, 0, -1)
	wantInjected(t, "ReadVersionRange", err)
	wantInjected(t, "DeleteVersion", f.DeleteVersion(t.Context(), "k", id))
	if n := f.Count.Failed.Load(); n != 5 {
		t.Errorf("%d calls failed, want 5", n)
	}

	f.SetConfig(Config{Seed: 4, ResetRate: 1})
	rc, err := f.ReadVersionRange(t.Context(), "k", id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, ErrReset) || n <= 0 || n >= int64(len(data)) {
		t.Fatalf("read %d bytes, err %v; want a reset part-way", n, err)
	}
	if err := f.DeleteVersion(t.Context(), "k", id); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.Stat(t.Context(), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after DeleteVersion through the wrapper: Stat = %v, want ErrNotFound", err)
	}
}

func wantInjected(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInjected) || !store.WasRetried(err) {
		t.Errorf("%s: %v, want the injected failure, marked Retried", what, err)
	}
}

// Over a store that keeps no versions (posix) the wrapper says versioning
// is off and the other version calls are not supported.
func TestNoVersioner(t *testing.T) {
	f := Wrap(newPosix(t), Config{})
	if st, err := f.NativeVersioning(t.Context()); st != "" || err != nil {
		t.Errorf(`NativeVersioning() = %q, %v; want "", nil`, st, err)
	}
	listed := 0
	for _, err := range f.ListVersions(t.Context(), store.VersionListOptions{}) {
		if !errors.Is(err, store.ErrNotSupported) {
			t.Errorf("ListVersions: %v, want ErrNotSupported", err)
		}
		listed++
	}
	if listed != 1 {
		t.Errorf("ListVersions yielded %d times, want once (the error)", listed)
	}
	if _, err := f.StatVersion(t.Context(), "k", "1"); !errors.Is(err, store.ErrNotSupported) {
		t.Errorf("StatVersion: %v, want ErrNotSupported", err)
	}
	if _, err := f.ReadVersionRange(t.Context(), "k", "1", 0, -1); !errors.Is(err, store.ErrNotSupported) {
		t.Errorf("ReadVersionRange: %v, want ErrNotSupported", err)
	}
	if err := f.DeleteVersion(t.Context(), "k", "1"); !errors.Is(err, store.ErrNotSupported) {
		t.Errorf("DeleteVersion: %v, want ErrNotSupported", err)
	}
}
