package sigv4

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/gateway/s3err"
)

const crcTrailer = "x-amz-checksum-crc32:NSRBwg=="

func verifyStreaming(t *testing.T, r *http.Request) Result {
	t.Helper()
	res, err := newVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestStreamingRoundTrip(t *testing.T) {
	for _, mode := range []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedPayloadTrailer} {
		for _, size := range []int{0, 1, 8191, 8192, 20000, 65536 + 17} {
			data := payload(size)
			r := toServer(t, streamingRequest(t, mode, data, 8192, crcTrailer))
			res := verifyStreaming(t, r)
			if res.DecodedLength != int64(size) {
				t.Fatalf("DecodedLength %d, want %d", res.DecodedLength, size)
			}
			got, err := readAll(t, res)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s size %d: got %d bytes, %v", mode, size, len(got), err)
			}
			if mode == StreamingPayload {
				if res.Trailer != nil {
					t.Fatalf("%s: unexpected Trailer func", mode)
				}
				continue
			}
			if v := res.Trailer().Get("X-Amz-Checksum-Crc32"); v != "NSRBwg==" {
				t.Fatalf("%s: trailer %v", mode, res.Trailer())
			}
		}
	}
}

// The test encoder's chunk signatures agree with the SDK's stream signer.
func TestChunkEncoderMatchesSDK(t *testing.T) {
	seed := strings.Repeat("ab", 32)
	rawSeed, _ := hex.DecodeString(seed)
	ss := v4.NewStreamSigner(testCreds, "s3", testRegion, rawSeed)
	e := newChunkEncoder(testTime, seed)
	for _, chunk := range [][]byte{payload(100), payload(7), nil} {
		want, err := ss.GetSignature(t.Context(), nil, chunk, testTime)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.chunkSig(chunk); got != hex.EncodeToString(want) {
			t.Fatalf("chunk signature %s, SDK %x", got, want)
		}
	}
}

// tamperBody replaces the first occurrence of old in r's body.
func tamperBody(t *testing.T, r *http.Request, old, repl string, n int) {
	t.Helper()
	b, _ := io.ReadAll(r.Body)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("body lacks %q", old)
	}
	r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(b, []byte(old), []byte(repl), n)))
}

func TestStreamingTamper(t *testing.T) {
	data := payload(20000)
	mk := func(mode string) (*http.Request, string) {
		r := toServer(t, streamingRequest(t, mode, data, 8192, crcTrailer))
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		return r, string(b)
	}
	sigOf := func(body string, i int) string { // i-th chunk signature
		parts := strings.Split(body, "chunk-signature=")
		return parts[i+1][:64]
	}
	flip := func(s string) string {
		if s[0] == '0' {
			return "1" + s[1:]
		}
		return "0" + s[1:]
	}
	cases := []struct {
		name   string
		mode   string
		mutate func(r *http.Request, body string)
		code   string
	}{
		{"first chunk signature", StreamingPayload, func(r *http.Request, b string) {
			s := sigOf(b, 0)
			tamperBody(t, r, s, flip(s), 1)
		}, s3err.CodeSignatureDoesNotMatch},
		{"middle chunk signature", StreamingPayload, func(r *http.Request, b string) {
			s := sigOf(b, 1)
			tamperBody(t, r, s, flip(s), 1)
		}, s3err.CodeSignatureDoesNotMatch},
		{"final chunk signature", StreamingPayloadTrailer, func(r *http.Request, b string) {
			s := sigOf(b, 3)
			tamperBody(t, r, s, flip(s), 1)
		}, s3err.CodeSignatureDoesNotMatch},
		{"chunk data", StreamingPayload, func(r *http.Request, b string) {
			tamperBody(t, r, string(data[9000:9010]), string(data[9001:9011]), 1)
		}, s3err.CodeSignatureDoesNotMatch},
		{"trailer value", StreamingPayloadTrailer, func(r *http.Request, b string) {
			tamperBody(t, r, "NSRBwg==", "AAAAAA==", 1)
		}, s3err.CodeSignatureDoesNotMatch},
		{"trailer signature", StreamingPayloadTrailer, func(r *http.Request, b string) {
			tamperBody(t, r, "x-amz-trailer-signature:", "x-amz-trailer-signature:0", 1)
			b2, _ := io.ReadAll(r.Body)
			i := bytes.Index(b2, []byte("x-amz-trailer-signature:")) + len("x-amz-trailer-signature:")
			b2 = append(b2[:i+64], b2[i+65:]...) // keep 64 hex chars, shifted
			r.Body = io.NopCloser(bytes.NewReader(b2))
		}, s3err.CodeSignatureDoesNotMatch},
		{"trailer signature missing", StreamingPayloadTrailer, func(r *http.Request, b string) {
			i := strings.Index(b, "x-amz-trailer-signature:")
			r.Body = io.NopCloser(strings.NewReader(b[:i] + "\r\n"))
		}, s3err.CodeIncompleteBody},
		{"chunk size garbled", StreamingPayload, func(r *http.Request, b string) {
			tamperBody(t, r, "2000;", "2g00;", 1)
		}, s3err.CodeInvalidChunkSizeError},
		{"chunk size too big", StreamingPayload, func(r *http.Request, b string) {
			tamperBody(t, r, "2000;", "2001;", 1)
		}, s3err.CodeInvalidChunkSizeError},
		{"chunk signature missing", StreamingPayload, func(r *http.Request, b string) {
			tamperBody(t, r, ";chunk-signature="+sigOf(b, 0), "", 1)
		}, s3err.CodeInvalidChunkSizeError},
		{"unsigned chunk size garbled", StreamingUnsignedPayloadTrailer, func(r *http.Request, b string) {
			tamperBody(t, r, "2000\r\n", "-2000\r\n", 1)
		}, s3err.CodeInvalidChunkSizeError},
		{"long chunk line", StreamingUnsignedPayloadTrailer, func(r *http.Request, b string) {
			tamperBody(t, r, "2000\r\n", "2000;"+strings.Repeat("x", 5000)+"\r\n", 1)
		}, s3err.CodeInvalidChunkSizeError},
		{"trailing data", StreamingPayload, func(r *http.Request, b string) {
			r.Body = io.NopCloser(strings.NewReader(b + "junk"))
		}, s3err.CodeInvalidChunkSizeError},
		{"decoded length larger", StreamingPayload, func(r *http.Request, b string) {
			r.Header.Set("X-Amz-Decoded-Content-Length", "20001")
		}, s3err.CodeSignatureDoesNotMatch},
		{"malformed trailer", StreamingUnsignedPayloadTrailer, func(r *http.Request, b string) {
			tamperBody(t, r, crcTrailer, "no colon here", 1)
		}, s3err.CodeMalformedTrailerError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, body := mk(c.mode)
			c.mutate(r, body)
			res, err := newVerifier(testTime).Verify(r)
			if err == nil {
				_, err = readAll(t, res)
			}
			wantCode(t, err, c.code)
		})
	}
}

// Every truncation of a chunk stream fails with IncompleteBody; none reads
// as a clean EOF.
func TestStreamingTruncated(t *testing.T) {
	for _, mode := range []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedPayloadTrailer} {
		r := toServer(t, streamingRequest(t, mode, payload(300), 128, crcTrailer))
		full, _ := io.ReadAll(r.Body)
		for cut := 0; cut < len(full); cut++ {
			r.Body = io.NopCloser(bytes.NewReader(full[:cut]))
			res := verifyStreaming(t, r)
			_, err := readAll(t, res)
			if e := wantCode(t, err, s3err.CodeIncompleteBody); e == nil {
				t.Fatalf("%s cut %d", mode, cut)
			}
		}
	}
}

func TestStreamingDecodedLengthHeader(t *testing.T) {
	for _, c := range []struct {
		decoded string
		code    string
	}{
		{"", s3err.CodeMissingSecurityHeader},
		{"abc", s3err.CodeInvalidArgument},
		{"-1", s3err.CodeInvalidArgument},
	} {
		r := newRequest(t, http.MethodPut, "k", "", []byte("0\r\n\r\n"))
		if c.decoded != "" {
			r.Header.Set("X-Amz-Decoded-Content-Length", c.decoded)
		}
		_, err := newVerifier(testTime).Verify(toServer(t, signHeader(t, r, StreamingUnsignedPayloadTrailer, testTime)))
		wantCode(t, err, c.code)
	}
}

func TestChunkedDecodedLengthMismatch(t *testing.T) {
	body := mustBody(t, streamingRequest(t, StreamingUnsignedPayloadTrailer, payload(300), 128, crcTrailer))
	for _, c := range []struct {
		decoded int64
		code    string
	}{
		{300, ""}, {-1, ""}, {299, s3err.CodeIncompleteBody}, {301, s3err.CodeIncompleteBody}, {0, s3err.CodeIncompleteBody},
	} {
		cr := NewChunkedReader(bytes.NewReader(body), ChunkedOptions{Trailer: true, DecodedLength: c.decoded})
		got, err := io.ReadAll(cr)
		if c.code == "" {
			if err != nil || len(got) != 300 || cr.Trailer().Get("X-Amz-Checksum-Crc32") == "" {
				t.Fatalf("decoded %d: %d bytes, %v, trailer %v", c.decoded, len(got), err, cr.Trailer())
			}
			continue
		}
		wantCode(t, err, c.code)
		if cr.Trailer() != nil {
			t.Fatal("Trailer before a clean EOF")
		}
	}
}

func mustBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// minio-go's encoder writes "name:value\n" trailer lines and a blank line
// before the signature; both must decode.
func TestSignedTrailerMinioLayout(t *testing.T) {
	data := payload(1000)
	r := toServer(t, streamingRequest(t, StreamingPayloadTrailer, data, 512, crcTrailer))
	b := mustBody(t, r)
	b = bytes.Replace(b, []byte(crcTrailer+"\r\n"), []byte(crcTrailer+"\n\r\n"), 1)
	b = append(b, "\r\n"...)
	r.Body = io.NopCloser(bytes.NewReader(b))
	res := verifyStreaming(t, r)
	got, err := readAll(t, res)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
}
