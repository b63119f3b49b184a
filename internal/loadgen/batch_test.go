package loadgen

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/internal/testenv"
)

// batchServer stands in for fedgate's batch GET, which is being built on
// another branch and does not exist in this one: it is NOT the real
// endpoint. It implements the format documented in issue 13 as written —
// POST /_fedgate/v1/batch, SigV4 (service s3) checked with fedgate's own
// verifier, a JSON body of entries, an answer that is a tar with one entry
// per request entry in request order named <bucket>/<key>, and failed
// entries as __errors__/<bucket>/<key> holding S3 error XML with
// continue_on_error (without it: an S3 error answer when the first entry
// fails, else the tar stops after an error entry) — over a real MinIO,
// from which it reads each entry. Every other request is proxied to
// MinIO with its Host header kept, so the client's signatures stay valid
// and the bench can write and remove its objects through it.
type batchServer struct {
	*httptest.Server
	minio   *testenv.S3Server
	s3      *s3.Client
	verify  *sigv4.Verifier
	batches atomic.Int64
	// misbehave: "swap" answers the first two entries in the wrong
	// order; "short" leaves the last entry out.
	misbehave string
}

func newBatchServer(t *testing.T, m *testenv.S3Server) *batchServer {
	t.Helper()
	b := &batchServer{minio: m, s3: minioClient(m)}
	b.verify = &sigv4.Verifier{Region: m.Region, Lookup: func(ak string) (string, bool) { return m.SecretKey, ak == m.AccessKey }}
	target, err := url.Parse(m.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the signature covers the Host the client used
	}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == BatchPath {
			b.serveBatch(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func writeS3Error(w http.ResponseWriter, e *s3err.Error) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	_, _ = io.WriteString(w, errorXML(e.Code, e.Message, ""))
}

func errorXML(code, msg, resource string) string {
	var b bytes.Buffer
	_ = xml.NewEncoder(&b).Encode(struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string
		Message  string
		Resource string `xml:",omitempty"`
	}{Code: code, Message: msg, Resource: resource})
	return xml.Header + b.String()
}

func (b *batchServer) serveBatch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeS3Error(w, s3err.New(s3err.CodeMethodNotAllowed, ""))
		return
	}
	res, err := b.verify.Verify(r)
	if err != nil {
		var e *s3err.Error
		if errors.As(err, &e) {
			writeS3Error(w, e)
		} else {
			writeS3Error(w, s3err.New(s3err.CodeAccessDenied, err.Error()))
		}
		return
	}
	if res.Anonymous {
		writeS3Error(w, s3err.New(s3err.CodeAccessDenied, "batch GET needs a signed request"))
		return
	}
	body, err := io.ReadAll(res.Body) // checks the payload hash at EOF
	if err != nil {
		writeS3Error(w, s3err.New(s3err.CodeXAmzContentSHA256Mismatch, err.Error()))
		return
	}
	var req BatchRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Entries) == 0 {
		writeS3Error(w, s3err.New(s3err.CodeMalformedXML, "want {\"entries\": [...]}"))
		return
	}
	b.batches.Add(1)
	entries := req.Entries
	if b.misbehave == "swap" && len(entries) > 1 {
		entries = append([]BatchEntry{entries[1], entries[0]}, entries[2:]...)
	}
	if b.misbehave == "short" {
		entries = entries[:len(entries)-1]
	}
	var tw *tar.Writer
	for i, e := range entries {
		in := &s3.GetObjectInput{Bucket: aws.String(e.Bucket), Key: aws.String(e.Key)}
		if e.Range != "" {
			in.Range = aws.String(e.Range)
		}
		out, err := b.s3.GetObject(r.Context(), in)
		if err != nil {
			code, msg := "InternalError", err.Error()
			var ae smithy.APIError
			if errors.As(err, &ae) {
				code, msg = ae.ErrorCode(), ae.ErrorMessage()
			}
			if !req.ContinueOnError && i == 0 {
				writeS3Error(w, &s3err.Error{Code: code, Message: msg, Status: s3err.StatusFor(code)})
				return
			}
			if tw == nil {
				w.Header().Set("Content-Type", "application/x-tar")
				tw = tar.NewWriter(w)
			}
			x := errorXML(code, msg, "/"+e.Bucket+"/"+e.Key)
			_ = tw.WriteHeader(&tar.Header{Name: ErrorPrefix + e.Name(), Mode: 0o644, Size: int64(len(x)), Typeflag: tar.TypeReg, ModTime: time.Now()})
			_, _ = io.WriteString(tw, x)
			if !req.ContinueOnError {
				_ = tw.Flush() // the stream ends here: no tar footer
				return
			}
			continue
		}
		if tw == nil {
			w.Header().Set("Content-Type", "application/x-tar")
			tw = tar.NewWriter(w)
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: aws.ToInt64(out.ContentLength), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			out.Body.Close()
			return
		}
		_, err = io.Copy(tw, out.Body)
		out.Body.Close()
		if err != nil {
			return
		}
	}
	if tw == nil {
		w.Header().Set("Content-Type", "application/x-tar")
		tw = tar.NewWriter(w)
	}
	_ = tw.Close()
}

func (b *batchServer) client(m *testenv.S3Server, secret string) *BatchClient {
	return NewBatchClient(b.URL, m.Region, credentials.NewStaticCredentialsProvider(m.AccessKey, secret, ""), nil)
}

// The client reads a batch answer entry by entry in request order,
// counts bytes (ranges too), and reports failed entries as the server
// names them.
func TestBatchClient(t *testing.T) {
	m := testenv.MinIO(t)
	srv := newBatchServer(t, m)
	bucket := m.NewBucket(t)
	c := minioClient(m)
	long := strings.Repeat("deep/", 30) + "key-longer-than-ustar's-100-bytes"
	for key, n := range map[string]int{"a": 10, "b/c": 2000, long: 5} {
		if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(bytes.Repeat([]byte("x"), n))}); err != nil {
			t.Fatal(err)
		}
	}
	bc := srv.client(m, m.SecretKey)
	ctx := context.Background()

	res, err := bc.Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "b/c"}, {Bucket: bucket, Key: "a"}, {Bucket: bucket, Key: long}, {Bucket: bucket, Key: "b/c", Range: "bytes=0-99"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 4 || res.Bytes != 2000+10+5+100 || len(res.Errors) != 0 || res.FirstEntry <= 0 {
		t.Fatalf("result = %+v, want 4 objects of 2115 bytes", res)
	}

	// continue_on_error: a missing key is an __errors__ entry, the rest
	// still comes.
	res, err = bc.Get(ctx, BatchRequest{ContinueOnError: true, Entries: []BatchEntry{{Bucket: bucket, Key: "a"}, {Bucket: bucket, Key: "missing"}, {Bucket: bucket, Key: "b/c"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 2 || res.Bytes != 2010 || len(res.Errors) != 1 || res.Errors[0].Name != bucket+"/missing" || res.Errors[0].Code != "NoSuchKey" {
		t.Fatalf("result = %+v, want 2 objects and NoSuchKey for missing", res)
	}

	// Without it: a failed first entry fails the request, a later one
	// ends the stream with its error.
	_, err = bc.Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "missing"}}})
	var he *BatchHTTPError
	if !errors.As(err, &he) || he.Status != 404 || he.Code != "NoSuchKey" {
		t.Fatalf("missing first entry: %v, want a 404 NoSuchKey BatchHTTPError", err)
	}
	_, err = bc.Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "a"}, {Bucket: bucket, Key: "missing"}, {Bucket: bucket, Key: "b/c"}}})
	var ee EntryError
	if !errors.As(err, &ee) || ee.Code != "NoSuchKey" || ee.Name != bucket+"/missing" {
		t.Fatalf("missing second entry: %v, want its EntryError", err)
	}

	// A wrong secret: the server's SigV4 check refuses it.
	_, err = srv.client(m, "not-the-secret").Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "a"}}})
	if !errors.As(err, &he) || he.Code != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v, want SignatureDoesNotMatch", err)
	}

	// Answers that break the format are errors, not counts.
	srv.misbehave = "swap"
	_, err = bc.Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "a"}, {Bucket: bucket, Key: "b/c"}}})
	if err == nil || !strings.Contains(err.Error(), "request order") {
		t.Fatalf("entries out of order: %v", err)
	}
	srv.misbehave = "short"
	_, err = bc.Get(ctx, BatchRequest{Entries: []BatchEntry{{Bucket: bucket, Key: "a"}, {Bucket: bucket, Key: "b/c"}}})
	if err == nil || !strings.Contains(err.Error(), "ended after 1 of 2") {
		t.Fatalf("an entry missing: %v", err)
	}
}

// Batch mode end to end through the stand-in: objects written through
// it, batches of BatchSize read, every entry counted, everything removed.
func TestBatchModeAgainstStandIn(t *testing.T) {
	m := testenv.MinIO(t)
	srv := newBatchServer(t, m)
	tg := minioTarget(t, m, uniqueBucket(t))
	tg.Endpoint = srv.URL
	cfg := baseConfig(ModeBatch, tg)
	cfg.BatchSize = 16
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Targets[0]
	if len(tr.Ops) != 1 || tr.Ops[0].Op != OpBatch {
		t.Fatalf("ops = %+v", tr.Ops)
	}
	o := tr.Ops[0]
	if o.Count == 0 || o.Errors != 0 || o.EntryErrors != 0 || o.Objects != o.Count*16 || o.ObjectsPerSec < 15*o.OpsPerSec || o.FirstByte == nil {
		t.Fatalf("batch = %+v, want batches of 16 objects and no errors", o)
	}
	// The route probe, the probe of written objects, then the run's.
	if got := srv.batches.Load(); got != o.Count+2 {
		t.Errorf("server saw %d batches, the report %d (+2 probes)", got, o.Count)
	}
	if tr.Cleanup.Removed != 20 || !tr.Cleanup.BucketRemoved {
		t.Errorf("cleanup = %+v", tr.Cleanup)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "OBJ/S") || !strings.Contains(buf.String(), "16 entries per batch") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// Against a server without batch GET (MinIO), batch mode stops before
// writing anything, with a message that says so.
func TestBatchModeWithoutBatchGET(t *testing.T) {
	m := testenv.MinIO(t)
	tg := minioTarget(t, m, uniqueBucket(t))
	start := time.Now()
	rep, err := Run(context.Background(), baseConfig(ModeBatch, tg))
	if err == nil || !strings.Contains(err.Error(), "does not serve fedgate's batch GET") || !strings.Contains(err.Error(), BatchPath) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %s to fail", time.Since(start))
	}
	if tr := rep.Targets[0]; tr.Prepare != nil || !tr.Cleanup.BucketRemoved {
		t.Errorf("prepare %+v, cleanup %+v: want nothing written and the bucket it created removed", tr.Prepare, tr.Cleanup)
	}
	if _, exists := keysUnder(t, minioClient(m), tg.Bucket, ""); exists {
		t.Errorf("bucket %s left behind", tg.Bucket)
	}
	t.Log(err)
}
