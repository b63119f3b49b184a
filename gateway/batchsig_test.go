package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// The batch endpoint's body says what is read, so its signature must cover
// the body: UNSIGNED-PAYLOAD and presigned URLs that do not sign the
// body's hash are refused (a URL presigned by root would otherwise read
// any object with any body).

var rootCreds = aws.Credentials{AccessKeyID: gatewaytest.RootAccessKey, SecretAccessKey: gatewaytest.RootSecretKey}

func send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	noErr(t, err)
	return resp, b
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// batchSigEnv has a public object (ds/a, read granted to alice) and a
// private one (private/secret, root's only).
func batchSigEnv(t *testing.T) (*env, []byte, []byte) {
	e, _ := batchEnv(t, gateway.BatchConfig{})
	e.bucket("ds")
	e.bucket("private")
	e.object("ds", "a", "alpha")
	e.object("private", "secret", "s3cr3t")
	public, _ := json.Marshal(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "ds", Key: "a"}}})
	private, _ := json.Marshal(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "private", Key: "secret"}}})
	return e, public, private
}

// presignBatch presigns a batch POST for root; hash "" presigns with the
// signer's default (UNSIGNED-PAYLOAD, nothing of the body signed), else
// x-amz-content-sha256 is a signed header with that value. It returns the
// URL and the headers a holder must send.
func (e *env) presignBatch(hash string) (string, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath+"?X-Amz-Expires=3600", nil)
	noErr(e.t, err)
	payload := "UNSIGNED-PAYLOAD"
	if hash != "" {
		payload = hash
		req.Header.Set("X-Amz-Content-Sha256", hash)
	}
	u, hdr, err := v4.NewSigner().PresignHTTP(context.Background(), rootCreds, req, payload, "s3", "us-east-1", time.Now())
	noErr(e.t, err)
	return u, hdr
}

func replayPresigned(t *testing.T, u string, hdr http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	noErr(t, err)
	for k, vs := range hdr {
		if !strings.EqualFold(k, "host") {
			req.Header[k] = vs
		}
	}
	return send(t, req)
}

func TestBatchRefusesUnsignedPayload(t *testing.T) {
	e, _, private := batchSigEnv(t)
	// Root signs the headers but not the body.
	req, err := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath, bytes.NewReader(private))
	noErr(t, err)
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	noErr(t, v4.NewSigner().SignHTTP(context.Background(), rootCreds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()))
	resp, body := send(t, req)
	se := wantBatchErr(t, resp, body, "AccessDenied", http.StatusForbidden)
	if !strings.Contains(se.Message, "x-amz-content-sha256") || !strings.Contains(se.Message, "UNSIGNED-PAYLOAD") {
		t.Fatalf("the refusal does not say what is required: %s", se.Message)
	}
	if bytes.Contains(body, []byte("s3cr3t")) {
		t.Fatal("the refusal holds the object")
	}
}

func TestBatchPresignedReplayRefused(t *testing.T) {
	e, public, private := batchSigEnv(t)

	// A URL presigned by root without the body's hash: refused with any
	// body, the one it was made for included.
	u, hdr := e.presignBatch("")
	for what, body := range map[string][]byte{"its body": public, "another body": private} {
		resp, b := replayPresigned(t, u, hdr, body)
		wantBatchErr(t, resp, b, "AccessDenied", http.StatusForbidden)
		if bytes.Contains(b, []byte("s3cr3t")) {
			t.Fatalf("%s: the answer holds the private object", what)
		}
	}

	// A URL whose signed headers hold the body's hash: its body works...
	u, hdr = e.presignBatch(hexSum(public))
	resp, b := replayPresigned(t, u, hdr, public)
	got, err := readTar(b)
	if resp.StatusCode != http.StatusOK || err != nil || len(got) != 1 || got[0].name != "ds/a" || string(got[0].data) != "alpha" {
		t.Fatalf("the presigned batch with its own body: %d %v %v %s", resp.StatusCode, got, err, b)
	}
	// ...another body does not.
	resp, b = replayPresigned(t, u, hdr, private)
	wantBatchErr(t, resp, b, "XAmzContentSHA256Mismatch", http.StatusBadRequest)
	if bytes.Contains(b, []byte("s3cr3t")) {
		t.Fatal("the answer holds the private object")
	}
	// Nor does the URL with the hash header changed to the other body's
	// (it is signed), nor dropped to UNSIGNED-PAYLOAD.
	for _, v := range []string{hexSum(private), "UNSIGNED-PAYLOAD"} {
		h := hdr.Clone()
		h.Set("X-Amz-Content-Sha256", v)
		resp, b = replayPresigned(t, u, h, private)
		wantBatchErr(t, resp, b, "SignatureDoesNotMatch", http.StatusForbidden)
	}
	// The hash as a (signed) query parameter binds the body too.
	req, err := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath+"?X-Amz-Expires=3600&X-Amz-Content-Sha256="+hexSum(public), nil)
	noErr(t, err)
	qu, qhdr, err := v4.NewSigner().PresignHTTP(context.Background(), rootCreds, req, hexSum(public), "s3", "us-east-1", time.Now())
	noErr(t, err)
	resp, b = replayPresigned(t, qu, qhdr, public)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned with the hash in the query: %d %s", resp.StatusCode, b)
	}
	resp, b = replayPresigned(t, qu, qhdr, private)
	wantBatchErr(t, resp, b, "XAmzContentSHA256Mismatch", http.StatusBadRequest)
}

// A signed streaming body (aws-chunked, each chunk signed) is bound to the
// signature and is accepted; a changed chunk is refused.
func TestBatchSignedStreamingBody(t *testing.T) {
	e, public, _ := batchSigEnv(t)
	post := func(tamper bool) (*http.Response, []byte) {
		now := time.Now().UTC()
		req, err := http.NewRequest(http.MethodPost, e.url+gateway.BatchPath, nil)
		noErr(t, err)
		const mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
		req.Header.Set("X-Amz-Content-Sha256", mode)
		req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(public)))
		req.Header.Set("Content-Encoding", "aws-chunked")
		chunks := [][]byte{public[:10], public[10:], nil}
		enc := func(seed string, out *bytes.Buffer) {
			key := signingKey(gatewaytest.RootSecretKey, now.Format("20060102"), "us-east-1")
			scope := now.Format("20060102") + "/us-east-1/s3/aws4_request"
			prev := seed
			for _, c := range chunks {
				sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + now.Format("20060102T150405Z") + "\n" + scope + "\n" + prev + "\n" + hexSum(nil) + "\n" + hexSum(c)
				sig := hex.EncodeToString(hmacSHA(key, sts))
				fmt.Fprintf(out, "%x;chunk-signature=%s\r\n", len(c), sig)
				out.Write(c)
				out.WriteString("\r\n")
				prev = sig
			}
		}
		var sized bytes.Buffer
		enc(strings.Repeat("0", 64), &sized)
		req.ContentLength = int64(sized.Len())
		noErr(t, v4.NewSigner().SignHTTP(context.Background(), rootCreds, req, mode, "s3", "us-east-1", now))
		auth := req.Header.Get("Authorization")
		seed := auth[strings.LastIndex(auth, "Signature=")+len("Signature="):]
		var body bytes.Buffer
		enc(seed, &body)
		raw := body.Bytes()
		if tamper {
			raw = bytes.Replace(raw, []byte(`"ds"`), []byte(`"dz"`), 1)
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		return send(t, req)
	}
	resp, b := post(false)
	got, err := readTar(b)
	if resp.StatusCode != http.StatusOK || err != nil || len(got) != 1 || string(got[0].data) != "alpha" {
		t.Fatalf("a signed streaming batch: %d %v %v %s", resp.StatusCode, got, err, b)
	}
	resp, b = post(true)
	wantBatchErr(t, resp, b, "SignatureDoesNotMatch", http.StatusForbidden)
}

func hmacSHA(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func signingKey(secret, date, region string) []byte {
	k := hmacSHA([]byte("AWS4"+secret), date)
	k = hmacSHA(k, region)
	k = hmacSHA(k, "s3")
	return hmacSHA(k, "aws4_request")
}

// A properly signed batch (the hash of its body signed) still works, for
// root and for a user with a grant.
func TestBatchSignedPayloadWorks(t *testing.T) {
	e, public, _ := batchSigEnv(t)
	e.grant("ds", "read")
	for _, k := range [][2]string{{gatewaytest.RootAccessKey, gatewaytest.RootSecretKey}, {userAK, userSK}} {
		resp, b := e.signed(http.MethodPost, gateway.BatchPath, public, nil, k[0], k[1])
		got, err := readTar(b)
		if resp.StatusCode != http.StatusOK || err != nil || len(got) != 1 || string(got[0].data) != "alpha" {
			t.Fatalf("%s: %d %v %v %s", k[0], resp.StatusCode, got, err, b)
		}
	}
}
