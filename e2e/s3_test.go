package e2e

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// apiCode returns the S3 error code of an SDK error ("" if none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	if got := apiCode(err); got != code {
		t.Fatalf("want error code %s, got %q (%v)", code, got, err)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func getBytes(t *testing.T, c *s3.Client, bucket, key string, opt ...func(*s3.GetObjectInput)) ([]byte, *s3.GetObjectOutput) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	for _, o := range opt {
		o(in)
	}
	out, err := c.GetObject(ctx(t), in)
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data, out
}

func put(t *testing.T, c *s3.Client, bucket, key string, data []byte) *s3.PutObjectOutput {
	t.Helper()
	out, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
	return out
}

func TestBuckets(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("alpha")})
	mustOK(t, err)
	// Your own bucket again: 200 in us-east-1, as S3 answers there.
	_, err = c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("alpha")})
	mustOK(t, err)
	for _, bad := range []string{"ab", "Upper", "under_score", "-dash", "a..b", "192.168.1.1", strings.Repeat("a", 64)} {
		_, err = c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(bad)})
		wantCode(t, err, "InvalidBucketName")
	}
	_, err = c.HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("alpha")})
	mustOK(t, err)
	_, err = c.HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("missing")})
	if err == nil {
		t.Fatal("HeadBucket on a missing bucket succeeded")
	}
	loc, err := c.GetBucketLocation(ctx(t), &s3.GetBucketLocationInput{Bucket: aws.String("alpha")})
	mustOK(t, err)
	if loc.LocationConstraint != "" {
		t.Fatalf("location %q, want empty for us-east-1", loc.LocationConstraint)
	}
	lb, err := c.ListBuckets(ctx(t), &s3.ListBucketsInput{})
	mustOK(t, err)
	if len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "alpha" {
		t.Fatalf("ListBuckets = %+v", lb.Buckets)
	}
	put(t, c, "alpha", "k", []byte("x"))
	_, err = c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("alpha")})
	wantCode(t, err, "BucketNotEmpty")
	_, err = c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("alpha"), Key: aws.String("k")})
	mustOK(t, err)
	_, err = c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("alpha")})
	mustOK(t, err)
	_, err = c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("alpha")})
	wantCode(t, err, "NoSuchBucket")
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("alpha"), Key: aws.String("k")})
	wantCode(t, err, "NoSuchBucket")
}

func TestObjectsAndMetadata(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("objs")})
	mustOK(t, err)
	data := randBytes(t, 3<<20+17)
	out, err := c.PutObject(ctx(t), &s3.PutObjectInput{
		Bucket: aws.String("objs"), Key: aws.String("dir/file one ü.bin"), Body: bytes.NewReader(data),
		ContentType: aws.String("application/x-test"), CacheControl: aws.String("max-age=60"),
		ContentDisposition: aws.String(`attachment; filename="f.bin"`), ContentEncoding: aws.String("identity"),
		Metadata: map[string]string{"run-id": "42", "Owner": "ml-team"},
	})
	mustOK(t, err)
	if want := `"` + md5hex(data) + `"`; *out.ETag != want {
		t.Fatalf("ETag %s, want %s", *out.ETag, want)
	}
	got, g := getBytes(t, c, "objs", "dir/file one ü.bin")
	if !bytes.Equal(got, data) {
		t.Fatal("GetObject bytes differ")
	}
	if *g.ContentType != "application/x-test" || *g.CacheControl != "max-age=60" || *g.ContentDisposition != `attachment; filename="f.bin"` ||
		*g.ContentEncoding != "identity" || g.Metadata["run-id"] != "42" || g.Metadata["owner"] != "ml-team" {
		t.Fatalf("metadata not returned: %+v %v", g, g.Metadata)
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("objs"), Key: aws.String("dir/file one ü.bin")})
	mustOK(t, err)
	if *h.ContentLength != int64(len(data)) || *h.ETag != *out.ETag {
		t.Fatalf("HeadObject = %d %s", *h.ContentLength, *h.ETag)
	}

	// Content-MD5 that does not match: BadDigest, and nothing stored.
	wrong := md5.Sum([]byte("other"))
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("objs"), Key: aws.String("bad-md5"),
		Body: bytes.NewReader([]byte("payload")), ContentMD5: aws.String(base64.StdEncoding.EncodeToString(wrong[:]))})
	wantCode(t, err, "BadDigest")
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("objs"), Key: aws.String("bad-md5")})
	wantCode(t, err, "NotFound")

	// Empty object and zero-length ranges of it.
	put(t, c, "objs", "empty", nil)
	if e, _ := getBytes(t, c, "objs", "empty"); len(e) != 0 {
		t.Fatal("empty object not empty")
	}

	// Delete is idempotent.
	for range 2 {
		_, err = c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("objs"), Key: aws.String("empty")})
		mustOK(t, err)
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("objs"), Key: aws.String("empty")})
	wantCode(t, err, "NoSuchKey")

	// a and a/b coexist; keys of 1024 bytes work; 1025 do not.
	put(t, c, "objs", "a", []byte("A"))
	put(t, c, "objs", "a/b", []byte("AB"))
	long := strings.Repeat("k", 1024)
	put(t, c, "objs", long, []byte("L"))
	if v, _ := getBytes(t, c, "objs", long); string(v) != "L" {
		t.Fatal("1024-byte key")
	}
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("objs"), Key: aws.String(long + "x"), Body: bytes.NewReader(nil)})
	wantCode(t, err, "KeyTooLongError")
}

func TestRangesAndConditions(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("rng")})
	mustOK(t, err)
	data := randBytes(t, 1<<20)
	etag := *put(t, c, "rng", "obj", data).ETag
	for _, tc := range []struct {
		rng        string
		start, end int
	}{
		{"bytes=0-0", 0, 1}, {"bytes=10-19", 10, 20}, {"bytes=1000-", 1000, len(data)},
		{"bytes=-100", len(data) - 100, len(data)}, {"bytes=0-99999999", 0, len(data)},
		{"bytes=-99999999", 0, len(data)},
	} {
		got, out := getBytes(t, c, "rng", "obj", func(in *s3.GetObjectInput) { in.Range = aws.String(tc.rng) })
		if !bytes.Equal(got, data[tc.start:tc.end]) {
			t.Fatalf("%s: wrong bytes", tc.rng)
		}
		want := fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end-1, len(data))
		if out.ContentRange == nil || *out.ContentRange != want {
			t.Fatalf("%s: Content-Range %v, want %s", tc.rng, out.ContentRange, want)
		}
	}
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), Range: aws.String(fmt.Sprintf("bytes=%d-", len(data)))})
	wantCode(t, err, "InvalidRange")

	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfMatch: aws.String(`"nope"`)})
	wantCode(t, err, "PreconditionFailed")
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfMatch: aws.String(etag)})
	mustOK(t, err)
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfNoneMatch: aws.String(etag)})
	if err == nil || !strings.Contains(err.Error(), "304") {
		t.Fatalf("If-None-Match matching: want 304, got %v", err)
	}
	future := time.Now().Add(time.Hour)
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfModifiedSince: &future})
	if err == nil || !strings.Contains(err.Error(), "304") {
		t.Fatalf("If-Modified-Since future: want 304, got %v", err)
	}
	past := time.Now().Add(-time.Hour)
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("rng"), Key: aws.String("obj"), IfUnmodifiedSince: &past})
	wantCode(t, err, "PreconditionFailed")

	// Conditional create: the second If-None-Match: * fails and keeps the first.
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("rng"), Key: aws.String("ckpt"), Body: bytes.NewReader([]byte("one")), IfNoneMatch: aws.String("*")})
	mustOK(t, err)
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("rng"), Key: aws.String("ckpt"), Body: bytes.NewReader([]byte("two")), IfNoneMatch: aws.String("*")})
	wantCode(t, err, "PreconditionFailed")
	if v, _ := getBytes(t, c, "rng", "ckpt"); string(v) != "one" {
		t.Fatalf("conditional create overwrote: %q", v)
	}
}

func TestListing(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("lst")})
	mustOK(t, err)
	keys := []string{"a", "a-b", "a/b", "a/c/d", "b", "dir/", "dir/x", "photos/2024/1.jpg", "photos/2024/2.jpg", "photos/2025/1.jpg", "z z", "ü"}
	for _, k := range keys {
		put(t, c, "lst", k, []byte(k))
	}
	var all []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("lst"), MaxKeys: aws.Int32(3)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx(t))
		mustOK(t, err)
		for _, o := range page.Contents {
			all = append(all, *o.Key)
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("paginated listing\n got %q\nwant %q", all, want)
	}
	out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("lst"), Delimiter: aws.String("/")})
	mustOK(t, err)
	var objs, prefixes []string
	for _, o := range out.Contents {
		objs = append(objs, *o.Key)
	}
	for _, p := range out.CommonPrefixes {
		prefixes = append(prefixes, *p.Prefix)
	}
	if !slices.Equal(objs, []string{"a", "a-b", "b", "z z", "ü"}) || !slices.Equal(prefixes, []string{"a/", "dir/", "photos/"}) {
		t.Fatalf("delimiter listing: %q %q", objs, prefixes)
	}
	// Pages of one entry across common prefixes: every prefix once.
	var seen []string
	var token *string
	for {
		out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("lst"), Prefix: aws.String("photos/"),
			Delimiter: aws.String("/"), MaxKeys: aws.Int32(1), ContinuationToken: token})
		mustOK(t, err)
		for _, p := range out.CommonPrefixes {
			seen = append(seen, *p.Prefix)
		}
		if !*out.IsTruncated {
			break
		}
		token = out.NextContinuationToken
	}
	if !slices.Equal(seen, []string{"photos/2024/", "photos/2025/"}) {
		t.Fatalf("prefix pages: %q", seen)
	}
	out, err = c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("lst"), StartAfter: aws.String("dir/x"), FetchOwner: aws.Bool(true)})
	mustOK(t, err)
	if *out.Contents[0].Key != "photos/2024/1.jpg" || out.Contents[0].Owner == nil {
		t.Fatalf("start-after/fetch-owner: %+v", out.Contents[0])
	}
	out, err = c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("lst"), Prefix: aws.String("z"), EncodingType: types.EncodingTypeUrl})
	mustOK(t, err)
	if len(out.Contents) != 1 || (*out.Contents[0].Key != "z+z" && *out.Contents[0].Key != "z%20z") {
		t.Fatalf("encoding-type=url: %+v", out.Contents)
	}
	v1, err := c.ListObjects(ctx(t), &s3.ListObjectsInput{Bucket: aws.String("lst"), MaxKeys: aws.Int32(2), Marker: aws.String("a-b")})
	mustOK(t, err)
	if len(v1.Contents) != 2 || *v1.Contents[0].Key != "a/b" || !*v1.IsTruncated || *v1.NextMarker != "a/c/d" {
		t.Fatalf("ListObjects v1: %+v", v1)
	}
}

func TestDeleteObjectsAndCopy(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("cpy")})
	mustOK(t, err)
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("cpy"), Key: aws.String("src"), Body: bytes.NewReader([]byte("source")),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"k": "v"}})
	mustOK(t, err)
	_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("cpy"), Key: aws.String("dst ü"), CopySource: aws.String("cpy/src")})
	mustOK(t, err)
	got, g := getBytes(t, c, "cpy", "dst ü")
	if string(got) != "source" || g.Metadata["k"] != "v" || *g.ContentType != "text/plain" {
		t.Fatalf("COPY: %q %v", got, g.Metadata)
	}
	_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("cpy"), Key: aws.String("dst2"), CopySource: aws.String("cpy/src"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"new": "1"}, ContentType: aws.String("a/b")})
	mustOK(t, err)
	_, g = getBytes(t, c, "cpy", "dst2")
	if g.Metadata["new"] != "1" || g.Metadata["k"] != "" || *g.ContentType != "a/b" {
		t.Fatalf("REPLACE: %v %s", g.Metadata, *g.ContentType)
	}
	_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("cpy"), Key: aws.String("src"), CopySource: aws.String("cpy/src")})
	wantCode(t, err, "InvalidRequest")
	_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("cpy"), Key: aws.String("x"), CopySource: aws.String("cpy/src"), CopySourceIfMatch: aws.String(`"bad"`)})
	wantCode(t, err, "PreconditionFailed")
	_, err = c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("cpy"), Key: aws.String("x"), CopySource: aws.String("cpy/missing")})
	wantCode(t, err, "NoSuchKey")

	var objs []types.ObjectIdentifier
	for i := range 5 {
		k := fmt.Sprintf("del/%d", i)
		put(t, c, "cpy", k, []byte("x"))
		objs = append(objs, types.ObjectIdentifier{Key: aws.String(k)})
	}
	objs = append(objs, types.ObjectIdentifier{Key: aws.String("del/never-existed")})
	d, err := c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: aws.String("cpy"), Delete: &types.Delete{Objects: objs}})
	mustOK(t, err)
	if len(d.Deleted) != 6 || len(d.Errors) != 0 {
		t.Fatalf("verbose DeleteObjects: %d deleted, %d errors", len(d.Deleted), len(d.Errors))
	}
	put(t, c, "cpy", "q", []byte("x"))
	d, err = c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: aws.String("cpy"), Delete: &types.Delete{Quiet: aws.Bool(true), Objects: []types.ObjectIdentifier{{Key: aws.String("q")}}}})
	mustOK(t, err)
	if len(d.Deleted) != 0 {
		t.Fatal("quiet DeleteObjects listed deletions")
	}
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("cpy"), Key: aws.String("q")})
	wantCode(t, err, "NotFound")
}

func TestChecksums(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("sums")})
	mustOK(t, err)
	data := randBytes(t, 100_000)
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmCrc64nvme} {
		key := "obj-" + string(alg)
		out, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String(key), Body: bytes.NewReader(data), ChecksumAlgorithm: alg})
		mustOK(t, err)
		h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		mustOK(t, err)
		pairs := map[types.ChecksumAlgorithm][2]*string{
			types.ChecksumAlgorithmCrc32: {out.ChecksumCRC32, h.ChecksumCRC32}, types.ChecksumAlgorithmCrc32c: {out.ChecksumCRC32C, h.ChecksumCRC32C},
			types.ChecksumAlgorithmSha1: {out.ChecksumSHA1, h.ChecksumSHA1}, types.ChecksumAlgorithmSha256: {out.ChecksumSHA256, h.ChecksumSHA256},
			types.ChecksumAlgorithmCrc64nvme: {out.ChecksumCRC64NVME, h.ChecksumCRC64NVME},
		}[alg]
		if pairs[0] == nil || pairs[1] == nil || *pairs[0] != *pairs[1] {
			t.Fatalf("%s: put returned %v, head returned %v", alg, pairs[0], pairs[1])
		}
		if alg == types.ChecksumAlgorithmSha256 {
			sum := sha256.Sum256(data)
			if *pairs[1] != base64.StdEncoding.EncodeToString(sum[:]) {
				t.Fatalf("SHA256 stored %s", *pairs[1])
			}
		}
		// The SDK validates the response checksum on a full GET.
		if got, _ := getBytes(t, c, "sums", key, func(in *s3.GetObjectInput) { in.ChecksumMode = types.ChecksumModeEnabled }); !bytes.Equal(got, data) {
			t.Fatalf("%s: GET bytes differ", alg)
		}
	}
	// A wrong checksum header is refused and stores nothing.
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("bad"), Body: bytes.NewReader(data),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(make([]byte, 32)))})
	if err == nil {
		t.Fatal("wrong x-amz-checksum-sha256 accepted")
	}
	if code := apiCode(err); code != "BadDigest" && code != "XAmzContentChecksumMismatch" {
		t.Fatalf("wrong checksum: code %q (%v)", code, err)
	}
	_, err = c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("bad")})
	wantCode(t, err, "NotFound")
}

func TestRawBadRequests(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("raw")})
	mustOK(t, err)
	// Unsigned requests are refused with S3 XML and a request id.
	resp, err := http.Get(s.Endpoint + "/raw/x")
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("<Code>AccessDenied</Code>")) || resp.Header.Get("x-amz-request-id") == "" ||
		!bytes.Contains(body, []byte("<RequestId>")) {
		t.Fatalf("anonymous GET: %d %s", resp.StatusCode, body)
	}
	// Health endpoints are open.
	for _, p := range []string{"healthz", "readyz", "metrics"} {
		resp, err := http.Get(s.Endpoint + "/_fedgate/" + p)
		mustOK(t, err)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/_fedgate/%s: %d", p, resp.StatusCode)
		}
	}
	// Keys with .. segments are refused and leave nothing behind.
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String("a/../../etc/passwd"), Body: bytes.NewReader([]byte("x"))})
	if err == nil {
		t.Fatal("key with .. accepted")
	}
	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("raw")})
	mustOK(t, err)
	if len(lo.Contents) != 0 {
		t.Fatalf("objects after refused writes: %v", lo.Contents)
	}
	// Malformed XML bodies.
	_, err = c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: aws.String("raw"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{}}})
	wantCode(t, err, "MalformedXML")
}
