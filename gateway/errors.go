package gateway

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"syscall"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/store"
)

// S3 errors the handlers return with the table's default message
// (gateway/s3err holds every code's status and message). A handler that can
// say more builds its own with s3err.Newf.
var (
	errNoSuchBucket     = s3err.New(s3err.CodeNoSuchBucket, "")
	errNoSuchKey        = s3err.New(s3err.CodeNoSuchKey, "")
	errNoSuchUpload     = s3err.New(s3err.CodeNoSuchUpload, "")
	errBucketNotEmpty   = s3err.New(s3err.CodeBucketNotEmpty, "")
	errPrecondition     = s3err.New(s3err.CodePreconditionFailed, "")
	errInvalidPart      = s3err.New(s3err.CodeInvalidPart, "")
	errInvalidPartOrder = s3err.New(s3err.CodeInvalidPartOrder, "")
	errMalformedXML     = s3err.New(s3err.CodeMalformedXML, "")
	errMissingLength    = s3err.New(s3err.CodeMissingContentLength, "")
	errIncompleteBody   = s3err.New(s3err.CodeIncompleteBody, "")
	errEntityTooLarge   = s3err.New(s3err.CodeEntityTooLarge, "")
	errInvalidRange     = s3err.New(s3err.CodeInvalidRange, "")
	errKeyTooLong       = s3err.New(s3err.CodeKeyTooLongError, "")
	errMethodNotAllowed = s3err.New(s3err.CodeMethodNotAllowed, "")
	errServiceUnavail   = s3err.New(s3err.CodeServiceUnavailable, "The service is shutting down; retry on another node.")
	errSlowDown         = s3err.New(s3err.CodeSlowDown, "")
	errInternal         = s3err.New(s3err.CodeInternalError, "")
)

func errNotImplemented(what string) *s3err.Error {
	return s3err.Newf(s3err.CodeNotImplemented, "%s is not implemented by fedgate; see docs/s3-compatibility.md", what)
}

// toS3 maps any error a handler meets to the S3 error the client gets:
// an S3 error as it is, a region error (regionError), the two typed
// errors of the backend, else the first entry of errorTable that err is,
// else InternalError.
func toS3(err error) *s3err.Error {
	var se *s3err.Error
	if errors.As(err, &se) {
		return se
	}
	if se := regionError(err); se != nil {
		return se
	}
	var exists *backend.BucketExistsError
	var unreachable *backend.RegionUnreachableError
	switch {
	case errors.As(err, &unreachable):
		// The cause (the home region's address, the dial error) goes to
		// the log only.
		return s3err.Newf(s3err.CodeServiceUnavailable, "The bucket %s is at home in region %s, which cannot be reached now; listings, objects not cached in this region and writes of its buckets fail until it answers. Retry later, or through region %s's endpoint.",
			unreachable.Bucket, unreachable.Region, unreachable.Region)
	case errors.As(err, &exists):
		if exists.OwnedByCaller {
			return s3err.New(s3err.CodeBucketAlreadyOwnedByYou, "")
		}
		return s3err.New(s3err.CodeBucketAlreadyExists, "")
	}
	for _, m := range errorTable {
		if slices.ContainsFunc(m.is, func(target error) bool { return errors.Is(err, target) }) {
			return m.s3(err)
		}
	}
	return errInternal
}

// errorMapping is one row of errorTable: the S3 error of an error that is
// one of is.
type errorMapping struct {
	is []error
	s3 func(err error) *s3err.Error
}

// always answers e whatever the error.
func always(e *s3err.Error) func(error) *s3err.Error { return func(error) *s3err.Error { return e } }

// saying answers code with format, whose one verb is the error.
func saying(code, format string) func(error) *s3err.Error {
	return func(err error) *s3err.Error { return s3err.Newf(code, format, err) }
}

// errorTable maps the sentinel errors of backend and store (and a few of
// the system's) to S3 errors, in the order toS3 tries them.
var errorTable = []errorMapping{
	{[]error{backend.ErrNoSuchBucket}, always(errNoSuchBucket)},
	{[]error{backend.ErrBucketNotEmpty}, always(errBucketNotEmpty)},
	{[]error{backend.ErrNoSuchUpload, store.ErrNoSuchUpload}, always(errNoSuchUpload)},
	{[]error{backend.ErrPolicyBucket}, saying(s3err.CodeInvalidBucketState, "%v")},
	{[]error{backend.ErrInvalidBucketName}, saying(s3err.CodeInvalidBucketName, "%v")},
	{[]error{backend.ErrNoSuchVersion}, always(s3err.New(s3err.CodeNoSuchVersion, "The specified version does not exist."))},
	{[]error{backend.ErrVersioningAtOrigin}, saying(s3err.CodeInvalidBucketState, "%v: turn versioning on or off in the origin bucket itself.")},
	{[]error{backend.ErrLifecycleAtOrigin}, saying(s3err.CodeInvalidRequest, "%v: set Expiration and NoncurrentVersionExpiration rules on the origin bucket itself; only AbortIncompleteMultipartUpload applies here (to uploads started through fedgate).")},
	{[]error{backend.ErrVersioningNotSupported}, saying(s3err.CodeNotImplemented, "%v (docs/versioning.md lists the bucket kinds that can be versioned).")},
	{[]error{backend.ErrObjectLocked}, always(s3err.New(s3err.CodeAccessDenied, "Access Denied because object protected by object lock."))},
	{[]error{backend.ErrInvalidBucketState}, saying(s3err.CodeInvalidBucketState, "%v")},
	{[]error{backend.ErrObjectLockNotSupported}, saying(s3err.CodeNotImplemented, "%v (docs/s3-compatibility.md, Object Lock).")},
	{[]error{backend.ErrNotLocal}, saying(s3err.CodeNotLocal, "%v: read it over HTTP.")},
	{[]error{backend.ErrInvalidArgument}, saying(s3err.CodeInvalidArgument, "%v")},
	{[]error{store.ErrNotFound}, always(errNoSuchKey)},
	{[]error{store.ErrPreconditionFailed}, always(errPrecondition)},
	{[]error{store.ErrInvalidPart}, always(errInvalidPart)},
	{[]error{store.ErrInvalidKey}, saying(s3err.CodeInvalidArgument, "The object key is not valid: %v")},
	{[]error{store.ErrReadOnly}, always(s3err.New(s3err.CodeAccessDenied, "The bucket's store is read-only (read_only: true in the policy file); nothing was changed."))},
	{[]error{store.ErrAccessDenied}, always(s3err.New(s3err.CodeAccessDenied, "The backing store denied access."))},
	{[]error{store.ErrMetadataNotSupported}, saying(s3err.CodeNotImplemented, "The bucket's store cannot keep this metadata (%v); nothing was written. Send the object without it.")},
	{[]error{store.ErrThrottled}, always(errSlowDown)},
	{[]error{syscall.ENOSPC, syscall.EDQUOT}, deviceFull},
	{[]error{backend.ErrLengthRequired}, saying(s3err.CodeMissingContentLength, "You must provide the Content-Length HTTP header: %v")},
	{[]error{store.ErrNotSupported}, always(errNotImplemented("This operation on this store"))},
	{[]error{backend.ErrEgressBudget}, saying(s3err.CodeEgressBudgetExceeded, "%v")},
	{[]error{backend.ErrCatalogUnavailable}, saying(s3err.CodeServiceUnavailable, "%v")},
	{[]error{backend.ErrNotHomeRegion}, saying(s3err.CodeInvalidBucketState, "%v")},
	{[]error{backend.ErrStagingUnavailable}, saying(s3err.CodeSlowDown, "The write-back staging area could not take the write in time (%v); nothing was stored. Retry shortly: staging frees up as the region drains to its stores.")},
	{[]error{context.Canceled, context.DeadlineExceeded}, always(s3err.New(s3err.CodeRequestTimeout, ""))},
}

// deviceFull is the answer to a full disk or quota: a lasting condition,
// not a retry: 507. (500 "Please try again" made clients retry into a full
// disk.) The message names the condition only: err holds the server's
// paths, which the log keeps and the client is not told.
func deviceFull(err error) *s3err.Error {
	why := syscall.ENOSPC
	if !errors.Is(err, syscall.ENOSPC) {
		why = syscall.EDQUOT
	}
	return s3err.Newf(s3err.CodeInsufficientStorage, "A device the write needs is full; nothing was written (%v). Free space or add capacity; reads go on.", why)
}

// regionError is the one answer each error of the region's replicated
// state gets, on the S3 routes and the admin API alike; nil for any other
// error.
func regionError(err error) *s3err.Error {
	switch {
	case errors.Is(err, backend.ErrNoLeader):
		return s3err.New(s3err.CodeSlowDown, "The region has no Raft leader right now (a leader election is in progress, or this node is cut off from the majority of its region); the write was not applied. Retry shortly, or through another node.")
	case errors.Is(err, backend.ErrOutcomeUnknown):
		return s3err.New(s3err.CodeSlowDown, "The region's leader changed while the write was being applied, so it may or may not have taken effect. Check, or retry it.")
	case errors.Is(err, backend.ErrBehind):
		return s3err.New(s3err.CodeSlowDown, "This node has not caught up with the region's log in time (a slow or full disk, or it is catching up after a restart); nothing was changed. Retry shortly, or through another node.")
	case errors.Is(err, backend.ErrClosed):
		return errServiceUnavail
	}
	return nil
}

type errorResponse struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	HostID    string   `xml:"HostId"`
}

// WriteError renders err as the S3 XML error document (status and code from
// the error table; see toS3), for handlers outside the Server that answer
// on the S3 port.
func WriteError(w http.ResponseWriter, r *http.Request, err error) { writeError(w, r, err) }

// writeError renders err as S3 XML (no body for HEAD) and records it for the
// access log.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	se := toS3(err)
	ri := infoFrom(r.Context())
	if ri != nil {
		ri.errCode = se.Code
		if se.Status >= 500 {
			ri.cause = err
		}
	}
	reqID := w.Header().Get("x-amz-request-id")
	h := w.Header()
	// A handler may have set the object's headers before it failed: keep
	// only what describes the request, never the object (its length above
	// all, which would make the error body unreadable).
	for k := range h {
		switch k {
		case "X-Amz-Request-Id", "X-Amz-Id-2", "Server", "Date", "Retry-After":
		case "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
			"Access-Control-Expose-Headers", "Access-Control-Max-Age", "Vary": // CORS (cors.go)
		case "X-Amz-Delete-Marker", "X-Amz-Version-Id", "Allow": // a delete marker's answer (versioning.go)
		case "Content-Range":
			if se.Status != http.StatusRequestedRangeNotSatisfiable {
				delete(h, k)
			}
		default:
			delete(h, k)
		}
	}
	h.Set("Content-Type", "application/xml")
	if se.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	if r.Method == http.MethodHead {
		if drain := settleBody(w, r, se.Status); drain != nil {
			defer drain()
		}
		w.WriteHeader(se.Status)
		return
	}
	body := errorResponse{Code: se.Code, Message: se.Message, Resource: r.URL.Path, RequestID: reqID, HostID: reqID}
	if drain := settleBody(w, r, se.Status); drain != nil {
		defer drain()
	}
	// A known length: the answer is complete when written, even while the
	// handler still drains the request's body (settleBody).
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	_ = xml.NewEncoder(&buf).Encode(body)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(se.Status)
	_, _ = w.Write(buf.Bytes())
}
