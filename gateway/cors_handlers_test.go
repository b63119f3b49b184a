package gateway_test

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// siteCORS is a configuration a web app would set: its origins may read
// and upload with SDK headers; everyone may GET.
var siteCORS = &types.CORSConfiguration{CORSRules: []types.CORSRule{
	{
		ID:             aws.String("app"),
		AllowedOrigins: []string{"https://*.example.com"},
		AllowedMethods: []string{"GET", "PUT", "POST", "HEAD"},
		AllowedHeaders: []string{"x-amz-*", "Content-Type", "Authorization"},
		ExposeHeaders:  []string{"ETag", "x-amz-request-id"},
		MaxAgeSeconds:  aws.Int32(600),
	},
	{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
}}

func TestBucketCORSConfiguration(t *testing.T) {
	e := newEnv(t)
	e.bucket("web")
	b := aws.String("web")

	_, err := e.root.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	wantErr(t, err, "NoSuchCORSConfiguration", 404)

	_, err = e.root.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: siteCORS})
	noErr(t, err)
	out, err := e.root.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	noErr(t, err)
	if len(out.CORSRules) != 2 {
		t.Fatalf("rules %+v", out.CORSRules)
	}
	r := out.CORSRules[0]
	if aws.ToString(r.ID) != "app" || strings.Join(r.AllowedOrigins, ",") != "https://*.example.com" ||
		strings.Join(r.AllowedMethods, ",") != "GET,PUT,POST,HEAD" || strings.Join(r.AllowedHeaders, ",") != "x-amz-*,Content-Type,Authorization" ||
		strings.Join(r.ExposeHeaders, ",") != "ETag,x-amz-request-id" || aws.ToInt32(r.MaxAgeSeconds) != 600 {
		t.Errorf("rule 0 read back as %+v", r)
	}
	if r := out.CORSRules[1]; r.ID != nil || r.MaxAgeSeconds != nil || strings.Join(r.AllowedOrigins, ",") != "*" {
		t.Errorf("rule 1 read back as %+v", r)
	}

	// S3's validation.
	bad := func(rule types.CORSRule) error {
		_, err := e.root.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{rule}}})
		return err
	}
	wantErr(t, bad(types.CORSRule{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PATCH"}}), "InvalidRequest", 400)
	wantErr(t, bad(types.CORSRule{AllowedOrigins: []string{"https://*.*.example.com"}, AllowedMethods: []string{"GET"}}), "InvalidRequest", 400)
	// (The SDK refuses a rule without AllowedMethod itself.)
	for _, doc := range []string{`<CORSConfiguration/>`, `<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>`, `<CORSConfiguration>`} {
		resp, data := e.rootSigned("PUT", "/web?cors", []byte(doc), http.Header{"Content-Md5": {md5b64(doc)}})
		if resp.StatusCode != 400 || !strings.Contains(string(data), "<Code>MalformedXML</Code>") {
			t.Errorf("PutBucketCors %s: %d %s", doc, resp.StatusCode, data)
		}
	}
	// A refused configuration left the old one in place.
	if out, err := e.root.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b}); err != nil || len(out.CORSRules) != 2 {
		t.Fatalf("after refused puts: %v %+v", err, out)
	}

	// S3 requires a digest of the body.
	body := `<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>`
	resp, data := e.rootSigned("PUT", "/web?cors", []byte(body), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(data), "Content-MD5") {
		t.Errorf("PutBucketCors without Content-MD5: %d %s", resp.StatusCode, data)
	}
	resp, data = e.rootSigned("PUT", "/web?cors", []byte(body), http.Header{"Content-Md5": {md5b64(body)}})
	if resp.StatusCode != 200 {
		t.Errorf("PutBucketCors with Content-MD5: %d %s", resp.StatusCode, data)
	}
	resp, data = e.rootSigned("GET", "/web?cors", nil, nil)
	var got struct {
		XMLName xml.Name `xml:"CORSConfiguration"`
		Rules   []struct {
			AllowedOrigin []string
		} `xml:"CORSRule"`
	}
	if err := xml.Unmarshal(data, &got); err != nil || resp.StatusCode != 200 || len(got.Rules) != 1 || got.XMLName.Space != "http://s3.amazonaws.com/doc/2006-03-01/" {
		t.Errorf("GetBucketCors: %d %s (%v)", resp.StatusCode, data, err)
	}

	// Only the owner (or root, or whom the policy allows) sets CORS; a
	// read grant reads it.
	_, err = e.user.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: siteCORS})
	wantErr(t, err, "AccessDenied", 403)
	_, err = e.user.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	wantErr(t, err, "AccessDenied", 403)
	e.grant("web", "read")
	_, err = e.user.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	noErr(t, err)
	_, err = e.user.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: b})
	wantErr(t, err, "AccessDenied", 403)

	_, err = e.root.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: b})
	noErr(t, err)
	_, err = e.root.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	wantErr(t, err, "NoSuchCORSConfiguration", 404)
	_, err = e.root.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: aws.String("nosuch")})
	wantErr(t, err, "NoSuchBucket", 404)
}

// preflight sends an unauthenticated OPTIONS request with headers.
func (e *env) preflight(path string, hdr map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodOptions, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestCORSPreflight(t *testing.T) {
	e := newEnv(t)
	e.bucket("web")
	e.bucket("plain")
	_, err := e.root.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("web"), CORSConfiguration: siteCORS})
	noErr(t, err)

	// Allowed: the first matching rule answers, naming the origin (a rule
	// with a pattern) and echoing the requested headers.
	resp, body := e.preflight("/web/photos/cat.jpg", map[string]string{"Origin": "https://app.example.com",
		"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "Content-Type, X-Amz-Date, x-amz-content-sha256"})
	if resp.StatusCode != 200 {
		t.Fatalf("preflight: %d %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, PUT, POST, HEAD",
		"Access-Control-Allow-Headers":     "content-type, x-amz-date, x-amz-content-sha256",
		"Access-Control-Expose-Headers":    "ETag, x-amz-request-id",
		"Access-Control-Max-Age":           "600",
		"Vary":                             "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if resp.Header.Get("x-amz-request-id") == "" {
		t.Error("no x-amz-request-id")
	}
	// On the bucket; a rule open to all origins answers "*" without
	// credentials.
	resp, body = e.preflight("/web", map[string]string{"Origin": "http://elsewhere.test", "Access-Control-Request-Method": "GET"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" ||
		resp.Header.Get("Access-Control-Allow-Methods") != "GET" {
		t.Errorf("preflight for *: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
		code, msg  string
	}{
		{"method not allowed", "/web/k", map[string]string{"Origin": "http://elsewhere.test", "Access-Control-Request-Method": "PUT"},
			403, "AccessForbidden", "CORSResponse: This CORS request is not allowed."},
		{"header not allowed", "/web/k", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
			"Access-Control-Request-Headers": "x-custom"}, 403, "AccessForbidden", "CORSResponse: This CORS request"},
		{"origin not allowed", "/web/k", map[string]string{"Origin": "http://app.example.com", "Access-Control-Request-Method": "PUT"},
			403, "AccessForbidden", "CORSResponse: This CORS request"},
		{"no configuration", "/plain/k", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"},
			403, "AccessForbidden", "CORSResponse: CORS is not enabled for this bucket."},
		{"no bucket", "/nosuch/k", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"},
			403, "AccessForbidden", "CORSResponse: Bucket not found"},
		{"no origin", "/web/k", map[string]string{"Access-Control-Request-Method": "GET"}, 400, "BadRequest", "Origin request header needed"},
		{"no method", "/web/k", map[string]string{"Origin": "https://app.example.com"}, 400, "BadRequest", "Access-Control-Request-Method"},
	} {
		resp, body := e.preflight(tc.path, tc.hdr)
		if resp.StatusCode != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d %s %q", tc.name, resp.StatusCode, body, tc.status, tc.code, tc.msg)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: refused preflight carries Access-Control-Allow-Origin", tc.name)
		}
	}
}

func TestCORSActualRequests(t *testing.T) {
	e := newEnv(t)
	e.bucket("web")
	e.object("web", "k", "hello")
	_, err := e.root.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("web"), CORSConfiguration: siteCORS})
	noErr(t, err)

	origin := http.Header{"Origin": {"https://app.example.com"}}
	resp, body := e.rootSigned("GET", "/web/k", nil, origin)
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Expose-Headers":    "ETag, x-amz-request-id",
		"Vary":                             "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("GET %s: %q, want %q", k, got, want)
		}
	}
	// Error answers carry them too, so that the page can read the error.
	resp, body = e.rootSigned("GET", "/web/missing", nil, origin)
	if resp.StatusCode != 404 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || resp.Header.Get("Access-Control-Expose-Headers") == "" {
		t.Errorf("GET missing: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	req, _ := http.NewRequest("GET", e.url+"/web/k", nil)
	req.Header.Set("Origin", "http://anyone.test")
	resp, err = http.DefaultClient.Do(req)
	noErr(t, err)
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("anonymous GET from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	// A method no rule allows for the origin, or no Origin at all: no
	// CORS headers.
	resp, _ = e.rootSigned("DELETE", "/web/k", nil, origin)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("DELETE: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = e.rootSigned("HEAD", "/web/missing", nil, nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Vary") != "" {
		t.Errorf("HEAD without Origin: %v", resp.Header)
	}
}
