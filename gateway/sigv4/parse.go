package sigv4

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// Algorithm is the only signing algorithm the verifier accepts.
const Algorithm = "AWS4-HMAC-SHA256"

// Terminal is the last component of every SigV4 credential scope.
const Terminal = "aws4_request"

// MaxPresignExpiry is the longest X-Amz-Expires S3 accepts: seven days.
const MaxPresignExpiry = 7 * 24 * time.Hour

// timeFormat is the ISO 8601 basic format of X-Amz-Date.
const timeFormat = "20060102T150405Z"

// Query parameters of a presigned URL.
const (
	queryAlgorithm     = "X-Amz-Algorithm"
	queryCredential    = "X-Amz-Credential"
	queryDate          = "X-Amz-Date"
	queryExpires       = "X-Amz-Expires"
	querySignedHeaders = "X-Amz-SignedHeaders"
	querySignature     = "X-Amz-Signature"
	queryContentSHA256 = "X-Amz-Content-Sha256"
)

const credentialFormat = `the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`

// Credential is the parsed Credential component:
// AccessKey/Date/Region/Service/Terminal.
type Credential struct {
	AccessKey string
	Date      string // YYYYMMDD
	Region    string
	Service   string
	Terminal  string // "aws4_request" for a valid credential
	// Scope is Date/Region/Service/Terminal exactly as sent.
	Scope string
}

// Authorization is a parsed SigV4 Authorization header.
type Authorization struct {
	Credential    Credential
	SignedHeaders []string // lower case, in the order the client sent them
	Signature     string   // hex, as sent
}

// Presign holds the authentication parameters of a presigned URL.
type Presign struct {
	Credential    Credential
	Date          time.Time // X-Amz-Date
	Expires       time.Duration
	SignedHeaders []string
	Signature     string
}

// ParseAuthorization parses an Authorization header value of the form
//
//	AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=hex
//
// The components may come in any order and be separated by commas and/or
// blanks. It returns an *Error with code InvalidRequest for SigV2 ("AWS
// AK:sig") and SigV4A headers, InvalidArgument for other schemes and
// AuthorizationHeaderMalformed for a malformed SigV4 header. It does not check
// the scope against any expected region or service.
func ParseAuthorization(h string) (Authorization, error) {
	var a Authorization
	h = strings.TrimLeft(h, " \t")
	rest, ok := strings.CutPrefix(h, Algorithm)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		switch {
		case strings.HasPrefix(h, "AWS "), strings.HasPrefix(h, "AWS4-"):
			return a, s3err.New(s3err.CodeInvalidRequest, "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
		}
		return a, s3err.New(s3err.CodeInvalidArgument, "Unsupported Authorization Type")
	}
	var cred, signed, sig string
	var haveCred, haveSigned, haveSig bool
	for rest != "" {
		i := strings.IndexFunc(rest, isAuthSep)
		if i == 0 {
			rest = rest[1:]
			continue
		}
		field := rest
		if i > 0 {
			field, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		k, val, ok := strings.Cut(field, "=")
		if !ok {
			return a, malformedHeader("the authorization header component " + strconv.Quote(field) + " is not of the form key=value.")
		}
		var dup bool
		switch {
		case strings.EqualFold(k, "Credential"):
			dup, haveCred, cred = haveCred, true, val
		case strings.EqualFold(k, "SignedHeaders"):
			dup, haveSigned, signed = haveSigned, true, val
		case strings.EqualFold(k, "Signature"):
			dup, haveSig, sig = haveSig, true, val
		default:
			return a, malformedHeader("unknown component " + strconv.Quote(k) + ".")
		}
		if dup {
			return a, malformedHeader("the component " + k + " appears more than once.")
		}
	}
	if !haveCred || !haveSigned || !haveSig {
		return a, malformedHeader("the authorization header requires three components: Credential, SignedHeaders, and Signature.")
	}
	if a.Credential, ok = parseCredential(cred); !ok {
		return a, malformedHeader(credentialFormat)
	}
	if a.SignedHeaders, ok = parseSignedHeaders(signed); !ok {
		return a, malformedHeader("the SignedHeaders component is empty or malformed.")
	}
	if sig == "" {
		return a, malformedHeader("the Signature component is empty.")
	}
	a.Signature = sig
	return a, nil
}

func isAuthSep(r rune) bool { return r == ',' || r == ' ' || r == '\t' }

func malformedHeader(detail string) *s3err.Error {
	return s3err.New(s3err.CodeAuthorizationHeaderMalformed, "The authorization header is malformed; "+detail)
}

func queryParamsError(msg string) *s3err.Error {
	return s3err.New(s3err.CodeAuthorizationQueryParametersError, msg)
}

// parseCredential splits AK/date/region/service/terminal. The access key is
// everything before the last four slashes, so it may itself contain one.
func parseCredential(s string) (Credential, bool) {
	var c Credential
	end := len(s)
	var parts [4]string
	for i := 3; i >= 0; i-- {
		j := strings.LastIndexByte(s[:end], '/')
		if j < 0 {
			return c, false
		}
		parts[i] = s[j+1 : end]
		end = j
	}
	c.AccessKey = s[:end]
	c.Date, c.Region, c.Service, c.Terminal = parts[0], parts[1], parts[2], parts[3]
	c.Scope = s[end+1:]
	if c.AccessKey == "" || c.Region == "" || c.Service == "" || c.Terminal == "" || !isDate(c.Date) {
		return c, false
	}
	return c, true
}

func isDate(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseSignedHeaders splits "a;b;c", lower-casing names if a client sent
// them in upper case.
func parseSignedHeaders(s string) ([]string, bool) {
	if s == "" {
		return nil, false
	}
	out := make([]string, 0, strings.Count(s, ";")+1)
	for name := range strings.SplitSeq(s, ";") {
		if name == "" {
			return nil, false
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
				return nil, false
			}
		}
		if hasUpper(name) {
			name = strings.ToLower(name)
		}
		out = append(out, name)
	}
	return out, true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// ParsePresign parses the authentication parameters of a presigned URL.
// Every parameter must appear exactly once. It returns an *Error with code
// AuthorizationQueryParametersError when one is missing, repeated or
// malformed, including an X-Amz-Expires that is negative or over seven days.
// It does not check expiry or the scope.
func ParsePresign(q url.Values) (Presign, error) {
	var p Presign
	get := func(k string) (string, bool) {
		v := q[k]
		return firstOf(v), len(v) == 1
	}
	alg, ok1 := get(queryAlgorithm)
	cred, ok2 := get(queryCredential)
	date, ok3 := get(queryDate)
	exp, ok4 := get(queryExpires)
	signed, ok5 := get(querySignedHeaders)
	sig, ok6 := get(querySignature)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return p, queryParamsError("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters, each exactly once.")
	}
	if alg != Algorithm {
		return p, queryParamsError(`X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"`)
	}
	var ok bool
	if p.Credential, ok = parseCredential(cred); !ok {
		return p, queryParamsError("Error parsing the X-Amz-Credential parameter; " + credentialFormat)
	}
	t, err := time.Parse(timeFormat, date)
	if err != nil {
		return p, queryParamsError(`X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`)
	}
	p.Date = t
	secs, err := strconv.ParseInt(exp, 10, 64)
	switch {
	case err != nil && isDigits(exp):
		return p, queryParamsError("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	case err != nil:
		return p, queryParamsError("X-Amz-Expires should be a number")
	case secs < 0:
		return p, queryParamsError("X-Amz-Expires must be non-negative")
	case secs > int64(MaxPresignExpiry/time.Second):
		return p, queryParamsError("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	p.Expires = time.Duration(secs) * time.Second
	if p.SignedHeaders, ok = parseSignedHeaders(signed); !ok {
		return p, queryParamsError("X-Amz-SignedHeaders is empty or malformed.")
	}
	if sig == "" {
		return p, queryParamsError("X-Amz-Signature is empty.")
	}
	p.Signature = sig
	return p, nil
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
