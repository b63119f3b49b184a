package gateway

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"net/http"
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

// toS3 maps any error a handler meets to the S3 error the client gets.
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
	case errors.Is(err, backend.ErrNoSuchBucket):
		return errNoSuchBucket
	case errors.Is(err, backend.ErrBucketNotEmpty):
		return errBucketNotEmpty
	case errors.Is(err, backend.ErrNoSuchUpload), errors.Is(err, store.ErrNoSuchUpload):
		return errNoSuchUpload
	case errors.Is(err, backend.ErrPolicyBucket):
		return s3err.Newf(s3err.CodeInvalidBucketState, "%v", err)
	case errors.Is(err, backend.ErrInvalidBucketName):
		return s3err.Newf(s3err.CodeInvalidBucketName, "%v", err)
	case errors.Is(err, backend.ErrNoSuchVersion):
		return s3err.New(s3err.CodeNoSuchVersion, "The specified version does not exist.")
	case errors.Is(err, backend.ErrVersioningAtOrigin):
		return s3err.Newf(s3err.CodeInvalidBucketState, "%v: turn versioning on or off in the origin bucket itself.", err)
	case errors.Is(err, backend.ErrLifecycleAtOrigin):
		return s3err.Newf(s3err.CodeInvalidRequest, "%v: set Expiration and NoncurrentVersionExpiration rules on the origin bucket itself; only AbortIncompleteMultipartUpload applies here (to uploads started through fedgate).", err)
	case errors.Is(err, backend.ErrVersioningNotSupported):
		return s3err.Newf(s3err.CodeNotImplemented, "%v (docs/versioning.md lists the bucket kinds that can be versioned).", err)
	case errors.Is(err, backend.ErrObjectLocked):
		return s3err.New(s3err.CodeAccessDenied, "Access Denied because object protected by object lock.")
	case errors.Is(err, backend.ErrInvalidBucketState):
		return s3err.Newf(s3err.CodeInvalidBucketState, "%v", err)
	case errors.Is(err, backend.ErrObjectLockNotSupported):
		return s3err.Newf(s3err.CodeNotImplemented, "%v (docs/s3-compatibility.md, Object Lock).", err)
	case errors.Is(err, backend.ErrNotLocal):
		return s3err.Newf(s3err.CodeNotLocal, "%v: read it over HTTP.", err)
	case errors.Is(err, backend.ErrInvalidArgument):
		return s3err.Newf(s3err.CodeInvalidArgument, "%v", err)
	case errors.Is(err, store.ErrNotFound):
		return errNoSuchKey
	case errors.Is(err, store.ErrPreconditionFailed):
		return errPrecondition
	case errors.Is(err, store.ErrInvalidPart):
		return errInvalidPart
	case errors.Is(err, store.ErrInvalidKey):
		return s3err.Newf(s3err.CodeInvalidArgument, "The object key is not valid: %v", err)
	case errors.Is(err, store.ErrReadOnly):
		return s3err.New(s3err.CodeAccessDenied, "The bucket's store is read-only (read_only: true in the policy file); nothing was changed.")
	case errors.Is(err, store.ErrAccessDenied):
		return s3err.New(s3err.CodeAccessDenied, "The backing store denied access.")
	case errors.Is(err, store.ErrMetadataNotSupported):
		return s3err.Newf(s3err.CodeNotImplemented, "The bucket's store cannot keep this metadata (%v); nothing was written. Send the object without it.", err)
	case errors.Is(err, store.ErrThrottled):
		return errSlowDown
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// A lasting condition, not a retry: 507. (500 "Please try again"
		// made clients retry into a full disk.) The message names the
		// condition only: err holds the server's paths, which the log
		// keeps and the client is not told.
		why := syscall.ENOSPC
		if !errors.Is(err, syscall.ENOSPC) {
			why = syscall.EDQUOT
		}
		return s3err.Newf(s3err.CodeInsufficientStorage, "A device the write needs is full; nothing was written (%v). Free space or add capacity; reads go on.", why)
	case errors.Is(err, backend.ErrLengthRequired):
		return s3err.Newf(s3err.CodeMissingContentLength, "You must provide the Content-Length HTTP header: %v", err)
	case errors.Is(err, store.ErrNotSupported):
		return errNotImplemented("This operation on this store")
	case errors.Is(err, backend.ErrEgressBudget):
		return s3err.Newf(s3err.CodeEgressBudgetExceeded, "%v", err)
	case errors.Is(err, backend.ErrCatalogUnavailable):
		return s3err.Newf(s3err.CodeServiceUnavailable, "%v", err)
	case errors.Is(err, backend.ErrNotHomeRegion):
		return s3err.Newf(s3err.CodeInvalidBucketState, "%v", err)
	case errors.Is(err, backend.ErrStagingUnavailable):
		return s3err.Newf(s3err.CodeSlowDown, "The write-back staging area could not take the write in time (%v); nothing was stored. Retry shortly: staging frees up as the region drains to its stores.", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return s3err.New(s3err.CodeRequestTimeout, "")
	}
	return errInternal
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
