package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

func TestRouteBrowser(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct{ method, target, contentType, op string }{
		{"POST", "/b", "multipart/form-data; boundary=x", "PostObject"},
		{"POST", "/b/", "multipart/form-data; boundary=x", "PostObject"},
		{"POST", "/b?delete", "multipart/form-data; boundary=x", "DeleteObjects"},
		{"POST", "/b", "application/xml", "Unsupported"},
		{"POST", "/b/k", "multipart/form-data; boundary=x", "Unsupported"},
		{"POST", "/", "multipart/form-data; boundary=x", "Unsupported"},
		{"OPTIONS", "/b", "", "PreflightCors"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.contentType != "" {
			r.Header.Set("Content-Type", tc.contentType)
		}
		bucket, key := s.resolve(r)
		if op, _ := s.route(r, r.URL.Query(), bucket, key); op != tc.op {
			t.Errorf("%s %s (%s): op %s, want %s", tc.method, tc.target, tc.contentType, op, tc.op)
		}
	}
}

const corsDoc = `<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <CORSRule>
    <ID>site</ID>
    <AllowedOrigin>https://*.example.com</AllowedOrigin>
    <AllowedMethod>GET</AllowedMethod>
    <AllowedMethod>PUT</AllowedMethod>
    <AllowedHeader>x-amz-*</AllowedHeader>
    <AllowedHeader>Content-Type</AllowedHeader>
    <ExposeHeader>ETag</ExposeHeader>
    <ExposeHeader>x-amz-request-id</ExposeHeader>
    <MaxAgeSeconds>600</MaxAgeSeconds>
  </CORSRule>
  <CORSRule>
    <AllowedOrigin>*</AllowedOrigin>
    <AllowedMethod>GET</AllowedMethod>
  </CORSRule>
</CORSConfiguration>`

func TestParseCORS(t *testing.T) {
	c, err := parseCORS([]byte(corsDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules) != 2 || c.Rules[0].ID != "site" || *c.Rules[0].MaxAgeSeconds != 600 || len(c.Rules[0].AllowedHeaders) != 2 {
		t.Fatalf("parsed %+v", c)
	}
	// What is stored reads back the same.
	doc, err := c.encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseCORS([]byte(doc))
	if err != nil {
		t.Fatalf("stored form %s: %v", doc, err)
	}
	if doc2, _ := again.encode(); doc2 != doc {
		t.Fatalf("round trip changed the document:\n%s\n%s", doc, doc2)
	}

	rule := func(body string) string {
		return "<CORSConfiguration><CORSRule>" + body + "</CORSRule></CORSConfiguration>"
	}
	for _, tc := range []struct{ doc, code, msg string }{
		{"", s3err.CodeMalformedXML, ""},
		{"<CORSConfiguration></CORSConfiguration>", s3err.CodeMalformedXML, ""},
		{"<Other><CORSRule/></Other>", s3err.CodeMalformedXML, ""},
		{rule("<AllowedMethod>GET</AllowedMethod>"), s3err.CodeMalformedXML, ""},
		{rule("<AllowedOrigin>*</AllowedOrigin>"), s3err.CodeMalformedXML, ""},
		{rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>soon</MaxAgeSeconds>"), s3err.CodeMalformedXML, ""},
		{rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-1</MaxAgeSeconds>"), s3err.CodeMalformedXML, ""},
		{rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod>"), s3err.CodeInvalidRequest, "Found unsupported HTTP method in CORS config. Unsupported method is PATCH"},
		{rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod>"), s3err.CodeInvalidRequest, "Unsupported method is get"},
		{rule("<AllowedOrigin>http://*.*.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"), s3err.CodeInvalidRequest, `AllowedOrigin "http://*.*.com" can not have more than one wildcard.`},
		{rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>x-*-*</AllowedHeader>"), s3err.CodeInvalidRequest, `AllowedHeader "x-*-*" can not have more than one wildcard.`},
		{rule("<ID>" + strings.Repeat("i", 256) + "</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"), s3err.CodeInvalidRequest, "at most 255"},
		{"<CORSConfiguration>" + strings.Repeat("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>", 101) + "</CORSConfiguration>",
			s3err.CodeInvalidRequest, "at most 100 rules"},
	} {
		_, err := parseCORS([]byte(tc.doc))
		if s3err.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%.80s: %v, want %s %q", tc.doc, err, tc.code, tc.msg)
		}
	}
	hundred := "<CORSConfiguration>" + strings.Repeat("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>", 100) + "</CORSConfiguration>"
	if _, err := parseCORS([]byte(hundred)); err != nil {
		t.Errorf("100 rules: %v", err)
	}
}

func TestCORSMatch(t *testing.T) {
	c, err := parseCORS([]byte(corsDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin, method string
		headers        []string
		rule           int // index, -1 for none
		allow          string
	}{
		{"https://app.example.com", "PUT", []string{"x-amz-date", "content-type"}, 0, "https://app.example.com"},
		{"https://.example.com", "GET", nil, 0, "https://.example.com"},
		{"https://app.example.com", "PUT", []string{"authorization"}, -1, ""},
		{"http://app.example.com", "PUT", nil, -1, ""},
		{"http://app.example.com", "GET", nil, 1, "*"},
		{"https://app.example.com", "GET", []string{"authorization"}, -1, ""},
		{"https://app.example.com", "DELETE", nil, -1, ""},
		{"null", "GET", nil, 1, "*"},
	} {
		r := c.match(tc.origin, tc.method, tc.headers)
		switch {
		case tc.rule < 0 && r != nil:
			t.Errorf("%s %s %v: matched %+v, want none", tc.origin, tc.method, tc.headers, r)
		case tc.rule >= 0 && r != &c.Rules[tc.rule]:
			t.Errorf("%s %s %v: matched %+v, want rule %d", tc.origin, tc.method, tc.headers, r, tc.rule)
		case r != nil && r.originMatch(tc.origin) != tc.allow:
			t.Errorf("%s: Allow-Origin %q, want %q", tc.origin, r.originMatch(tc.origin), tc.allow)
		}
	}
	// s3-tests' wildcard cases: `*` stands for any run, also an empty one.
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*suffix", "foo.suffix", true}, {"*suffix", "foo.suffix.get", false},
		{"start*end", "startend", true}, {"start*end", "start12end", true}, {"start*end", "0start12end", false},
		{"prefix*", "prefix", true}, {"prefix*", "bla.prefix", false}, {"ab*ba", "aba", false},
		{"exact", "exact", true}, {"exact", "Exact", false},
	} {
		if got := wildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func TestParsePostPolicy(t *testing.T) {
	p, err := parsePostPolicy([]byte(`{"expiration": "2030-01-01T12:00:00.000Z",
		"conditions": [{"bucket": "b"}, ["starts-with", "$key", "user/"], {"acl": "public-read"},
		["content-length-range", 1, "1048576"], ["eq", "$Content-Type", "image/png"], ["starts-with", "$x-amz-meta-tag", ""]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.hasRange || p.minLen != 1 || p.maxLen != 1048576 || len(p.conds) != 5 || !p.expiration.Equal(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("parsed %+v", p)
	}
	now := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	fields := map[string]string{"key": "user/a", "acl": "public-read", "content-type": "image/png", "x-amz-meta-tag": "t",
		"policy": "p", "x-amz-signature": "s", "x-ignore-me": "1"}
	values := func(change map[string]string) map[string]string {
		v := map[string]string{"bucket": "b"}
		for k, x := range fields {
			v[k] = x
		}
		for k, x := range change {
			v[k] = x
		}
		return v
	}
	if err := p.check(values(nil), fields, now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change map[string]string
		extra  string
		now    time.Time
		msg    string
	}{
		{now: p.expiration, msg: "Policy expired."},
		{change: map[string]string{"key": "other/a"}, msg: `Policy Condition failed: ["starts-with", "$key", "user/"]`},
		{change: map[string]string{"bucket": "c"}, msg: `Policy Condition failed: ["eq", "$bucket", "b"]`},
		{change: map[string]string{"content-type": "image/pngx"}, msg: `Policy Condition failed: ["eq", "$content-type", "image/png"]`},
		{extra: "x-amz-meta-other", msg: "Extra input fields: x-amz-meta-other"},
	} {
		f := fields
		if tc.extra != "" {
			f = map[string]string{tc.extra: "v"}
			for k, v := range fields {
				f[k] = v
			}
		}
		at := now
		if !tc.now.IsZero() {
			at = tc.now
		}
		err := p.check(values(tc.change), f, at)
		if s3err.CodeOf(err) != s3err.CodeAccessDenied || !strings.Contains(err.Error(), "Invalid according to Policy: "+tc.msg) {
			t.Errorf("%v %s: %v, want AccessDenied %q", tc.change, tc.extra, err, tc.msg)
		}
	}

	for _, tc := range []struct{ doc, msg string }{
		{`not json`, "Invalid JSON"},
		{`{"conditions": []} {}`, "Invalid JSON"},
		{`{"conditions": []}`, "missing expiration"},
		{`{"expiration": "2030-01-01T00:00:00Z"}`, "missing conditions"},
		{`{"expiration": "tomorrow", "conditions": []}`, "Invalid 'expiration'"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["matches", "$key", "a"]]}`, "Unknown condition operator"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["eq", "key", "a"]]}`, "Invalid eq condition"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["starts-with", "$key"]]}`, "Invalid starts-with condition"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["content-length-range", 10, 1]]}`, "Invalid content-length-range"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["content-length-range", -1, 1]]}`, "Invalid content-length-range"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [{"key": 1}]}`, "Invalid Simple-Condition"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": [{}]}`, "Invalid Simple-Condition"},
		{`{"expiration": "2030-01-01T00:00:00Z", "conditions": ["key"]}`, "Invalid condition"},
	} {
		_, err := parsePostPolicy([]byte(tc.doc))
		if s3err.CodeOf(err) != s3err.CodeInvalidPolicyDocument || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want InvalidPolicyDocument %q", tc.doc, err, tc.msg)
		}
	}
}

// FuzzParseCORS: the CORS configuration parser never panics, fails only
// with MalformedXML or InvalidRequest, and what it accepts is stored in a
// form it reads back the same, within S3's limits.
func FuzzParseCORS(f *testing.F) {
	f.Add([]byte(corsDoc))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>`))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin>a*b*c</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>`))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>OPTIONS</AllowedMethod><MaxAgeSeconds>1</MaxAgeSeconds></CORSRule></CORSConfiguration>`))
	f.Add([]byte(`<CORSConfiguration><CORSRule><ID>&lt;x&gt;</ID><AllowedOrigin> * </AllowedOrigin><AllowedMethod>PUT</AllowedMethod></CORSRule>trailing`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseCORS(data)
		if err != nil {
			if code := s3err.CodeOf(err); code != s3err.CodeMalformedXML && code != s3err.CodeInvalidRequest {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(c.Rules) == 0 || len(c.Rules) > maxCORSRules {
			t.Fatalf("accepted %d rules", len(c.Rules))
		}
		for _, r := range c.Rules {
			for _, m := range r.AllowedMethods {
				if !isCORSMethod(m) {
					t.Fatalf("accepted method %q", m)
				}
			}
			// Matching an accepted rule never panics.
			r.allows("https://x.example", "GET", []string{"x-amz-date"})
		}
		doc, err := c.encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := parseCORS([]byte(doc))
		if err != nil {
			t.Fatalf("stored form %q does not parse: %v", doc, err)
		}
		if doc2, _ := again.encode(); doc2 != doc {
			t.Fatalf("stored form changed: %q then %q", doc, doc2)
		}
	})
}

// FuzzParsePostPolicy: the POST policy parser never panics and fails only
// with InvalidPolicyDocument.
func FuzzParsePostPolicy(f *testing.F) {
	f.Add([]byte(`{"expiration": "2030-01-01T12:00:00.000Z", "conditions": [{"bucket": "b"}, ["starts-with", "$key", "u/"], ["content-length-range", 0, 10]]}`))
	f.Add([]byte(`{"expiration": "2030-01-01T12:00:00Z", "conditions": [["eq", "$acl", "private"], ["content-length-range", "1", "2"]]}`))
	f.Add([]byte(`{"expiration": 1, "conditions": {}}`))
	f.Add([]byte(`{"conditions": [[]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePostPolicy(data)
		if err != nil {
			if s3err.CodeOf(err) != s3err.CodeInvalidPolicyDocument {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if p.hasRange && (p.minLen < 0 || p.maxLen < p.minLen) {
			t.Fatalf("accepted range %d-%d", p.minLen, p.maxLen)
		}
		_ = p.check(map[string]string{"key": "k"}, map[string]string{"key": "k"}, time.Now())
	})
}
