package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/store"
)

// This file is the one place where S3 errors become store sentinels. Retry
// decisions are not made here: the SDK's retryer (see New) retries
// throttling, 5xx and connection errors before an error reaches mapErr,
// which marks what it returns store.Retried so that no caller retries it
// again. A response body that breaks is not retried by the SDK: those
// errors reach the caller unmarked (ReadRange returns the SDK's body).

// sentinelFor returns the store sentinel for an S3 error code and HTTP
// status, or nil when none applies.
func sentinelFor(code string, status int) error {
	switch code {
	case "NoSuchKey", "NotFound":
		return store.ErrNotFound
	case "PreconditionFailed", "ConditionalRequestConflict":
		// 409 ConditionalRequestConflict: a concurrent conditional write
		// won; for create-if-absent and compare-and-swap this is a lost race.
		return store.ErrPreconditionFailed
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
		"TooManyRequests", "TooManyRequestsException", "RequestThrottled", "ServiceUnavailable",
		"XMinioServerNotInitialized":
		return store.ErrThrottled
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
		"InvalidToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem",
		"InvalidSecurity", "MissingSecurityHeader":
		return store.ErrAccessDenied
	case "NoSuchUpload", "XMinioInvalidUploadID", "InvalidUploadId":
		return store.ErrNoSuchUpload
	case "InvalidPart", "InvalidPartOrder":
		return store.ErrInvalidPart
	case "KeyTooLongError", "KeyTooLong", "XMinioInvalidObjectName", "InvalidObjectName",
		"XMinioObjectNameTooLong", "XMinioInvalidResourceName", "XMinioObjectExistsAsDirectory", "XMinioParentIsObject":
		return store.ErrInvalidKey
	case "NoSuchBucket":
		return nil // a configuration error, not a missing object
	}
	switch status {
	case http.StatusNotFound:
		return store.ErrNotFound
	case http.StatusPreconditionFailed:
		return store.ErrPreconditionFailed
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return store.ErrThrottled
	case http.StatusForbidden, http.StatusUnauthorized:
		return store.ErrAccessDenied
	}
	return nil
}

// errParts extracts the S3 error code and HTTP status of err (0 when the
// error did not come from a response).
func errParts(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// mapErr wraps an SDK error of operation op on key with the store sentinel
// it maps to (errors.Is finds both the sentinel and the SDK error, and
// context.Canceled / DeadlineExceeded when ctx ended the call). The SDK's
// error text holds the operation, status, request ids and the service's
// message; it never holds credentials.
func mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("s3: %s %q: %w", op, key, err)
	}
	if s := sentinelFor(errParts(err)); s != nil {
		return store.Retried(fmt.Errorf("s3: %s %q: %w: %w", op, key, s, err))
	}
	return store.Retried(fmt.Errorf("s3: %s %q: %w", op, key, err))
}

// isCode reports whether err is an S3 error with one of codes.
func isCode(err error, codes ...string) bool {
	code, _ := errParts(err)
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}
