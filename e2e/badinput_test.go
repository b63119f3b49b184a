package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func hmacSHA256(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// signed sends a SigV4-signed request with a fixed payload (its sha256 signed).
func (s *server) signed(t *testing.T, method, path string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.Endpoint+path, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hash := sha256hex(body)
	req.Header.Set("x-amz-content-sha256", hash)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("x-amz-request-id") == "" {
		t.Fatalf("%s %s: response without x-amz-request-id", req.Method, req.URL.Path)
	}
	return resp.StatusCode, string(b)
}

// chunkedPut builds a STREAMING-AWS4-HMAC-SHA256-PAYLOAD PUT of chunks,
// letting mutate damage the encoded body before it is sent.
func (s *server) chunkedPut(t *testing.T, path string, chunks [][]byte, mutate func(body []byte, sigs []string) []byte) (int, string) {
	t.Helper()
	now := time.Now().UTC()
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	req, _ := http.NewRequest(http.MethodPut, s.Endpoint+path, nil)
	req.Header.Set("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("x-amz-decoded-content-length", strconv.Itoa(total))
	// Sign with the final Content-Length, computed from the chunk framing.
	encodedLen := 0
	for _, c := range append(chunks, nil) {
		encodedLen += len(fmt.Sprintf("%x;chunk-signature=%s\r\n", len(c), strings.Repeat("0", 64))) + len(c) + 2
	}
	req.ContentLength = int64(encodedLen)
	req.Header.Set("Content-Length", strconv.Itoa(encodedLen))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req,
		"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "s3", "us-east-1", now); err != nil {
		t.Fatal(err)
	}
	auth := req.Header.Get("Authorization")
	prev := auth[strings.LastIndex(auth, "Signature=")+len("Signature="):]
	date := now.Format("20060102")
	scope := date + "/us-east-1/s3/aws4_request"
	key := hmacSHA256(hmacSHA256(hmacSHA256(hmacSHA256([]byte("AWS4"+rootSK), date), "us-east-1"), "s3"), "aws4_request")
	var body bytes.Buffer
	var sigs []string
	for _, c := range append(chunks, nil) {
		sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + now.Format("20060102T150405Z") + "\n" + scope + "\n" + prev + "\n" + sha256hex(nil) + "\n" + sha256hex(c)
		prev = hex.EncodeToString(hmacSHA256(key, sts))
		sigs = append(sigs, prev)
		fmt.Fprintf(&body, "%x;chunk-signature=%s\r\n", len(c), prev)
		body.Write(c)
		body.WriteString("\r\n")
	}
	b := body.Bytes()
	if mutate != nil {
		b = mutate(b, sigs)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	if len(b) < encodedLen {
		return sendTruncated(t, req, b)
	}
	req.ContentLength = int64(len(b))
	return do(t, req)
}

// sendTruncated writes req with its signed Content-Length but only body,
// then half-closes the connection: a client that died mid-upload.
func sendTruncated(t *testing.T, req *http.Request, body []byte) (int, string) {
	t.Helper()
	conn, err := dialer.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req.Body = io.NopCloser(bytes.NewReader(nil))
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	_ = req.Header.Write(&head)
	head.WriteString("\r\n")
	conn.Write(head.Bytes())
	conn.Write(body)
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(rb)
}

func TestBadInput(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("bad")})
	mustOK(t, err)
	absent := func(key string) {
		t.Helper()
		if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("bad"), Key: aws.String(key)}); apiCode(err) != "NotFound" {
			t.Fatalf("%s: want no object, got %v", key, err)
		}
	}
	expect := func(name string, status int, body string, wantStatus int, wantCode string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(body, "<Code>"+wantCode+"</Code>") || !strings.Contains(body, "<RequestId>") {
			t.Fatalf("%s: got %d %s, want %d %s", name, status, body, wantStatus, wantCode)
		}
	}
	a, b := bytes.Repeat([]byte("a"), 70000), bytes.Repeat([]byte("b"), 1000)

	st, body := s.chunkedPut(t, "/bad/chunked-ok", [][]byte{a, b}, nil)
	if st != 200 {
		t.Fatalf("valid chunked PUT: %d %s", st, body)
	}
	if got, _ := getBytes(t, c, "bad", "chunked-ok"); !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
		t.Fatal("chunked PUT stored wrong bytes")
	}

	st, body = s.chunkedPut(t, "/bad/chunked-badsig", [][]byte{a, b}, func(body []byte, sigs []string) []byte {
		return bytes.Replace(body, []byte(sigs[1]), []byte(strings.Repeat("f", 64)), 1)
	})
	expect("bad chunk signature", st, body, 403, "SignatureDoesNotMatch")
	absent("chunked-badsig")

	st, body = s.chunkedPut(t, "/bad/chunked-truncated", [][]byte{a, b}, func(body []byte, _ []string) []byte {
		return body[:len(body)-200]
	})
	expect("truncated chunked body", st, body, 400, "IncompleteBody")
	absent("chunked-truncated")

	st, body = s.chunkedPut(t, "/bad/chunked-garbage", [][]byte{a}, func(body []byte, _ []string) []byte {
		return append([]byte("zz;chunk-signature=x\r\n"), body...)
	})
	if st < 400 || st >= 500 {
		t.Fatalf("garbled chunk header: %d %s", st, body)
	}
	absent("chunked-garbage")

	// A signed payload whose bytes differ from the signed hash.
	req, _ := http.NewRequest(http.MethodPut, s.Endpoint+"/bad/hash-mismatch", strings.NewReader("actual"))
	req.Header.Set("x-amz-content-sha256", sha256hex([]byte("claimed")))
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, sha256hex([]byte("claimed")), "s3", "us-east-1", time.Now())
	st, body = do(t, req)
	expect("payload hash mismatch", st, body, 400, "XAmzContentSHA256Mismatch")
	absent("hash-mismatch")

	st, body = s.signed(t, http.MethodPut, "/bad/big-header", []byte("x"), map[string]string{"X-Padding": strings.Repeat("p", 10000)})
	expect("oversized header", st, body, 400, "RequestHeaderSectionTooLarge")
	absent("big-header")
	st, body = s.signed(t, http.MethodPut, "/bad/big-meta", []byte("x"), map[string]string{"X-Amz-Meta-Big": strings.Repeat("m", 3000)})
	expect("oversized metadata", st, body, 400, "MetadataTooLarge")
	absent("big-meta")

	up, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("bad"), Key: aws.String("mp")})
	mustOK(t, err)
	for _, x := range []string{"<CompleteMultipartUpload><Part>", "not xml", "<Other/>", "<CompleteMultipartUpload></CompleteMultipartUpload>"} {
		st, body = s.signed(t, http.MethodPost, "/bad/mp?uploadId="+*up.UploadId, []byte(x), nil)
		expect("complete body "+x, st, body, 400, "MalformedXML")
	}
	absent("mp")
	truncated := []byte("<Delete><Object><Key>x</Key></Object>")
	sum := md5.Sum(truncated)
	st, body = s.signed(t, http.MethodPost, "/bad?delete", truncated, map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(sum[:])})
	expect("truncated DeleteObjects body", st, body, 400, "MalformedXML")
	st, body = s.signed(t, http.MethodPost, "/bad?delete", truncated, nil)
	expect("DeleteObjects body without a digest", st, body, 400, "InvalidRequest")

	st, body = s.signed(t, http.MethodPut, "/bad/a/../b", []byte("x"), nil)
	if st != 400 {
		t.Fatalf("key with ..: %d %s", st, body)
	}
	st, body = s.signed(t, http.MethodPut, "/Bad_Bucket", nil, nil)
	expect("invalid bucket name", st, body, 400, "InvalidBucketName")
	st, body = s.signed(t, http.MethodGet, "/bad?website", nil, nil)
	expect("unsupported subresource", st, body, 501, "NotImplemented")
	st, body = s.signed(t, http.MethodGet, "/bad/chunked-ok?torrent", nil, nil)
	expect("unsupported object subresource", st, body, 501, "NotImplemented")
	st, body = s.signed(t, http.MethodPatch, "/bad/chunked-ok", nil, nil)
	expect("unsupported method", st, body, 501, "NotImplemented")

	// A request signed 20 minutes ago.
	req, _ = http.NewRequest(http.MethodGet, s.Endpoint+"/bad", nil)
	req.Header.Set("x-amz-content-sha256", sha256hex(nil))
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, sha256hex(nil), "s3", "us-east-1", time.Now().Add(-20*time.Minute))
	st, body = do(t, req)
	expect("skewed clock", st, body, 403, "RequestTimeTooSkewed")

	req, _ = http.NewRequest(http.MethodGet, s.Endpoint+"/bad", nil)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=garbage")
	st, body = do(t, req)
	expect("malformed Authorization", st, body, 400, "AuthorizationHeaderMalformed")

	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("bad")})
	mustOK(t, err)
	if len(lo.Contents) != 1 || *lo.Contents[0].Key != "chunked-ok" {
		t.Fatalf("objects left behind by bad requests: %d", len(lo.Contents))
	}
}

// unsignedTrailerPut sends body as STREAMING-UNSIGNED-PAYLOAD-TRAILER (what
// current SDKs send over HTTPS by default) with an x-amz-checksum-crc32c
// trailer of value sum.
func (s *server) unsignedTrailerPut(t *testing.T, path string, body []byte, sum string) (int, string) {
	t.Helper()
	var enc bytes.Buffer
	for off := 0; off < len(body); off += 64 << 10 {
		chunk := body[off:min(off+64<<10, len(body))]
		fmt.Fprintf(&enc, "%x\r\n", len(chunk))
		enc.Write(chunk)
		enc.WriteString("\r\n")
	}
	fmt.Fprintf(&enc, "0\r\nx-amz-checksum-crc32c:%s\r\n\r\n", sum)
	req, _ := http.NewRequest(http.MethodPut, s.Endpoint+path, bytes.NewReader(enc.Bytes()))
	req.Header.Set("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("x-amz-trailer", "x-amz-checksum-crc32c")
	req.Header.Set("x-amz-sdk-checksum-algorithm", "CRC32C")
	req.Header.Set("x-amz-decoded-content-length", strconv.Itoa(len(body)))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req,
		"STREAMING-UNSIGNED-PAYLOAD-TRAILER", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func TestUnsignedPayloadTrailer(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("trl")})
	mustOK(t, err)
	body := randBytes(t, 200_000)
	sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	good := base64.StdEncoding.EncodeToString(be32(sum))
	if st, b := s.unsignedTrailerPut(t, "/trl/ok", body, good); st != 200 {
		t.Fatalf("trailer PUT: %d %s", st, b)
	}
	got, _ := getBytes(t, c, "trl", "ok")
	if !bytes.Equal(got, body) {
		t.Fatal("trailer PUT stored wrong bytes")
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("trl"), Key: aws.String("ok"), ChecksumMode: types.ChecksumModeEnabled})
	mustOK(t, err)
	if h.ChecksumCRC32C == nil || *h.ChecksumCRC32C != good {
		t.Fatalf("stored CRC32C %v, want %s", h.ChecksumCRC32C, good)
	}
	bad := base64.StdEncoding.EncodeToString(be32(sum + 1))
	st, b := s.unsignedTrailerPut(t, "/trl/bad", body, bad)
	if st != 400 || !strings.Contains(b, "<Code>BadDigest</Code>") {
		t.Fatalf("wrong trailer checksum: %d %s", st, b)
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("trl"), Key: aws.String("bad")}); apiCode(err) != "NotFound" {
		t.Fatalf("object stored despite a wrong trailer checksum: %v", err)
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
