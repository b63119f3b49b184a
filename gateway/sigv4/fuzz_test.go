package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/gateway/s3err"
)

func isS3Err(err error) bool {
	var e *s3err.Error
	return errors.As(err, &e) && e.Code != "" && e.Status != 0
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240501/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + strings.Repeat("ab", 32))
	f.Add("AWS4-HMAC-SHA256 Signature=00,Credential=a/b/20240501/r/s3/aws4_request,SignedHeaders=Host")
	f.Add("AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=")
	f.Add("AWS4-HMAC-SHA256")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := ParseAuthorization(h)
		if err != nil {
			if !isS3Err(err) {
				t.Fatalf("error %v is not an *s3err.Error", err)
			}
			return
		}
		c := a.Credential
		if c.AccessKey == "" || !isDate(c.Date) || c.Region == "" || c.Service == "" || a.Signature == "" || len(a.SignedHeaders) == 0 {
			t.Fatalf("accepted incomplete %+v", a)
		}
		if c.Scope != c.Date+"/"+c.Region+"/"+c.Service+"/"+c.Terminal {
			t.Fatalf("scope %q inconsistent with %+v", c.Scope, c)
		}
		for _, n := range a.SignedHeaders {
			if n == "" || hasUpper(n) {
				t.Fatalf("bad signed header %q", n)
			}
		}
		// Re-serialised in canonical form, it parses to the same value.
		again := Algorithm + " Credential=" + c.AccessKey + "/" + c.Scope + ", SignedHeaders=" +
			strings.Join(a.SignedHeaders, ";") + ", Signature=" + a.Signature
		b, err := ParseAuthorization(again)
		if err != nil || b.Credential != a.Credential || b.Signature != a.Signature || strings.Join(b.SignedHeaders, ";") != strings.Join(a.SignedHeaders, ";") {
			t.Fatalf("round trip of %q: %+v, %v", again, b, err)
		}
	})
}

func FuzzParsePresign(f *testing.F) {
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240501%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20240501T120000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=" + strings.Repeat("0f", 32))
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604801")
	f.Add("X-Amz-Expires=99999999999999999999999&X-Amz-Expires=1")
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		p, err := ParsePresign(q)
		if err != nil {
			if !isS3Err(err) || s3err.CodeOf(err) != s3err.CodeAuthorizationQueryParametersError {
				t.Fatalf("error %v", err)
			}
			return
		}
		if p.Expires < 0 || p.Expires > MaxPresignExpiry || p.Signature == "" || len(p.SignedHeaders) == 0 || p.Date.IsZero() {
			t.Fatalf("accepted %+v", p)
		}
	})
}

// fuzzSigning is the fixed key material FuzzChunkedReader decodes with; the
// seed corpus holds streams signed with it.
func fuzzSigning() *ChunkSigning {
	e := newChunkEncoder(testTime, strings.Repeat("0", 64))
	s := &ChunkSigning{Timestamp: e.ts, Scope: e.scope}
	copy(s.Key[:], e.key)
	return s
}

// decodeAll reads a chunk stream with reads of the given size.
func decodeAll(data []byte, signed, trailer bool, decoded int64, step int) ([]byte, *ChunkedReader, error) {
	o := ChunkedOptions{Trailer: trailer, DecodedLength: decoded}
	if signed {
		o.Signing = fuzzSigning()
	}
	cr := NewChunkedReader(bytes.NewReader(data), o)
	var out []byte
	buf := make([]byte, step)
	for {
		n, err := cr.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, cr, err
		}
	}
}

func FuzzChunkedReader(f *testing.F) {
	for _, signed := range []bool{true, false} {
		for _, trailer := range []bool{true, false} {
			e := newChunkEncoder(testTime, strings.Repeat("0", 64))
			f.Add(e.encode(payload(40), 16, signed, trailer, crcTrailer), signed, trailer, int64(40))
		}
	}
	f.Add([]byte("5\r\nhello\r\n0\r\n\r\n"), false, false, int64(-1))
	f.Add([]byte("ffffffffffffffff\r\n"), false, true, int64(-1))
	f.Fuzz(func(t *testing.T, data []byte, signed, trailer bool, decoded int64) {
		if decoded < -1 {
			decoded = -1
		}
		out, cr, err := decodeAll(data, signed, trailer, decoded, 4096)
		if err != io.EOF && !isS3Err(err) {
			t.Fatalf("error %v (%T) is neither io.EOF nor *s3err.Error", err, err)
		}
		if len(out) > len(data) {
			t.Fatalf("decoded %d bytes from %d", len(out), len(data))
		}
		if err == io.EOF {
			if decoded >= 0 && int64(len(out)) != decoded {
				t.Fatalf("EOF after %d bytes, decoded length %d", len(out), decoded)
			}
			if h := cr.Trailer(); h != nil && !trailer {
				t.Fatalf("trailer %v without trailer mode", h)
			}
		} else if cr.Trailer() != nil {
			t.Fatal("Trailer set after an error")
		}
		// Tiny reads see the same outcome.
		out1, _, err1 := decodeAll(data, signed, trailer, decoded, 1)
		if s3err.CodeOf(err) != s3err.CodeOf(err1) || (err == io.EOF) != (err1 == io.EOF) {
			t.Fatalf("outcome depends on read size: %v vs %v", err, err1)
		}
		if err == io.EOF && !bytes.Equal(out, out1) {
			t.Fatal("data depends on read size")
		}
	})
}
