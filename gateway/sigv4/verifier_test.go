package sigv4

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

var trickyKeys = []string{
	"plain.txt",
	"a b/c d.txt",
	"plus+sign=equals~tilde",
	"ünïcödé/€uro/日本語",
	"percent%20literal%2Fslash",
	"!*'()&$@:,;",
	"a//double/./dot/../x",
	"sp  ace  s",
	"#hash?question",
}

var trickyQueries = []string{
	"",
	"acl",
	"uploads=",
	"prefix=a%20b&delimiter=%2F&list-type=2",
	"partNumber=3&uploadId=x%2By%3Dz~",
	"marker=%E2%82%AC&max-keys=10&encoding-type=url",
	"b=2&a=1&a=0&A=3",
}

func TestVerifyHeaderTrickyRequests(t *testing.T) {
	v := newVerifier(testTime)
	for _, key := range trickyKeys {
		for _, q := range trickyQueries {
			body := []byte("hello " + key)
			r := newRequest(t, http.MethodPut, key, q, body)
			r.Header.Set("X-Amz-Meta-Note", "  spaced   out  value ")
			r.Header.Set("Content-Type", "text/plain")
			signHeader(t, r, hexSHA256(body), testTime)
			res, err := v.Verify(toServer(t, r))
			if err != nil {
				t.Fatalf("key %q query %q: %v", key, q, err)
			}
			if res.AccessKey != testAK || res.Anonymous || res.Presigned || res.DecodedLength != int64(len(body)) {
				t.Fatalf("key %q: result %+v", key, res)
			}
			got, err := readAll(t, res)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("key %q: body %q, %v", key, got, err)
			}
		}
	}
}

// Clients encode the same query in different ways; all must verify.
func TestVerifyEquivalentQueryEncodings(t *testing.T) {
	v := newVerifier(testTime)
	r := newRequest(t, http.MethodGet, "k", "prefix=a%20b&marker=%E2%82%AC&delimiter=%2F&z=1", nil)
	signHeader(t, r, UnsignedPayload, testTime)
	for _, raw := range []string{
		"z=1&delimiter=%2F&marker=%e2%82%ac&prefix=a+b",
		"delimiter=/&marker=%E2%82%AC&prefix=a%20b&z=1&",
		"prefix=a%20b&&marker=%E2%82%AC&delimiter=%2f&z=1",
	} {
		sr := toServer(t, r)
		sr.URL.RawQuery = raw
		if _, err := v.Verify(sr); err != nil {
			t.Errorf("query %q: %v", raw, err)
		}
	}
}

func TestVerifyAuthorizationHeaderVariants(t *testing.T) {
	v := newVerifier(testTime)
	r := signHeader(t, newRequest(t, http.MethodGet, "k", "", nil), UnsignedPayload, testTime)
	a := r.Header.Get("Authorization")
	rest := strings.TrimPrefix(a, Algorithm+" ")
	parts := strings.Split(rest, ", ")
	if len(parts) != 3 {
		t.Fatalf("unexpected header %q", a)
	}
	for _, h := range []string{
		Algorithm + " " + strings.Join(parts, ","),
		Algorithm + "   " + strings.Join(parts, " ,  "),
		Algorithm + " " + parts[2] + ", " + parts[0] + ", " + parts[1],
		Algorithm + "\t" + parts[1] + " " + parts[2] + " " + parts[0],
		" " + Algorithm + " " + strings.Join(parts, ", ") + " ",
	} {
		sr := toServer(t, r)
		sr.Header.Set("Authorization", h)
		if _, err := v.Verify(sr); err != nil {
			t.Errorf("header %q: %v", h, err)
		}
	}
}

func TestVerifyHeaderTamper(t *testing.T) {
	body := []byte("the body")
	mk := func() *http.Request {
		r := newRequest(t, http.MethodPut, "dir/a b+c", "tagging=&x=1", body)
		r.Header.Set("X-Amz-Meta-Color", "blue")
		r.Header.Set("Content-Type", "text/plain")
		return toServer(t, signHeader(t, r, hexSHA256(body), testTime))
	}
	cases := []struct {
		name   string
		mutate func(r *http.Request)
		code   string
	}{
		{"signed header value", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Color", "red") }, s3err.CodeSignatureDoesNotMatch},
		{"content-type", func(r *http.Request) { r.Header.Set("Content-Type", "text/html") }, s3err.CodeSignatureDoesNotMatch},
		{"host", func(r *http.Request) { r.Host = "evil.example.com" }, s3err.CodeSignatureDoesNotMatch},
		{"method", func(r *http.Request) { r.Method = http.MethodPost }, s3err.CodeSignatureDoesNotMatch},
		{"path", func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/bkt/dir/a b+d", "" }, s3err.CodeSignatureDoesNotMatch},
		{"query value", func(r *http.Request) { r.URL.RawQuery = "tagging=&x=2" }, s3err.CodeSignatureDoesNotMatch},
		{"query added", func(r *http.Request) { r.URL.RawQuery += "&versionId=1" }, s3err.CodeSignatureDoesNotMatch},
		{"signature", func(r *http.Request) {
			a := r.Header.Get("Authorization")
			last := a[len(a)-1]
			r.Header.Set("Authorization", a[:len(a)-1]+string("01"[(last&1)^1]))
		}, s3err.CodeSignatureDoesNotMatch},
		{"short signature", func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:len(a)-2])
		}, s3err.CodeSignatureDoesNotMatch},
		{"content sha256", func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", hexSHA256([]byte("x"))) }, s3err.CodeSignatureDoesNotMatch},
		{"unsigned amz header", func(r *http.Request) { r.Header.Set("X-Amz-Copy-Source", "other/secret") }, s3err.CodeAccessDenied},
		{"unknown key", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testAK, "AKIDOTHER", 1))
		}, s3err.CodeInvalidAccessKeyID},
		{"wrong region", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/us-east-1/", "/eu-west-1/", 1))
		}, s3err.CodeAuthorizationHeaderMalformed},
		{"wrong service", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/s3/", "/ec2/", 1))
		}, s3err.CodeAuthorizationHeaderMalformed},
		{"credential date", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20240501/", "/20240502/", 1))
		}, s3err.CodeAuthorizationHeaderMalformed},
		{"no date", func(r *http.Request) { r.Header.Del("X-Amz-Date") }, s3err.CodeAccessDenied},
		{"bad date", func(r *http.Request) { r.Header.Set("X-Amz-Date", "2024-05-01") }, s3err.CodeAccessDenied},
		{"no content sha256", func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }, s3err.CodeInvalidRequest},
		{"bad content sha256", func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "abc") }, s3err.CodeInvalidArgument},
		{"sigv2", func(r *http.Request) { r.Header.Set("Authorization", "AWS "+testAK+":c2lnbmF0dXJl") }, s3err.CodeInvalidRequest},
		{"sigv4a", func(r *http.Request) { r.Header.Set("Authorization", "AWS4-ECDSA-P256-SHA256 Credential=x") }, s3err.CodeInvalidRequest},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer abc") }, s3err.CodeInvalidArgument},
		{"two mechanisms", func(r *http.Request) { r.URL.RawQuery += "&X-Amz-Signature=00" }, s3err.CodeInvalidArgument},
		{"missing component", func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
		}, s3err.CodeAuthorizationHeaderMalformed},
		{"host unsigned", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "SignedHeaders=content-length;content-type;host;", "SignedHeaders=content-length;content-type;", 1))
		}, s3err.CodeAuthorizationHeaderMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mk()
			c.mutate(r)
			_, err := newVerifier(testTime).Verify(r)
			wantCode(t, err, c.code)
		})
	}
}

// s3cmd at its defaults signs with region "US" (its bucket_location):
// accepted for us-east-1, as MinIO does, and only there.
func TestVerifyLegacyUSRegion(t *testing.T) {
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		r := newRequest(t, http.MethodGet, "k", "", nil)
		r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		if err := s3Signer.SignHTTP(t.Context(), testCreds, r, UnsignedPayload, "s3", "US", testTime); err != nil {
			t.Fatal(err)
		}
		v := newVerifier(testTime)
		v.Region = region
		_, err := v.Verify(toServer(t, r))
		if region == "us-east-1" && err != nil {
			t.Errorf("region US against us-east-1: %v", err)
		}
		if region != "us-east-1" {
			wantCode(t, err, s3err.CodeAuthorizationHeaderMalformed)
		}
	}
}

func TestVerifyWrongRegionMessage(t *testing.T) {
	r := newRequest(t, http.MethodGet, "k", "", nil)
	r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
	if err := s3Signer.SignHTTP(t.Context(), testCreds, r, UnsignedPayload, "s3", "eu-west-1", testTime); err != nil {
		t.Fatal(err)
	}
	_, err := newVerifier(testTime).Verify(toServer(t, r))
	e := wantCode(t, err, s3err.CodeAuthorizationHeaderMalformed)
	if !strings.Contains(e.Message, "the region 'eu-west-1' is wrong; expecting 'us-east-1'") {
		t.Fatalf("message %q does not name the expected region", e.Message)
	}
}

func TestVerifyBodyTamper(t *testing.T) {
	body := []byte("signed payload")
	r := toServer(t, signHeader(t, newRequest(t, http.MethodPut, "k", "", body), hexSHA256(body), testTime))
	r.Body = io.NopCloser(strings.NewReader("signed paYload"))
	res, err := newVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, res)
	wantCode(t, err, s3err.CodeXAmzContentSHA256Mismatch)
	// The error is sticky.
	_, err = res.Body.Read(make([]byte, 1))
	wantCode(t, err, s3err.CodeXAmzContentSHA256Mismatch)
}

func TestVerifyUnsignedPayload(t *testing.T) {
	r := toServer(t, signHeader(t, newRequest(t, http.MethodPut, "k", "", []byte("abc")), UnsignedPayload, testTime))
	r.Body = io.NopCloser(strings.NewReader("xyz")) // not covered by the signature
	res, err := newVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, res); err != nil || string(got) != "xyz" {
		t.Fatalf("body %q, %v", got, err)
	}
}

func TestVerifySkew(t *testing.T) {
	r := signHeader(t, newRequest(t, http.MethodGet, "k", "", nil), UnsignedPayload, testTime)
	for _, c := range []struct {
		now  time.Time
		code string
	}{
		{testTime.Add(14 * time.Minute), ""},
		{testTime.Add(-14 * time.Minute), ""},
		{testTime.Add(16 * time.Minute), s3err.CodeRequestTimeTooSkewed},
		{testTime.Add(-16 * time.Minute), s3err.CodeRequestTimeTooSkewed},
	} {
		_, err := newVerifier(c.now).Verify(toServer(t, r))
		if c.code == "" {
			if err != nil {
				t.Errorf("now %v: %v", c.now, err)
			}
			continue
		}
		wantCode(t, err, c.code)
	}
	v := newVerifier(testTime.Add(2 * time.Minute))
	v.MaxSkew = time.Minute
	_, err := v.Verify(toServer(t, r))
	wantCode(t, err, s3err.CodeRequestTimeTooSkewed)
}

func TestVerifyAnonymous(t *testing.T) {
	r := toServer(t, newRequest(t, http.MethodPut, "k", "prefix=x", []byte("data")))
	res, err := newVerifier(testTime).Verify(r)
	if err != nil || !res.Anonymous || res.AccessKey != "" || res.DecodedLength != 4 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	r = toServer(t, newRequest(t, http.MethodGet, "k", "AWSAccessKeyId=AK&Signature=x&Expires=1", nil))
	_, err = newVerifier(testTime).Verify(r)
	wantCode(t, err, s3err.CodeAccessDenied) // a SigV2 presigned URL, expired
}

// TestVerifyPresignV2 checks AWS's documented SigV2 query-string example
// (the S3 developer guide, "Query string request authentication").
func TestVerifyPresignV2(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	v := &Verifier{Region: "us-east-1", Lookup: func(ak string) (string, bool) { return secret, ak == "AKIAIOSFODNN7EXAMPLE" },
		Now: func() time.Time { return time.Unix(1175139620-600, 0) }}
	target := "/johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D"
	r := httptest.NewRequest(http.MethodGet, target, nil)
	res, err := v.Verify(r)
	if err != nil || res.AccessKey != "AKIAIOSFODNN7EXAMPLE" || !res.Presigned {
		t.Fatalf("AWS's example: %+v, %v", res, err)
	}
	// The same URL for virtual-hosted style names the bucket in Host.
	v.VirtualHost = func(host string) (string, bool) {
		return "johnsmith", host == "johnsmith.s3.example.test"
	}
	r = httptest.NewRequest(http.MethodGet, strings.TrimPrefix(target, "/johnsmith"), nil)
	r.Host = "johnsmith.s3.example.test"
	if _, err := v.Verify(r); err != nil {
		t.Fatalf("virtual-hosted: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(target, "puppy", "kitty", 1),
		strings.Replace(target, "Expires=1175139620", "Expires=1175139621", 1),
	} {
		_, err := v.Verify(httptest.NewRequest(http.MethodGet, bad, nil))
		wantCode(t, err, s3err.CodeSignatureDoesNotMatch)
	}
	v.Now = func() time.Time { return time.Unix(1175139621, 0) }
	_, err = v.Verify(httptest.NewRequest(http.MethodGet, target, nil))
	wantCode(t, err, s3err.CodeAccessDenied)
	// SigV2 in the Authorization header stays refused.
	r = httptest.NewRequest(http.MethodGet, "/b/k", nil)
	r.Header.Set("Authorization", "AWS AKIAIOSFODNN7EXAMPLE:sig")
	_, err = v.Verify(r)
	wantCode(t, err, s3err.CodeInvalidRequest)
}

func TestVerifyAnonymousPayloads(t *testing.T) {
	// An anonymous unsigned-trailer upload is decoded, not passed through.
	data := payload(1000)
	r := toServer(t, streamingRequest(t, StreamingUnsignedPayloadTrailer, data, 256, crcTrailer))
	r.Header.Del("Authorization")
	res, err := newVerifier(testTime).Verify(r)
	if err != nil || !res.Anonymous || res.DecodedLength != 1000 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	if got, err := readAll(t, res); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("decoded %d bytes, %v", len(got), err)
	}

	r = toServer(t, streamingRequest(t, StreamingPayload, data, 256))
	r.Header.Del("Authorization")
	_, err = newVerifier(testTime).Verify(r)
	wantCode(t, err, s3err.CodeInvalidRequest)

	r = toServer(t, newRequest(t, http.MethodPut, "k", "", []byte("abc")))
	r.Header.Set("X-Amz-Content-Sha256", hexSHA256([]byte("abd")))
	res, err = newVerifier(testTime).Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, res)
	wantCode(t, err, s3err.CodeXAmzContentSHA256Mismatch)
}

func TestSigningKeyCache(t *testing.T) {
	v := newVerifier(testTime)
	for i := 0; i < maxCachedKeys+10; i++ {
		c := Credential{Date: "20240501", Region: "r", Service: "s3"}
		k := v.keys.get(strings.Repeat("x", i), &c)
		if want := testSigningKey(strings.Repeat("x", i), "20240501", "r"); !bytes.Equal(k[:], want) {
			t.Fatalf("key %d differs from independent derivation", i)
		}
	}
	if n := len(v.keys.m); n > maxCachedKeys {
		t.Fatalf("cache holds %d keys, bound %d", n, maxCachedKeys)
	}
}

func TestMacerMatchesHMAC(t *testing.T) {
	m := newMacer()
	var key [32]byte
	copy(key[:], testSigningKey(testSecret, "20240501", testRegion))
	for _, msg := range []string{"", "a", strings.Repeat("long message ", 100)} {
		got := m.mac(&key, []byte(msg))
		if !bytes.Equal(got[:], testHMAC(key[:], msg)) {
			t.Fatalf("mac(%q) differs from crypto/hmac", msg)
		}
	}
}

func BenchmarkVerifyHeader(b *testing.B) {
	r := newRequest(b, http.MethodGet, "photos/2024/a b.jpg", "versionId=3&x-id=GetObject", nil)
	r.Header.Set("User-Agent", "bench")
	r = toServer(b, signHeader(b, r, UnsignedPayload, testTime))
	v := newVerifier(testTime)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}
