// Package s3err defines the error value that gateway packages return when a
// request must fail with a specific S3 error code. The gateway's error
// renderer turns an *Error into the S3 XML error document; packages that
// produce one keep HTTP concerns out of everything else.
package s3err

import (
	"errors"
	"fmt"
	"net/http"
)

// S3 error codes used across the gateway.
const (
	CodeAccessDenied                      = "AccessDenied"
	CodeAuthorizationHeaderMalformed      = "AuthorizationHeaderMalformed"
	CodeAuthorizationQueryParametersError = "AuthorizationQueryParametersError"
	CodeBadDigest                         = "BadDigest"
	CodeIncompleteBody                    = "IncompleteBody"
	CodeInvalidAccessKeyID                = "InvalidAccessKeyId"
	CodeInvalidArgument                   = "InvalidArgument"
	CodeInvalidChunkSizeError             = "InvalidChunkSizeError"
	CodeInvalidDigest                     = "InvalidDigest"
	CodeInvalidRequest                    = "InvalidRequest"
	CodeMalformedTrailerError             = "MalformedTrailerError"
	CodeMissingSecurityHeader             = "MissingSecurityHeader"
	CodeNotImplemented                    = "NotImplemented"
	CodeRequestTimeTooSkewed              = "RequestTimeTooSkewed"
	CodeSignatureDoesNotMatch             = "SignatureDoesNotMatch"
	CodeXAmzContentSHA256Mismatch         = "XAmzContentSHA256Mismatch"
)

// statusByCode holds the HTTP status S3 sends with each code. Codes not
// listed default to 400 Bad Request.
var statusByCode = map[string]int{
	CodeAccessDenied:          http.StatusForbidden,
	CodeInvalidAccessKeyID:    http.StatusForbidden,
	CodeRequestTimeTooSkewed:  http.StatusForbidden,
	CodeSignatureDoesNotMatch: http.StatusForbidden,
	CodeNotImplemented:        http.StatusNotImplemented,
}

// Error is an S3 error: a code from the S3 error catalogue, a human-readable
// message and the HTTP status that goes with the code.
type Error struct {
	Code    string
	Message string
	Status  int
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is reports whether target is an *Error with the same Code, so that callers
// can write errors.Is(err, &s3err.Error{Code: s3err.CodeBadDigest}) or use a
// value built by New.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// StatusFor returns the HTTP status S3 uses for code.
func StatusFor(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusBadRequest
}

// New returns an *Error with the given code and message and the status that
// S3 uses for that code.
func New(code, message string) *Error {
	return &Error{Code: code, Message: message, Status: StatusFor(code)}
}

// Newf is New with a formatted message.
func Newf(code, format string, args ...any) *Error {
	return New(code, fmt.Sprintf(format, args...))
}

// CodeOf returns the Code of the first *Error in err's chain, or "" if there
// is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
