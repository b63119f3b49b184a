package gcs

// All mapping of SDK errors to store sentinels is here. Whether to retry is
// the SDK's retryer's business (see New; it also reopens a broken read body
// where it stopped); the sentinel says what happened, and every error
// mapErr returns is marked store.Retried so that no caller retries it again.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/fedgate/fedgate/store"
)

// mapErr wraps err, from operation op on key, with the sentinel it stands
// for:
//
//	ErrObjectNotExist, ErrBucketNotExist, 404 -> ErrNotFound
//	412                                       -> ErrPreconditionFailed
//	429, 503                                  -> ErrThrottled
//	401, 403                                  -> ErrAccessDenied
//	400 "invalid object name"                 -> ErrInvalidKey
//
// ctx errors stay as they are (wrapped); the error text is redacted (see
// redact).
func mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch code := httpCode(err); {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	case errors.Is(err, storage.ErrObjectNotExist), code == http.StatusNotFound:
		sentinel = store.ErrNotFound
	case errors.Is(err, storage.ErrBucketNotExist):
		return store.Retried(fmt.Errorf("gcs: %s %q: bucket does not exist: %w (%w)", op, key, store.ErrNotFound, redact(err)))
	case code == http.StatusPreconditionFailed:
		sentinel = store.ErrPreconditionFailed
	case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		sentinel = store.ErrThrottled
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		sentinel = store.ErrAccessDenied
	case code == http.StatusBadRequest && invalidName(err):
		sentinel = store.ErrInvalidKey
	}
	if sentinel == nil {
		return store.Retried(fmt.Errorf("gcs: %s %q: %w", op, key, redact(err)))
	}
	return store.Retried(fmt.Errorf("gcs: %s %q: %w (%w)", op, key, sentinel, redact(err)))
}

// httpCode is the HTTP status of a GCS error, 0 when err has none.
func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// invalidNameRE matches GCS's message for an object name it refuses.
var invalidNameRE = regexp.MustCompile(`(?i)invalid object name|object name .*(invalid|not valid)`)

func invalidName(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	for _, e := range ge.Errors {
		if invalidNameRE.MatchString(e.Message) {
			return true
		}
	}
	return invalidNameRE.MatchString(ge.Message)
}

// secretRE matches what must not reach logs: a resumable upload's session
// id (whoever holds it may write to the upload), access tokens, API keys
// and bearer tokens that a transport error may quote with its URL.
var secretRE = regexp.MustCompile(`((?:upload_id|access_token|key|token|X-Goog-Signature|sig)=)[^&\s"']+|(Bearer )[A-Za-z0-9._~+/=-]+`)

// redact returns err with secrets removed from its text; errors.Is and
// errors.As still see err.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := secretRE.ReplaceAllString(msg, "$1$2REDACTED")
	if clean == msg {
		return err
	}
	return &redacted{msg: clean, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
