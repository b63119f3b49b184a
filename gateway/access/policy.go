// Package access is S3's access-control model as fedgate enforces it:
// bucket policies (the JSON grammar and its evaluation), access control
// lists (canned and explicit grants, their XML and headers), Block Public
// Access, and what makes a policy or an ACL "public".
//
// It knows nothing about HTTP handlers or the region: the gateway builds a
// Request for each operation and combines the answers with fedgate's own
// users and grants (docs/security.md describes the order).
package access

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/internal/suggest"
)

// MaxPolicySize is S3's limit on a bucket policy document.
const MaxPolicySize = 20 << 10

// Effect of a statement.
const (
	Allow = "Allow"
	Deny  = "Deny"
)

// Decision is what a policy says about a request.
type Decision int

// The decisions: no statement applies, an Allow applies and no Deny, or a
// Deny applies (it wins over every Allow).
const (
	NoOpinion Decision = iota
	Allowed
	Denied
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allow"
	case Denied:
		return "deny"
	}
	return "no opinion"
}

// Principal is who sends a request.
type Principal struct {
	User      string // fedgate user name; "" when Anonymous
	Root      bool
	Anonymous bool
}

// Request is one operation as a policy sees it.
type Request struct {
	Principal Principal
	// Action is the S3 action, e.g. "s3:GetObject".
	Action string
	// Resource is the ARN: arn:aws:s3:::bucket or arn:aws:s3:::bucket/key.
	Resource string
	// Keys holds the request's condition keys by lower-case name
	// (aws:sourceip, s3:prefix, ...). A key absent from the map is absent
	// from the request.
	Keys map[string]string
}

// Policy is a parsed bucket policy.
type Policy struct {
	Version    string
	ID         string
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid       string
	Effect    string
	Principal principals // nil with NotPrincipal
	NotPrinc  principals
	Action    []string // lower-case patterns; nil with NotAction
	NotAction []string
	Resource  []string // ARN patterns; nil with NotResource
	NotRes    []string
	Condition []condition
}

// principals is a Principal element: "*" or the users, roots and
// canonical ids it names.
type principals struct {
	set   bool
	any   bool            // "*" or {"AWS":"*"}
	users map[string]bool // fedgate user names (IAM user ARNs, CanonicalUser ids)
	root  bool            // an account (arn:aws:iam::ACCOUNT:root or ACCOUNT)
}

func (p principals) matches(pr Principal) bool {
	switch {
	case p.any:
		return true
	case pr.Anonymous:
		return false
	case pr.Root && p.root:
		return true
	}
	return p.users[pr.User]
}

// Error is a policy that fedgate refuses: S3 answers MalformedPolicy with
// Message.
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

func malformed(format string, args ...any) error {
	return &Error{Message: fmt.Sprintf(format, args...)}
}

// ParsePolicy reads a bucket policy for bucket. It checks the grammar, that
// every action is an S3 action, that every resource is in bucket, and that
// every condition operator and key is one fedgate evaluates.
func ParsePolicy(doc []byte, bucket string) (*Policy, error) {
	if len(doc) > MaxPolicySize {
		return nil, malformed("Policies must be at most %d bytes; this one has %d.", MaxPolicySize, len(doc))
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed("This policy contains invalid Json: %v", err)
	}
	if dec.More() {
		return nil, malformed("This policy contains invalid Json: data after the policy object")
	}
	p := &Policy{}
	for k, v := range raw {
		switch k {
		case "Version":
			if err := json.Unmarshal(v, &p.Version); err != nil {
				return nil, malformed("Version must be a string")
			}
			if p.Version != "2012-10-17" && p.Version != "2008-10-17" {
				return nil, malformed("The policy Version %q is not supported: use \"2012-10-17\".", p.Version)
			}
		case "Id":
			if err := json.Unmarshal(v, &p.ID); err != nil {
				return nil, malformed("Id must be a string")
			}
		case "Statement":
			stmts, err := oneOrMany(v)
			if err != nil {
				return nil, malformed("Statement must be an object or a list of objects")
			}
			for i, s := range stmts {
				st, err := parseStatement(s, bucket, p)
				if err != nil {
					return nil, malformed("Statement %d: %s", i+1, err.(*Error).Message)
				}
				p.Statements = append(p.Statements, st)
			}
		default:
			return nil, malformed("Policy has an unknown field %q (expected Version, Id, Statement).", k)
		}
	}
	if _, ok := raw["Statement"]; !ok {
		return nil, malformed("Missing required field Statement")
	}
	if len(p.Statements) == 0 {
		return nil, malformed("Policy has no statements")
	}
	return p, nil
}

// oneOrMany reads a JSON value that is one item or a list of them.
func oneOrMany(v json.RawMessage) ([]json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '[' {
		var list []json.RawMessage
		err := json.Unmarshal(v, &list)
		return list, err
	}
	return []json.RawMessage{v}, nil
}

// strings reads a string or a list of strings.
func stringList(v json.RawMessage, what string) ([]string, error) {
	items, err := oneOrMany(v)
	if err != nil {
		return nil, malformed("%s must be a string or a list of strings", what)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			return nil, malformed("%s must be a string or a list of strings", what)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, malformed("%s is empty", what)
	}
	return out, nil
}

func parseStatement(v json.RawMessage, bucket string, p *Policy) (Statement, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return Statement{}, malformed("a statement must be a JSON object")
	}
	var st Statement
	for k, v := range raw {
		if err := st.parseField(k, v, bucket); err != nil {
			return st, err
		}
	}
	return st, st.complete()
}

// parseField sets the statement's element k from its JSON value v.
func (st *Statement) parseField(k string, v json.RawMessage, bucket string) error {
	var err error
	switch k {
	case "Sid":
		if json.Unmarshal(v, &st.Sid) != nil {
			return malformed("Sid must be a string")
		}
	case "Effect":
		if json.Unmarshal(v, &st.Effect) != nil || (st.Effect != Allow && st.Effect != Deny) {
			return malformed("Effect must be \"Allow\" or \"Deny\"")
		}
	case "Principal":
		st.Principal, err = parsePrincipal(v)
	case "NotPrincipal":
		st.NotPrinc, err = parsePrincipal(v)
	case "Action", "NotAction":
		var acts []string
		if acts, err = stringList(v, k); err == nil {
			for i, a := range acts {
				if acts[i], err = checkAction(a); err != nil {
					break
				}
			}
		}
		if k == "Action" {
			st.Action = acts
		} else {
			st.NotAction = acts
		}
	case "Resource", "NotResource":
		var res []string
		if res, err = stringList(v, k); err == nil {
			for _, r := range res {
				if err = checkResource(r, bucket); err != nil {
					break
				}
			}
		}
		if k == "Resource" {
			st.Resource = res
		} else {
			st.NotRes = res
		}
	case "Condition":
		st.Condition, err = parseConditions(v)
	default:
		return malformed("unknown field %q (expected Sid, Effect, Principal, NotPrincipal, Action, NotAction, Resource, NotResource, Condition)", k)
	}
	return err
}

// complete checks that the statement has the elements S3 requires, each
// either as itself or as its Not form.
func (st *Statement) complete() error {
	switch {
	case st.Effect == "":
		return malformed("Missing required field Effect")
	case !st.Principal.set && !st.NotPrinc.set:
		return malformed("Missing required field Principal (a bucket policy names who it applies to: \"*\" or {\"AWS\": \"arn:aws:iam::ACCOUNT:user/NAME\"})")
	case st.Principal.set && st.NotPrinc.set:
		return malformed("Principal and NotPrincipal cannot both be given")
	case st.Action == nil && st.NotAction == nil:
		return malformed("Missing required field Action")
	case st.Action != nil && st.NotAction != nil:
		return malformed("Action and NotAction cannot both be given")
	case st.Resource == nil && st.NotRes == nil:
		return malformed("Missing required field Resource")
	case st.Resource != nil && st.NotRes != nil:
		return malformed("Resource and NotResource cannot both be given")
	}
	return nil
}

func parsePrincipal(v json.RawMessage) (principals, error) {
	p := principals{set: true, users: map[string]bool{}}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s != "*" {
			return p, malformed("Invalid principal in policy: %q (expected \"*\" or an object such as {\"AWS\": \"arn:aws:iam::ACCOUNT:user/NAME\"})", s)
		}
		p.any = true
		return p, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil || len(m) == 0 {
		return p, malformed("Invalid principal in policy: expected \"*\" or an object")
	}
	for kind, val := range m {
		ids, err := stringList(val, "Principal."+kind)
		if err != nil {
			return p, err
		}
		for _, id := range ids {
			switch kind {
			case "AWS":
				switch {
				case id == "*":
					p.any = true
				case isAccountID(id):
					p.root = true
				case strings.HasPrefix(id, "arn:aws:iam::"):
					acct, res, _ := strings.Cut(strings.TrimPrefix(id, "arn:aws:iam::"), ":")
					switch {
					case !isAccountID(acct) && acct != "":
						return p, malformed("Invalid principal in policy: %q has an account id that is not 12 digits", id)
					case res == "root":
						p.root = true
					case strings.HasPrefix(res, "user/") && len(res) > len("user/"):
						p.users[path.Base(res)] = true
					default:
						return p, malformed("Invalid principal in policy: %q (fedgate knows users, arn:aws:iam::ACCOUNT:user/NAME, and the account root, arn:aws:iam::ACCOUNT:root)", id)
					}
				default:
					return p, malformed("Invalid principal in policy: %q (expected \"*\", an account id or an IAM user ARN)", id)
				}
			case "CanonicalUser":
				// fedgate's canonical user id is the user name.
				p.users[id] = true
			case "Service", "Federated":
				// Valid in AWS; no such callers exist in fedgate, so these
				// match nobody.
			default:
				return p, malformed("Invalid principal in policy: unknown principal type %q (expected AWS, CanonicalUser, Service or Federated)", kind)
			}
		}
	}
	return p, nil
}

func isAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func checkAction(a string) (string, error) {
	l := strings.ToLower(a)
	if l == "*" {
		return l, nil
	}
	name, ok := strings.CutPrefix(l, "s3:")
	if !ok {
		return "", malformed("Policy has invalid action %q: a bucket policy holds S3 actions (s3:GetObject, s3:*, ...)", a)
	}
	if strings.ContainsAny(name, "*?") {
		return l, nil
	}
	if !slices.ContainsFunc(Actions, func(k string) bool { return strings.EqualFold(k, a) }) {
		return "", malformed("Policy has invalid action %q%s", a, didYouMean(a, Actions))
	}
	return l, nil
}

// checkResource requires an S3 ARN in bucket (S3: "Policy has invalid
// resource").
func checkResource(r, bucket string) error {
	rest, ok := strings.CutPrefix(r, "arn:aws:s3:::")
	if !ok {
		if r == "*" {
			return nil
		}
		return malformed("Policy has invalid resource %q: expected arn:aws:s3:::%s or arn:aws:s3:::%s/KEY-PATTERN", r, bucket, bucket)
	}
	b, _, _ := strings.Cut(rest, "/")
	if !wildMatch(b, bucket) {
		return malformed("Policy has invalid resource %q: a policy of bucket %q can only name resources in it", r, bucket)
	}
	return nil
}

// Evaluate returns what p says about r: Denied when a Deny statement
// applies, else Allowed when an Allow statement applies, else NoOpinion.
func (p *Policy) Evaluate(r Request) Decision {
	if p == nil {
		return NoOpinion
	}
	d := NoOpinion
	for i := range p.Statements {
		st := &p.Statements[i]
		if !st.applies(r, p.Version) {
			continue
		}
		if st.Effect == Deny {
			return Denied
		}
		d = Allowed
	}
	return d
}

func (st *Statement) applies(r Request, version string) bool {
	if st.Principal.set && !st.Principal.matches(r.Principal) {
		return false
	}
	if st.NotPrinc.set && st.NotPrinc.matches(r.Principal) {
		return false
	}
	act := strings.ToLower(r.Action)
	if st.Action != nil && !slices.ContainsFunc(st.Action, func(p string) bool { return wildMatch(p, act) }) {
		return false
	}
	if st.NotAction != nil && slices.ContainsFunc(st.NotAction, func(p string) bool { return wildMatch(p, act) }) {
		return false
	}
	vars := version != "2008-10-17"
	resMatch := func(p string) bool { return wildMatch(substitute(p, r, vars, true), r.Resource) }
	if st.Resource != nil && !slices.ContainsFunc(st.Resource, resMatch) {
		return false
	}
	if st.NotRes != nil && slices.ContainsFunc(st.NotRes, resMatch) {
		return false
	}
	for _, c := range st.Condition {
		if !c.eval(r, vars) {
			return false
		}
	}
	return true
}

// substitute replaces policy variables (${aws:username}, ${*}, ...) in a
// pattern; in a resource pattern the ${*} and ${?} escapes become literal
// characters matched by wildMatch's escape.
func substitute(p string, r Request, vars, pattern bool) string {
	if !vars || !strings.Contains(p, "${") {
		return p
	}
	var b strings.Builder
	for {
		i := strings.Index(p, "${")
		if i < 0 {
			b.WriteString(p)
			return b.String()
		}
		b.WriteString(p[:i])
		j := strings.IndexByte(p[i:], '}')
		if j < 0 {
			b.WriteString(p[i:])
			return b.String()
		}
		name := p[i+2 : i+j]
		p = p[i+j+1:]
		switch name {
		case "*", "?", "$":
			if pattern && name != "$" {
				b.WriteString("\\" + name)
			} else {
				b.WriteString(name)
			}
			continue
		}
		v, ok := r.Keys[strings.ToLower(name)]
		if !ok {
			// An unknown or absent variable matches nothing: use a value
			// no key or resource holds.
			v = "\x00"
		}
		if pattern {
			v = escapeWild(v)
		}
		b.WriteString(v)
	}
}

func escapeWild(s string) string {
	if !strings.ContainsAny(s, `*?\`) {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`)
	return r.Replace(s)
}

// wildMatch matches s against pattern with * (any run) and ? (one
// character); a backslash makes the next character literal.
func wildMatch(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			c := pattern[px]
			switch {
			case c == '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case c == '?' && sx < len(s):
				_, size := decodeRune(s[sx:])
				px++
				sx += size
				continue
			case c == '\\' && px+1 < len(pattern) && sx < len(s) && pattern[px+1] == s[sx]:
				px += 2
				sx++
				continue
			case c != '\\' && c != '?' && sx < len(s) && s[sx] == c:
				px++
				sx++
				continue
			}
		}
		if nextSx > 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}

func decodeRune(s string) (rune, int) {
	for i, r := range s {
		if i == 0 {
			n := len(string(r))
			if r == 0xFFFD && n > len(s) {
				n = 1
			}
			return r, min(n, len(s))
		}
	}
	return 0, 1
}

// condition is one operator applied to one key.
type condition struct {
	op       string // lower-case, without IfExists or a set prefix
	ifExists bool
	forAll   bool // ForAllValues: true when the key is absent
	key      string
	values   []string
	nets     []netip.Prefix
}

// conditionOps are the operators fedgate evaluates (lower-case).
var conditionOps = []string{
	"stringequals", "stringnotequals", "stringequalsignorecase", "stringnotequalsignorecase",
	"stringlike", "stringnotlike",
	"numericequals", "numericnotequals", "numericlessthan", "numericlessthanequals",
	"numericgreaterthan", "numericgreaterthanequals",
	"dateequals", "datenotequals", "datelessthan", "datelessthanequals", "dategreaterthan", "dategreaterthanequals",
	"bool", "ipaddress", "notipaddress", "null",
	"arnequals", "arnlike", "arnnotequals", "arnnotlike",
}

// ConditionKeys are the keys fedgate sets (lower-case). Each request sets
// the ones that apply to it.
var ConditionKeys = []string{
	"aws:sourceip", "aws:securetransport", "aws:username", "aws:userid", "aws:principaltype",
	"aws:currenttime", "aws:epochtime", "aws:useragent", "aws:referer",
	"s3:prefix", "s3:delimiter", "s3:max-keys", "s3:x-amz-acl", "s3:x-amz-content-sha256",
	"s3:authtype", "s3:signatureversion", "s3:x-amz-copy-source", "s3:x-amz-metadata-directive",
	"s3:versionid", "s3:x-amz-grant-read", "s3:x-amz-grant-write", "s3:x-amz-grant-read-acp",
	"s3:x-amz-grant-write-acp", "s3:x-amz-grant-full-control",
}

func parseConditions(v json.RawMessage) ([]condition, error) {
	var ops map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &ops); err != nil {
		return nil, malformed("Condition must be an object of operators, each an object of keys and values")
	}
	var out []condition
	for _, rawOp := range slices.Sorted(mapKeys(ops)) {
		op := strings.ToLower(rawOp)
		c := condition{}
		if rest, ok := strings.CutPrefix(op, "forallvalues:"); ok {
			op, c.forAll = rest, true
		} else if rest, ok := strings.CutPrefix(op, "foranyvalue:"); ok {
			op = rest
		}
		if rest, ok := strings.CutSuffix(op, "ifexists"); ok && rest != "" {
			op, c.ifExists = rest, true
		}
		if !slices.Contains(conditionOps, op) {
			return nil, malformed("Invalid Condition type %q%s", rawOp, didYouMean(rawOp, conditionOpNames))
		}
		c.op = op
		for _, rawKey := range slices.Sorted(mapKeys(ops[rawOp])) {
			key := strings.ToLower(rawKey)
			if !knownKey(key) {
				return nil, malformed("Policy has an invalid condition key %q (fedgate evaluates %s)", rawKey, strings.Join(ConditionKeys, ", "))
			}
			vals, err := conditionValues(ops[rawOp][rawKey], rawOp+"."+rawKey)
			if err != nil {
				return nil, err
			}
			cc := c
			cc.key, cc.values = key, vals
			if err := cc.check(rawOp, rawKey); err != nil {
				return nil, err
			}
			out = append(out, cc)
		}
	}
	return out, nil
}

var conditionOpNames = []string{"StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
	"StringLike", "StringNotLike", "NumericEquals", "NumericNotEquals", "NumericLessThan", "NumericLessThanEquals",
	"NumericGreaterThan", "NumericGreaterThanEquals", "DateEquals", "DateNotEquals", "DateLessThan",
	"DateLessThanEquals", "DateGreaterThan", "DateGreaterThanEquals", "Bool", "IpAddress", "NotIpAddress", "Null",
	"ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"}

func knownKey(k string) bool { return slices.Contains(ConditionKeys, k) }

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// conditionValues reads a value or a list of values (strings, numbers or
// booleans, as policies write them).
func conditionValues(v json.RawMessage, what string) ([]string, error) {
	items, err := oneOrMany(v)
	if err != nil {
		return nil, malformed("Condition %s must be a value or a list of values", what)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var x any
		d := json.NewDecoder(bytes.NewReader(it))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return nil, malformed("Condition %s must be a value or a list of values", what)
		}
		switch x := x.(type) {
		case string:
			out = append(out, x)
		case json.Number:
			out = append(out, x.String())
		case bool:
			out = append(out, strconv.FormatBool(x))
		default:
			return nil, malformed("Condition %s holds %s; expected strings, numbers or booleans", what, it)
		}
	}
	if len(out) == 0 {
		return nil, malformed("Condition %s has no values", what)
	}
	return out, nil
}

// check validates values for the operator.
func (c *condition) check(rawOp, rawKey string) error {
	for _, v := range c.values {
		switch {
		case strings.HasPrefix(c.op, "numeric"):
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return malformed("Condition %s.%s: %q is not a number", rawOp, rawKey, v)
			}
		case strings.HasPrefix(c.op, "date"):
			if _, err := parseDate(v); err != nil {
				return malformed("Condition %s.%s: %q is not a date (expected e.g. 2026-12-31T00:00:00Z)", rawOp, rawKey, v)
			}
		case c.op == "bool", c.op == "null":
			if v != "true" && v != "false" {
				return malformed("Condition %s.%s: %q is not true or false", rawOp, rawKey, v)
			}
		case strings.HasSuffix(c.op, "ipaddress"):
			pfx, err := parsePrefix(v)
			if err != nil {
				return malformed("Condition %s.%s: %q is not an IP address or CIDR block", rawOp, rawKey, v)
			}
			c.nets = append(c.nets, pfx)
		}
	}
	return nil
}

func parsePrefix(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parseDate(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(n, 0), nil
}

// negated operators match when no value matches (and when the key is
// absent).
func (c *condition) negated() bool {
	switch c.op {
	case "stringnotequals", "stringnotequalsignorecase", "stringnotlike", "numericnotequals", "datenotequals",
		"notipaddress", "arnnotequals", "arnnotlike":
		return true
	}
	return false
}

func (c *condition) eval(r Request, vars bool) bool {
	v, ok := r.Keys[c.key]
	if c.op == "null" {
		// Null true: the key must be absent.
		return slices.Contains(c.values, strconv.FormatBool(!ok))
	}
	if !ok {
		return c.ifExists || c.forAll || c.negated()
	}
	any := false
	for i, want := range c.values {
		if c.match(v, substitute(want, r, vars, c.op == "stringlike" || c.op == "stringnotlike" || c.op == "arnlike" || c.op == "arnnotlike"), i) {
			any = true
			break
		}
	}
	if c.negated() {
		return !any
	}
	return any
}

func (c *condition) match(v, want string, i int) bool {
	switch c.op {
	case "stringequals", "stringnotequals", "arnequals", "arnnotequals":
		return v == want
	case "stringequalsignorecase", "stringnotequalsignorecase":
		return strings.EqualFold(v, want)
	case "stringlike", "stringnotlike", "arnlike", "arnnotlike":
		return wildMatch(want, v)
	case "bool":
		return strings.EqualFold(v, want)
	case "ipaddress", "notipaddress":
		a, err := netip.ParseAddr(v)
		return err == nil && c.nets[i].Contains(a.Unmap())
	}
	if strings.HasPrefix(c.op, "numeric") {
		x, err1 := strconv.ParseFloat(v, 64)
		y, err2 := strconv.ParseFloat(want, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return compare(c.op[len("numeric"):], cmpFloat(x, y))
	}
	if strings.HasPrefix(c.op, "date") {
		x, err1 := parseDate(v)
		y, err2 := parseDate(want)
		if err1 != nil || err2 != nil {
			return false
		}
		return compare(c.op[len("date"):], x.Compare(y))
	}
	return false
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func compare(rel string, c int) bool {
	switch rel {
	case "equals":
		return c == 0
	case "notequals":
		return c != 0
	case "lessthan":
		return c < 0
	case "lessthanequals":
		return c <= 0
	case "greaterthan":
		return c > 0
	case "greaterthanequals":
		return c >= 0
	}
	return false
}

// didYouMean returns " (did you mean X?)" for the choice closest to s, or "".
func didYouMean(s string, choices []string) string {
	if best := suggest.Closest(s, choices); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
