package sigv4

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// Limits of the aws-chunked decoder.
const (
	// maxLine bounds a chunk-size line or a trailer line.
	maxLine = 4096
	// maxTrailerBytes bounds the whole trailer section.
	maxTrailerBytes = 16 << 10
	// maxTrailers bounds the number of trailing headers.
	maxTrailers = 16
	// maxChunkSize bounds one chunk; S3 never accepts more than 5 GiB in
	// one request body.
	maxChunkSize = 5 << 30
)

const (
	chunkSigPrefix   = "chunk-signature="
	trailerSigHeader = "x-amz-trailer-signature"
	emptySHA256      = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// ChunkSigning carries what is needed to verify chunk signatures.
type ChunkSigning struct {
	Key       [32]byte // the derived SigV4 signing key
	Timestamp string   // the request's X-Amz-Date, ISO 8601 basic format
	Scope     string   // the credential scope, date/region/service/aws4_request
	Seed      [32]byte // the request's own (seed) signature
}

// ChunkedOptions configures a ChunkedReader.
type ChunkedOptions struct {
	// Signing, when set, requires "hex-size;chunk-signature=sig" headers and
	// verifies every chunk signature, chained from the seed signature, and
	// the trailer signature. Nil decodes unsigned chunks ("hex-size").
	Signing *ChunkSigning
	// Trailer says that trailing headers follow the final chunk.
	Trailer bool
	// DecodedLength is the x-amz-decoded-content-length; -1 if unknown.
	DecodedLength int64
}

// ChunkedReader decodes an aws-chunked body. Chunk data is streamed to the
// caller as it arrives, so a chunk whose signature turns out to be wrong has
// been partly delivered when Read reports the error: callers must discard
// everything unless Read ends with io.EOF.
//
// Read returns an *Error with code IncompleteBody when the stream ends early
// or the decoded size differs from DecodedLength, InvalidChunkSizeError for a
// malformed chunk header or chunk terminator, SignatureDoesNotMatch for a bad
// chunk or trailer signature and MalformedTrailerError for a malformed
// trailer. Errors of the underlying reader other than io.EOF and
// io.ErrUnexpectedEOF are returned unchanged.
type ChunkedReader struct {
	br        *bufio.Reader
	opts      ChunkedOptions
	remaining int64 // data bytes left in the current chunk
	total     int64 // data bytes decoded so far
	done      bool
	err       error // sticky
	trailer   http.Header

	// Signed mode only.
	prev     [32]byte // previous signature in the chain
	chunkSig [32]byte // signature claimed by the current chunk header
	data     hash.Hash
	mac      macer
	sts      []byte
}

// NewChunkedReader returns a decoder of the aws-chunked stream r.
func NewChunkedReader(r io.Reader, o ChunkedOptions) *ChunkedReader {
	c := &ChunkedReader{br: bufio.NewReaderSize(r, maxLine), opts: o}
	if o.Signing != nil {
		c.prev = o.Signing.Seed
		c.data = sha256.New()
		c.mac = newMacer()
	}
	return c
}

// Trailer returns the trailing headers; it is valid after Read returned
// io.EOF and nil before, or when the stream had none.
func (c *ChunkedReader) Trailer() http.Header {
	if !c.done {
		return nil
	}
	return c.trailer
}

// Read implements io.Reader.
func (c *ChunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	for c.remaining == 0 {
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.br.Read(p)
	c.remaining -= int64(n)
	c.total += int64(n)
	if c.data != nil {
		c.data.Write(p[:n])
	}
	if err != nil {
		c.err = streamErr(err)
		return n, c.err
	}
	if c.remaining == 0 {
		if err := c.endChunk(); err != nil {
			// Withhold the chunk's last bytes: they failed verification.
			c.err = err
			return 0, err
		}
	}
	return n, nil
}

var (
	errIncomplete   = s3err.New(s3err.CodeIncompleteBody, "The request body terminated unexpectedly.")
	errTrailingData = chunkSizeErr("unexpected data after the final chunk")
)

func chunkSizeErr(detail string) *s3err.Error {
	return s3err.New(s3err.CodeInvalidChunkSizeError, "Invalid aws-chunked encoding: "+detail+".")
}

func trailerErr(detail string) *s3err.Error {
	return s3err.New(s3err.CodeMalformedTrailerError, "The request contained trailing data that was not well-formed: "+detail+".")
}

func sigErr(what string) *s3err.Error {
	return s3err.New(s3err.CodeSignatureDoesNotMatch, "The "+what+" signature we calculated does not match the signature you provided.")
}

// streamErr maps the end of the underlying stream to IncompleteBody.
func streamErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errIncomplete
	}
	return err
}

// readLine returns the next line without its CRLF (or bare LF; crlf reports
// which). At the end of the stream it returns io.EOF if nothing was read.
func (c *ChunkedReader) readLine() (line []byte, crlf bool, err error) {
	line, err = c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, false, chunkSizeErr("line too long")
	case errors.Is(err, io.EOF) && len(line) == 0:
		return nil, false, io.EOF
	case err != nil:
		return nil, false, streamErr(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1], true, nil
	}
	return line, false, nil
}

// nextChunk reads a chunk header; after the final chunk it reads the
// trailer and finishes the stream, returning io.EOF.
func (c *ChunkedReader) nextChunk() error {
	if c.done {
		return io.EOF
	}
	line, crlf, err := c.readLine()
	if err == io.EOF {
		return errIncomplete
	}
	if err != nil {
		return err
	}
	if !crlf {
		return chunkSizeErr("chunk header not terminated by CRLF")
	}
	sizeHex, ext, hasExt := bytes.Cut(line, []byte{';'})
	size, ok := parseHexSize(sizeHex)
	if !ok {
		return chunkSizeErr("bad chunk size")
	}
	if c.opts.Signing != nil {
		sig, ok := bytes.CutPrefix(ext, []byte(chunkSigPrefix))
		if !hasExt || !ok || len(sig) != 64 {
			return chunkSizeErr("missing or malformed chunk-signature")
		}
		if _, err := hex.Decode(c.chunkSig[:], sig); err != nil {
			return chunkSizeErr("malformed chunk-signature")
		}
		c.data.Reset()
	}
	if c.opts.DecodedLength >= 0 && c.total+size > c.opts.DecodedLength {
		return s3err.New(s3err.CodeIncompleteBody, "The chunks carry more data than x-amz-decoded-content-length.")
	}
	if size > 0 {
		c.remaining = size
		return nil
	}
	return c.finish()
}

func parseHexSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		d, ok := unhex(ch)
		if !ok {
			return 0, false
		}
		n = n<<4 | int64(d)
		if n > maxChunkSize {
			return 0, false
		}
	}
	return n, true
}

// endChunk consumes the CRLF after a chunk's data and checks its signature.
func (c *ChunkedReader) endChunk() error {
	line, crlf, err := c.readLine()
	if err == io.EOF {
		return errIncomplete
	}
	if err != nil {
		return err
	}
	if len(line) != 0 || !crlf {
		return chunkSizeErr("chunk data not followed by CRLF")
	}
	return c.verifyChunk()
}

func (c *ChunkedReader) verifyChunk() error {
	if c.opts.Signing == nil {
		return nil
	}
	var sum [32]byte
	c.data.Sum(sum[:0])
	s := c.opts.Signing
	b := append(c.sts[:0], "AWS4-HMAC-SHA256-PAYLOAD\n"...)
	b = append(b, s.Timestamp...)
	b = append(b, '\n')
	b = append(b, s.Scope...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, c.prev[:])
	b = append(b, "\n"+emptySHA256+"\n"...)
	b = hex.AppendEncode(b, sum[:])
	c.sts = b
	want := c.mac.mac(&s.Key, b)
	if subtle.ConstantTimeCompare(want[:], c.chunkSig[:]) != 1 {
		return sigErr("chunk")
	}
	c.prev = want
	return nil
}

// finish handles the final (zero-size) chunk and whatever follows it.
func (c *ChunkedReader) finish() error {
	if err := c.verifyChunk(); err != nil {
		return err
	}
	if c.opts.Trailer {
		if err := c.readTrailer(); err != nil {
			return err
		}
	} else {
		line, _, err := c.readLine()
		if err == io.EOF {
			return errIncomplete
		}
		if err != nil {
			return err
		}
		if len(line) != 0 {
			return chunkSizeErr("final chunk not followed by an empty line")
		}
	}
	if c.opts.DecodedLength >= 0 && c.total != c.opts.DecodedLength {
		return s3err.New(s3err.CodeIncompleteBody, "You did not provide the number of bytes specified by x-amz-decoded-content-length.")
	}
	// Tolerate stray line ends some clients add, nothing else.
	for i := 0; ; i++ {
		b, err := c.br.ReadByte()
		if err != nil {
			if err != io.EOF {
				return err
			}
			break
		}
		if (b != '\r' && b != '\n') || i >= 4 {
			return errTrailingData
		}
	}
	c.done = true
	return io.EOF
}

// readTrailer reads "name:value" lines up to an empty line, which must be
// there. In signed mode the last one must be x-amz-trailer-signature,
// verified over the preceding lines, each followed by "\n". Blank lines
// before the signature are skipped, as some encoders emit one.
func (c *ChunkedReader) readTrailer() error {
	signed := c.opts.Signing != nil
	var canon []byte
	var sig [32]byte
	sawSig := false
	size, count := 0, 0
	for {
		line, _, err := c.readLine()
		if err == io.EOF {
			return errIncomplete
		}
		if err != nil {
			return err
		}
		if size += len(line) + 2; size > maxTrailerBytes {
			return trailerErr("trailer too large")
		}
		if len(line) == 0 {
			if signed && !sawSig {
				continue
			}
			break
		}
		if sawSig {
			return trailerErr("data after x-amz-trailer-signature")
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return trailerErr("expected name:value")
		}
		if signed && bytes.EqualFold(name, []byte(trailerSigHeader)) {
			value = bytes.TrimSpace(value)
			if len(value) != 64 {
				return sigErr("trailer")
			}
			if _, err := hex.Decode(sig[:], value); err != nil {
				return sigErr("trailer")
			}
			sawSig = true
			continue
		}
		if count++; count > maxTrailers {
			return trailerErr("too many trailing headers")
		}
		canon = append(canon, line...)
		canon = append(canon, '\n')
		if c.trailer == nil {
			c.trailer = make(http.Header)
		}
		c.trailer.Add(strings.TrimSpace(string(name)), string(bytes.TrimSpace(value)))
	}
	if signed {
		return c.verifyTrailer(canon, &sig)
	}
	return nil
}

func (c *ChunkedReader) verifyTrailer(canon []byte, sig *[32]byte) error {
	s := c.opts.Signing
	sum := sha256.Sum256(canon)
	b := append(c.sts[:0], "AWS4-HMAC-SHA256-TRAILER\n"...)
	b = append(b, s.Timestamp...)
	b = append(b, '\n')
	b = append(b, s.Scope...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, c.prev[:])
	b = append(b, '\n')
	b = hex.AppendEncode(b, sum[:])
	c.sts = b
	want := c.mac.mac(&s.Key, b)
	if subtle.ConstantTimeCompare(want[:], sig[:]) != 1 {
		return sigErr("trailer")
	}
	c.prev = want
	return nil
}
