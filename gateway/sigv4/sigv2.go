package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// SigV2 (HMAC-SHA1) is accepted in the two places where common clients
// still produce it at their defaults: presigned URLs and presigned POST
// forms (boto3/botocore sign both with SigV2 for an S3 endpoint in
// us-east-1 unless told signature_version="s3v4"). A SigV2 Authorization
// header is still refused: every SDK signs requests with SigV4.

// v2Subresources are the query parameters that are part of a SigV2
// canonical resource (botocore's list, which follows S3's).
var v2Subresources = []string{
	"accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory", "legal-hold",
	"lifecycle", "location", "logging", "metrics", "notification", "object-lock", "partNumber", "policy",
	"publicAccessBlock", "replication", "requestPayment", "response-cache-control",
	"response-content-disposition", "response-content-encoding", "response-content-language",
	"response-content-type", "response-expires", "restore", "retention", "select", "select-type",
	"storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning", "versions",
	"website",
}

// signV2 is the base64 HMAC-SHA1 of s with secret.
func signV2(secret, s string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func equalV2(got, want string) bool {
	return hmac.Equal([]byte(got), []byte(want))
}

// VerifyPostV2 checks a SigV2 POST form: signature is the base64
// HMAC-SHA1 of the base64 policy with the secret of accessKey. It returns
// the access key.
func (v *Verifier) VerifyPostV2(accessKey, policy, signature string) (string, error) {
	secret, ok := v.Lookup(accessKey)
	if !ok {
		return "", s3err.New(s3err.CodeInvalidAccessKeyID, "")
	}
	if !equalV2(signature, signV2(secret, policy)) {
		return "", errSignature
	}
	return accessKey, nil
}

// verifyPresignV2 checks a SigV2 presigned URL (AWSAccessKeyId, Expires,
// Signature). The path in its canonical resource is the one the client
// sent; with a virtual-hosted bucket, VirtualHost names it.
func (v *Verifier) verifyPresignV2(r *http.Request) (Result, error) {
	q := r.URL.Query()
	ak, sig, exp := q.Get("AWSAccessKeyId"), q.Get("Signature"), q.Get("Expires")
	if ak == "" || sig == "" || exp == "" {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Invalid date (should be seconds since epoch): "+exp)
	}
	now := v.now()
	expires := time.Unix(secs, 0)
	if now.After(expires) {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Request has expired")
	}
	if expires.Sub(now) > v.maxPresignExpiry() {
		return Result{}, s3err.New(s3err.CodeAccessDenied, "Expires must be less than "+strconv.FormatInt(int64(v.maxPresignExpiry()/time.Second), 10)+" seconds in the future")
	}
	secret, ok := v.Lookup(ak)
	if !ok {
		return Result{}, s3err.New(s3err.CodeInvalidAccessKeyID, "")
	}
	if !equalV2(sig, signV2(secret, v.stringToSignV2(r, exp))) {
		return Result{}, errSignature
	}
	var none [32]byte
	res, err := wrapBody(r, payloadUnsigned, nil, &none)
	if err != nil {
		return Result{}, err
	}
	res.AccessKey, res.Presigned = ak, true
	return res, nil
}

// stringToSignV2 is SigV2's string to sign with date (Expires) in place of
// the Date header.
func (v *Verifier) stringToSignV2(r *http.Request, date string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(r.Header.Get("Content-MD5") + "\n")
	b.WriteString(r.Header.Get("Content-Type") + "\n")
	b.WriteString(date + "\n")
	var amz []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			amz = append(amz, lk)
		}
	}
	slices.Sort(amz)
	for _, k := range amz {
		vals := r.Header.Values(k)
		for i := range vals {
			vals[i] = strings.TrimSpace(vals[i])
		}
		b.WriteString(k + ":" + strings.Join(vals, ",") + "\n")
	}
	path, _, _ := strings.Cut(r.RequestURI, "?")
	if path == "" || !strings.HasPrefix(path, "/") {
		path = r.URL.EscapedPath()
	}
	if v.VirtualHost != nil {
		if bucket, ok := v.VirtualHost(r.Host); ok {
			path = "/" + bucket + path
		}
	}
	b.WriteString(path)
	b.WriteString(v2SubresourceString(r.URL.Query()))
	return b.String()
}

func v2SubresourceString(q url.Values) string {
	var keys []string
	for _, k := range v2Subresources {
		if _, ok := q[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys) // by name, as botocore and S3 sort them
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k
		if v := q.Get(k); v != "" {
			parts[i] += "=" + v
		}
	}
	return "?" + strings.Join(parts, "&")
}
