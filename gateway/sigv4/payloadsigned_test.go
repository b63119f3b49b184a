package sigv4

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPayloadSigned: Result.PayloadSigned is true only when the signature
// covers the body (a signed hex hash, or signed aws-chunked), never for
// UNSIGNED-PAYLOAD, an unsigned trailer, a default presigned URL or an
// anonymous request.
func TestPayloadSigned(t *testing.T) {
	v := newVerifier(testTime)
	body := []byte(`{"entries":[]}`)
	presignWith := func(hash string, asQuery bool) *http.Request {
		r := newRequest(t, http.MethodPost, "k", "X-Amz-Expires=3600", body)
		if asQuery {
			r.URL.RawQuery += "&X-Amz-Content-Sha256=" + hash
		} else {
			r.Header.Set("X-Amz-Content-Sha256", hash)
		}
		u, hdr, err := s3Signer.PresignHTTP(context.Background(), testCreds, r, hash, "s3", testRegion, testTime)
		if err != nil {
			t.Fatal(err)
		}
		out, err := http.NewRequest(http.MethodPost, u, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range hdr {
			if !strings.EqualFold(k, "host") {
				out.Header[k] = vs
			}
		}
		return toServer(t, out)
	}
	for _, c := range []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"header, hex hash", toServer(t, signHeader(t, newRequest(t, http.MethodPost, "k", "", body), hexSHA256(body), testTime)), true},
		{"header, UNSIGNED-PAYLOAD", toServer(t, signHeader(t, newRequest(t, http.MethodPost, "k", "", body), UnsignedPayload, testTime)), false},
		{"streaming, signed", streamingRequest(t, StreamingPayload, payload(100), 64), true},
		{"streaming, signed with trailer", streamingRequest(t, StreamingPayloadTrailer, payload(100), 64, "x-amz-checksum-crc32:AAAAAA=="), true},
		{"streaming, unsigned trailer", streamingRequest(t, StreamingUnsignedPayloadTrailer, payload(100), 64, "x-amz-checksum-crc32:AAAAAA=="), false},
		{"presigned, default", presigned(t, "k", "", time.Hour), false},
		{"presigned, signed hash header", presignWith(hexSHA256(body), false), true},
		{"presigned, signed hash query", presignWith(hexSHA256(body), true), true},
		{"presigned, UNSIGNED-PAYLOAD header", presignWith(UnsignedPayload, false), false},
		{"anonymous", toServer(t, newRequest(t, http.MethodPost, "k", "", body)), false},
	} {
		res, err := v.Verify(c.r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.PayloadSigned != c.want {
			t.Errorf("%s: PayloadSigned %v, want %v", c.name, res.PayloadSigned, c.want)
		}
	}
}
