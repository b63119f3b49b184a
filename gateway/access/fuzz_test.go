package access

import (
	"testing"
)

// FuzzParsePolicy: no document panics the parser, and a policy it accepts
// evaluates without panicking.
func FuzzParsePolicy(f *testing.F) {
	f.Add(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/public/*"}]}`)
	f.Add(`{"Statement":{"Effect":"Deny","Principal":{"AWS":["arn:aws:iam::123456789012:user/a"]},"NotAction":"s3:Get*","NotResource":"arn:aws:s3:::datasets/${aws:username}/*","Condition":{"IpAddressIfExists":{"aws:SourceIp":"10.0.0.0/8"},"ForAllValues:StringLike":{"s3:prefix":["a*"]}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := ParsePolicy([]byte(doc), "datasets")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		keys := map[string]string{"aws:sourceip": "10.1.1.1", "s3:prefix": "a/b", "aws:username": "u"}
		for _, pr := range []Principal{{Anonymous: true}, {User: "u"}, {User: "root", Root: true}} {
			p.Evaluate(Request{Principal: pr, Action: "s3:GetObject", Resource: Resource("datasets", "a/b"), Keys: keys})
		}
		p.Public()
	})
}

// FuzzParseACLXML: no body panics the ACL parser.
func FuzzParseACLXML(f *testing.F) {
	a, _ := Canned("public-read", "alice", "alice")
	f.Add(`<AccessControlPolicy><Owner><ID>alice</ID></Owner><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>`)
	f.Add(a.Encode())
	f.Fuzz(func(t *testing.T, body string) {
		acl, err := ParseACLXML([]byte(body), "alice", known)
		if err == nil && acl.Owner != "alice" {
			t.Fatalf("owner %q", acl.Owner)
		}
	})
}
