package store

import "errors"

// Retries: one layer retries a failure, never two (docs/stores.md, "Retries").
//
// A store whose client already retries transient failures (the cloud SDKs:
// s3's aws-sdk-go-v2 retryer, gcs's storage retryer, azure's azcore retry
// policy) returns every error it gives up on marked with Retried. Callers
// (federation's read retries) must not retry a marked error: the attempts
// would multiply (6 federation attempts around an SDK's 5 to 8 were up to
// 48 requests for one range read). An unmarked error is one no layer below
// has retried — posix failures, or a broken S3 response body, which
// aws-sdk-go-v2 does not resume — and the caller may retry it within its
// own budget.
//
// The mark is apart from the error kind: errors.Is still finds the
// sentinel (ErrThrottled, ...) through it.

// Retried marks err as already retried by the store's own retry policy.
// It returns nil for nil.
func Retried(err error) error {
	if err == nil || WasRetried(err) {
		return err
	}
	return &retriedError{err}
}

// WasRetried reports whether err, or an error it wraps, is marked Retried.
func WasRetried(err error) bool {
	var r *retriedError
	return errors.As(err, &r)
}

type retriedError struct{ err error }

func (e *retriedError) Error() string { return e.err.Error() }
func (e *retriedError) Unwrap() error { return e.err }
