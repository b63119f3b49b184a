package azure

// All mapping of Azure SDK errors to the sentinels of package store lives in
// this file, and so does the scrubbing of secrets from error messages.
// Retrying is not decided here: azcore's retry policy has already retried
// what it could (see retryOptions) before an error reaches mapErr.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/fedgate/fedgate/store"
)

// kindOf returns the sentinel an SDK error maps to, or nil when none fits.
func kindOf(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch bloberror.Code(re.ErrorCode) {
		case bloberror.BlobNotFound:
			return store.ErrNotFound
		case bloberror.ConditionNotMet, bloberror.BlobAlreadyExists, bloberror.TargetConditionNotMet:
			return store.ErrPreconditionFailed
		case bloberror.ServerBusy, bloberror.OperationTimedOut, bloberror.InternalError:
			return store.ErrThrottled
		case bloberror.AuthorizationFailure, bloberror.AuthenticationFailed,
			bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions,
			bloberror.AuthorizationSourceIPMismatch, bloberror.AuthorizationProtocolMismatch,
			bloberror.AuthorizationResourceTypeMismatch, bloberror.AuthorizationServiceMismatch:
			return store.ErrAccessDenied
		case bloberror.InvalidBlockList, bloberror.InvalidBlockID:
			return store.ErrInvalidPart
		case bloberror.InvalidResourceName, bloberror.InvalidURI:
			return store.ErrInvalidKey
		case bloberror.ContainerNotFound:
			// A missing container is a configuration error, not a
			// missing key: it maps to no sentinel.
			return nil
		}
		switch re.StatusCode {
		case http.StatusNotFound:
			return store.ErrNotFound
		case http.StatusPreconditionFailed:
			return store.ErrPreconditionFailed
		case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusRequestTimeout:
			return store.ErrThrottled
		case http.StatusUnauthorized, http.StatusForbidden:
			return store.ErrAccessDenied
		}
		return nil
	}
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		return store.ErrAccessDenied
	}
	return nil
}

// azError is an SDK error with a message fit for logs: short, and with the
// store's secrets and every URL query (SAS signatures) removed. It unwraps
// to the sentinel it maps to and to the SDK error (context errors stay
// visible to errors.Is).
type azError struct {
	msg  string
	kind error // a store sentinel, or nil
	err  error
}

func (e *azError) Error() string { return e.msg }

func (e *azError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.err}
}

// mapErr wraps an SDK error for operation op on key. Context errors and
// errors that already carry a message of ours pass through wrapped as they
// are; everything else becomes an azError. Every error it returns is marked
// store.Retried: the azcore pipeline has retried the request (and the
// RetryReader a broken body) as New configures, so no caller retries it
// again.
func (s *Store) mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ae *azError
	if errors.As(err, &ae) {
		return store.Retried(fmt.Errorf("azure: %s %q: %w", op, key, err))
	}
	kind := kindOf(err)
	msg := s.scrub(describe(err))
	if kind == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return store.Retried(fmt.Errorf("azure: %s %q: %w", op, key, &azError{msg: msg, err: err}))
	}
	return store.Retried(fmt.Errorf("azure: %s %q: %w", op, key, &azError{msg: msg, kind: kind, err: err}))
}

// describe is a one-line description of err: for a service error its
// status and code (the SDK's own message spans many lines and includes the
// response body), for a transport error its cause without the URL.
func describe(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = http.StatusText(re.StatusCode)
		}
		return fmt.Sprintf("%d %s", re.StatusCode, code)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + redactURL(ue.URL) + ": " + describe(ue.Err)
	}
	return err.Error()
}

func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.RawQuery != "" {
			u.RawQuery = "REDACTED"
		}
		u.User = nil
		return u.String()
	}
	return "(url)"
}

// sigRE matches credentials that may appear in an SDK message: SAS
// signatures and account keys in query strings or connection strings.
var sigRE = regexp.MustCompile(`(?i)(sig=|accountkey=|sharedaccesssignature=)[^&;\s"']*`)

// scrub removes the store's secrets from msg.
func (s *Store) scrub(msg string) string {
	s.secretsMu.Lock()
	secrets := s.secrets
	s.secretsMu.Unlock()
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "REDACTED")
		}
	}
	return sigRE.ReplaceAllString(msg, "${1}REDACTED")
}

// addSecret adds a rotated account key to what scrub removes.
func (s *Store) addSecret(v string) {
	s.secretsMu.Lock()
	defer s.secretsMu.Unlock()
	s.secrets = append(slices.Clip(s.secrets), secretsOf(Config{AccountKey: v})...)
}

// secretsOf lists the strings of cfg that must never appear in a message,
// with the encodings they take in a URL.
func secretsOf(cfg Config) []string {
	var out []string
	add := func(v string) {
		if v == "" {
			return
		}
		out = append(out, v, url.QueryEscape(v), url.PathEscape(v))
	}
	add(cfg.AccountKey)
	add(strings.TrimPrefix(cfg.SASToken, "?"))
	add(cfg.ConnectionString)
	for part := range strings.SplitSeq(cfg.ConnectionString, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && (strings.EqualFold(k, "AccountKey") || strings.EqualFold(k, "SharedAccessSignature")) {
			add(v)
		}
	}
	for q := range strings.SplitSeq(strings.TrimPrefix(cfg.SASToken, "?"), "&") {
		if k, v, ok := strings.Cut(q, "="); ok && k == "sig" {
			add(v)
			if uv, err := url.QueryUnescape(v); err == nil {
				add(uv)
			}
		}
	}
	return out
}

// writeErr maps the error of a commit (Put Blob, Put Block List). If-Match
// on a missing blob is a failed precondition. A commit whose staged blocks
// were discarded by a concurrent commit of the key reports the condition
// if that is what failed, else ErrThrottled: the write may be retried.
func (s *Store) writeErr(ctx context.Context, op, key string, err error, opts store.PutOptions) error {
	kind := kindOf(err)
	if errors.Is(kind, store.ErrNotFound) && opts.IfMatch != "" {
		return fmt.Errorf("azure: %s %q: no object to match: %w", op, key, store.ErrPreconditionFailed)
	}
	if errors.Is(kind, store.ErrInvalidPart) && op == "put" {
		if (opts.IfNoneMatch || opts.IfMatch != "") && s.conditionFails(ctx, key, opts) {
			return fmt.Errorf("azure: %s %q: %w", op, key, store.ErrPreconditionFailed)
		}
		return fmt.Errorf("azure: %s %q: staged blocks discarded by a concurrent write of the key: %w",
			op, key, store.ErrThrottled)
	}
	return s.mapErr(op, key, err)
}

// conditionFails reports whether opts' condition fails now.
func (s *Store) conditionFails(ctx context.Context, key string, opts store.PutOptions) bool {
	resp, err := s.cont.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return opts.IfMatch != "" && errors.Is(kindOf(err), store.ErrNotFound)
	}
	return opts.IfNoneMatch || validatorOf(resp.ETag) != store.Validator(strings.Trim(string(opts.IfMatch), `"`))
}

// readErr maps the error of a read made with If-Match: Azurite answers
// If-Match on a missing blob with 412, which must read as ErrNotFound.
func (s *Store) readErr(ctx context.Context, key string, err error) error {
	if errors.Is(kindOf(err), store.ErrPreconditionFailed) {
		if _, serr := s.cont.NewBlobClient(key).GetProperties(ctx, nil); errors.Is(kindOf(serr), store.ErrNotFound) {
			err = serr
		}
	}
	return s.mapErr("read", key, err)
}
