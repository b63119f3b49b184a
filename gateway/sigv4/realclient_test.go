package sigv4

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fedgate/fedgate/gateway/checksum"
)

// recorder is an S3 stub that verifies every request and records what it
// saw.
type recorder struct {
	t    *testing.T
	v    *Verifier
	mu   sync.Mutex
	errs []string
	seen map[string]int // x-amz-content-sha256 kind -> count
	body map[string][]byte
	trl  map[string]http.Header
	sums map[string]map[string]string // checksums verified per path
}

func newRecorder(t *testing.T) (*recorder, *httptest.Server) {
	v := newVerifier(time.Time{})
	v.Now = time.Now
	rec := &recorder{t: t, v: v, seen: map[string]int{}, body: map[string][]byte{}, trl: map[string]http.Header{}, sums: map[string]map[string]string{}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := rec.v.Verify(r)
	var cr *checksum.Reader
	if err == nil {
		cr, err = checksum.NewReader(r.Header, res.Body, res.Trailer)
	}
	if err == nil {
		var b []byte
		b, err = io.ReadAll(cr)
		rec.mu.Lock()
		kind := r.Header.Get("X-Amz-Content-Sha256")
		if len(kind) == 64 {
			kind = "sha256"
		}
		if res.Presigned {
			kind = "presigned"
		}
		rec.seen[kind]++
		rec.body[r.URL.Path] = b
		if res.Trailer != nil {
			rec.trl[r.URL.Path] = res.Trailer()
		}
		rec.sums[r.URL.Path] = cr.Checksums()
		rec.mu.Unlock()
	}
	if err != nil {
		rec.mu.Lock()
		rec.errs = append(rec.errs, fmt.Sprintf("%s %s: %v", r.Method, r.URL, err))
		rec.mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<Error><Code>%s</Code></Error>", "SignatureDoesNotMatch")
		return
	}
	w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, `<ListBucketResult><Name>bkt</Name><KeyCount>0</KeyCount></ListBucketResult>`)
	case r.Method == http.MethodGet:
		io.WriteString(w, "hello")
	}
}

func (rec *recorder) check(t *testing.T) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.errs {
		t.Error(e)
	}
}

func TestRealClientMinio(t *testing.T) {
	rec, srv := newRecorder(t)
	u, _ := url.Parse(srv.URL)
	c, err := minio.New(u.Host, &minio.Options{
		Creds:           miniocreds.NewStaticV4(testAK, testSecret, ""),
		Region:          testRegion,
		TrailingHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := payload(200 << 10)
	puts := []struct {
		key  string
		opts minio.PutObjectOptions
	}{
		{"stream/a b+c=d~€", minio.PutObjectOptions{}},
		{"signed-trailer/ü x", minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C}},
		{"unsigned-trailer/k!'()", minio.PutObjectOptions{Checksum: minio.ChecksumCRC32, DisableContentSha256: true}},
	}
	for _, p := range puts {
		if _, err := c.PutObject(ctx, "bkt", p.key, bytes.NewReader(data), int64(len(data)), p.opts); err != nil {
			t.Errorf("put %q: %v", p.key, err)
		}
		if got := rec.body["/bkt/"+p.key]; !bytes.Equal(got, data) {
			t.Errorf("put %q: server decoded %d bytes, want %d", p.key, len(got), len(data))
		}
	}
	if h := rec.trl["/bkt/signed-trailer/ü x"]; h.Get("X-Amz-Checksum-Crc32c") == "" {
		t.Errorf("signed trailer not received: %v", h)
	}
	if h := rec.trl["/bkt/unsigned-trailer/k!'()"]; h.Get("X-Amz-Checksum-Crc32") == "" {
		t.Errorf("unsigned trailer not received: %v", h)
	}
	// checksum.Reader verified the trailers against the decoded data.
	if s := rec.sums["/bkt/signed-trailer/ü x"]["CRC32C"]; s != checksum.CRC32C.Sum(data) {
		t.Errorf("CRC32C verified = %q", s)
	}
	if s := rec.sums["/bkt/unsigned-trailer/k!'()"]["CRC32"]; s != checksum.CRC32.Sum(data) {
		t.Errorf("CRC32 verified = %q", s)
	}
	pu, err := c.PresignedGetObject(ctx, "bkt", "dir/a b+€.txt", time.Hour, url.Values{"response-content-type": {"text/plain; x=y"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(pu.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec.check(t)
	for _, k := range []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedPayloadTrailer, "presigned"} {
		if rec.seen[k] == 0 {
			t.Errorf("minio-go never sent %s (saw %v)", k, rec.seen)
		}
	}
}

func TestRealClientAWSSDK(t *testing.T) {
	rec, srv := newRecorder(t)
	c := s3.NewFromConfig(aws.Config{
		Region:      testRegion,
		Credentials: credentials.NewStaticCredentialsProvider(testAK, testSecret, ""),
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.UsePathStyle = true
	})
	ctx := context.Background()
	for _, key := range trickyKeys {
		if strings.Contains(key, "/./") || strings.Contains(key, "/../") {
			continue // the SDK refuses dot segments
		}
		_, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("body of " + key),
			Metadata: map[string]string{"note": "  a   b  "},
		})
		if err != nil {
			t.Errorf("put %q: %v", key, err)
		}
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Range: aws.String("bytes=0-4")})
		if err != nil {
			t.Errorf("get %q: %v", key, err)
		} else {
			out.Body.Close()
		}
	}
	_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: aws.String("bkt"), Prefix: aws.String("a b/ü+="), Delimiter: aws.String("/"), StartAfter: aws.String("x~y"),
	})
	if err != nil {
		t.Errorf("list: %v", err)
	}
	ps := s3.NewPresignClient(c)
	req, err := ps.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("p/ü b+c")})
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(req.Method, req.URL, strings.NewReader("presigned body"))
	for k, vs := range req.SignedHeader {
		if !strings.EqualFold(k, "host") {
			hr.Header[k] = vs
		}
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec.check(t)
	if rec.seen["presigned"] == 0 {
		t.Errorf("no presigned request verified: %v", rec.seen)
	}
	t.Logf("payload kinds seen: %v", rec.seen)
}
