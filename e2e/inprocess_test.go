package e2e

import (
	"bytes"
	"crypto/sha256"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
	"github.com/fedgate/fedgate/store/posix"
)

// newStack serves bucket "data" whose origin is origin, in this process.
func newStack(t *testing.T, origin store.Store, ttl time.Duration) *s3.Client {
	st := testserver.InProcess(t, origin, testserver.StackOptions{TTL: ttl})
	return clientFor(st.Endpoint, rootAK, rootSK)
}

// TestReadThroughCache: existing objects of an origin are visible at once;
// the first GET fills the cache, the second reads nothing from the origin.
func TestReadThroughCache(t *testing.T) {
	inner, err := posix.New("origin", policies.Location{Cloud: "aws", Region: "us-east-1"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 20<<20+12345)
	if _, err := inner.Put(t.Context(), "shards/shard-0000.tar", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	origin := faulty.Wrap(inner, faulty.Config{})
	c := newStack(t, origin, 0)

	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("data")})
	mustOK(t, err)
	if len(lo.Contents) != 1 || *lo.Contents[0].Key != "shards/shard-0000.tar" || *lo.Contents[0].Size != int64(len(data)) {
		t.Fatalf("existing object not listed: %+v", lo.Contents)
	}
	got, _ := getBytes(t, c, "data", "shards/shard-0000.tar")
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatal("cold read differs")
	}
	reads := origin.Count.ReadCalls.Load()
	if reads == 0 {
		t.Fatal("the cold read did not read the origin")
	}
	got, _ = getBytes(t, c, "data", "shards/shard-0000.tar")
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatal("warm read differs")
	}
	rng, _ := getBytes(t, c, "data", "shards/shard-0000.tar", func(in *s3.GetObjectInput) { in.Range = aws.String("bytes=8388600-8388700") })
	if !bytes.Equal(rng, data[8388600:8388701]) {
		t.Fatal("ranged warm read across a chunk boundary differs")
	}
	if n := origin.Count.ReadCalls.Load(); n != reads {
		t.Fatalf("warm reads went to the origin: %d reads after the cold read, %d now", reads, n)
	}

	// Changed in the origin (TTL 0): the next read serves the new bytes.
	newer := randBytes(t, 1<<20)
	if _, err := inner.Put(t.Context(), "shards/shard-0000.tar", bytes.NewReader(newer), int64(len(newer)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := getBytes(t, c, "data", "shards/shard-0000.tar"); !bytes.Equal(got, newer) {
		t.Fatal("a changed origin object was served stale")
	}
	// Deleted in the origin: NoSuchKey.
	if err := inner.Delete(t.Context(), "shards/shard-0000.tar"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("shards/shard-0000.tar")})
	wantCode(t, err, "NoSuchKey")
}

// TestFaultyOrigin: GETs return byte-identical data while the origin fails
// 20% of calls and resets 5% of bodies; when it keeps failing past the retry
// budget the client gets a clean S3 error, never a truncated 200.
func TestFaultyOrigin(t *testing.T) {
	inner, err := posix.New("origin", policies.Location{Cloud: "aws", Region: "us-east-1"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 40<<20+7)
	if _, err := inner.Put(t.Context(), "big", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	origin := faulty.Wrap(inner, faulty.Config{Seed: 7, ErrorRate: 0.2, ResetRate: 0.05})
	c := newStack(t, origin, 0)
	for range 2 {
		out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("big")})
		mustOK(t, err)
		h := sha256.New()
		_, err = io.Copy(h, out.Body)
		out.Body.Close()
		mustOK(t, err)
		if [32]byte(h.Sum(nil)) != sha256.Sum256(data) {
			t.Fatal("GET through a faulty origin returned different bytes")
		}
	}
	if origin.Count.Failed.Load() == 0 {
		t.Fatal("no faults were injected")
	}
	t.Logf("origin: %d calls, %d failed, %d bodies reset", origin.Count.Calls.Load(), origin.Count.Failed.Load(), origin.Count.Resets.Load())

	if _, err := inner.Put(t.Context(), "cold", bytes.NewReader(data[:3<<20]), 3<<20, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	origin.SetConfig(faulty.Config{ErrorRate: 1})
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("cold")},
		func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	if code := apiCode(err); code != "SlowDown" && code != "InternalError" {
		t.Fatalf("origin down: want a clean SlowDown/InternalError, got %v", err)
	}
}

// TestChangedUnderTTL: with a metadata TTL, an object replaced in its store
// makes the next GET answer a clean, retryable 503 (its error body intact,
// not the object's Content-Length) and forget the stale metadata, so the
// retry reads the new bytes.
func TestChangedUnderTTL(t *testing.T) {
	inner, err := posix.New("origin", policies.Location{Cloud: "aws", Region: "us-east-1"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := randBytes(t, 3<<20)
	if _, err := inner.Put(t.Context(), "k", bytes.NewReader(old), int64(len(old)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c := newStack(t, faulty.Wrap(inner, faulty.Config{}), time.Hour)
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("k")})
	mustOK(t, err)
	newer := randBytes(t, 2<<20)
	if _, err := inner.Put(t.Context(), "k", bytes.NewReader(newer), int64(len(newer)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("k")},
		func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	wantCode(t, err, "SlowDown")
	if got, _ := getBytes(t, c, "data", "k"); !bytes.Equal(got, newer) {
		t.Fatal("the retry did not read the new version")
	}
}
