package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/console"
)

// Issue 35 against the real binary: the batch endpoint's signature must
// cover its body (a URL presigned by root cannot be replayed with another
// body), batch tar names never climb, and a signed-out console cookie is
// refused.

func sendReq(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	mustOK(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	mustOK(t, err)
	return resp, b
}

// presignedBatch presigns a batch POST with root's keys; hash "" leaves
// the body unsigned (the signer's default), else x-amz-content-sha256 is a
// signed header with that value. body is what the holder then sends.
func presignedBatch(t *testing.T, endpoint, hash string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint+gateway.BatchPath+"?X-Amz-Expires=600", nil)
	mustOK(t, err)
	payload := "UNSIGNED-PAYLOAD"
	if hash != "" {
		payload = hash
		req.Header.Set("X-Amz-Content-Sha256", hash)
	}
	u, hdr, err := v4.NewSigner().PresignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, payload, "s3", "us-east-1", time.Now())
	mustOK(t, err)
	replay, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	mustOK(t, err)
	for k, vs := range hdr {
		if !strings.EqualFold(k, "host") {
			replay.Header[k] = vs
		}
	}
	return sendReq(t, replay)
}

func TestBatchSignedBodyAndNames(t *testing.T) {
	s := startServer(t)
	c := s.root()
	for _, b := range []string{"pub", "priv"} {
		_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(b)})
		mustOK(t, err)
	}
	put(t, c, "pub", "a.txt", []byte("alpha"))
	put(t, c, "priv", "secret.txt", []byte("s3cr3t"))
	pubBody, _ := json.Marshal(batchReq{Entries: []batchEntry{{Bucket: "pub", Key: "a.txt"}}})
	privBody, _ := json.Marshal(batchReq{Entries: []batchEntry{{Bucket: "priv", Key: "secret.txt"}}})

	// Presigned without the body's hash: refused, with any body.
	for _, body := range [][]byte{pubBody, privBody} {
		resp, b := presignedBatch(t, s.Endpoint, "", body)
		if resp.StatusCode != http.StatusForbidden || parseXMLError(t, b).Code != "AccessDenied" || bytes.Contains(b, []byte("s3cr3t")) {
			t.Fatalf("presigned batch without a body hash: %d %s", resp.StatusCode, b)
		}
	}
	// Presigned with it: its own body works, another is refused.
	resp, b := presignedBatch(t, s.Endpoint, digest(pubBody), pubBody)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("alpha")) {
		t.Fatalf("presigned batch with its body: %d %s", resp.StatusCode, b)
	}
	resp, b = presignedBatch(t, s.Endpoint, digest(pubBody), privBody)
	if resp.StatusCode != http.StatusBadRequest || parseXMLError(t, b).Code != "XAmzContentSHA256Mismatch" || bytes.Contains(b, []byte("s3cr3t")) {
		t.Fatalf("presigned batch replayed with another body: %d %s", resp.StatusCode, b)
	}
	// A header-signed request over UNSIGNED-PAYLOAD is refused too.
	req, err := http.NewRequest(http.MethodPost, s.Endpoint+gateway.BatchPath, bytes.NewReader(privBody))
	mustOK(t, err)
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	mustOK(t, v4.NewSigner().SignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()))
	resp, b = sendReq(t, req)
	if resp.StatusCode != http.StatusForbidden || parseXMLError(t, b).Code != "AccessDenied" {
		t.Fatalf("UNSIGNED-PAYLOAD batch: %d %s", resp.StatusCode, b)
	}
	// Properly signed (the body's hash signed), it works.
	a := batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{Entries: []batchEntry{{Bucket: "priv", Key: "secret.txt"}}})
	if a.status != http.StatusOK || len(a.entries) != 1 || string(a.entries[0].data) != "s3cr3t" {
		t.Fatalf("signed batch: %d %v %v", a.status, a.entries, a.tarErr)
	}

	// Names that would climb are escaped.
	a = batchPost(t, s.Endpoint, rootAK, rootSK, batchReq{ContinueOnError: true, Entries: []batchEntry{
		{Bucket: "pub", Key: "../../../x.txt"}, {Bucket: "..", Key: "../y"}, {Bucket: "pub", Key: "a.txt"}}})
	if a.status != http.StatusOK || a.tarErr != nil || len(a.entries) != 3 {
		t.Fatalf("batch of climbing names: %d %d entries %v", a.status, len(a.entries), a.tarErr)
	}
	tr := tar.NewReader(bytes.NewReader(a.body))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		mustOK(t, err)
		if !filepath.IsLocal(h.Name) || strings.Contains("/"+h.Name+"/", "/../") {
			t.Errorf("tar name %q climbs", h.Name)
		}
	}
	if a.entries[0].name != "__errors__/pub/%2E%2E/%2E%2E/%2E%2E/x.txt" || a.entries[2].name != "pub/a.txt" {
		t.Fatalf("names %q, %q", a.entries[0].name, a.entries[2].name)
	}
}

func TestConsoleSignedOutCookieRefused(t *testing.T) {
	s := startServer(t)
	ui := s.Endpoint + console.ConsolePath
	form := url.Values{"access_key": {rootAK}, "secret_key": {rootSK}}
	req, err := http.NewRequest(http.MethodPost, ui+"/login", strings.NewReader(form.Encode()))
	mustOK(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, _ := sendReq(t, req)
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == "fedgate_console" {
			ck = k
		}
	}
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	get := func() *http.Response {
		req, err := http.NewRequest(http.MethodGet, ui+"/", nil)
		mustOK(t, err)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		resp, _ := sendReq(t, req)
		return resp
	}
	if resp := get(); resp.StatusCode != http.StatusOK {
		t.Fatalf("the overview with the cookie: %d", resp.StatusCode)
	}
	req, err = http.NewRequest(http.MethodPost, ui+"/logout", nil)
	mustOK(t, err)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	if resp, _ := sendReq(t, req); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if resp := get(); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != console.ConsolePath+"/login" {
		t.Fatalf("the old cookie after sign-out: %d to %q, want 303 to the sign-in form", resp.StatusCode, resp.Header.Get("Location"))
	}
}
