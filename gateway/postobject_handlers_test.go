package gateway_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// aws-sdk-go-v2 has no presigned POST: the forms here are built as AWS
// documents it ("Browser-Based Uploads Using POST (AWS Signature Version
// 4)"), independently of the gateway's code; scripts/test-tools.sh posts
// boto3's generate_presigned_post forms and e2e minio-go's.

// field is one form field, in the order it is sent.
type field struct{ name, value string }

// signedPost returns the fields of a SigV4 POST form for bucket: the
// policy (expiration and conditions, plus the x-amz-algorithm,
// -credential and -date conditions a SigV4 form needs) and its signature.
func signedPost(ak, sk string, expires time.Time, conds ...any) []field {
	now := time.Now().UTC()
	date := now.Format("20060102T150405Z")
	cred := ak + "/" + date[:8] + "/us-east-1/s3/aws4_request"
	conds = append(conds, map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"},
		map[string]string{"x-amz-credential": cred}, map[string]string{"x-amz-date": date})
	doc, err := json.Marshal(map[string]any{"expiration": expires.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conds})
	if err != nil {
		panic(err)
	}
	return signPostDoc(sk, cred, date, doc)
}

// signPostDoc returns the SigV4 fields of a form whose policy is doc, as
// is, signed with sk for the credential cred at date.
func signPostDoc(sk, cred, date string, doc []byte) []field {
	policy := base64.StdEncoding.EncodeToString(doc)
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	k := mac([]byte("AWS4"+sk), date[:8])
	k = mac(k, "us-east-1")
	k = mac(k, "s3")
	k = mac(k, "aws4_request")
	return []field{{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"x-amz-credential", cred}, {"x-amz-date", date},
		{"policy", policy}, {"x-amz-signature", hex.EncodeToString(mac(k, policy))}}
}

// rootPost is signedPost with root's keys, valid for an hour.
func rootPost(conds ...any) []field {
	return signedPost(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey, time.Now().Add(time.Hour), conds...)
}

// postForm posts a multipart form to path: fields, then the file (unless
// file is nil), then after fields. It returns the answer, not following
// redirects.
func (e *env) postForm(path string, fields []field, filename string, file io.Reader, after ...field) (*http.Response, string) {
	e.t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for _, f := range fields {
				if err := mw.WriteField(f.name, f.value); err != nil {
					return err
				}
			}
			if file != nil {
				w, err := mw.CreateFormFile("file", filename)
				if err != nil {
					return err
				}
				if _, err := io.Copy(w, file); err != nil {
					return err
				}
			}
			for _, f := range after {
				if err := mw.WriteField(f.name, f.value); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPost, e.url+path, pr)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", "https://app.example.com")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func wantPostErr(t *testing.T, resp *http.Response, body string, status int, code, msg string) {
	t.Helper()
	var e struct{ Code, Message string }
	_ = xml.Unmarshal([]byte(body), &e)
	if resp.StatusCode != status || e.Code != code || !strings.Contains(e.Message, msg) {
		t.Errorf("answer %d %s, want %d %s %q", resp.StatusCode, body, status, code, msg)
	}
}

func TestPostObject(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	data := bytes.Repeat([]byte("0123456789"), 1000)
	conds := []any{map[string]string{"bucket": "up"}, []any{"starts-with", "$key", "user/"},
		[]any{"content-length-range", 1, 1 << 20}, []any{"starts-with", "$Content-Type", "text/"},
		[]any{"starts-with", "$x-amz-meta-owner", ""}}

	// 204 by default; ${filename} is the file's name.
	fields := append([]field{{"key", "user/${filename}"}, {"Content-Type", "text/plain"}, {"x-amz-meta-owner", "ann"}}, rootPost(conds...)...)
	resp, body := e.postForm("/up", fields, "notes.txt", bytes.NewReader(data))
	if resp.StatusCode != 204 || body != "" {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	if loc := resp.Header.Get("Location"); loc != e.url+"/up/user/notes.txt" {
		t.Errorf("Location %q", loc)
	}
	out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("up"), Key: aws.String("user/notes.txt")})
	noErr(t, err)
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, data) || aws.ToString(out.ContentType) != "text/plain" || out.Metadata["owner"] != "ann" ||
		aws.ToString(out.ETag) != `"`+md5hex(string(data))+`"` || resp.Header.Get("ETag") != aws.ToString(out.ETag) {
		t.Errorf("stored %d bytes, type %q, meta %v, ETag %s (answer's %s)", len(got), aws.ToString(out.ContentType), out.Metadata, aws.ToString(out.ETag), resp.Header.Get("ETag"))
	}

	// 201: a PostResponse document.
	conds201 := append(conds, map[string]string{"success_action_status": "201"})
	fields = append([]field{{"key", "user/a.txt"}, {"Content-Type", "text/plain"}, {"success_action_status", "201"}}, rootPost(conds201...)...)
	resp, body = e.postForm("/up", fields, "a", strings.NewReader("abc"))
	var pr struct {
		XMLName                     xml.Name `xml:"PostResponse"`
		Location, Bucket, Key, ETag string
	}
	if err := xml.Unmarshal([]byte(body), &pr); err != nil || resp.StatusCode != 201 || pr.Bucket != "up" || pr.Key != "user/a.txt" ||
		pr.ETag != `"`+md5hex("abc")+`"` || pr.Location != e.url+"/up/user/a.txt" {
		t.Errorf("201: %d %s (%v)", resp.StatusCode, body, err)
	}
	// 200: no body.
	conds200 := append(conds, map[string]string{"success_action_status": "200"})
	fields = append([]field{{"key", "user/b.txt"}, {"Content-Type", "text/plain"}, {"success_action_status", "200"}}, rootPost(conds200...)...)
	if resp, body = e.postForm("/up", fields, "b", strings.NewReader("b")); resp.StatusCode != 200 || body != "" {
		t.Errorf("200: %d %s", resp.StatusCode, body)
	}
	// A redirect: 303 to it with bucket, key and etag.
	condsRedirect := append(conds, []any{"starts-with", "$success_action_redirect", "https://app.example.com/"})
	fields = append([]field{{"key", "user/c d.txt"}, {"Content-Type", "text/plain"}, {"success_action_redirect", "https://app.example.com/done?x=1"}}, rootPost(condsRedirect...)...)
	resp, body = e.postForm("/up", fields, "c", strings.NewReader("c"))
	want := "https://app.example.com/done?x=1&bucket=up&key=user%2Fc+d.txt&etag=" + url.QueryEscape(`"`+md5hex("c")+`"`)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != want {
		t.Errorf("redirect: %d Location %q, want %q (%s)", resp.StatusCode, resp.Header.Get("Location"), want, body)
	}
	if _, _, ok := e.fake.Object("up", "user/c d.txt"); !ok {
		t.Error("redirected upload not stored")
	}

	// Fields after the file are not part of the form (a submit button).
	fields = append([]field{{"key", "user/d.txt"}, {"Content-Type", "text/plain"}}, rootPost(conds...)...)
	if resp, body = e.postForm("/up", fields, "d", strings.NewReader("d"), field{"submit", "Upload"}); resp.StatusCode != 204 {
		t.Errorf("field after the file: %d %s", resp.StatusCode, body)
	}
	// Field names are case-insensitive; the Content-MD5 field is checked.
	condsMD5 := append(conds, []any{"starts-with", "$content-md5", ""})
	fields = append([]field{{"Key", "user/e.txt"}, {"CONTENT-TYPE", "text/plain"}, {"Content-MD5", md5b64("other")}}, rootPost(condsMD5...)...)
	resp, body = e.postForm("/up", fields, "e", strings.NewReader("e"))
	wantPostErr(t, resp, body, 400, "BadDigest", "")
	if _, _, ok := e.fake.Object("up", "user/e.txt"); ok {
		t.Error("an upload with a wrong Content-MD5 was stored")
	}
}

func TestPostObjectRefused(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	conds := []any{map[string]string{"bucket": "up"}, []any{"starts-with", "$key", "user/"}, []any{"content-length-range", 2, 2 << 20}}
	form := func(key string, fields []field) []field { return append([]field{{"key", key}}, fields...) }
	big := bytes.Repeat([]byte("x"), 3<<20) // past the 1 MiB the gateway reads ahead: streamed

	resp, body := e.postForm("/up", form("user/x", signedPost(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey, time.Now().Add(-time.Minute), conds...)), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "Invalid according to Policy: Policy expired.")
	resp, body = e.postForm("/up", form("other/x", rootPost(conds...)), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", `Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "user/"]`)
	resp, body = e.postForm("/up", form("user/x", rootPost(conds...)), "f", bytes.NewReader(big))
	wantPostErr(t, resp, body, 400, "EntityTooLarge", "larger than 2097152 bytes")
	resp, body = e.postForm("/up", form("user/x", rootPost(conds...)), "f", strings.NewReader("a"))
	wantPostErr(t, resp, body, 400, "EntityTooSmall", "at least 2")
	resp, body = e.postForm("/up", append(form("user/x", rootPost(conds...)), field{"x-amz-meta-extra", "1"}, field{"acl", "private"}), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "Invalid according to Policy: Extra input fields: acl, x-amz-meta-extra")
	// x-ignore-* fields need no condition.
	resp, body = e.postForm("/up", append(form("user/ok", rootPost(conds...)), field{"x-ignore-note", "1"}), "f", strings.NewReader("abc"))
	if resp.StatusCode != 204 {
		t.Errorf("x-ignore- field: %d %s", resp.StatusCode, body)
	}

	bad := rootPost(conds...)
	bad[4].value = strings.Repeat("0", 64)
	resp, body = e.postForm("/up", form("user/x", bad), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "SignatureDoesNotMatch", "")
	resp, body = e.postForm("/up", form("user/x", signedPost(gatewaytest.RootAccessKey, "wrong secret", time.Now().Add(time.Hour), conds...)), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "SignatureDoesNotMatch", "")
	resp, body = e.postForm("/up", form("user/x", signedPost("NOSUCHKEY", "s", time.Now().Add(time.Hour), conds...)), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "InvalidAccessKeyId", "")
	// A signed form without its signature.
	resp, body = e.postForm("/up", form("user/x", rootPost(conds...)[:4]), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 400, "InvalidArgument", "Bucket POST must contain a field named 'x-amz-signature'")
	resp, body = e.postForm("/up", rootPost(conds...), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 400, "InvalidArgument", "Bucket POST must contain a field named 'key'")
	resp, body = e.postForm("/up", form("user/x", rootPost(conds...)), "", nil)
	wantPostErr(t, resp, body, 400, "InvalidArgument", "POST requires exactly one file upload per request.")
	resp, body = e.postForm("/up", form("user/x", append(rootPost(conds...), field{"x-ignore-pad", strings.Repeat("p", 21<<10)})), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 400, "MaxPostPreDataLengthExceeded", "")
	// SigV2 forms (boto3's presigned POST at its defaults) are checked too.
	resp, body = e.postForm("/up", form("user/x", []field{{"AWSAccessKeyId", "AK"}, {"policy", "e30="}, {"signature", "sig"}}), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "InvalidAccessKeyId", "")
	resp, body = e.postForm("/up", form("user/x", []field{{"AWSAccessKeyId", gatewaytest.RootAccessKey}, {"policy", "e30="}, {"signature", "sig"}}), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "SignatureDoesNotMatch", "")
	resp, body = e.postForm("/up", form("user/x", []field{{"AWSAccessKeyId", gatewaytest.RootAccessKey}, {"policy", "e30="}}), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 400, "InvalidArgument", "Bucket POST must contain a field named 'signature'")
	resp, body = e.postForm("/nosuch", form("k", rootPost(map[string]string{"bucket": "nosuch"}, map[string]string{"key": "k"})), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 404, "NoSuchBucket", "")
	for _, k := range []string{"user/x", "other/x", "user/ok"} {
		if _, _, ok := e.fake.Object("up", k); ok != (k == "user/ok") {
			t.Errorf("%s stored: %v", k, ok)
		}
	}

	// A big upload inside the range streams through.
	condsBig := []any{map[string]string{"bucket": "up"}, []any{"starts-with", "$key", "user/"}, []any{"content-length-range", 0, 4 << 20}}
	resp, body = e.postForm("/up", form("user/big", rootPost(condsBig...)), "f", bytes.NewReader(big))
	if resp.StatusCode != 204 {
		t.Fatalf("big upload: %d %s", resp.StatusCode, body)
	}
	if got, _, _ := e.fake.Object("up", "user/big"); !bytes.Equal(got, big) {
		t.Errorf("big upload stored %d bytes", len(got))
	}

	// Alice's signature is hers: she needs a write grant.
	alice := signedPost(userAK, userSK, time.Now().Add(time.Hour), conds...)
	resp, body = e.postForm("/up", form("user/alice", alice), "f", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", `user "alice" has no write grant`)
	e.grant("up", "write")
	if resp, body = e.postForm("/up", form("user/alice", alice), "f", strings.NewReader("abc")); resp.StatusCode != 204 {
		t.Errorf("alice with a write grant: %d %s", resp.StatusCode, body)
	}
}

func TestPostObjectAnonymousAndACL(t *testing.T) {
	e := newEnv(t)
	e.bucket("drop")
	fields := []field{{"key", "in/${filename}"}}
	resp, body := e.postForm("/drop", fields, "a.txt", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "anonymous s3:PutObject")

	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::drop/in/*"}]}`
	_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("drop"), Policy: aws.String(policy)})
	noErr(t, err)
	resp, body = e.postForm("/drop", fields, "a.txt", strings.NewReader("abc"))
	if resp.StatusCode != 204 {
		t.Fatalf("anonymous POST allowed by the policy: %d %s", resp.StatusCode, body)
	}
	if got, _, ok := e.fake.Object("drop", "in/a.txt"); !ok || string(got) != "abc" {
		t.Errorf("stored %q %v", got, ok)
	}
	resp, body = e.postForm("/drop", []field{{"key", "elsewhere"}}, "a.txt", strings.NewReader("abc"))
	wantPostErr(t, resp, body, 403, "AccessDenied", "")

	// The acl field sets the object's ACL (the x-amz-acl path): a
	// public-read upload reads anonymously.
	conds := []any{map[string]string{"bucket": "drop"}, map[string]string{"key": "pub.txt"}, map[string]string{"acl": "public-read"}}
	resp, body = e.postForm("/drop", append([]field{{"key", "pub.txt"}, {"acl", "public-read"}}, rootPost(conds...)...), "f", strings.NewReader("public"))
	if resp.StatusCode != 204 {
		t.Fatalf("POST with acl: %d %s", resp.StatusCode, body)
	}
	get, err := http.Get(e.url + "/drop/pub.txt")
	noErr(t, err)
	data, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if get.StatusCode != 200 || string(data) != "public" {
		t.Errorf("anonymous GET of a public-read upload: %d %s", get.StatusCode, data)
	}
	acl, err := e.root.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String("drop"), Key: aws.String("pub.txt")})
	noErr(t, err)
	if len(acl.Grants) != 2 {
		t.Errorf("grants %+v", acl.Grants)
	}
	conds = []any{map[string]string{"bucket": "drop"}, map[string]string{"key": "bad.txt"}, map[string]string{"acl": "world-writable"}}
	resp, body = e.postForm("/drop", append([]field{{"key", "bad.txt"}, {"acl", "world-writable"}}, rootPost(conds...)...), "f", strings.NewReader("x"))
	wantPostErr(t, resp, body, 400, "InvalidArgument", "")
}

func TestPostObjectCORS(t *testing.T) {
	e := newEnv(t)
	e.bucket("up")
	_, err := e.root.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("up"), CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []string{"POST"}, ExposeHeaders: []string{"ETag", "Location"}}}}})
	noErr(t, err)
	resp, body := e.preflight("/up", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Fatalf("preflight: %d %s", resp.StatusCode, body)
	}
	conds := []any{map[string]string{"bucket": "up"}, map[string]string{"key": "k"}}
	resp, body = e.postForm("/up", append([]field{{"key", "k"}}, rootPost(conds...)...), "f", strings.NewReader("x"))
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || resp.Header.Get("Access-Control-Expose-Headers") != "ETag, Location" {
		t.Errorf("POST: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// A refused upload's answer is readable by the page too.
	resp, body = e.postForm("/up", append([]field{{"key", "other"}}, rootPost(conds...)...), "f", strings.NewReader("x"))
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("refused POST: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}
