package access

import (
	"encoding/xml"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func known(id string) bool { return id == "alice" || id == "bob" }

func TestCannedACLs(t *testing.T) {
	anon := Principal{Anonymous: true}
	bob := Principal{User: "bob"}
	for _, tc := range []struct {
		canned          string
		anonRead, bobRd bool
		public          bool
	}{
		{"private", false, false, false},
		{"public-read", true, true, true},
		{"public-read-write", true, true, true},
		{"authenticated-read", false, true, true},
		{"bucket-owner-read", false, true, false},
	} {
		a, err := Canned(tc.canned, "alice", "bob")
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Permits(anon, PermRead, false); got != tc.anonRead {
			t.Errorf("%s: anonymous READ = %v", tc.canned, got)
		}
		if got := a.Permits(bob, PermRead, false); got != tc.bobRd {
			t.Errorf("%s: bob READ = %v", tc.canned, got)
		}
		if a.Public() != tc.public {
			t.Errorf("%s: Public = %v", tc.canned, a.Public())
		}
		if !a.Permits(Principal{User: "alice"}, PermWriteACP, false) {
			t.Errorf("%s: owner lacks FULL_CONTROL", tc.canned)
		}
		if a.Permits(anon, PermRead, true) && tc.canned != "private" {
			t.Errorf("%s: IgnorePublicAcls still lets anonymous read", tc.canned)
		}
	}
	if _, err := Canned("public", "a", "a"); err == nil || !strings.Contains(err.Error(), "public-read") {
		t.Errorf("unknown canned ACL error = %v", err)
	}
}

func TestACLFromHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("x-amz-grant-read", `uri="http://acs.amazonaws.com/groups/global/AllUsers", id="bob"`)
	h.Set("x-amz-grant-full-control", `id="alice"`)
	a, ok, err := FromHeaders(h, "alice", "alice", known)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := []Grant{groupGrant(AllUsers, PermRead), userGrant("bob", PermRead), userGrant("alice", PermFullControl)}
	if !reflect.DeepEqual(a.Grants, want) {
		t.Errorf("grants = %+v", a.Grants)
	}
	h.Set("x-amz-acl", "private")
	if _, _, err := FromHeaders(h, "alice", "alice", known); err == nil || !strings.Contains(err.Error(), "both Canned ACLs and Header Grants") {
		t.Errorf("canned+grants error = %v", err)
	}
	h = http.Header{"X-Amz-Grant-Read": {`id="mallory"`}}
	var ig *InvalidGranteeError
	if _, _, err := FromHeaders(h, "alice", "alice", known); !errors.As(err, &ig) {
		t.Errorf("unknown id error = %v", err)
	}
	h = http.Header{"X-Amz-Grant-Read": {`emailAddress="x@example.com"`}}
	var ue *UnresolvableEmailError
	if _, _, err := FromHeaders(h, "alice", "alice", known); !errors.As(err, &ue) {
		t.Errorf("email error = %v", err)
	}
	if _, ok, err := FromHeaders(http.Header{}, "alice", "alice", known); ok || err != nil {
		t.Errorf("no headers: %v %v", ok, err)
	}
}

func TestACLXMLRoundTrip(t *testing.T) {
	a, _ := Canned("public-read", "alice", "alice")
	a.Grants = append(a.Grants, userGrant("bob", PermWriteACP))
	out, err := xml.Marshal(a.XML("http://s3.amazonaws.com/doc/2006-03-01/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`xsi:type="Group"`, `xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"`, "<URI>" + AllUsers + "</URI>", "<Owner><ID>alice</ID>"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("XML lacks %s:\n%s", want, out)
		}
	}
	back, err := ParseACLXML(out, "alice", known)
	if err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, a)
	}
	// Another prefix for the XML Schema instance namespace is the same.
	other := strings.ReplaceAll(string(out), "xsi:", "i:")
	other = strings.ReplaceAll(other, "xmlns:xsi", "xmlns:i")
	if back, err := ParseACLXML([]byte(other), "alice", known); err != nil || !reflect.DeepEqual(back, a) {
		t.Errorf("prefix i: = %+v, %v", back, err)
	}
	for _, tc := range []struct{ body, want string }{
		{"<AccessControlPolicy><Owner><ID>bob</ID></Owner></AccessControlPolicy>", "cannot change the owner"},
		{"<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>alice</ID></Grantee><Permission>ALL</Permission></Grant></AccessControlList></AccessControlPolicy>", "Invalid permission"},
		{"<AccessControlPolicy", "not well-formed"},
	} {
		if _, err := ParseACLXML([]byte(tc.body), "alice", known); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseACLXML(%s) = %v, want %q", tc.body, err, tc.want)
		}
	}
	enc := a.Encode()
	if back, err := DecodeACL(enc); err != nil || !reflect.DeepEqual(back, a) {
		t.Errorf("Encode/DecodeACL = %+v, %v", back, err)
	}
}

func TestPublicAccessBlockXML(t *testing.T) {
	p, err := ParsePublicAccessBlock([]byte(`<PublicAccessBlockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><BlockPublicAcls>true</BlockPublicAcls><RestrictPublicBuckets>true</RestrictPublicBuckets></PublicAccessBlockConfiguration>`))
	if err != nil || !p.BlockPublicAcls || p.IgnorePublicAcls || !p.RestrictPublicBuckets {
		t.Fatalf("%+v %v", p, err)
	}
	back, err := ParsePublicAccessBlock([]byte(p.Encode()))
	if err != nil || back.BlockPublicAcls != p.BlockPublicAcls || back.RestrictPublicBuckets != p.RestrictPublicBuckets {
		t.Errorf("round trip %+v %v", back, err)
	}
	if got := p.Or(PublicAccessBlock{IgnorePublicAcls: true}); !got.IgnorePublicAcls || !got.BlockPublicAcls {
		t.Errorf("Or = %+v", got)
	}
}
