package gateway

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/federation/store"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/raft"
)

// S3 errors the handlers return. Each is a fresh value per call site so the
// message can name what went wrong.
func errf(status int, code, format string, args ...any) *s3err.Error {
	return &s3err.Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	errAccessDenied      = &s3err.Error{Status: 403, Code: "AccessDenied", Message: "Access Denied"}
	errNoSuchBucket      = &s3err.Error{Status: 404, Code: "NoSuchBucket", Message: "The specified bucket does not exist"}
	errNoSuchKey         = &s3err.Error{Status: 404, Code: "NoSuchKey", Message: "The specified key does not exist."}
	errNoSuchUpload      = &s3err.Error{Status: 404, Code: "NoSuchUpload", Message: "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."}
	errBucketNotEmpty    = &s3err.Error{Status: 409, Code: "BucketNotEmpty", Message: "The bucket you tried to delete is not empty"}
	errPrecondition      = &s3err.Error{Status: 412, Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"}
	errInvalidPart       = &s3err.Error{Status: 400, Code: "InvalidPart", Message: "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."}
	errInvalidPartOrder  = &s3err.Error{Status: 400, Code: "InvalidPartOrder", Message: "The list of parts was not in ascending order. Parts must be ordered by part number."}
	errMalformedXML      = &s3err.Error{Status: 400, Code: "MalformedXML", Message: "The XML you provided was not well-formed or did not validate against our published schema"}
	errMissingLength     = &s3err.Error{Status: 411, Code: "MissingContentLength", Message: "You must provide the Content-Length HTTP header."}
	errIncompleteBody    = &s3err.Error{Status: 400, Code: "IncompleteBody", Message: "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	errEntityTooLarge    = &s3err.Error{Status: 400, Code: "EntityTooLarge", Message: "Your proposed upload exceeds the maximum allowed object size."}
	errInvalidRange      = &s3err.Error{Status: 416, Code: "InvalidRange", Message: "The requested range is not satisfiable"}
	errKeyTooLong        = &s3err.Error{Status: 400, Code: "KeyTooLongError", Message: "Your key is too long"}
	errMethodNotAllowed  = &s3err.Error{Status: 405, Code: "MethodNotAllowed", Message: "The specified method is not allowed against this resource."}
	errServiceUnavail    = &s3err.Error{Status: 503, Code: "ServiceUnavailable", Message: "The service is shutting down; retry on another node."}
	errSlowDown          = &s3err.Error{Status: 503, Code: "SlowDown", Message: "Please reduce your request rate."}
	errInternal          = &s3err.Error{Status: 500, Code: "InternalError", Message: "We encountered an internal error. Please try again."}
	errInvalidBucketName = &s3err.Error{Status: 400, Code: "InvalidBucketName", Message: "The specified bucket is not valid."}
)

func errNotImplemented(what string) *s3err.Error {
	return errf(501, "NotImplemented", "%s is not implemented by fedgate; see docs/s3-compatibility.md", what)
}

// toS3 maps any error a handler meets to the S3 error the client gets.
func toS3(err error) *s3err.Error {
	var se *s3err.Error
	if errors.As(err, &se) {
		return se
	}
	var exists *federation.BucketExistsError
	switch {
	case errors.As(err, &exists):
		if exists.OwnedByCaller {
			return errf(409, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
		}
		return errf(409, "BucketAlreadyExists", "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
	case errors.Is(err, federation.ErrNoSuchBucket):
		return errNoSuchBucket
	case errors.Is(err, federation.ErrBucketNotEmpty):
		return errBucketNotEmpty
	case errors.Is(err, federation.ErrNoSuchUpload), errors.Is(err, store.ErrNoSuchUpload):
		return errNoSuchUpload
	case errors.Is(err, federation.ErrPolicyBucket):
		return errf(409, "InvalidBucketState", "%v", err)
	case errors.Is(err, federation.ErrInvalidBucketName):
		return errf(400, "InvalidBucketName", "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return errNoSuchKey
	case errors.Is(err, store.ErrPreconditionFailed):
		return errPrecondition
	case errors.Is(err, store.ErrInvalidPart):
		return errInvalidPart
	case errors.Is(err, store.ErrInvalidKey):
		return errf(400, "InvalidArgument", "The object key is not valid: %v", err)
	case errors.Is(err, store.ErrAccessDenied):
		return errf(403, "AccessDenied", "The backing store denied access.")
	case errors.Is(err, store.ErrThrottled):
		return errSlowDown
	case errors.Is(err, store.ErrNotSupported):
		return errNotImplemented("This operation on this store")
	case errors.Is(err, federation.ErrEgressBudget):
		return errf(403, "EgressBudgetExceeded", "%v", err)
	case errors.Is(err, federation.ErrStagingUnavailable):
		return errf(503, "SlowDown", "The write-back staging area could not take the write in time (%v); nothing was stored. Retry shortly: staging frees up as the region drains to its stores.", err)
	case errors.Is(err, raft.ErrNoLeader):
		return errf(503, "SlowDown", "The region has no Raft leader right now (a leader election is in progress, or this node is cut off from the majority of its region); the write was not applied. Retry shortly, or through another node.")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errf(400, "RequestTimeout", "Your socket connection to the server was not read from or written to within the timeout period.")
	}
	return errInternal
}

type errorResponse struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	HostID    string   `xml:"HostId"`
}

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
		w.WriteHeader(se.Status)
		return
	}
	body := errorResponse{Code: se.Code, Message: se.Message, Resource: r.URL.Path, RequestID: reqID, HostID: reqID}
	if se.Status == http.StatusServiceUnavailable {
		discardBody(r)
	}
	w.WriteHeader(se.Status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(body)
}

// maxDiscard bounds how much of an unread request body a 503 answer reads
// and drops first.
const maxDiscard = 256 << 20

// discardBody reads what is left of a request body (up to maxDiscard)
// before a 503 answer: a client still sending its body (it stopped waiting
// for 100-continue) then reads SlowDown and retries, instead of meeting a
// connection reset. A larger body is cut off with the connection.
func discardBody(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, maxDiscard)
}
