package checksum

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// Vectors for "hello world" are those of aws-sdk-go-v2's internal checksum
// package tests.
func TestKnownVectors(t *testing.T) {
	for _, c := range []struct {
		alg  Algorithm
		in   string
		want string
	}{
		{CRC32, "hello world", "DUoRhQ=="},
		{CRC32C, "hello world", "yZRlqg=="},
		{CRC64NVME, "hello world", "jSnVw/bqjr4="},
		{SHA1, "hello world", "Kq5sNclPz7QV2+lfQIuc6R7oRu0="},
		{SHA256, "hello world", "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="},
		{CRC32, "", "AAAAAA=="},
		{CRC64NVME, "", "AAAAAAAAAAA="},
	} {
		if got := c.alg.Sum([]byte(c.in)); got != c.want {
			t.Errorf("%s(%q) = %s, want %s", c.alg, c.in, got, c.want)
		}
	}
	// The CRC-64/NVME check value.
	h := CRC64NVME.New()
	io.WriteString(h, "123456789")
	if got := binary.BigEndian.Uint64(h.Sum(nil)); got != 0xae8b14860a799888 {
		t.Errorf("CRC64NVME check value = %#x", got)
	}
	for _, a := range Algorithms {
		if got := len(a.New().Sum(nil)); got != a.Size() {
			t.Errorf("%s: digest %d bytes, Size %d", a, got, a.Size())
		}
		if p, ok := ParseAlgorithm(strings.ToLower(string(a))); !ok || p != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", strings.ToLower(string(a)), p, ok)
		}
	}
}

func md5b64(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *s3err.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	if e.Status != http.StatusBadRequest {
		t.Fatalf("status %d", e.Status)
	}
}

const body = "hello world"

func TestReader(t *testing.T) {
	good := map[Algorithm]string{}
	for _, a := range Algorithms {
		good[a] = a.Sum([]byte(body))
	}
	trl := func(kv ...string) func() http.Header {
		return func() http.Header {
			h := http.Header{}
			for i := 0; i < len(kv); i += 2 {
				h.Set(kv[i], kv[i+1])
			}
			return h
		}
	}
	cases := []struct {
		name    string
		hdr     []string // name, value pairs
		trailer func() http.Header
		newCode string // error from NewReader
		eofCode string // error instead of io.EOF
		sums    map[string]string
	}{
		{name: "nothing", sums: map[string]string{}},
		{name: "md5 ok", hdr: []string{"Content-MD5", md5b64(body)}, sums: map[string]string{}},
		{name: "md5 mismatch", hdr: []string{"Content-MD5", md5b64("other")}, eofCode: s3err.CodeBadDigest},
		{name: "md5 malformed", hdr: []string{"Content-MD5", "not base64!"}, newCode: s3err.CodeInvalidDigest},
		{name: "md5 short", hdr: []string{"Content-MD5", "AAAA"}, newCode: s3err.CodeInvalidDigest},
		{name: "crc32 header ok", hdr: []string{"x-amz-checksum-crc32", good[CRC32]}, sums: map[string]string{"CRC32": good[CRC32]}},
		{name: "crc32c header ok", hdr: []string{"x-amz-checksum-crc32c", good[CRC32C], "x-amz-sdk-checksum-algorithm", "crc32c"}, sums: map[string]string{"CRC32C": good[CRC32C]}},
		{name: "crc64nvme ok", hdr: []string{"x-amz-checksum-crc64nvme", good[CRC64NVME]}, sums: map[string]string{"CRC64NVME": good[CRC64NVME]}},
		{name: "sha1 ok", hdr: []string{"x-amz-checksum-sha1", good[SHA1]}, sums: map[string]string{"SHA1": good[SHA1]}},
		{name: "sha256 ok", hdr: []string{"x-amz-checksum-sha256", good[SHA256], "Content-MD5", md5b64(body)}, sums: map[string]string{"SHA256": good[SHA256]}},
		{name: "crc32 mismatch", hdr: []string{"x-amz-checksum-crc32", good[CRC32C]}, eofCode: s3err.CodeBadDigest},
		{name: "sha256 mismatch", hdr: []string{"x-amz-checksum-sha256", SHA256.Sum(nil)}, eofCode: s3err.CodeBadDigest},
		{name: "md5 ok crc mismatch", hdr: []string{"Content-MD5", md5b64(body), "x-amz-checksum-crc32", "AAAAAA=="}, eofCode: s3err.CodeBadDigest},
		{name: "checksum wrong size", hdr: []string{"x-amz-checksum-crc32", good[SHA1]}, newCode: s3err.CodeInvalidRequest},
		{name: "checksum not base64", hdr: []string{"x-amz-checksum-sha1", "%%%"}, newCode: s3err.CodeInvalidRequest},
		{name: "two checksums", hdr: []string{"x-amz-checksum-crc32", good[CRC32], "x-amz-checksum-sha1", good[SHA1]}, newCode: s3err.CodeInvalidRequest},
		{name: "sdk algorithm only", hdr: []string{"x-amz-sdk-checksum-algorithm", "SHA256"}, sums: map[string]string{"SHA256": good[SHA256]}},
		{name: "sdk algorithm unknown", hdr: []string{"x-amz-sdk-checksum-algorithm", "MD4"}, newCode: s3err.CodeInvalidRequest},
		{name: "sdk algorithm contradicts", hdr: []string{"x-amz-sdk-checksum-algorithm", "CRC32", "x-amz-checksum-sha1", good[SHA1]}, newCode: s3err.CodeInvalidRequest},
		{name: "trailer ok", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc32", "x-amz-sdk-checksum-algorithm", "CRC32"},
			trailer: trl("x-amz-checksum-crc32", good[CRC32]), sums: map[string]string{"CRC32": good[CRC32]}},
		{name: "trailer crc64nvme ok", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc64nvme"},
			trailer: trl("x-amz-checksum-crc64nvme", good[CRC64NVME]), sums: map[string]string{"CRC64NVME": good[CRC64NVME]}},
		{name: "trailer mismatch", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc32c"},
			trailer: trl("x-amz-checksum-crc32c", good[CRC32]), eofCode: s3err.CodeBadDigest},
		{name: "trailer missing", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc32c"},
			trailer: trl("x-amz-checksum-crc32", good[CRC32]), eofCode: s3err.CodeInvalidRequest},
		{name: "trailer nil header", hdr: []string{"x-amz-trailer", "x-amz-checksum-sha1"},
			trailer: func() http.Header { return nil }, eofCode: s3err.CodeInvalidRequest},
		{name: "trailer malformed", hdr: []string{"x-amz-trailer", "x-amz-checksum-sha1"},
			trailer: trl("x-amz-checksum-sha1", "AAAA"), eofCode: s3err.CodeInvalidRequest},
		{name: "trailer and header", hdr: []string{"x-amz-trailer", "x-amz-checksum-sha1", "x-amz-checksum-crc32", good[CRC32]},
			trailer: trl(), newCode: s3err.CodeInvalidRequest},
		{name: "trailer unsupported", hdr: []string{"x-amz-trailer", "x-amz-meta-foo"}, trailer: trl(), newCode: s3err.CodeInvalidRequest},
		{name: "trailer without trailer func", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc32"}, newCode: s3err.CodeInvalidRequest},
		{name: "trailer md5 mismatch", hdr: []string{"x-amz-trailer", "x-amz-checksum-crc32", "Content-MD5", md5b64("x")},
			trailer: trl("x-amz-checksum-crc32", good[CRC32]), eofCode: s3err.CodeBadDigest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i < len(c.hdr); i += 2 {
				h.Add(c.hdr[i], c.hdr[i+1])
			}
			r, err := NewReader(h, iotest.HalfReader(strings.NewReader(body)), c.trailer)
			if c.newCode != "" {
				wantCode(t, err, c.newCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if string(got) != body {
				t.Fatalf("read %q", got)
			}
			if c.eofCode != "" {
				wantCode(t, err, c.eofCode)
				if _, err2 := r.Read(make([]byte, 1)); !errors.Is(err2, err) {
					t.Fatalf("error not sticky: %v", err2)
				}
				if r.Checksums() != nil {
					t.Fatalf("Checksums after failure: %v", r.Checksums())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalMaps(r.Checksums(), c.sums) {
				t.Fatalf("Checksums() = %v, want %v", r.Checksums(), c.sums)
			}
		})
	}
}

func TestMismatchMessage(t *testing.T) {
	h := http.Header{"X-Amz-Checksum-Crc32": {"AAAAAA=="}}
	r, err := NewReader(h, strings.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	var e *s3err.Error
	if !errors.As(err, &e) || e.Message != "The CRC32 you specified did not match the calculated checksum." {
		t.Fatalf("error %v", err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
