package access

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
)

// ACL permissions.
const (
	PermRead        = "READ"
	PermWrite       = "WRITE"
	PermReadACP     = "READ_ACP"
	PermWriteACP    = "WRITE_ACP"
	PermFullControl = "FULL_CONTROL"
)

// Group URIs of S3's predefined groups.
const (
	AllUsers           = "http://acs.amazonaws.com/groups/global/AllUsers"
	AuthenticatedUsers = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	LogDelivery        = "http://acs.amazonaws.com/groups/s3/LogDelivery"
)

// Grantee types (xsi:type).
const (
	TypeCanonicalUser = "CanonicalUser"
	TypeGroup         = "Group"
)

// ACL is an access control list: its owner and grants. fedgate's canonical
// user id is the user name.
type ACL struct {
	Owner  string  `json:"owner"`
	Grants []Grant `json:"grants,omitempty"`
}

// Grant gives one grantee one permission.
type Grant struct {
	Type       string `json:"type"`          // CanonicalUser or Group
	ID         string `json:"id,omitempty"`  // CanonicalUser
	URI        string `json:"uri,omitempty"` // Group
	Permission string `json:"perm"`
}

// CannedACLs are the x-amz-acl values S3 defines.
var CannedACLs = []string{"private", "public-read", "public-read-write", "authenticated-read",
	"aws-exec-read", "bucket-owner-read", "bucket-owner-full-control", "log-delivery-write"}

// Canned returns the ACL a canned name gives an object or bucket owned by
// owner in a bucket owned by bucketOwner.
func Canned(name, owner, bucketOwner string) (ACL, error) {
	a := ACL{Owner: owner, Grants: []Grant{userGrant(owner, PermFullControl)}}
	switch name {
	case "private", "aws-exec-read":
	case "public-read":
		a.Grants = append(a.Grants, groupGrant(AllUsers, PermRead))
	case "public-read-write":
		a.Grants = append(a.Grants, groupGrant(AllUsers, PermRead), groupGrant(AllUsers, PermWrite))
	case "authenticated-read":
		a.Grants = append(a.Grants, groupGrant(AuthenticatedUsers, PermRead))
	case "bucket-owner-read":
		if bucketOwner != owner {
			a.Grants = append(a.Grants, userGrant(bucketOwner, PermRead))
		}
	case "bucket-owner-full-control":
		if bucketOwner != owner {
			a.Grants = append(a.Grants, userGrant(bucketOwner, PermFullControl))
		}
	case "log-delivery-write":
		a.Grants = append(a.Grants, groupGrant(LogDelivery, PermWrite), groupGrant(LogDelivery, PermReadACP))
	default:
		return ACL{}, fmt.Errorf("unknown canned ACL %q (expected one of %s)", name, strings.Join(CannedACLs, ", "))
	}
	return a, nil
}

// Private is the ACL of a bucket or object without one.
func Private(owner string) ACL {
	return ACL{Owner: owner, Grants: []Grant{userGrant(owner, PermFullControl)}}
}

func userGrant(id, perm string) Grant {
	return Grant{Type: TypeCanonicalUser, ID: id, Permission: perm}
}
func groupGrant(uri, perm string) Grant {
	return Grant{Type: TypeGroup, URI: uri, Permission: perm}
}

// grantHeaders are the x-amz-grant-* headers and their permissions.
var grantHeaders = []struct{ header, perm string }{
	{"x-amz-grant-read", PermRead},
	{"x-amz-grant-write", PermWrite},
	{"x-amz-grant-read-acp", PermReadACP},
	{"x-amz-grant-write-acp", PermWriteACP},
	{"x-amz-grant-full-control", PermFullControl},
}

// HasACLHeaders reports a request that sets an ACL with headers.
func HasACLHeaders(h http.Header) bool {
	if h.Get("x-amz-acl") != "" {
		return true
	}
	for _, g := range grantHeaders {
		if h.Get(g.header) != "" {
			return true
		}
	}
	return false
}

// FromHeaders reads the ACL a request sets with x-amz-acl or x-amz-grant-*
// headers (ok false: none). Both at once is an error, as in S3. Grantees
// named by id must pass known.
func FromHeaders(h http.Header, owner, bucketOwner string, known func(id string) bool) (a ACL, ok bool, err error) {
	canned := h.Get("x-amz-acl")
	var grants []Grant
	for _, g := range grantHeaders {
		v := h.Get(g.header)
		if v == "" {
			continue
		}
		list, err := parseGrantees(v, g.header, g.perm, known)
		if err != nil {
			return ACL{}, false, err
		}
		grants = append(grants, list...)
	}
	switch {
	case canned != "" && grants != nil:
		return ACL{}, false, &Error{Message: "Specifying both Canned ACLs and Header Grants is not allowed"}
	case canned != "":
		a, err := Canned(canned, owner, bucketOwner)
		if err != nil {
			return ACL{}, false, &Error{Message: err.Error()}
		}
		return a, true, nil
	case grants != nil:
		return ACL{Owner: owner, Grants: grants}, true, nil
	}
	return ACL{}, false, nil
}

// parseGrantees reads `id="x", uri="y"` lists of a grant header.
func parseGrantees(v, header, perm string, known func(string) bool) ([]Grant, error) {
	var out []Grant
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, &Error{Message: fmt.Sprintf("%s: %q is not of the form id=\"...\" or uri=\"...\"", header, item)}
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "id":
			if !known(val) {
				return nil, &InvalidGranteeError{ID: val}
			}
			out = append(out, userGrant(val, perm))
		case "uri":
			if err := checkGroup(val); err != nil {
				return nil, err
			}
			out = append(out, groupGrant(val, perm))
		case "emailaddress":
			return nil, &UnresolvableEmailError{Email: val}
		default:
			return nil, &Error{Message: fmt.Sprintf("%s: unknown grantee type %q (expected id, uri or emailAddress)", header, k)}
		}
	}
	return out, nil
}

// InvalidGranteeError names a canonical user id fedgate does not know
// (S3: InvalidArgument "Invalid id").
type InvalidGranteeError struct{ ID string }

func (e *InvalidGranteeError) Error() string {
	return fmt.Sprintf("Invalid id: no user %q (a grantee's canonical id is a fedgate user name)", e.ID)
}

// UnresolvableEmailError is a grantee named by e-mail address (S3:
// UnresolvableGrantByEmailAddress).
type UnresolvableEmailError struct{ Email string }

func (e *UnresolvableEmailError) Error() string {
	return fmt.Sprintf("The e-mail address %q you provided does not match any account on record: fedgate names grantees by user name (id=\"NAME\")", e.Email)
}

func checkGroup(uri string) error {
	switch uri {
	case AllUsers, AuthenticatedUsers, LogDelivery:
		return nil
	}
	return &Error{Message: fmt.Sprintf("Invalid group uri %q (expected %s, %s or %s)", uri, AllUsers, AuthenticatedUsers, LogDelivery)}
}

// Permits reports whether a grants perm to p. FULL_CONTROL implies every
// permission. With ignorePublic (IgnorePublicAcls), grants to AllUsers and
// AuthenticatedUsers count for nothing.
func (a ACL) Permits(p Principal, perm string, ignorePublic bool) bool {
	for _, g := range a.Grants {
		if g.Permission != perm && g.Permission != PermFullControl {
			continue
		}
		switch g.Type {
		case TypeCanonicalUser:
			if !p.Anonymous && g.ID == p.User {
				return true
			}
		case TypeGroup:
			if ignorePublic {
				continue
			}
			if g.URI == AllUsers || g.URI == AuthenticatedUsers && !p.Anonymous {
				return true
			}
		}
	}
	return false
}

// GrantsBeyondOwner reports whether a grants anything to a grantee other
// than its owner.
func (a ACL) GrantsBeyondOwner() bool {
	for _, g := range a.Grants {
		if g.Type != TypeCanonicalUser || g.ID != a.Owner {
			return true
		}
	}
	return false
}

// Public reports whether a grants anything to AllUsers or
// AuthenticatedUsers (S3's test for BlockPublicAcls and policy status).
func (a ACL) Public() bool {
	for _, g := range a.Grants {
		if g.Type == TypeGroup && (g.URI == AllUsers || g.URI == AuthenticatedUsers) {
			return true
		}
	}
	return false
}

// Encode is the ACL's stored form (compact JSON).
func (a ACL) Encode() string {
	b, _ := json.Marshal(a)
	return string(b)
}

// DecodeACL reads what Encode wrote.
func DecodeACL(s string) (ACL, error) {
	var a ACL
	err := json.Unmarshal([]byte(s), &a)
	return a, err
}

// xsiNS is the XML Schema instance namespace of xsi:type.
const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// AccessControlPolicy is the XML of GetBucketAcl / GetObjectAcl.
type AccessControlPolicy struct {
	XMLName xml.Name   `xml:"AccessControlPolicy"`
	Xmlns   string     `xml:"xmlns,attr,omitempty"`
	Owner   xmlOwner   `xml:"Owner"`
	Grants  []xmlGrant `xml:"AccessControlList>Grant"`
}

type xmlOwner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

type xmlGrant struct {
	Grantee    xmlGrantee `xml:"Grantee"`
	Permission string     `xml:"Permission"`
}

type xmlGrantee struct {
	XMLNSXsi    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
	Email       string `xml:"EmailAddress,omitempty"`
}

// XML returns a's AccessControlPolicy document.
func (a ACL) XML(ns string) AccessControlPolicy {
	out := AccessControlPolicy{Xmlns: ns, Owner: xmlOwner{ID: a.Owner, DisplayName: a.Owner}}
	for _, g := range a.Grants {
		ge := xmlGrantee{XMLNSXsi: xsiNS, Type: g.Type, ID: g.ID, URI: g.URI}
		if g.Type == TypeCanonicalUser {
			ge.DisplayName = g.ID
		}
		out.Grants = append(out.Grants, xmlGrant{Grantee: ge, Permission: g.Permission})
	}
	return out
}

// inPolicy is AccessControlPolicy as a client sends it (xsi:type resolved
// by namespace, whatever its prefix).
type inPolicy struct {
	Owner *struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type  string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID    string `xml:"ID"`
			URI   string `xml:"URI"`
			Email string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// MaxGrants is S3's limit on the grants of one ACL.
const MaxGrants = 100

// ParseACLXML reads a PutBucketAcl / PutObjectAcl body. The owner must be
// the current owner (S3 does not let an ACL change it). Errors are *Error
// (MalformedACLError), *InvalidGranteeError or *UnresolvableEmailError.
func ParseACLXML(body []byte, owner string, known func(string) bool) (ACL, error) {
	var in inPolicy
	if err := xml.Unmarshal(body, &in); err != nil {
		return ACL{}, &Error{Message: "The XML you provided was not well-formed or did not validate against our published schema: " + err.Error()}
	}
	if in.Owner != nil && in.Owner.ID != "" && in.Owner.ID != owner {
		return ACL{}, &Error{Message: fmt.Sprintf("The ACL's owner %q is not the owner %q: an ACL cannot change the owner", in.Owner.ID, owner)}
	}
	if len(in.Grants) > MaxGrants {
		return ACL{}, &Error{Message: fmt.Sprintf("An ACL holds at most %d grants; this one has %d", MaxGrants, len(in.Grants))}
	}
	a := ACL{Owner: owner}
	for _, g := range in.Grants {
		switch g.Permission {
		case PermRead, PermWrite, PermReadACP, PermWriteACP, PermFullControl:
		default:
			return ACL{}, &Error{Message: fmt.Sprintf("Invalid permission %q (expected READ, WRITE, READ_ACP, WRITE_ACP or FULL_CONTROL)", g.Permission)}
		}
		ge := g.Grantee
		switch {
		case ge.Type == TypeCanonicalUser || ge.Type == "" && ge.ID != "":
			if !known(ge.ID) {
				return ACL{}, &InvalidGranteeError{ID: ge.ID}
			}
			a.Grants = append(a.Grants, userGrant(ge.ID, g.Permission))
		case ge.Type == TypeGroup || ge.Type == "" && ge.URI != "":
			if err := checkGroup(ge.URI); err != nil {
				return ACL{}, err
			}
			a.Grants = append(a.Grants, groupGrant(ge.URI, g.Permission))
		case ge.Type == "AmazonCustomerByEmail" || ge.Email != "":
			return ACL{}, &UnresolvableEmailError{Email: ge.Email}
		default:
			return ACL{}, &Error{Message: fmt.Sprintf("Invalid grantee type %q (expected CanonicalUser or Group)", ge.Type)}
		}
	}
	return a, nil
}
