package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/store"
)

// S3's POST Object: browser-form uploads and presigned POSTs
// (docs/browser-uploads.md). The request is a multipart/form-data form
// whose fields come before the file; a SigV4 form carries a base64 policy
// (an expiration and conditions every field must meet) and the policy's
// signature. The file is streamed into the bucket, never held whole.

const (
	// maxPostPreData is S3's limit on the form fields before the file
	// (names and values; MaxPostPreDataLengthExceeded).
	maxPostPreData = 20 << 10
	// maxPostPreDataRaw bounds the raw bytes read before the file part
	// (fields, their part headers and boundaries).
	maxPostPreDataRaw = 64 << 10
	// postBuffered is how much of a file is read before it is written: a
	// file that ends within it is written with its length known (a
	// write-back bucket needs it); a longer one streams with its length
	// unknown.
	postBuffered = 1 << 20
)

// postForm is a POST upload's form: fields by lower-case name, and the
// file part, the form's last part read.
type postForm struct {
	fields   map[string]string
	file     *multipart.Part
	filename string
}

func (f *postForm) has(name string) bool { _, ok := f.fields[name]; return ok }

// preDataReader fails once more than left bytes were read before it is
// lifted (when the file part starts).
type preDataReader struct {
	r      io.Reader
	left   int
	lifted bool
}

var errPreData = s3err.Newf(s3err.CodeMaxPostPreDataLengthExceeded, "Your POST request fields preceding the upload file were too large (at most %d bytes).", maxPostPreData)

func (p *preDataReader) Read(b []byte) (int, error) {
	if p.lifted {
		return p.r.Read(b)
	}
	if p.left <= 0 {
		return 0, errPreData
	}
	if len(b) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.left -= n
	return n, err
}

// readPostForm reads the form's fields up to the file part.
func readPostForm(mr *multipart.Reader) (*postForm, error) {
	f := &postForm{fields: map[string]string{}}
	size := 0
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, malformedPost(err)
		}
		name := strings.ToLower(p.FormName())
		if name == "" {
			return nil, s3err.New(s3err.CodeMalformedPOSTRequest, "Every part of a POST form needs a Content-Disposition: form-data header with a name.")
		}
		if name == "file" {
			f.file, f.filename = p, p.FileName()
			return f, nil
		}
		v, err := io.ReadAll(io.LimitReader(p, int64(maxPostPreData-size+1)))
		if err != nil {
			return nil, malformedPost(err)
		}
		if size += len(name) + len(v); size > maxPostPreData {
			return nil, errPreData
		}
		if f.has(name) {
			return nil, s3err.Newf(s3err.CodeInvalidArgument, "The POST form field %q appears more than once.", name)
		}
		f.fields[name] = string(v)
	}
}

// malformedPost is the answer to a form that mime/multipart cannot read.
func malformedPost(err error) error {
	var se *s3err.Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errIncompleteBody
	}
	return s3err.Newf(s3err.CodeMalformedPOSTRequest, "The body of your POST request is not well-formed multipart/form-data: %v", err)
}

func missingField(name string) error {
	return s3err.Newf(s3err.CodeInvalidArgument, "Bucket POST must contain a field named '%s'.  If it is specified, please check the order of the fields.", name)
}

// postObject answers a POST form upload to a bucket.
func (s *Server) postObject(q *request) error {
	q.postForm = true
	_, params, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	if params["boundary"] == "" {
		return s3err.New(s3err.CodeMalformedPOSTRequest, "The Content-Type of a POST upload must be multipart/form-data with a boundary.")
	}
	pre := &preDataReader{r: q.body, left: maxPostPreDataRaw}
	form, err := readPostForm(multipart.NewReader(pre, params["boundary"]))
	if err != nil {
		return err
	}
	pre.lifted = true
	pol, err := s.authenticatePost(q, form)
	if err != nil {
		return err
	}
	key, ok := form.fields["key"]
	if !ok {
		return missingField("key")
	}
	if form.file == nil {
		return s3err.New(s3err.CodeInvalidArgument, "POST requires exactly one file upload per request.")
	}
	key = strings.ReplaceAll(key, "${filename}", form.filename)
	if key == "" {
		return s3err.New(s3err.CodeInvalidArgument, "User key must have a length greater than 0.")
	}
	if err := checkKey(key); err != nil {
		return err
	}
	q.key = key
	if ri := infoFrom(q.r.Context()); ri != nil {
		ri.key = key
	}
	minLen, maxLen := int64(0), int64(maxPutSize)
	if pol != nil {
		values := maps.Clone(form.fields)
		values["key"], values["bucket"] = key, q.bucket
		if err := pol.check(values, form.fields, s.cfg.Now()); err != nil {
			return err
		}
		if pol.hasRange {
			minLen, maxLen = pol.minLen, min(pol.maxLen, maxLen)
		}
	}
	hdr, err := formHeaders(q.r.Header, form.fields)
	if err != nil {
		return err
	}
	// The form's fields stand in for a PUT's headers from here on: the
	// ACL, metadata and checksum code paths, and the policy condition
	// keys (s3:x-amz-acl), read them there.
	fr := q.r.Clone(q.r.Context())
	fr.Header = hdr
	q.r = fr
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	meta, err := s.writeMetadata(q, b)
	if err != nil {
		return err
	}
	// The tagging field became x-amz-tagging: needs s3:PutObjectTagging,
	// as on a PUT.
	if err := s.setObjectTags(q, b, &meta); err != nil {
		return err
	}
	info, err := s.putPostFile(q, b, form.file, minLen, maxLen, store.PutOptions{Metadata: meta})
	if err != nil {
		return err
	}
	return s.postAnswer(q, form.fields, info)
}

// authenticatePost checks a form's SigV4 signature and sets the caller; a
// form without a policy or signature is anonymous. It returns the parsed
// policy (nil for an anonymous form).
func (s *Server) authenticatePost(q *request, form *postForm) (*postPolicy, error) {
	f := form.fields
	var ak string
	var err error
	switch {
	case form.has("awsaccesskeyid") || form.has("signature"):
		// SigV2, as boto3 signs presigned POSTs at its defaults.
		for _, name := range []string{"policy", "awsaccesskeyid", "signature"} {
			if !form.has(name) {
				return nil, missingField(name)
			}
		}
		ak, err = s.verifier.VerifyPostV2(f["awsaccesskeyid"], f["policy"], f["signature"])
	case !form.has("policy") && !form.has("x-amz-signature") && !form.has("x-amz-credential"):
		return nil, nil
	default:
		for _, name := range []string{"policy", "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature"} {
			if !form.has(name) {
				return nil, missingField(name)
			}
		}
		ak, err = s.verifier.VerifyPost(sigv4.PostForm{Algorithm: f["x-amz-algorithm"], Credential: f["x-amz-credential"],
			Date: f["x-amz-date"], Policy: f["policy"], Signature: f["x-amz-signature"]})
	}
	if err != nil {
		return nil, err
	}
	user, ok := s.be.Users().ByAccessKey(ak)
	if !ok {
		return nil, s3err.New(s3err.CodeInvalidAccessKeyID, "")
	}
	q.user, q.anonymous, q.keys = user, false, nil
	if ri := infoFrom(q.r.Context()); ri != nil {
		ri.setUser(user.Name)
	}
	doc, err := base64.StdEncoding.DecodeString(f["policy"])
	if err != nil {
		return nil, s3err.New(s3err.CodeInvalidPolicyDocument, "Invalid Policy: the policy field is not valid base64.")
	}
	return parsePostPolicy(doc)
}

// formHeaders turns the form fields a PUT would send as headers into
// headers: Content-Type and the other entity headers, x-amz-meta-*, the
// ACL (acl, x-amz-grant-*), the new version's lock (x-amz-object-lock-mode,
// -retain-until-date, -legal-hold) and the body's digests (Content-MD5,
// x-amz-checksum-*). The policy condition keys of orig (User-Agent,
// Referer) are kept.
func formHeaders(orig http.Header, fields map[string]string) (http.Header, error) {
	h := http.Header{}
	for _, k := range []string{"User-Agent", "Referer"} {
		if v := orig.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	for name, v := range fields {
		switch {
		case name == "tagging":
			// A Tagging document (S3's POST form), stored as a PUT's
			// x-amz-tagging would be.
			tags, err := postTagging(v)
			if err != nil {
				return nil, err
			}
			h.Set("x-amz-tagging", encodeTags(tags))
		case name == "acl":
			h.Set("x-amz-acl", v)
		case slices.Contains([]string{"content-type", "cache-control", "content-disposition", "content-encoding",
			"content-language", "expires", "content-md5", "x-amz-server-side-encryption-customer-algorithm"}, name),
			strings.HasPrefix(name, "x-amz-meta-"), strings.HasPrefix(name, "x-amz-grant-"),
			strings.HasPrefix(name, "x-amz-checksum-"), strings.HasPrefix(name, "x-amz-object-lock-"):
			h.Set(name, v)
		}
	}
	return h, nil
}

// postTagging reads a POST form's tagging field: a Tagging XML document,
// checked as PutObjectTagging checks its body.
func postTagging(v string) ([]tag, error) {
	var doc tagging
	if err := readXML(strings.NewReader(v), &doc); err != nil {
		return nil, err
	}
	if doc.TagSet == nil {
		return nil, s3err.New(s3err.CodeMalformedXML, "The tagging field's Tagging document needs a TagSet element.")
	}
	if err := checkTags(doc.TagSet.Tags, maxObjectTags); err != nil {
		return nil, err
	}
	return doc.TagSet.Tags, nil
}

// putPostFile streams the form's file into b, within [minLen, maxLen]
// bytes.
func (s *Server) putPostFile(q *request, b backend.Bucket, file io.Reader, minLen, maxLen int64, opts store.PutOptions) (store.ObjectInfo, error) {
	fr := &postFileReader{r: file, min: minLen, max: maxLen}
	var head bytes.Buffer
	if _, err := head.ReadFrom(io.LimitReader(fr, postBuffered+1)); err != nil {
		return store.ObjectInfo{}, err
	}
	var body io.Reader = &head
	size := int64(head.Len())
	if size > postBuffered {
		body, size = io.MultiReader(&head, fr), -1
	}
	cr, err := checksum.NewReader(q.r.Header, body, nil)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	opts.LateChecksums = cr.Checksums
	info, err := b.Put(q.r.Context(), q.key, cr, size, opts)
	if errors.Is(err, backend.ErrLengthRequired) {
		return info, s3err.Newf(s3err.CodeMissingContentLength, "Bucket %q writes back through its staging area, which needs each object's length in advance; a POST form does not give the file's length, and fedgate learns it only for files up to %d bytes. Upload larger files with PutObject or a multipart upload.", b.Name(), postBuffered)
	}
	return info, err
}

// postFileReader reads the file part, failing once it runs past max
// bytes (EntityTooLarge) or ends before min (EntityTooSmall).
type postFileReader struct {
	r        io.Reader
	n        int64
	min, max int64
}

func (p *postFileReader) Read(b []byte) (int, error) {
	if left := p.max - p.n; int64(len(b)) > left+1 {
		b = b[:left+1]
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	switch {
	case p.n > p.max:
		return 0, s3err.Newf(s3err.CodeEntityTooLarge, "Your proposed upload exceeds the maximum allowed size: the file is larger than %d bytes (the policy's content-length-range, or S3's 5 GiB limit).", p.max)
	case errors.Is(err, io.EOF) && p.n < p.min:
		return n, s3err.Newf(s3err.CodeEntityTooSmall, "Your proposed upload is smaller than the minimum allowed size: the file has %d bytes, the policy's content-length-range asks for at least %d.", p.n, p.min)
	case err != nil && !errors.Is(err, io.EOF):
		return n, malformedPost(err)
	}
	return n, err
}

// postResponse is the answer to success_action_status 201.
type postResponse struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

// postAnswer answers a stored upload as the form asks: a 303 to
// success_action_redirect (with bucket, key and etag added to its query),
// else success_action_status 200, 201 (a PostResponse document) or 204
// (the default).
func (s *Server) postAnswer(q *request, fields map[string]string, info store.ObjectInfo) error {
	etag := `"` + info.ETag + `"`
	h := q.w.Header()
	h.Set("ETag", etag)
	setChecksumHeaders(h, info.Checksums)
	scheme := "http"
	if q.r.TLS != nil {
		scheme = "https"
	}
	loc := url.URL{Scheme: scheme, Host: q.r.Host, Path: "/" + q.bucket + "/" + q.key}
	if s.isVirtualHost(q.r) {
		loc.Path = "/" + q.key
	}
	redirect := fields["success_action_redirect"]
	if redirect == "" {
		redirect = fields["redirect"]
	}
	if u, err := url.Parse(redirect); redirect != "" && err == nil && u.Scheme != "" && u.Host != "" {
		// S3 appends bucket, key and etag, in that order, to the URL's
		// own query, which it leaves as it was.
		add := "bucket=" + url.QueryEscape(q.bucket) + "&key=" + url.QueryEscape(q.key) + "&etag=" + url.QueryEscape(etag)
		if u.RawQuery != "" {
			add = u.RawQuery + "&" + add
		}
		u.RawQuery = add
		h.Set("Location", u.String())
		q.w.WriteHeader(http.StatusSeeOther)
		return nil
	}
	h.Set("Location", loc.String())
	switch fields["success_action_status"] {
	case "200":
		q.w.WriteHeader(http.StatusOK)
	case "201":
		writeXML(q.w, http.StatusCreated, postResponse{Location: loc.String(), Bucket: q.bucket, Key: q.key, ETag: etag})
	default:
		q.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// postPolicy is a POST form's policy document: when it expires and the
// conditions the form must meet.
type postPolicy struct {
	expiration time.Time
	conds      []postCond
	// content-length-range: the file's size bounds.
	hasRange       bool
	minLen, maxLen int64
}

// postCond is one condition on a form field: its value equals (eq) or
// starts with (starts-with) value. field is lower case, without "$".
type postCond struct {
	op, field, value string
}

func (c postCond) String() string {
	v, _ := json.Marshal(c.value)
	return fmt.Sprintf(`["%s", "$%s", %s]`, c.op, c.field, v)
}

func invalidPolicy(format string, args ...any) error {
	return s3err.Newf(s3err.CodeInvalidPolicyDocument, "Invalid Policy: "+format, args...)
}

// parsePostPolicy reads a policy document (decoded from base64): a JSON
// object with "expiration" (ISO 8601) and "conditions", each either an
// object of exact matches ({"acl": "public-read"}) or an array:
// ["eq"|"starts-with", "$field", "value"] or ["content-length-range",
// min, max]. Errors are InvalidPolicyDocument.
func parsePostPolicy(doc []byte) (*postPolicy, error) {
	// The document's keys are matched exactly, as S3 does: "Expiration"
	// or "CONDITIONS" is not the element (encoding/json would match
	// struct fields case-insensitively).
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, invalidPolicy("Invalid JSON.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidPolicy("Invalid JSON.")
	}
	rawExp, ok := raw["expiration"]
	if !ok {
		return nil, invalidPolicy("Policy missing expiration.")
	}
	rawConds, ok := raw["conditions"]
	if !ok {
		return nil, invalidPolicy("Policy missing conditions.")
	}
	var expiration string
	if err := json.Unmarshal(rawExp, &expiration); err != nil {
		return nil, invalidPolicy("Invalid 'expiration' value: %s", rawExp)
	}
	var conds []json.RawMessage
	if err := json.Unmarshal(rawConds, &conds); err != nil || conds == nil {
		return nil, invalidPolicy("The 'conditions' of a policy must be a list.")
	}
	p := &postPolicy{}
	var err error
	if p.expiration, err = time.Parse(time.RFC3339Nano, expiration); err != nil {
		return nil, invalidPolicy("Invalid 'expiration' value: '%s'", expiration)
	}
	for _, c := range conds {
		if err := p.addCondition(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *postPolicy) addCondition(c json.RawMessage) error {
	c = bytes.TrimSpace(c)
	if len(c) > 0 && c[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(c, &m); err != nil || len(m) == 0 {
			return invalidPolicy("Invalid Simple-Condition: %s", c)
		}
		for k, v := range m {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return invalidPolicy("Invalid Simple-Condition: value of %q must be a string.", k)
			}
			p.conds = append(p.conds, postCond{op: "eq", field: strings.ToLower(strings.TrimPrefix(k, "$")), value: s})
		}
		return nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(c, &a); err != nil || len(a) == 0 {
		return invalidPolicy("Invalid condition: %s", c)
	}
	var op string
	if err := json.Unmarshal(a[0], &op); err != nil {
		return invalidPolicy("Invalid condition: %s", c)
	}
	switch op = strings.ToLower(op); op {
	case "eq", "starts-with":
		var field, value string
		if len(a) != 3 || json.Unmarshal(a[1], &field) != nil || json.Unmarshal(a[2], &value) != nil || !strings.HasPrefix(field, "$") || len(field) < 2 {
			return invalidPolicy("Invalid %s condition: %s", op, c)
		}
		p.conds = append(p.conds, postCond{op: op, field: strings.ToLower(field[1:]), value: value})
	case "content-length-range":
		var lo, hi int64
		if len(a) != 3 || !policyInt(a[1], &lo) || !policyInt(a[2], &hi) || lo < 0 || hi < lo {
			return invalidPolicy("Invalid content-length-range condition: %s", c)
		}
		p.hasRange, p.minLen, p.maxLen = true, lo, hi
	default:
		return invalidPolicy("Unknown condition operator %q.", op)
	}
	return nil
}

// policyInt reads a JSON integer, or a string of one.
func policyInt(v json.RawMessage, out *int64) bool {
	var s string
	if json.Unmarshal(v, &s) != nil {
		s = string(v)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	*out = n
	return err == nil
}

// postExempt reports the fields S3 does not ask a policy to name.
func postExempt(name string) bool {
	switch name {
	case "file", "policy", "x-amz-signature", "signature", "awsaccesskeyid":
		return true
	}
	return strings.HasPrefix(name, "x-ignore-")
}

// check checks the policy at now: every condition holds for values (the
// form's fields, with key after ${filename} and the bucket), and every
// field of the form but the exempt ones is named by a condition.
func (p *postPolicy) check(values, fields map[string]string, now time.Time) error {
	if !now.Before(p.expiration) {
		return s3err.New(s3err.CodeAccessDenied, "Invalid according to Policy: Policy expired.")
	}
	named := map[string]bool{}
	for _, c := range p.conds {
		named[c.field] = true
		v := values[c.field]
		if c.op == "eq" && v != c.value || c.op == "starts-with" && !strings.HasPrefix(v, c.value) {
			return s3err.Newf(s3err.CodeAccessDenied, "Invalid according to Policy: Policy Condition failed: %s", c)
		}
	}
	var extra []string
	for name := range fields {
		if !named[name] && !postExempt(name) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return s3err.Newf(s3err.CodeAccessDenied, "Invalid according to Policy: Extra input fields: %s", strings.Join(extra, ", "))
	}
	return nil
}
