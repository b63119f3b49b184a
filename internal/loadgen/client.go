package loadgen

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// newHTTPClient is the client of one target: enough idle connections that
// every worker keeps its own (Go's default keeps 2 per host, so 64 workers
// would open and close connections all the time and measure TCP setup),
// no transparent gzip, HTTP/1.1 as S3 clients speak it, and larger
// buffers than the default 4 KiB.
func newHTTPClient(concurrency int, tlsCfg *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	idle := 2*concurrency + 16
	tr.MaxIdleConns = idle
	tr.MaxIdleConnsPerHost = idle
	tr.IdleConnTimeout = 90 * time.Second
	tr.DisableCompression = true
	tr.ForceAttemptHTTP2 = false
	tr.ReadBufferSize = 64 << 10
	tr.WriteBufferSize = 64 << 10
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
	}
	return &http.Client{Transport: tr}
}

// newS3Client is an aws-sdk-go-v2 client that sends each operation as one
// request: no retries (a failure is counted, not hidden in a latency), no
// checksums where S3 does not require them, and UNSIGNED-PAYLOAD (as over
// HTTPS) so the client does not hash every body it sends: what is measured
// is the server, not the client's CPU.
func newS3Client(t Target, creds aws.CredentialsProvider, hc *http.Client) *s3.Client {
	o := s3.Options{
		Region:                     t.Region,
		Credentials:                creds,
		HTTPClient:                 hc,
		UsePathStyle:               t.PathStyle,
		Retryer:                    aws.NopRetryer{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware},
	}
	if t.Endpoint != "" {
		o.BaseEndpoint = aws.String(t.Endpoint)
	}
	return s3.New(o)
}

// shortError is err without what differs from one request to the next
// (request ids, keys), so that equal failures are counted together:
// "GET: 404 NoSuchKey: The specified key does not exist.".
func shortError(op string, err error) error {
	var ae smithy.APIError
	var re *awshttp.ResponseError
	status := ""
	if errors.As(err, &re) {
		status = fmt.Sprintf("%d ", re.HTTPStatusCode())
	}
	if errors.As(err, &ae) {
		msg := ae.ErrorMessage()
		if msg == "" {
			return fmt.Errorf("%s: %s%s", op, status, ae.ErrorCode())
		}
		return fmt.Errorf("%s: %s%s: %s", op, status, ae.ErrorCode(), msg)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		// The innermost error names the address and what failed
		// ("dial tcp 127.0.0.1:9: connect: connection refused").
		var oe *net.OpError
		if errors.As(err, &oe) {
			return fmt.Errorf("%s: %v", op, oe)
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: the response ended early (%v)", op, io.ErrUnexpectedEOF)
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ", "); i >= 0 && strings.Contains(msg, "RequestID") {
		msg = msg[i+2:]
	}
	return fmt.Errorf("%s: %s", op, msg)
}

// The bytes of objects: a random megabyte, read from an offset of the
// object's own, repeated. Objects need not be incompressible beyond that:
// S3 servers do not compress, and fedgate neither.
const blockSize = 1 << 20

var block = sync.OnceValue(func() []byte {
	b := make([]byte, blockSize)
	_, _ = rand.Read(b)
	return b
})

// patternReader is an object's body: size bytes of the block starting at
// salt, as an io.ReadSeeker so the SDK knows its length and can rewind it.
type patternReader struct {
	size, off, salt int64
}

func newBody(size int64, salt uint64) *patternReader {
	return &patternReader{size: size, salt: int64(salt % blockSize)}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	data := block()
	n := 0
	for n < len(b) && p.off < p.size {
		i := (p.off + p.salt) % blockSize
		end := min(int64(blockSize), i+(p.size-p.off))
		c := copy(b[n:], data[i:end])
		n += c
		p.off += int64(c)
	}
	return n, nil
}

func (p *patternReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += p.off
	case io.SeekEnd:
		offset += p.size
	default:
		return 0, errors.New("patternReader: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("patternReader: negative position")
	}
	p.off = offset
	return offset, nil
}
