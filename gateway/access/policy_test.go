package access

import (
	"errors"
	"strings"
	"testing"
)

func mustPolicy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc), "datasets")
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

func req(user, action, key string, keys map[string]string) Request {
	pr := Principal{User: user}
	if user == "" {
		pr = Principal{Anonymous: true}
	}
	if keys == nil {
		keys = map[string]string{}
	}
	return Request{Principal: pr, Action: action, Resource: Resource("datasets", key), Keys: keys}
}

func TestPublicPrefixPolicy(t *testing.T) {
	p := mustPolicy(t, `{"Version":"2012-10-17","Statement":[{"Sid":"pub","Effect":"Allow","Principal":"*",
		"Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/public/*"}]}`)
	for _, tc := range []struct {
		user, action, key string
		want              Decision
	}{
		{"", "s3:GetObject", "public/x", Allowed},
		{"", "s3:GetObject", "public/a/b/c", Allowed},
		{"alice", "s3:GetObject", "public/x", Allowed},
		{"", "s3:GetObject", "private/x", NoOpinion},
		{"", "s3:GetObject", "publicx", NoOpinion},
		{"", "s3:PutObject", "public/x", NoOpinion},
		{"", "s3:ListBucket", "", NoOpinion},
		{"", "S3:GETOBJECT", "public/x", Allowed}, // actions ignore case
	} {
		if got := p.Evaluate(req(tc.user, tc.action, tc.key, nil)); got != tc.want {
			t.Errorf("%q %s %s = %v, want %v", tc.user, tc.action, tc.key, got, tc.want)
		}
	}
	if !p.Public() {
		t.Error("a GetObject grant to * is not public")
	}
}

func TestDenyBeatsAllow(t *testing.T) {
	p := mustPolicy(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123456789012:user/alice"]},"Action":"s3:*","Resource":["arn:aws:s3:::datasets","arn:aws:s3:::datasets/*"]},
		{"Effect":"Deny","Principal":"*","Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::datasets/secret/*"}]}`)
	if got := p.Evaluate(req("alice", "s3:GetObject", "train/1", nil)); got != Allowed {
		t.Errorf("alice train/1 = %v", got)
	}
	if got := p.Evaluate(req("alice", "s3:GetObject", "secret/1", nil)); got != Denied {
		t.Errorf("alice secret/1 = %v, want deny", got)
	}
	if got := p.Evaluate(req("bob", "s3:GetObject", "train/1", nil)); got != NoOpinion {
		t.Errorf("bob train/1 = %v", got)
	}
	if p.Public() {
		t.Error("a policy that only denies to * is public")
	}
	root := Request{Principal: Principal{User: "root", Root: true}, Action: "s3:GetObject", Resource: Resource("datasets", "secret/x")}
	if got := p.Evaluate(root); got != Denied {
		t.Errorf("root secret = %v, want deny (an explicit deny applies to root too)", got)
	}
}

func TestNotElementsAndConditions(t *testing.T) {
	p := mustPolicy(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::datasets/*","Condition":{"Bool":{"aws:SecureTransport":"false"}}},
		{"Effect":"Allow","Principal":"*","NotAction":"s3:Delete*","Resource":"arn:aws:s3:::datasets/*","Condition":{"IpAddress":{"aws:SourceIp":["10.0.0.0/8","192.168.1.7"]}}},
		{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::datasets","Condition":{"StringLike":{"s3:prefix":["home/${aws:username}/*"]},"StringEquals":{"s3:delimiter":"/"}}},
		{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","NotResource":"arn:aws:s3:::datasets/private/*","Condition":{"StringEquals":{"aws:username":"carol"}}}]}`)
	k := func(kv ...string) map[string]string {
		m := map[string]string{"aws:securetransport": "true"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for i, tc := range []struct {
		user, action, key string
		keys              map[string]string
		want              Decision
	}{
		{"", "s3:GetObject", "a", k("aws:sourceip", "10.1.2.3"), Allowed},
		{"", "s3:GetObject", "a", k("aws:sourceip", "192.168.1.7"), Allowed},
		{"", "s3:GetObject", "a", k("aws:sourceip", "192.168.1.8"), NoOpinion},
		{"", "s3:GetObject", "a", k("aws:sourceip", "::ffff:10.0.0.1"), Allowed},
		{"", "s3:DeleteObject", "a", k("aws:sourceip", "10.1.2.3"), NoOpinion},
		{"", "s3:GetObject", "a", map[string]string{"aws:securetransport": "false", "aws:sourceip": "10.1.2.3"}, Denied},
		{"", "s3:GetObject", "a", k(), NoOpinion}, // no source ip: IpAddress is false
		{"dave", "s3:ListBucket", "", k("aws:username", "dave", "s3:prefix", "home/dave/x", "s3:delimiter", "/"), Allowed},
		{"dave", "s3:ListBucket", "", k("aws:username", "dave", "s3:prefix", "home/erin/x", "s3:delimiter", "/"), NoOpinion},
		{"dave", "s3:ListBucket", "", k("aws:username", "dave", "s3:prefix", "home/dave/x"), NoOpinion},
		{"carol", "s3:GetObject", "public", k("aws:username", "carol"), Allowed},
		{"carol", "s3:GetObject", "private/x", k("aws:username", "carol"), NoOpinion},
	} {
		if got := p.Evaluate(req(tc.user, tc.action, tc.key, tc.keys)); got != tc.want {
			t.Errorf("case %d: %q %s %q %v = %v, want %v", i, tc.user, tc.action, tc.key, tc.keys, got, tc.want)
		}
	}
	if !p.Public() {
		t.Error("not public, but its ListBucket statement allows * with no fixed caller")
	}
}

func TestNegatedAndNullConditions(t *testing.T) {
	p := mustPolicy(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::datasets/*","Condition":{"StringNotEquals":{"s3:x-amz-acl":["private","bucket-owner-full-control"]}}},
		{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::datasets/*","Condition":{"Null":{"aws:username":"false"}}}]}`)
	if got := p.Evaluate(req("u", "s3:PutObject", "k", map[string]string{"aws:username": "u", "s3:x-amz-acl": "private"})); got != Allowed {
		t.Errorf("private PUT = %v", got)
	}
	if got := p.Evaluate(req("u", "s3:PutObject", "k", map[string]string{"aws:username": "u", "s3:x-amz-acl": "public-read"})); got != Denied {
		t.Errorf("public-read PUT = %v, want deny", got)
	}
	// A negated operator on an absent key matches: no x-amz-acl is denied.
	if got := p.Evaluate(req("u", "s3:PutObject", "k", map[string]string{"aws:username": "u"})); got != Denied {
		t.Errorf("PUT without x-amz-acl = %v, want deny", got)
	}
	if got := p.Evaluate(req("", "s3:PutObject", "k", map[string]string{"s3:x-amz-acl": "private"})); got != NoOpinion {
		t.Errorf("anonymous PUT = %v (Null aws:username false needs the key)", got)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	ok := `"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"`
	for _, tc := range []struct{ doc, want string }{
		{`{`, "invalid Json"},
		{`{"Version":"2012-10-17"}`, "Missing required field Statement"},
		{`{"Version":"2012-10-17","Statement":[]}`, "no statements"},
		{`{"Version":"2020-01-01","Statement":{` + ok + `}}`, `Version "2020-01-01"`},
		{`{"Version":"2012-10-17","Statment":{` + ok + `}}`, `unknown field "Statment"`},
		{`{"Statement":{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`, "Missing required field Principal"},
		{`{"Statement":{"Effect":"Permit","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`, `Effect must be "Allow" or "Deny"`},
		{`{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObjekt","Resource":"arn:aws:s3:::datasets/*"}}`, `invalid action "s3:GetObjekt" (did you mean "s3:GetObject"?)`},
		{`{"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:RunInstances","Resource":"arn:aws:s3:::datasets/*"}}`, "invalid action"},
		{`{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}}`, `invalid resource "arn:aws:s3:::other/*"`},
		{`{"Statement":{"Effect":"Allow","Principal":"alice","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`, "Invalid principal"},
		{`{"Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123:user/x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`, "not 12 digits"},
		{`{"Statement":{` + ok + `,"Condition":{"StringEqual":{"s3:prefix":"a"}}}}`, `Invalid Condition type "StringEqual" (did you mean "StringEquals"?)`},
		{`{"Statement":{` + ok + `,"Condition":{"StringEquals":{"aws:SorceIp":"a"}}}}`, `invalid condition key "aws:SorceIp"`},
		{`{"Statement":{` + ok + `,"Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/33"}}}}`, "not an IP address"},
		{`{"Statement":{` + ok + `,"Condition":{"NumericLessThan":{"s3:max-keys":"ten"}}}}`, "not a number"},
		{`{"Statement":{` + ok + `,"NotAction":"s3:PutObject"}}`, "Action and NotAction cannot both"},
		{`{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}}`, "Missing required field Resource"},
		{`{"Statement":[{` + ok + `}]} {}`, "data after"},
		{`{"Statement":{` + ok + `},"Padding":"` + strings.Repeat("x", MaxPolicySize) + `"}`, "at most"},
	} {
		_, err := ParsePolicy([]byte(tc.doc), "datasets")
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%.80s) = %v, want an *Error containing %q", tc.doc, err, tc.want)
		}
	}
}

func TestWildMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abbb", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"a?c", "aéc", true}, {`a\*`, "a*", true}, {`a\*`, "ab", false},
		{"*/x/*", "a/x/b", true}, {"*/x/*", "a/y/b", false}, {"", "", true}, {"", "a", false},
	} {
		if got := wildMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("wildMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
	// A user name holding wildcards matches only itself through ${aws:username}.
	p := mustPolicy(t, `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/home/${aws:username}/*"}}`)
	if got := p.Evaluate(req("a*", "s3:GetObject", "home/abc/x", map[string]string{"aws:username": "a*"})); got != NoOpinion {
		t.Errorf("user a* reading home/abc = %v", got)
	}
	if got := p.Evaluate(req("a*", "s3:GetObject", "home/a*/x", map[string]string{"aws:username": "a*"})); got != Allowed {
		t.Errorf("user a* reading home/a* = %v", got)
	}
}
