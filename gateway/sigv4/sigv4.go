// Package sigv4 verifies AWS Signature Version 4 on S3 requests, server side:
// Authorization headers, presigned URLs, signed and unsigned payload hashes
// and aws-chunked (streaming) bodies with chunk and trailer signatures.
package sigv4

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// Error is the S3 error every failure is reported as.
type Error = s3err.Error

// Values of x-amz-content-sha256 other than a hex SHA-256.
const (
	UnsignedPayload                 = "UNSIGNED-PAYLOAD"
	StreamingPayload                = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingPayloadTrailer         = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// Lookup returns the secret key of accessKey; ok is false if there is none.
type Lookup func(accessKey string) (secret string, ok bool)

// Verifier authenticates S3 requests signed with SigV4. Only Lookup is
// required; zero values of the other fields select the documented defaults.
// A Verifier must not be copied after first use.
type Verifier struct {
	Region  string // the region credentials must be scoped to
	Service string // the service in the credential scope; default "s3"
	Lookup  Lookup
	Now     func() time.Time // default time.Now
	// MaxSkew is how far a request's time may be from Now; default 15m.
	MaxSkew time.Duration
	// MaxPresignExpiry caps X-Amz-Expires; default and upper bound 7 days.
	MaxPresignExpiry time.Duration
	// VirtualHost, when set, names the bucket of a virtual-hosted-style
	// Host header: a SigV2 presigned URL's canonical resource starts with it.
	VirtualHost func(host string) (bucket string, ok bool)

	keys keyCache
}

// Result is the outcome of a successful Verify.
type Result struct {
	AccessKey string
	Anonymous bool // no authentication was supplied at all
	Presigned bool
	// PayloadSigned reports that the signature covers the body: a hex
	// x-amz-content-sha256 that was signed (as a header, or for a presigned
	// URL as a signed header or query parameter) and that Body checks, or a
	// signed aws-chunked body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER])
	// whose chunks Body checks. It is false for UNSIGNED-PAYLOAD (a presigned
	// URL's default), STREAMING-UNSIGNED-PAYLOAD-TRAILER, SigV2 and anonymous
	// requests: whoever holds such a request may send it with another body.
	PayloadSigned bool
	// Body is the request body to read instead of r.Body: it checks the
	// payload hash or decodes aws-chunked content while streaming and
	// returns an *Error instead of io.EOF when the payload fails a check.
	// Data is passed on before the check completes, so nothing read may be
	// committed unless Body ends with io.EOF. For aws-chunked bodies the
	// caller should also drop "aws-chunked" from Content-Encoding before
	// storing it. Closing Body closes r.Body.
	Body io.ReadCloser
	// DecodedLength is the length of Body's content; -1 if unknown.
	DecodedLength int64
	// Trailer returns the trailing headers of an aws-chunked body with a
	// trailer, valid once Body returned io.EOF; nil for other bodies.
	Trailer func() http.Header
}

func (v *Verifier) service() string {
	if v.Service == "" {
		return "s3"
	}
	return v.Service
}

func (v *Verifier) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew <= 0 {
		return 15 * time.Minute
	}
	return v.MaxSkew
}

func (v *Verifier) maxPresignExpiry() time.Duration {
	if v.MaxPresignExpiry <= 0 || v.MaxPresignExpiry > MaxPresignExpiry {
		return MaxPresignExpiry
	}
	return v.MaxPresignExpiry
}

// Verify authenticates r. It returns the access key and r's body wrapped as
// needed; a request with no authentication at all gives Anonymous. Errors
// are *Error values with these codes:
//
//   - AuthorizationHeaderMalformed / AuthorizationQueryParametersError: a
//     malformed header or presign parameters, or a scope for another
//     region or service;
//   - InvalidRequest: a SigV2 header or SigV4A, or no x-amz-content-sha256;
//   - InvalidArgument: two auth mechanisms, or a bad x-amz-content-sha256;
//   - InvalidAccessKeyId: Lookup does not know the access key;
//   - RequestTimeTooSkewed: the request time is more than MaxSkew from Now;
//   - AccessDenied: no usable date, an expired or not yet valid presigned
//     URL, or an x-amz-* header that is not signed;
//   - MissingSecurityHeader: a streaming payload without
//     x-amz-decoded-content-length;
//   - SignatureDoesNotMatch: the signature is wrong.
func (v *Verifier) Verify(r *http.Request) (Result, error) {
	auth := r.Header.Get("Authorization")
	presign, v2presign := presignKind(r.URL.RawQuery)
	switch {
	case auth != "" && (presign || v2presign):
		return Result{}, s3err.New(s3err.CodeInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	case auth != "":
		return v.verifyHeader(r, auth)
	case presign:
		return v.verifyPresign(r)
	case v2presign:
		return v.verifyPresignV2(r)
	}
	return anonymous(r)
}

// anonymous handles a request without authentication. Its body is still
// checked against x-amz-content-sha256 and unsigned aws-chunked bodies are
// decoded, so that the caller never stores chunk framing as data.
func anonymous(r *http.Request) (Result, error) {
	kind := payloadUnsigned
	var want [32]byte
	if p := r.Header.Get("X-Amz-Content-Sha256"); p != "" {
		var err error
		if kind, err = payloadKind(p, &want); err != nil {
			return Result{}, err
		}
	}
	res, err := wrapBody(r, kind, nil, &want)
	if err != nil {
		return Result{}, err
	}
	res.Anonymous = true
	return res, nil
}

// presignKind reports whether the raw query carries SigV4 or SigV2
// presign parameters.
func presignKind(raw string) (v4, v2 bool) {
	if !strings.Contains(raw, "X-Amz-") && !strings.Contains(raw, "AWSAccessKeyId") {
		return false, false
	}
	for seg := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(seg, "=")
		switch k {
		case queryAlgorithm, queryCredential, querySignature:
			v4 = true
		case "AWSAccessKeyId":
			v2 = true
		}
	}
	return v4, v2
}

func body(r *http.Request) io.ReadCloser {
	if r.Body == nil {
		return http.NoBody
	}
	return r.Body
}

// LegacyUSRegion is the name the oldest S3 API gave us-east-1 (its
// LocationConstraint "US"). s3cmd signs with it at its default settings
// (bucket_location = US); MinIO accepts it for us-east-1, and so does a
// verifier whose region is us-east-1. The signature is computed with the
// scope's region as sent, so it must match "US".
const LegacyUSRegion = "US"

// checkScope validates a credential scope against the verifier's region
// and service. newErr builds the error of the caller's auth mechanism.
func (v *Verifier) checkScope(c *Credential, newErr func(string) *s3err.Error) error {
	switch {
	case c.Region != v.Region && !(v.Region == "us-east-1" && c.Region == LegacyUSRegion):
		return newErr("the region '" + c.Region + "' is wrong; expecting '" + v.Region + "'")
	case c.Service != v.service():
		return newErr("incorrect service '" + c.Service + "'. This endpoint belongs to '" + v.service() + "'.")
	case c.Terminal != Terminal:
		return newErr("incorrect terminal '" + c.Terminal + "'. This endpoint uses '" + Terminal + "'.")
	}
	return nil
}

func (v *Verifier) verifyHeader(r *http.Request, auth string) (Result, error) {
	a, err := ParseAuthorization(auth)
	if err != nil {
		return Result{}, err
	}
	if err := v.checkScope(&a.Credential, malformedHeader); err != nil {
		return Result{}, err
	}
	if !containsHost(a.SignedHeaders) {
		return Result{}, malformedHeader("SignedHeaders must include host.")
	}
	t, err := requestTime(r)
	if err != nil {
		return Result{}, err
	}
	if !sameDate(a.Credential.Date, t) {
		return Result{}, malformedHeader("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	if d := v.now().Sub(t); d > v.maxSkew() || d < -v.maxSkew() {
		return Result{}, s3err.New(s3err.CodeRequestTimeTooSkewed, "The difference between the request time and the current time is too large.")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return Result{}, s3err.New(s3err.CodeInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	return v.finish(r, &request{
		r: r, cred: &a.Credential, t: t, signedHeaders: a.SignedHeaders, payload: payload,
	}, a.Signature)
}

func (v *Verifier) verifyPresign(r *http.Request) (Result, error) {
	q := r.URL.Query()
	p, err := ParsePresign(q)
	if err != nil {
		return Result{}, err
	}
	credErr := func(detail string) *s3err.Error {
		return queryParamsError("Error parsing the X-Amz-Credential parameter; " + detail)
	}
	if err := v.checkScope(&p.Credential, credErr); err != nil {
		return Result{}, err
	}
	if !containsHost(p.SignedHeaders) {
		return Result{}, queryParamsError("X-Amz-SignedHeaders must include host.")
	}
	if !sameDate(p.Credential.Date, p.Date) {
		return Result{}, queryParamsError("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	if max := v.maxPresignExpiry(); p.Expires > max {
		return Result{}, queryParamsError("X-Amz-Expires must be less than " + strconv.FormatInt(int64(max/time.Second), 10) + " seconds")
	}
	now := v.now()
	if p.Date.Sub(now) > v.maxSkew() {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Request is not valid yet")
	}
	if now.After(p.Date.Add(p.Expires)) {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Request has expired")
	}
	payload := UnsignedPayload
	if vs := q[queryContentSHA256]; len(vs) > 0 {
		payload = vs[0]
	} else if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" {
		payload = h
	}
	res, err := v.finish(r, &request{
		r: r, cred: &p.Credential, t: p.Date, signedHeaders: p.SignedHeaders, payload: payload, presign: true,
	}, p.Signature)
	res.Presigned = err == nil
	return res, err
}

// sameDate reports whether the credential date d is t's UTC date.
func sameDate(d string, t time.Time) bool {
	var buf [8]byte
	return string(t.UTC().AppendFormat(buf[:0], "20060102")) == d
}

func containsHost(names []string) bool {
	for _, n := range names {
		if n == "host" {
			return true
		}
	}
	return false
}

// requestTime returns the time from X-Amz-Date or, failing that, Date.
func requestTime(r *http.Request) (time.Time, error) {
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		if t, err := time.Parse(timeFormat, s); err == nil {
			return t, nil
		}
	} else if s := r.Header.Get("Date"); s != "" {
		if t, err := http.ParseTime(s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, s3err.New(s3err.CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
}

// finish runs the checks shared by both mechanisms: the payload hash value,
// unsigned x-amz-* headers, the secret, the signature; then it wraps the body.
func (v *Verifier) finish(r *http.Request, q *request, signature string) (Result, error) {
	var want [32]byte
	kind, err := payloadKind(q.payload, &want)
	if err != nil {
		return Result{}, err
	}
	if name := unsignedAmzHeader(r.Header, q.signedHeaders); name != "" {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "There were headers present in the request which were not signed: "+strings.ToLower(name))
	}
	secret, ok := v.Lookup(q.cred.AccessKey)
	if !ok {
		return Result{}, s3err.New(s3err.CodeInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
	}
	key := v.keys.get(secret, q.cred)
	s := scratchPool.Get().(*scratch)
	sig := s.signature(q, &key)
	scratchPool.Put(s)
	var got [32]byte
	if len(signature) != 64 {
		return Result{}, errSignature
	}
	if _, err := hex.Decode(got[:], []byte(signature)); err != nil {
		return Result{}, errSignature
	}
	if subtle.ConstantTimeCompare(got[:], sig[:]) != 1 {
		return Result{}, errSignature
	}
	var signing *ChunkSigning
	if kind == payloadStreaming || kind == payloadStreamingTrailer {
		var ts [len(timeFormat)]byte
		signing = &ChunkSigning{Key: key, Timestamp: string(q.t.UTC().AppendFormat(ts[:0], timeFormat)), Scope: q.cred.Scope, Seed: sig}
	}
	res, err := wrapBody(r, kind, signing, &want)
	if err != nil {
		return Result{}, err
	}
	res.AccessKey = q.cred.AccessKey
	res.PayloadSigned = kind == payloadHash || kind == payloadStreaming || kind == payloadStreamingTrailer
	return res, nil
}

var errSignature = s3err.New(s3err.CodeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")

type payloadType int

const (
	payloadHash payloadType = iota
	payloadUnsigned
	payloadStreaming
	payloadStreamingTrailer
	payloadUnsignedTrailer
)

// payloadKind classifies an x-amz-content-sha256 value; a hex hash is
// decoded into sum.
func payloadKind(p string, sum *[32]byte) (payloadType, error) {
	switch p {
	case UnsignedPayload:
		return payloadUnsigned, nil
	case StreamingPayload:
		return payloadStreaming, nil
	case StreamingPayloadTrailer:
		return payloadStreamingTrailer, nil
	case StreamingUnsignedPayloadTrailer:
		return payloadUnsignedTrailer, nil
	}
	if strings.HasPrefix(p, "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD") {
		return 0, s3err.New(s3err.CodeNotImplemented, "SigV4A streaming payloads are not supported.")
	}
	if len(p) == 64 {
		if _, err := hex.Decode(sum[:], []byte(p)); err == nil {
			return payloadHash, nil
		}
	}
	return 0, s3err.New(s3err.CodeInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
}

// unsignedAmzHeader returns the name of an x-amz-* header that is not among
// signed, or "".
func unsignedAmzHeader(h http.Header, signed []string) string {
next:
	for k := range h {
		if len(k) < 6 || !strings.EqualFold(k[:6], "x-amz-") {
			continue
		}
		for _, s := range signed {
			if strings.EqualFold(k, s) {
				continue next
			}
		}
		return k
	}
	return ""
}

// wrapBody wraps r's body for the payload kind. signing is nil for an
// anonymous request, which may not use signed streaming.
func wrapBody(r *http.Request, kind payloadType, signing *ChunkSigning, want *[32]byte) (Result, error) {
	res := Result{Body: body(r), DecodedLength: r.ContentLength}
	switch kind {
	case payloadUnsigned:
		return res, nil
	case payloadHash:
		res.Body = &hashBody{rc: res.Body, h: sha256.New(), want: *want}
		return res, nil
	}
	if signing == nil && kind != payloadUnsignedTrailer {
		return Result{}, s3err.New(s3err.CodeInvalidRequest, "A signed streaming payload requires an authenticated request.")
	}
	dl := r.Header.Get("X-Amz-Decoded-Content-Length")
	if dl == "" {
		return Result{}, s3err.New(s3err.CodeMissingSecurityHeader, "Your request is missing a required header: x-amz-decoded-content-length.")
	}
	n, err := strconv.ParseInt(dl, 10, 64)
	if err != nil || n < 0 {
		return Result{}, s3err.New(s3err.CodeInvalidArgument, "x-amz-decoded-content-length must be a non-negative integer.")
	}
	o := ChunkedOptions{DecodedLength: n, Trailer: kind != payloadStreaming}
	if kind != payloadUnsignedTrailer {
		o.Signing = signing
	}
	cr := NewChunkedReader(res.Body, o)
	res.Body = &chunkedBody{ChunkedReader: cr, c: res.Body}
	res.DecodedLength = n
	if o.Trailer {
		res.Trailer = cr.Trailer
	}
	return res, nil
}

type chunkedBody struct {
	*ChunkedReader
	c io.Closer
}

func (b *chunkedBody) Close() error { return b.c.Close() }

// hashBody checks the body against the signed x-amz-content-sha256.
type hashBody struct {
	rc   io.ReadCloser
	h    hash.Hash
	want [32]byte
	err  error
}

func (b *hashBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF {
		var got [32]byte
		if subtle.ConstantTimeCompare(b.h.Sum(got[:0]), b.want[:]) != 1 {
			err = s3err.New(s3err.CodeXAmzContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

func (b *hashBody) Close() error { return b.rc.Close() }
