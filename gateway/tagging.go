package gateway

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/checksum"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/lifecycle"
	"github.com/fedgate/fedgate/store"
)

// Object tags live with the object, in the reserved user-metadata entry
// metaTagging, URL-query encoded ("k1=v1&k2=v2", in the order they were
// given) like x-amz-tagging. Bucket tags are the bucket's ConfTagging
// configuration, a Tagging XML document.
const (
	metaTagging = lifecycle.TaggingMetaKey // "fedgate-tagging": the lifecycle runner reads it too

	// S3's limits: tags per object and per bucket, and the length of a
	// key and a value in Unicode characters.
	maxObjectTags  = 10
	maxBucketTags  = 50
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// tag is one key-value pair.
type tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// tagging is the Tagging document of the ?tagging requests and answers.
type tagging struct {
	XMLName struct{} `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	TagSet  *tagSet  `xml:"TagSet"`
}

type tagSet struct {
	Tags []tag `xml:"Tag"`
}

func taggingDoc(tags []tag) tagging {
	return tagging{Xmlns: s3NS, TagSet: &tagSet{Tags: tags}}
}

// checkTags applies S3's rules to a tag set of at most max tags: keys of
// 1 to 128 and values of at most 256 Unicode characters, both of letters,
// digits, white space and + - = . _ : / @; keys unique and not starting
// with "aws:" (reserved for AWS in any case).
func checkTags(tags []tag, max int) error {
	if len(tags) > max {
		if max == maxObjectTags {
			return s3err.Newf(s3err.CodeBadRequest, "Object tags cannot be greater than %d", max)
		}
		return s3err.Newf(s3err.CodeBadRequest, "Bucket tag count cannot be greater than %d", max)
	}
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		if n := utf8.RuneCountInString(t.Key); n < 1 || n > maxTagKeyLen || !tagText(t.Key) {
			return s3err.Newf(s3err.CodeInvalidTag, "The TagKey you have provided is invalid: %q (a tag key is 1 to %d Unicode letters, digits, spaces and + - = . _ : / @)", t.Key, maxTagKeyLen)
		}
		if len(t.Key) >= 4 && strings.EqualFold(t.Key[:4], "aws:") {
			return s3err.Newf(s3err.CodeInvalidTag, "Your TagKey cannot be prefixed with aws: (%q); the prefix is reserved for AWS.", t.Key)
		}
		if utf8.RuneCountInString(t.Value) > maxTagValueLen || !tagText(t.Value) {
			return s3err.Newf(s3err.CodeInvalidTag, "The TagValue you have provided is invalid: %q for key %q (a tag value is at most %d Unicode letters, digits, spaces and + - = . _ : / @)", t.Value, t.Key, maxTagValueLen)
		}
		if seen[t.Key] {
			return s3err.Newf(s3err.CodeInvalidTag, "Cannot provide multiple Tags with the same key: %q", t.Key)
		}
		seen[t.Key] = true
	}
	return nil
}

// tagText reports whether s is valid UTF-8 of the characters tags allow
// (the pattern ^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$ of the S3 API reference).
func tagText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Z, r) || strings.ContainsRune("_.:/=+-@", r) {
			continue
		}
		return false
	}
	return true
}

var errTaggingHeader = s3err.New(s3err.CodeInvalidArgument, "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")

// parseTaggingHeader reads an x-amz-tagging value as S3 does: URL query
// parameters, empty ones skipped, a name without "=" a tag with an empty
// value. Bad escapes, bad UTF-8, an empty name or a name twice are
// InvalidArgument; the tags themselves must pass checkTags.
func parseTaggingHeader(h string) ([]tag, error) {
	var tags []tag
	seen := map[string]bool{}
	for part := range strings.SplitSeq(h, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || key == "" || seen[key] || !utf8.ValidString(key) || !utf8.ValidString(value) {
			return nil, errTaggingHeader
		}
		seen[key] = true
		tags = append(tags, tag{Key: key, Value: value})
	}
	if err := checkTags(tags, maxObjectTags); err != nil {
		return nil, err
	}
	return tags, nil
}

// encodeTags is the metaTagging form of a tag set ("" for none).
func encodeTags(tags []tag) string {
	var b strings.Builder
	for i, t := range tags {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(t.Key))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(t.Value))
	}
	return b.String()
}

// objectTags returns the tags stored with an object, in their order.
func objectTags(info store.ObjectInfo) []tag {
	enc := info.User[metaTagging]
	tags := []tag{}
	for part := range strings.SplitSeq(enc, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 == nil && err2 == nil {
			tags = append(tags, tag{Key: key, Value: value})
		}
	}
	return tags
}

// setTaggingCount answers x-amz-tagging-count on GET and HEAD of an object
// that has tags.
func setTaggingCount(h http.Header, info store.ObjectInfo) {
	if enc := info.User[metaTagging]; enc != "" {
		h.Set("x-amz-tagging-count", strconv.Itoa(strings.Count(enc, "&")+1))
	}
}

// setObjectTags keeps the tags of a PutObject's or CreateMultipartUpload's
// x-amz-tagging in meta. Setting tags with a write needs
// s3:PutObjectTagging besides s3:PutObject, as in S3.
func (s *Server) setObjectTags(q *request, b backend.Bucket, meta *store.Metadata) error {
	if _, ok := q.r.Header["X-Amz-Tagging"]; !ok {
		return nil
	}
	tags, err := parseTaggingHeader(q.r.Header.Get("X-Amz-Tagging"))
	if err != nil || len(tags) == 0 {
		return err
	}
	if v := s.decide(q, b, "s3:PutObjectTagging", q.key); v != vAllow {
		return s.denied(q, b, "s3:PutObjectTagging", v)
	}
	if meta.User == nil {
		meta.User = map[string]string{}
	}
	meta.User[metaTagging] = encodeTags(tags)
	return nil
}

// copyTags sets the tags of a CopyObject's copy per x-amz-tagging-directive:
// the source's (COPY, the default) or x-amz-tagging's (REPLACE).
func (s *Server) copyTags(q *request, dst backend.Bucket, src store.ObjectInfo, meta *store.Metadata) error {
	if meta.User != nil {
		delete(meta.User, metaTagging)
	}
	switch d := strings.ToUpper(q.r.Header.Get("x-amz-tagging-directive")); d {
	case "", "COPY":
		if enc := src.User[metaTagging]; enc != "" {
			if meta.User == nil {
				meta.User = map[string]string{}
			}
			meta.User[metaTagging] = enc
		}
		return nil
	case "REPLACE":
		return s.setObjectTags(q, dst, meta)
	default:
		return s3err.Newf(s3err.CodeInvalidArgument, "Unknown tagging directive %q: use COPY or REPLACE.", d)
	}
}

// readTagging reads and checks the Tagging document of a Put*Tagging
// request. A Content-MD5 or x-amz-checksum-* that came with it is
// verified.
func (q *request) readTagging(max int) ([]tag, error) {
	var body io.Reader = q.body
	if hasBodyDigest(q.r.Header) {
		cr, err := checksum.NewReader(q.r.Header, q.body, q.trailer)
		if err != nil {
			return nil, err
		}
		body = cr
	}
	var doc tagging
	if err := readXML(body, &doc); err != nil {
		return nil, err
	}
	if doc.TagSet == nil {
		return nil, s3err.New(s3err.CodeMalformedXML, "The Tagging document needs a TagSet element.")
	}
	tags := doc.TagSet.Tags
	if err := checkTags(tags, max); err != nil {
		return nil, err
	}
	return tags, nil
}

func (s *Server) getObjectTagging(q *request) error {
	_, info, err := s.statObject(q)
	if err != nil {
		return err
	}
	writeXML(q.w, http.StatusOK, taggingDoc(objectTags(info)))
	return nil
}

// putObjectTagging replaces an object's tags. They live with the object,
// so this writes it again (rewriteMetadata); a tag set equal to the one
// stored changes nothing.
func (s *Server) putObjectTagging(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	tags, err := q.readTagging(maxObjectTags)
	if err != nil {
		return err
	}
	info, err := b.Stat(q.r.Context(), q.key)
	if err != nil {
		return err
	}
	if err := s.setTags(q, b, info, encodeTags(tags)); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteObjectTagging(q *request) error {
	b, info, err := s.statObject(q)
	if err != nil {
		return err
	}
	if err := s.setTags(q, b, info, ""); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

// setTags stores enc as the object's tags ("" removes them), unless they
// are already what it has.
func (s *Server) setTags(q *request, b backend.Bucket, info store.ObjectInfo, enc string) error {
	return s.updateMetadata(q, b, info, func(m *store.Metadata) bool {
		if m.User[metaTagging] == enc {
			return false
		}
		if enc == "" {
			delete(m.User, metaTagging)
		} else {
			m.User[metaTagging] = enc
		}
		return true
	})
}

func (s *Server) getBucketTagging(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	doc, ok := b.Config(backend.ConfTagging)
	var t tagging
	if ok {
		if err := decodeXML([]byte(doc), &t); err != nil || t.TagSet == nil {
			ok = false
		}
	}
	if !ok || len(t.TagSet.Tags) == 0 {
		return s3err.Newf(s3err.CodeNoSuchTagSet, "The TagSet does not exist: bucket %q has no tags.", b.Name())
	}
	writeXML(q.w, http.StatusOK, taggingDoc(t.TagSet.Tags))
	return nil
}

// putBucketTagging replaces the bucket's tags; an empty TagSet removes
// them.
func (s *Server) putBucketTagging(q *request) error {
	b, err := s.bucketFor(q)
	if err != nil {
		return err
	}
	tags, err := q.readTagging(maxBucketTags)
	if err != nil {
		return err
	}
	doc := ""
	if len(tags) > 0 {
		var sb strings.Builder
		if err := xml.NewEncoder(&sb).Encode(taggingDoc(tags)); err != nil {
			return err
		}
		doc = sb.String()
	}
	if err := b.SetConfig(q.r.Context(), backend.ConfTagging, doc); err != nil {
		return err
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}
