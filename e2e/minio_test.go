package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// TestMinioGo drives fedgate with minio-go, which over plain HTTP signs
// bodies with STREAMING-AWS4-HMAC-SHA256-PAYLOAD (every chunk signed) and
// uploads large objects in parts.
func TestMinioGo(t *testing.T) {
	s := startServer(t)
	mc := s.minio(rootAK, rootSK)
	c := ctx(t)
	if err := mc.MakeBucket(c, "mgo", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	small := randBytes(t, 300_000)
	if _, err := mc.PutObject(c, "mgo", "small", bytes.NewReader(small), int64(len(small)),
		minio.PutObjectOptions{ContentType: "text/x-small", UserMetadata: map[string]string{"run-id": "7"}}); err != nil {
		t.Fatal(err)
	}
	// Unknown size: minio-go streams it in 5 MiB parts (multipart).
	big := randBytes(t, 12*mib+5)
	info, err := mc.PutObject(c, "mgo", "big", io.NopCloser(bytes.NewReader(big)), -1, minio.PutObjectOptions{PartSize: 5 * mib})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("streamed upload ETag %q: want a 3-part multipart ETag", info.ETag)
	}
	for key, want := range map[string][]byte{"small": small, "big": big} {
		obj, err := mc.GetObject(c, "mgo", key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes, err %v", key, len(got), err)
		}
	}
	st, err := mc.StatObject(c, "mgo", "small", minio.StatObjectOptions{})
	if err != nil || st.ContentType != "text/x-small" || st.UserMetadata["Run-Id"] != "7" {
		t.Fatalf("StatObject: %+v %v", st, err)
	}
	var opts minio.GetObjectOptions
	_ = opts.SetRange(100, 199)
	obj, err := mc.GetObject(c, "mgo", "small", opts)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(obj)
	obj.Close()
	if !bytes.Equal(part, small[100:200]) {
		t.Fatal("ranged read differs")
	}
	var keys []string
	for o := range mc.ListObjects(c, "mgo", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "big,small" {
		t.Fatalf("ListObjects: %v", keys)
	}
	u, err := mc.PresignedGetObject(c, "mgo", "small", time.Minute, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, small) {
		t.Fatalf("minio presigned GET: %d", resp.StatusCode)
	}
	if err := mc.RemoveObject(c, "mgo", "small", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// A wrong secret fails on the first chunked upload.
	bad := s.minio(rootAK, "wrong-secret-wrong-secret-wrong")
	_, err = bad.PutObject(c, "mgo", "x", bytes.NewReader(small), int64(len(small)), minio.PutObjectOptions{})
	if minio.ToErrorResponse(err).Code != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
}

// TestVirtualHostedStyle: with --domain, bucket.DOMAIN addresses a bucket.
func TestVirtualHostedStyle(t *testing.T) {
	s := startServer(t, "--domain", "s3.fedgate.test")
	port := s.Endpoint[strings.LastIndex(s.Endpoint, ":")+1:]
	mc, err := minio.New("s3.fedgate.test:"+port, &minio.Options{
		Creds:        miniocreds.NewStaticV4(rootAK, rootSK, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupDNS,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (netConn, error) {
			return dialer.DialContext(ctx, network, strings.TrimPrefix(s.Endpoint, "http://"))
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	if err := mc.MakeBucket(c, "vhost", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(c, "vhost", "dir/k", strings.NewReader("virtual"), 7, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same object path-style through the plain endpoint.
	if got, _ := getBytes(t, s.root(), "vhost", "dir/k"); string(got) != "virtual" {
		t.Fatalf("path-style read of a virtual-hosted write: %q", got)
	}
	obj, err := mc.GetObject(c, "vhost", "dir/k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj)
	obj.Close()
	if string(got) != "virtual" {
		t.Fatalf("virtual-hosted read: %q", got)
	}
}
