package sigv4

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// postFormFor is a form signed as AWS documents it: the string to sign is
// the base64 policy, the key the scope's signing key.
func postFormFor(secret, region string) PostForm {
	date := testTime.Format(timeFormat)
	policy := base64.StdEncoding.EncodeToString([]byte(`{"expiration":"2024-05-02T00:00:00Z","conditions":[{"bucket":"b"}]}`))
	return PostForm{
		Algorithm:  Algorithm,
		Credential: testAK + "/" + date[:8] + "/" + region + "/s3/aws4_request",
		Date:       date,
		Policy:     policy,
		Signature:  hex.EncodeToString(testHMAC(testSigningKey(secret, date[:8], region), policy)),
	}
}

func TestVerifyPost(t *testing.T) {
	v := newVerifier(testTime)
	ak, err := v.VerifyPost(postFormFor(testSecret, testRegion))
	if err != nil || ak != testAK {
		t.Fatalf("VerifyPost = %q, %v", ak, err)
	}
	if _, err := v.VerifyPost(postFormFor(testSecret, LegacyUSRegion)); err != nil {
		t.Errorf("scope region US: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*PostForm)
		code   string
	}{
		{"wrong secret", func(f *PostForm) { *f = postFormFor("other", testRegion) }, s3err.CodeSignatureDoesNotMatch},
		{"policy changed", func(f *PostForm) { f.Policy += "=" }, s3err.CodeSignatureDoesNotMatch},
		{"short signature", func(f *PostForm) { f.Signature = f.Signature[:10] }, s3err.CodeSignatureDoesNotMatch},
		{"not hex", func(f *PostForm) { f.Signature = "zz" + f.Signature[2:] }, s3err.CodeSignatureDoesNotMatch},
		{"unknown key", func(f *PostForm) { f.Credential = "NOSUCH" + f.Credential[len(testAK):] }, s3err.CodeInvalidAccessKeyID},
		{"SigV4A", func(f *PostForm) { f.Algorithm = "AWS4-ECDSA-P256-SHA256" }, s3err.CodeInvalidArgument},
		{"other region", func(f *PostForm) { *f = postFormFor(testSecret, "eu-west-1") }, s3err.CodeInvalidArgument},
		{"malformed credential", func(f *PostForm) { f.Credential = testAK + "/20240501/us-east-1" }, s3err.CodeInvalidArgument},
		{"malformed date", func(f *PostForm) { f.Date = "2024-05-01" }, s3err.CodeInvalidArgument},
		{"date of another day", func(f *PostForm) { f.Date = "20240502T000000Z" }, s3err.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := postFormFor(testSecret, testRegion)
			tc.change(&f)
			_, err := v.VerifyPost(f)
			wantCode(t, err, tc.code)
		})
	}
}
