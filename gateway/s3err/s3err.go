// Package s3err is the one table of the S3 errors fedgate answers: every
// code with its HTTP status and its default message. Handlers and the
// packages below them (sigv4, checksum) return an *Error built from a code
// of this table, never a status or a code string of their own; the
// gateway's error renderer turns an *Error into the S3 XML error document.
package s3err

import (
	"errors"
	"fmt"
	"net/http"
)

// S3 error codes fedgate answers. Every one has a row in table (a test
// checks it); add the code and its row together.
const (
	CodeAccessDenied                            = "AccessDenied"
	CodeAuthorizationHeaderMalformed            = "AuthorizationHeaderMalformed"
	CodeAuthorizationQueryParametersError       = "AuthorizationQueryParametersError"
	CodeBadRequest                              = "BadRequest" // too many tags; a CORS preflight without Origin or Access-Control-Request-Method
	CodeBadDigest                               = "BadDigest"
	CodeBucketAlreadyExists                     = "BucketAlreadyExists"
	CodeBucketAlreadyOwnedByYou                 = "BucketAlreadyOwnedByYou"
	CodeBucketNotEmpty                          = "BucketNotEmpty"
	CodeBatchTooLarge                           = "BatchTooLarge"        // fedgate's own: a batch GET over --batch-max-entries or --batch-max-bytes
	CodeEgressBudgetExceeded                    = "EgressBudgetExceeded" // fedgate's own: a policy budget refused the read
	CodeNotLocal                                = "NotLocal"             // fedgate's own: a short-circuit read of bytes this node cannot hand over as files
	CodeInsufficientStorage                     = "InsufficientStorage"  // fedgate's own (MinIO: XMinioStorageFull): a device is full
	CodeEntityTooLarge                          = "EntityTooLarge"
	CodeEntityTooSmall                          = "EntityTooSmall"
	CodeIncompleteBody                          = "IncompleteBody"
	CodeInternalError                           = "InternalError"
	CodeInvalidAccessKeyID                      = "InvalidAccessKeyId"
	CodeInvalidArgument                         = "InvalidArgument"
	CodeInvalidBucketName                       = "InvalidBucketName"
	CodeInvalidBucketState                      = "InvalidBucketState"
	CodeInvalidChunkSizeError                   = "InvalidChunkSizeError"
	CodeInvalidDigest                           = "InvalidDigest"
	CodeInvalidLocationConstraint               = "InvalidLocationConstraint"
	CodeInvalidPart                             = "InvalidPart"
	CodeInvalidURI                              = "InvalidURI"
	CodeInvalidPartNumber                       = "InvalidPartNumber"
	CodeInvalidPartOrder                        = "InvalidPartOrder"
	CodeInvalidRange                            = "InvalidRange"
	CodeInvalidRequest                          = "InvalidRequest"
	CodeKeyTooLongError                         = "KeyTooLongError"
	CodeMalformedTrailerError                   = "MalformedTrailerError"
	CodeMalformedXML                            = "MalformedXML"
	CodeMaxPostPreDataLengthExceeded            = "MaxPostPreDataLengthExceeded"
	CodeMetadataTooLarge                        = "MetadataTooLarge"
	CodeMethodNotAllowed                        = "MethodNotAllowed"
	CodeMissingContentLength                    = "MissingContentLength"
	CodeMissingSecurityHeader                   = "MissingSecurityHeader"
	CodeNoSuchBucket                            = "NoSuchBucket"
	CodeNoSuchKey                               = "NoSuchKey"
	CodeNoSuchResource                          = "NoSuchResource" // fedgate's own: an unknown /_fedgate/ path
	CodeNoSuchUpload                            = "NoSuchUpload"
	CodeNotImplemented                          = "NotImplemented"
	CodePreconditionFailed                      = "PreconditionFailed"
	CodeRequestHeaderSectionTooLarge            = "RequestHeaderSectionTooLarge"
	CodeRequestTimeTooSkewed                    = "RequestTimeTooSkewed"
	CodeRequestTimeout                          = "RequestTimeout"
	CodeServiceUnavailable                      = "ServiceUnavailable"
	CodeSignatureDoesNotMatch                   = "SignatureDoesNotMatch"
	CodeSlowDown                                = "SlowDown"
	CodeXAmzContentSHA256Mismatch               = "XAmzContentSHA256Mismatch"
	CodeIllegalVersioningConfigurationException = "IllegalVersioningConfigurationException"
	CodeNoSuchVersion                           = "NoSuchVersion"
	CodeNoSuchLifecycleConfiguration            = "NoSuchLifecycleConfiguration"
	CodeOperationAborted                        = "OperationAborted"
	CodeUnexpectedContent                       = "UnexpectedContent"
	CodeInvalidPolicyDocument                   = "InvalidPolicyDocument"
	CodeMalformedPOSTRequest                    = "MalformedPOSTRequest"
	CodeCORSForbidden                           = "AccessForbidden"
	CodeNoSuchCORSConfiguration                 = "NoSuchCORSConfiguration"
	CodeInvalidTag                              = "InvalidTag"
	CodeNoSuchTagSet                            = "NoSuchTagSet"
	CodeObjectLockConfigurationNotFoundError    = "ObjectLockConfigurationNotFoundError"
	CodeNoSuchObjectLockConfiguration           = "NoSuchObjectLockConfiguration"
	CodeUnresolvableGrantByEmailAddress         = "UnresolvableGrantByEmailAddress"
	CodeNoSuchPublicAccessBlockConfiguration    = "NoSuchPublicAccessBlockConfiguration"
	CodeNoSuchBucketPolicy                      = "NoSuchBucketPolicy"
	CodeMalformedPolicy                         = "MalformedPolicy"
	CodeMalformedACLError                       = "MalformedACLError"
)

// row is one code's HTTP status and default message.
type row struct {
	status  int
	message string
}

// table holds every code fedgate answers with the status S3 sends with it
// and the message S3 uses when nothing more specific is said.
var table = map[string]row{
	CodeAccessDenied:                            {http.StatusForbidden, "Access Denied"},
	CodeAuthorizationHeaderMalformed:            {http.StatusBadRequest, "The authorization header is malformed."},
	CodeAuthorizationQueryParametersError:       {http.StatusBadRequest, "Error parsing the X-Amz-Credential parameter."},
	CodeBadRequest:                              {http.StatusBadRequest, "Bad Request"},
	CodeBadDigest:                               {http.StatusBadRequest, "The Content-MD5 you specified did not match what we received."},
	CodeBucketAlreadyExists:                     {http.StatusConflict, "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again."},
	CodeBucketAlreadyOwnedByYou:                 {http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."},
	CodeBucketNotEmpty:                          {http.StatusConflict, "The bucket you tried to delete is not empty"},
	CodeBatchTooLarge:                           {http.StatusBadRequest, "The batch is larger than this server takes; split it."},
	CodeEgressBudgetExceeded:                    {http.StatusForbidden, "The bucket's egress budget does not allow this read."},
	CodeNotLocal:                                {http.StatusConflict, "The object cannot be read from this node's files; read it over HTTP."},
	CodeInsufficientStorage:                     {http.StatusInsufficientStorage, "A device the write needs is full; nothing was written. Free space or add capacity."},
	CodeEntityTooLarge:                          {http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."},
	CodeEntityTooSmall:                          {http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size."},
	CodeIncompleteBody:                          {http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."},
	CodeInternalError:                           {http.StatusInternalServerError, "We encountered an internal error. Please try again."},
	CodeInvalidAccessKeyID:                      {http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records."},
	CodeInvalidArgument:                         {http.StatusBadRequest, "Invalid Argument"},
	CodeInvalidBucketName:                       {http.StatusBadRequest, "The specified bucket is not valid."},
	CodeInvalidBucketState:                      {http.StatusConflict, "The request is not valid with the current state of the bucket."},
	CodeInvalidChunkSizeError:                   {http.StatusBadRequest, "Only the last chunk is allowed to have a size less than 8192 bytes."},
	CodeInvalidDigest:                           {http.StatusBadRequest, "The Content-MD5 you specified was invalid."},
	CodeInvalidLocationConstraint:               {http.StatusBadRequest, "The specified location-constraint is not valid."},
	CodeInvalidURI:                              {http.StatusBadRequest, "Couldn't parse the specified URI."},
	CodeInvalidPart:                             {http.StatusBadRequest, "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."},
	CodeInvalidPartNumber:                       {http.StatusRequestedRangeNotSatisfiable, "The requested partnumber is not satisfiable."},
	CodeInvalidPartOrder:                        {http.StatusBadRequest, "The list of parts was not in ascending order. Parts must be ordered by part number."},
	CodeInvalidRange:                            {http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable"},
	CodeInvalidRequest:                          {http.StatusBadRequest, "Invalid Request"},
	CodeKeyTooLongError:                         {http.StatusBadRequest, "Your key is too long"},
	CodeMalformedTrailerError:                   {http.StatusBadRequest, "The request contained trailing data that was not well-formed or did not conform to our published schema."},
	CodeMalformedXML:                            {http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema"},
	CodeMaxPostPreDataLengthExceeded:            {http.StatusBadRequest, "Your POST request fields preceding the upload file were too large."},
	CodeMetadataTooLarge:                        {http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size."},
	CodeMethodNotAllowed:                        {http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."},
	CodeMissingContentLength:                    {http.StatusLengthRequired, "You must provide the Content-Length HTTP header."},
	CodeMissingSecurityHeader:                   {http.StatusBadRequest, "Your request is missing a required header."},
	CodeNoSuchBucket:                            {http.StatusNotFound, "The specified bucket does not exist"},
	CodeNoSuchKey:                               {http.StatusNotFound, "The specified key does not exist."},
	CodeNoSuchResource:                          {http.StatusNotFound, "The specified resource does not exist."},
	CodeNoSuchUpload:                            {http.StatusNotFound, "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."},
	CodeNotImplemented:                          {http.StatusNotImplemented, "A header you provided implies functionality that is not implemented."},
	CodePreconditionFailed:                      {http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold"},
	CodeRequestHeaderSectionTooLarge:            {http.StatusBadRequest, "Your request header section exceeds the maximum allowed size."},
	CodeRequestTimeTooSkewed:                    {http.StatusForbidden, "The difference between the request time and the server's time is too large."},
	CodeRequestTimeout:                          {http.StatusBadRequest, "Your socket connection to the server was not read from or written to within the timeout period."},
	CodeServiceUnavailable:                      {http.StatusServiceUnavailable, "Please reduce your request rate."},
	CodeSignatureDoesNotMatch:                   {http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method."},
	CodeSlowDown:                                {http.StatusServiceUnavailable, "Please reduce your request rate."},
	CodeXAmzContentSHA256Mismatch:               {http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."},
	CodeIllegalVersioningConfigurationException: {http.StatusBadRequest, "The versioning configuration specified in the request is invalid."},
	CodeNoSuchVersion:                           {http.StatusNotFound, "The specified version does not exist."},
	CodeNoSuchLifecycleConfiguration:            {http.StatusNotFound, "The lifecycle configuration does not exist."},
	CodeOperationAborted:                        {http.StatusConflict, "A conflicting conditional operation is currently in progress against this resource. Try again."},
	CodeUnexpectedContent:                       {http.StatusBadRequest, "This request does not support content."},
	CodeInvalidPolicyDocument:                   {http.StatusBadRequest, "The content of the form does not meet the conditions specified in the policy document."},
	CodeMalformedPOSTRequest:                    {http.StatusBadRequest, "The body of your POST request is not well-formed multipart/form-data."},
	CodeCORSForbidden:                           {http.StatusForbidden, "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."},
	CodeNoSuchCORSConfiguration:                 {http.StatusNotFound, "The CORS configuration does not exist"},
	CodeInvalidTag:                              {http.StatusBadRequest, "The tag provided was not a valid tag."},
	CodeNoSuchTagSet:                            {http.StatusNotFound, "The TagSet does not exist"},
	CodeObjectLockConfigurationNotFoundError:    {http.StatusNotFound, "Object Lock configuration does not exist for this bucket"},
	CodeNoSuchObjectLockConfiguration:           {http.StatusNotFound, "The specified object does not have a ObjectLock configuration"},
	CodeUnresolvableGrantByEmailAddress:         {http.StatusBadRequest, "The email address you provided does not match any account on record."},
	CodeNoSuchPublicAccessBlockConfiguration:    {http.StatusNotFound, "The public access block configuration was not found"},
	CodeNoSuchBucketPolicy:                      {http.StatusNotFound, "The bucket policy does not exist"},
	CodeMalformedPolicy:                         {http.StatusBadRequest, "Policies must be valid JSON and the first byte must be '{'"},
	CodeMalformedACLError:                       {http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."},
}

// Error is an S3 error: a code from the table, a human-readable message
// and the HTTP status that goes with the code.
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
// can write errors.Is(err, s3err.New(s3err.CodeBadDigest, "")).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// StatusFor returns the HTTP status S3 uses for code. A code missing from
// the table is a programming error; it answers 500 so it is noticed.
func StatusFor(code string) int {
	if r, ok := table[code]; ok {
		return r.status
	}
	return http.StatusInternalServerError
}

// New returns an *Error with the given code and message (the table's
// default message when message is "") and the status the table gives it.
func New(code, message string) *Error {
	if message == "" {
		message = table[code].message
	}
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
