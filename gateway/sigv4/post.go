package sigv4

import (
	"crypto/subtle"
	"encoding/hex"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// PostForm holds the SigV4 fields of a browser-form POST upload (S3's
// POST Object): the form carries its signature in fields, not headers.
type PostForm struct {
	Algorithm  string // x-amz-algorithm
	Credential string // x-amz-credential: AK/YYYYMMDD/region/s3/aws4_request
	Date       string // x-amz-date: YYYYMMDDTHHMMSSZ
	Policy     string // policy: the base64 policy document, as sent
	Signature  string // x-amz-signature: hex
}

// VerifyPost authenticates a POST form: its signature must be the hex
// HMAC-SHA256 of the base64 policy (the string to sign is the policy
// field itself) with the signing key of the credential's scope. It
// returns the access key. The policy's own expiration and conditions are
// the caller's to check. Errors are *Error values: InvalidArgument (a
// malformed field, a scope for another region or service), InvalidAccessKeyId,
// SignatureDoesNotMatch.
func (v *Verifier) VerifyPost(f PostForm) (string, error) {
	if f.Algorithm != Algorithm {
		return "", postErr("x-amz-algorithm must be " + Algorithm + ".")
	}
	cred, ok := parseCredential(f.Credential)
	if !ok {
		return "", postErr("x-amz-credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	if err := v.checkScope(&cred, func(d string) *s3err.Error { return postErr("x-amz-credential: " + d) }); err != nil {
		return "", err
	}
	t, err := time.Parse(timeFormat, f.Date)
	if err != nil {
		return "", postErr("x-amz-date must be an ISO 8601 basic date-time (YYYYMMDDTHHMMSSZ).")
	}
	if !sameDate(cred.Date, t) {
		return "", postErr("x-amz-credential: the credential's date is not the date of x-amz-date.")
	}
	secret, ok := v.Lookup(cred.AccessKey)
	if !ok {
		return "", s3err.New(s3err.CodeInvalidAccessKeyID, "")
	}
	key := v.keys.get(secret, &cred)
	m := newMacer()
	want := m.mac(&key, []byte(f.Policy))
	var got [32]byte
	if len(f.Signature) != 64 {
		return "", errSignature
	}
	if _, err := hex.Decode(got[:], []byte(f.Signature)); err != nil {
		return "", errSignature
	}
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return "", errSignature
	}
	return cred.AccessKey, nil
}

func postErr(detail string) *s3err.Error {
	return s3err.New(s3err.CodeInvalidArgument, "Invalid POST form: "+detail)
}
