// Package checksum verifies the integrity headers of S3 uploads while the
// body streams through: Content-MD5 and the flexible checksums
// (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256), sent either as
// headers or as aws-chunked trailers.
package checksum

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// Algorithm is an S3 checksum algorithm, named as S3 names it.
type Algorithm string

// The algorithms S3 supports.
const (
	CRC32     Algorithm = "CRC32"
	CRC32C    Algorithm = "CRC32C"
	CRC64NVME Algorithm = "CRC64NVME"
	SHA1      Algorithm = "SHA1"
	SHA256    Algorithm = "SHA256"
)

// Algorithms lists every supported algorithm.
var Algorithms = []Algorithm{CRC32, CRC32C, CRC64NVME, SHA1, SHA256}

// crc64NVMEPoly is the reversed CRC-64/NVME polynomial, as crc64.MakeTable
// expects it.
const crc64NVMEPoly = 0x9a6c9329ac4bc9b5

var (
	crc32cTable    = crc32.MakeTable(crc32.Castagnoli)
	crc64NVMETable = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(crc64NVMEPoly) })
)

// ParseAlgorithm parses an algorithm name case-insensitively.
func ParseAlgorithm(s string) (Algorithm, bool) {
	for _, a := range Algorithms {
		if strings.EqualFold(s, string(a)) {
			return a, true
		}
	}
	return "", false
}

// New returns a fresh hash for a; it panics for an unknown algorithm.
func (a Algorithm) New() hash.Hash {
	switch a {
	case CRC32:
		return crc32.NewIEEE()
	case CRC32C:
		return crc32.New(crc32cTable)
	case CRC64NVME:
		return crc64.New(crc64NVMETable())
	case SHA1:
		return sha1.New()
	case SHA256:
		return sha256.New()
	}
	panic("checksum: unknown algorithm " + string(a))
}

// Size is the length in bytes of a's digest.
func (a Algorithm) Size() int {
	switch a {
	case CRC32, CRC32C:
		return crc32.Size
	case CRC64NVME:
		return crc64.Size
	case SHA1:
		return sha1.Size
	}
	return sha256.Size
}

// Header is the header (or trailer) carrying a's value, in lower case:
// "x-amz-checksum-crc32".
func (a Algorithm) Header() string { return "x-amz-checksum-" + strings.ToLower(string(a)) }

// Sum returns the base64 checksum of data, as S3 headers carry it.
func (a Algorithm) Sum(data []byte) string {
	h := a.New()
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Reader verifies a body against the integrity headers of its request.
type Reader struct {
	body    io.Reader
	trailer func() http.Header

	md5     hash.Hash
	md5Want []byte

	alg         Algorithm // "" if no checksum was asked for
	h           hash.Hash
	want        []byte // from the header; nil if from the trailer or not given
	fromTrailer bool

	sums map[string]string
	err  error
}

func invalidRequest(msg string) *s3err.Error { return s3err.New(s3err.CodeInvalidRequest, msg) }

// NewReader wraps body. It reads Content-MD5, the x-amz-checksum-<alg>
// headers, x-amz-sdk-checksum-algorithm and x-amz-trailer from h; trailer
// gives the trailing headers once body is at EOF and may be nil if the body
// has none. Before any byte is read it returns an *Error with code
// InvalidDigest for a malformed Content-MD5 and InvalidRequest for a
// malformed checksum header, more than one checksum, an unknown algorithm
// or trailer, an algorithm that contradicts the checksum sent, or a
// declared trailer on a body without one.
func NewReader(h http.Header, body io.Reader, trailer func() http.Header) (*Reader, error) {
	r := &Reader{body: body, trailer: trailer}
	if vs := h.Values("Content-Md5"); len(vs) > 0 {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vs[0]))
		if len(vs) > 1 || err != nil || len(b) != md5.Size {
			return nil, s3err.New(s3err.CodeInvalidDigest, "The Content-MD5 you specified was invalid.")
		}
		r.md5, r.md5Want = md5.New(), b
	}
	for _, a := range Algorithms {
		vs := h.Values(a.Header())
		if len(vs) == 0 {
			continue
		}
		if r.alg != "" || len(vs) > 1 {
			return nil, errMultiple
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vs[0]))
		if err != nil || len(b) != a.Size() {
			return nil, invalidRequest("Value for " + a.Header() + " header is invalid.")
		}
		r.alg, r.want = a, b
	}
	for _, list := range h.Values("X-Amz-Trailer") {
		for name := range strings.SplitSeq(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			a, ok := algorithmOfHeader(name)
			if !ok {
				return nil, invalidRequest("The value specified in the x-amz-trailer header is not supported: " + name)
			}
			if r.alg != "" {
				return nil, errMultiple
			}
			if trailer == nil {
				return nil, invalidRequest("x-amz-trailer was sent for a body without a trailer.")
			}
			r.alg, r.fromTrailer = a, true
		}
	}
	if s := h.Get("X-Amz-Sdk-Checksum-Algorithm"); s != "" {
		a, ok := ParseAlgorithm(strings.TrimSpace(s))
		if !ok || (r.alg != "" && r.alg != a) {
			return nil, invalidRequest("Value for x-amz-sdk-checksum-algorithm header is invalid.")
		}
		r.alg = a
	}
	if r.alg != "" {
		r.h = r.alg.New()
	}
	return r, nil
}

var errMultiple = invalidRequest("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")

func algorithmOfHeader(name string) (Algorithm, bool) {
	const prefix = "x-amz-checksum-"
	if len(name) <= len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
		return "", false
	}
	return ParseAlgorithm(name[len(prefix):])
}

// Read implements io.Reader. At the end of the body it verifies what the
// request declared and returns, instead of io.EOF, an *Error with code
// BadDigest when Content-MD5 or the checksum does not match, and
// InvalidRequest when a declared trailing checksum is missing or malformed.
// Errors are sticky.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	if n > 0 {
		if r.md5 != nil {
			r.md5.Write(p[:n])
		}
		if r.h != nil {
			r.h.Write(p[:n])
		}
	}
	if err == io.EOF {
		err = r.verify()
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

func (r *Reader) verify() error {
	if r.md5 != nil && subtle.ConstantTimeCompare(r.md5.Sum(nil), r.md5Want) != 1 {
		return s3err.New(s3err.CodeBadDigest, "The Content-MD5 you specified did not match what we received.")
	}
	if r.alg == "" {
		r.sums = map[string]string{}
		return io.EOF
	}
	sum := r.h.Sum(nil)
	want := r.want
	if r.fromTrailer {
		var v string
		if t := r.trailer(); t != nil {
			v = strings.TrimSpace(t.Get(r.alg.Header()))
		}
		if v == "" {
			return invalidRequest("The trailing header " + r.alg.Header() + " declared in x-amz-trailer was not sent.")
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) != r.alg.Size() {
			return invalidRequest("Value for " + r.alg.Header() + " trailing header is invalid.")
		}
		want = b
	}
	if want != nil && subtle.ConstantTimeCompare(sum, want) != 1 {
		return s3err.New(s3err.CodeBadDigest, "The "+string(r.alg)+" you specified did not match the calculated checksum.")
	}
	r.sums = map[string]string{string(r.alg): base64.StdEncoding.EncodeToString(sum)}
	return io.EOF
}

// Algorithm returns the checksum algorithm the request asked for, or "".
func (r *Reader) Algorithm() Algorithm { return r.alg }

// Checksums returns the base64 checksums of the body, keyed by algorithm
// name ("CRC32"), for the algorithm the client asked for by header,
// x-amz-sdk-checksum-algorithm or trailer. It is valid once Read returned
// io.EOF, and nil before or after a failed check.
func (r *Reader) Checksums() map[string]string { return r.sums }
