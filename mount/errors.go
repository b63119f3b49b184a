package mount

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/backoff"
)

// errChanged is a read of an object that changed since the file was opened
// (its ETag no longer matches): the read fails with EIO rather than mixing
// the bytes of two versions.
var errChanged = errors.New("object changed since open")

// httpStatus is the HTTP status of an S3 error, 0 when there was no answer.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// errorCode is the S3 error code ("NoSuchKey"), "" when there is none.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// toErrno maps an S3 request's final error to the errno a FUSE call
// returns (docs/mount.md, "Errors").
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, errChanged) {
		return syscall.EIO
	}
	// The FUSE call was interrupted (a signal to the caller: Go's runtime
	// sends SIGURG to preempt goroutines): EINTR, which libc callers and
	// Go's os package retry.
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	switch errorCode(err) {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return syscall.ENOENT
	case "AccessDenied", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return syscall.EACCES
	case "PreconditionFailed":
		return syscall.EIO
	case "EgressBudgetExceeded":
		return syscall.EDQUOT
	case "InsufficientStorage", "XMinioStorageFull":
		return syscall.ENOSPC
	case "EntityTooLarge":
		return syscall.EFBIG
	case "KeyTooLongError":
		return syscall.ENAMETOOLONG
	}
	if errors.Is(err, errUnsupportedWrite) {
		return syscall.EOPNOTSUPP
	}
	switch httpStatus(err) {
	case 404:
		return syscall.ENOENT
	case 403:
		return syscall.EACCES
	case 507:
		return syscall.ENOSPC
	}
	return syscall.EIO
}

// retryable reports whether a failed request is worth another try:
// throttling, 5xx, timeouts and broken connections; never a 4xx answer
// about the request itself.
func retryable(err error) bool {
	if err == nil || errors.Is(err, errChanged) || errors.Is(err, context.Canceled) {
		return false
	}
	switch errorCode(err) {
	case "InsufficientStorage", "XMinioStorageFull", "EgressBudgetExceeded", "EntityTooLarge", "KeyTooLongError", "AccessDenied", "NoSuchUpload", "NoSuchKey", "NoSuchBucket":
		return false
	case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed":
		return true
	}
	if s := httpStatus(err); s != 0 {
		return s == 429 || s >= 500
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// No HTTP answer at all (connection refused, reset, EOF mid-body).
	return true
}

// retryPolicy is the wait between tries of one request.
var retryPolicy = backoff.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full}

// doTimeout is do with a per-try deadline other than --request-timeout.
func (f *FS) doTimeout(parent context.Context, op string, timeout time.Duration, req func(ctx context.Context) error) error {
	return f.doWith(parent, op, timeout, req)
}

// sizedTimeout is the per-try deadline of a request whose server side
// work grows with size bytes (PutObject, CompleteMultipartUpload,
// CopyObject): --request-timeout plus a second per 64 MiB.
func (f *FS) sizedTimeout(size int64) time.Duration {
	return f.cfg.RequestTimeout + time.Duration(size/(64<<20))*time.Second
}

// do runs one S3 request with a deadline per try, retrying what
// retryable allows up to tries times. parent ends all tries (an
// interrupted FUSE call, an unmount).
func (f *FS) do(parent context.Context, op string, req func(ctx context.Context) error) error {
	return f.doWith(parent, op, f.cfg.RequestTimeout, req)
}

func (f *FS) doWith(parent context.Context, op string, timeout time.Duration, req func(ctx context.Context) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(parent, timeout)
		err = req(ctx)
		cancel()
		f.metrics.observe(op, err, time.Since(start))
		if err == nil || !retryable(err) || attempt >= f.cfg.Tries || parent.Err() != nil {
			break
		}
		f.log.Debug("retrying S3 request", "op", op, "attempt", attempt, "err", err)
		if backoff.Policy.Sleep(retryPolicy, parent, attempt) != nil {
			break
		}
	}
	return err
}
