package sigv4

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

func presigned(t *testing.T, key, rawQuery string, expires time.Duration) *http.Request {
	t.Helper()
	q := rawQuery
	if expires >= 0 {
		if q != "" {
			q += "&"
		}
		q += "X-Amz-Expires=" + strconv.FormatInt(int64(expires/time.Second), 10)
	}
	r := newRequest(t, http.MethodGet, key, q, nil)
	r.Header.Set("X-Amz-Meta-Note", "signed")
	return toServer(t, presign(t, r, testTime, testRegion))
}

func TestVerifyPresignTricky(t *testing.T) {
	v := newVerifier(testTime.Add(time.Minute))
	for _, key := range trickyKeys {
		for _, q := range trickyQueries {
			r := presigned(t, key, q, time.Hour)
			res, err := v.Verify(r)
			if err != nil {
				t.Fatalf("key %q query %q: %v (url %s)", key, q, err, r.URL)
			}
			if !res.Presigned || res.AccessKey != testAK {
				t.Fatalf("result %+v", res)
			}
		}
	}
}

func TestVerifyPresignExpiry(t *testing.T) {
	r := presigned(t, "k", "", time.Hour)
	for _, c := range []struct {
		now  time.Time
		code string
		msg  string
	}{
		{testTime, "", ""},
		{testTime.Add(time.Hour), "", ""},
		{testTime.Add(time.Hour + time.Second), s3err.CodeAccessDenied, "Request has expired"},
		{testTime.Add(-14 * time.Minute), "", ""},
		{testTime.Add(-16 * time.Minute), s3err.CodeAccessDenied, "Request is not valid yet"},
	} {
		_, err := newVerifier(c.now).Verify(r)
		if c.code == "" {
			if err != nil {
				t.Errorf("now %v: %v", c.now, err)
			}
			continue
		}
		if e := wantCode(t, err, c.code); e.Message != c.msg {
			t.Errorf("now %v: message %q, want %q", c.now, e.Message, c.msg)
		}
	}

	v := newVerifier(testTime)
	v.MaxPresignExpiry = 30 * time.Minute
	_, err := v.Verify(r)
	wantCode(t, err, s3err.CodeAuthorizationQueryParametersError)

	_, err = newVerifier(testTime).Verify(presigned(t, "k", "", 7*24*time.Hour))
	if err != nil {
		t.Fatalf("7 days: %v", err)
	}
	_, err = newVerifier(testTime).Verify(presigned(t, "k", "", 7*24*time.Hour+time.Second))
	wantCode(t, err, s3err.CodeAuthorizationQueryParametersError)
}

func TestVerifyPresignTamper(t *testing.T) {
	mk := func() *http.Request { return presigned(t, "dir/a b", "prefix=x&versionId=7", time.Hour) }
	setQ := func(r *http.Request, k, val string) {
		q := r.URL.Query()
		q.Set(k, val)
		r.URL.RawQuery = q.Encode()
	}
	cases := []struct {
		name   string
		mutate func(r *http.Request)
		code   string
	}{
		{"query value", func(r *http.Request) { setQ(r, "versionId", "8") }, s3err.CodeSignatureDoesNotMatch},
		{"query added", func(r *http.Request) { r.URL.RawQuery += "&acl" }, s3err.CodeSignatureDoesNotMatch},
		{"path", func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/bkt/dir/a c", "" }, s3err.CodeSignatureDoesNotMatch},
		{"signed header", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Note", "changed") }, s3err.CodeSignatureDoesNotMatch},
		{"unsigned amz header", func(r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") }, s3err.CodeAccessDenied},
		{"signature", func(r *http.Request) { setQ(r, "X-Amz-Signature", strings.Repeat("ab", 32)) }, s3err.CodeSignatureDoesNotMatch},
		{"expires", func(r *http.Request) { setQ(r, "X-Amz-Expires", "7200") }, s3err.CodeSignatureDoesNotMatch},
		{"expires garbage", func(r *http.Request) { setQ(r, "X-Amz-Expires", "1h") }, s3err.CodeAuthorizationQueryParametersError},
		{"expires negative", func(r *http.Request) { setQ(r, "X-Amz-Expires", "-1") }, s3err.CodeAuthorizationQueryParametersError},
		{"algorithm", func(r *http.Request) { setQ(r, "X-Amz-Algorithm", "AWS4-HMAC-SHA1") }, s3err.CodeAuthorizationQueryParametersError},
		{"missing date", func(r *http.Request) {
			q := r.URL.Query()
			q.Del("X-Amz-Date")
			r.URL.RawQuery = q.Encode()
		}, s3err.CodeAuthorizationQueryParametersError},
		{"unknown key", func(r *http.Request) {
			setQ(r, "X-Amz-Credential", strings.Replace(r.URL.Query().Get("X-Amz-Credential"), testAK, "NOPE", 1))
		}, s3err.CodeInvalidAccessKeyID},
		{"header too", func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 x") }, s3err.CodeInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mk()
			if _, err := newVerifier(testTime).Verify(r); err != nil {
				t.Fatalf("untampered: %v", err)
			}
			c.mutate(r)
			_, err := newVerifier(testTime).Verify(r)
			wantCode(t, err, c.code)
		})
	}
}

func TestVerifyPresignWrongRegion(t *testing.T) {
	r := newRequest(t, http.MethodGet, "k", "X-Amz-Expires=60", nil)
	_, err := newVerifier(testTime).Verify(toServer(t, presign(t, r, testTime, "ap-south-1")))
	e := wantCode(t, err, s3err.CodeAuthorizationQueryParametersError)
	if !strings.Contains(e.Message, "the region 'ap-south-1' is wrong; expecting 'us-east-1'") {
		t.Fatalf("message %q", e.Message)
	}
}
