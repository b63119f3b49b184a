package sigv4

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/fedgate/fedgate/gateway/s3err"
)

const (
	testAK     = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testRegion = "us-east-1"
	testHost   = "s3.example.com"
)

var (
	testTime  = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	testCreds = aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSecret}
)

func newVerifier(now time.Time) *Verifier {
	return &Verifier{
		Region: testRegion,
		Lookup: func(ak string) (string, bool) {
			if ak == testAK {
				return testSecret, true
			}
			return "", false
		},
		Now: func() time.Time { return now },
	}
}

// s3Signer signs like the S3 client: the path is already escaped once.
var s3Signer = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newRequest builds a client request for key in bucket "bkt" with the raw
// query rawQuery; the path is escaped as the S3 SDK does.
func newRequest(t testing.TB, method, key, rawQuery string, body []byte) *http.Request {
	t.Helper()
	u := &url.URL{
		Scheme:   "http",
		Host:     testHost,
		Path:     "/bkt/" + key,
		RawPath:  "/bkt/" + httpbinding.EscapePath(key, false),
		RawQuery: rawQuery,
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequest(method, u.String(), rd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// signHeader signs r with an Authorization header over payloadHash.
func signHeader(t testing.TB, r *http.Request, payloadHash string, at time.Time) *http.Request {
	t.Helper()
	r.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if err := s3Signer.SignHTTP(context.Background(), testCreds, r, payloadHash, "s3", testRegion, at); err != nil {
		t.Fatal(err)
	}
	return r
}

// presign returns a presigned copy of r and the headers to send with it.
func presign(t testing.TB, r *http.Request, at time.Time, region string) *http.Request {
	t.Helper()
	u, hdr, err := s3Signer.PresignHTTP(context.Background(), testCreds, r, UnsignedPayload, "s3", region, at)
	if err != nil {
		t.Fatal(err)
	}
	out, err := http.NewRequest(r.Method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		if !strings.EqualFold(k, "host") {
			out.Header[k] = vs
		}
	}
	return out
}

// toServer sends r through the HTTP/1.1 wire format and parses it back as a
// server would see it.
func toServer(t testing.TB, r *http.Request) *http.Request {
	t.Helper()
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	sr, err := http.ReadRequest(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

// wantCode asserts err is an *s3err.Error with the given code.
func wantCode(t testing.TB, err error, code string) *s3err.Error {
	t.Helper()
	var e *s3err.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *s3err.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("error code = %s (%q), want %s", e.Code, e.Message, code)
	}
	if !errors.Is(err, s3err.New(code, "")) || e.Status != s3err.StatusFor(code) {
		t.Fatalf("error %v: errors.Is or status (%d) inconsistent", e, e.Status)
	}
	return e
}

// readAll reads res.Body to the end.
func readAll(t testing.TB, res Result) ([]byte, error) {
	t.Helper()
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}

// seedSignature extracts the signature from an Authorization header.
func seedSignature(t testing.TB, r *http.Request) string {
	t.Helper()
	a, err := ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		t.Fatal(err)
	}
	return a.Signature
}

// testHMAC is an independent HMAC-SHA256 for the test encoder.
func testHMAC(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func testSigningKey(secret, date, region string) []byte {
	k := testHMAC([]byte("AWS4"+secret), date)
	k = testHMAC(k, region)
	k = testHMAC(k, "s3")
	return testHMAC(k, "aws4_request")
}

// chunkEncoder produces aws-chunked bodies per the AWS spec.
type chunkEncoder struct {
	key   []byte
	ts    string // X-Amz-Date
	scope string
	prev  string // previous signature, hex; the seed at first
}

func newChunkEncoder(at time.Time, seed string) *chunkEncoder {
	d := at.UTC().Format("20060102")
	return &chunkEncoder{
		key:   testSigningKey(testSecret, d, testRegion),
		ts:    at.UTC().Format(timeFormat),
		scope: d + "/" + testRegion + "/s3/aws4_request",
		prev:  seed,
	}
}

func (e *chunkEncoder) chunkSig(data []byte) string {
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + e.ts + "\n" + e.scope + "\n" + e.prev + "\n" +
		hexSHA256(nil) + "\n" + hexSHA256(data)
	e.prev = hex.EncodeToString(testHMAC(e.key, sts))
	return e.prev
}

func (e *chunkEncoder) trailerSig(canon string) string {
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + e.ts + "\n" + e.scope + "\n" + e.prev + "\n" + hexSHA256([]byte(canon))
	e.prev = hex.EncodeToString(testHMAC(e.key, sts))
	return e.prev
}

// encode splits data into chunks of size n. signed selects chunk
// signatures; trailer lines ("name:value") follow the final chunk when
// withTrailer is set.
func (e *chunkEncoder) encode(data []byte, n int, signed, withTrailer bool, trailer ...string) []byte {
	var b bytes.Buffer
	for {
		c := data[:min(n, len(data))]
		data = data[len(c):]
		b.WriteString(strconv.FormatInt(int64(len(c)), 16))
		if signed {
			b.WriteString(";chunk-signature=" + e.chunkSig(c))
		}
		b.WriteString("\r\n")
		if len(c) == 0 {
			break
		}
		b.Write(c)
		b.WriteString("\r\n")
	}
	if !withTrailer {
		b.WriteString("\r\n")
		return b.Bytes()
	}
	canon := ""
	for _, l := range trailer {
		b.WriteString(l + "\r\n")
		canon += l + "\n"
	}
	if signed {
		b.WriteString(trailerSigHeader + ":" + e.trailerSig(canon) + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// streamingRequest builds and signs a streaming upload of data; mode is the
// x-amz-content-sha256 value.
func streamingRequest(t testing.TB, mode string, data []byte, chunk int, trailer ...string) *http.Request {
	t.Helper()
	signed := mode != StreamingUnsignedPayloadTrailer
	withTrailer := mode != StreamingPayload
	dummy := strings.Repeat("0", 64)
	encLen := len(newChunkEncoder(testTime, dummy).encode(data, chunk, signed, withTrailer, trailer...))
	r := newRequest(t, http.MethodPut, "dir/obj", "", nil)
	r.ContentLength = int64(encLen)
	r.Header.Set("Content-Encoding", "aws-chunked")
	r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	if withTrailer {
		var names []string
		for _, l := range trailer {
			names = append(names, l[:strings.IndexByte(l, ':')])
		}
		r.Header.Set("X-Amz-Trailer", strings.Join(names, ","))
	}
	signHeader(t, r, mode, testTime)
	body := newChunkEncoder(testTime, seedSignature(t, r)).encode(data, chunk, signed, withTrailer, trailer...)
	if len(body) != encLen {
		t.Fatalf("encoded length changed: %d vs %d", len(body), encLen)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}

// payload returns n bytes of deterministic data.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}
