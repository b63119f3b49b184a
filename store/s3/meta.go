package s3

import (
	"encoding/base64"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/store"
)

// Reserved names of x-amz-meta-*, all starting "fedgate-". A user name that
// starts with "fedgate-" is stored as "fedgate-u-<name>", so every user name
// round-trips.
const (
	reservedPrefix = "fedgate-"
	metaETag       = reservedPrefix + "etag"    // the S3-facing ETag
	metaExpires    = reservedPrefix + "expires" // an Expires that is not an HTTP date
	metaChecksum   = reservedPrefix + "cks-"    // + lower-case algorithm
	metaUser       = reservedPrefix + "u-"      // + a user name starting "fedgate-"
	encodedPrefix  = "=?UTF-8?B?"               // RFC 2047 word of a value headers cannot carry
	encodedSuffix  = "?="
)

// headers are the object headers S3 keeps, in and out.
type headers struct {
	contentType, cacheControl, contentDisposition *string
	contentEncoding, contentLanguage              *string
	expires                                       *string // as sent or received
	meta                                          map[string]string
}

// toHeaders encodes md (with the S3-facing etag and extra checksums) as S3
// object headers. It fails for a user metadata name that is not an HTTP
// token.
func toHeaders(md store.Metadata, etag string, late map[string]string) (headers, error) {
	h := headers{
		contentType: nonEmpty(md.ContentType), cacheControl: nonEmpty(md.CacheControl),
		contentDisposition: nonEmpty(md.ContentDisposition), contentEncoding: nonEmpty(md.ContentEncoding),
		contentLanguage: nonEmpty(md.ContentLanguage), meta: map[string]string{},
	}
	if md.Expires != "" {
		if t, err := http.ParseTime(md.Expires); err == nil && t.UTC().Format(http.TimeFormat) == md.Expires {
			h.expires = &md.Expires
		} else {
			h.meta[metaExpires] = encodeValue(md.Expires)
		}
	}
	for k, v := range md.User {
		name := strings.ToLower(k)
		if !validName(name) {
			return headers{}, fmt.Errorf("user metadata name %q is not an HTTP token", k)
		}
		if strings.HasPrefix(name, reservedPrefix) {
			name = metaUser + name
		}
		h.meta[name] = encodeValue(v)
	}
	for alg, v := range md.Checksums {
		h.meta[metaChecksum+strings.ToLower(alg)] = encodeValue(v)
	}
	for alg, v := range late {
		h.meta[metaChecksum+strings.ToLower(alg)] = encodeValue(v)
	}
	if etag != "" {
		h.meta[metaETag] = etag
	}
	return h, nil
}

// empty reports whether h sets nothing.
func (h headers) empty() bool {
	return h.contentType == nil && h.cacheControl == nil && h.contentDisposition == nil &&
		h.contentEncoding == nil && h.contentLanguage == nil && h.expires == nil && len(h.meta) == 0
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// info decodes h into an ObjectInfo; serverETag is the object's S3 ETag.
func (h headers) info(key, serverETag string) store.ObjectInfo {
	v := unquoteETag(serverETag)
	info := store.ObjectInfo{Key: key, ETag: v, Validator: store.Validator(v)}
	info.ContentType = aws.ToString(h.contentType)
	info.CacheControl = aws.ToString(h.cacheControl)
	info.ContentDisposition = aws.ToString(h.contentDisposition)
	info.ContentEncoding = aws.ToString(h.contentEncoding)
	info.ContentLanguage = aws.ToString(h.contentLanguage)
	info.Expires = aws.ToString(h.expires)
	for k, val := range h.meta {
		k = strings.ToLower(k)
		val = decodeValue(val)
		switch {
		case k == metaETag:
			info.ETag = val
		case k == metaExpires:
			info.Expires = val
		case strings.HasPrefix(k, metaChecksum):
			if info.Checksums == nil {
				info.Checksums = map[string]string{}
			}
			info.Checksums[strings.ToUpper(k[len(metaChecksum):])] = val
		case strings.HasPrefix(k, metaUser):
			info.User = setUser(info.User, k[len(metaUser):], val)
		case strings.HasPrefix(k, reservedPrefix):
			// A reserved name of a later version: not user metadata.
		default:
			info.User = setUser(info.User, k, val)
		}
	}
	return info
}

func setUser(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func (h headers) expiresTime() *time.Time {
	if h.expires == nil {
		return nil
	}
	t, err := http.ParseTime(*h.expires)
	if err != nil {
		return nil
	}
	return &t
}

func (h headers) putInput(in *awss3.PutObjectInput) {
	in.ContentType, in.CacheControl, in.ContentDisposition = h.contentType, h.cacheControl, h.contentDisposition
	in.ContentEncoding, in.ContentLanguage, in.Expires = h.contentEncoding, h.contentLanguage, h.expiresTime()
	in.Metadata = h.meta
}

func (h headers) createInput(in *awss3.CreateMultipartUploadInput) {
	in.ContentType, in.CacheControl, in.ContentDisposition = h.contentType, h.cacheControl, h.contentDisposition
	in.ContentEncoding, in.ContentLanguage, in.Expires = h.contentEncoding, h.contentLanguage, h.expiresTime()
	in.Metadata = h.meta
}

func (h headers) copyInput(in *awss3.CopyObjectInput) {
	in.MetadataDirective = types.MetadataDirectiveReplace
	in.ContentType, in.CacheControl, in.ContentDisposition = h.contentType, h.cacheControl, h.contentDisposition
	in.ContentEncoding, in.ContentLanguage, in.Expires = h.contentEncoding, h.contentLanguage, h.expiresTime()
	in.Metadata = h.meta
}

// override sets the fields of o that are set over those of h (CompleteMultipart's rule).
func (h headers) override(o headers) headers {
	for _, p := range []struct{ dst, src **string }{
		{&h.contentType, &o.contentType}, {&h.cacheControl, &o.cacheControl},
		{&h.contentDisposition, &o.contentDisposition}, {&h.contentEncoding, &o.contentEncoding},
		{&h.contentLanguage, &o.contentLanguage}, {&h.expires, &o.expires},
	} {
		if *p.src != nil {
			*p.dst = *p.src
		}
	}
	h.meta = maps.Clone(h.meta)
	if h.meta == nil {
		h.meta = map[string]string{}
	}
	if _, ok := o.meta[metaExpires]; ok {
		h.expires = nil
	}
	if o.expires != nil {
		delete(h.meta, metaExpires)
	}
	maps.Copy(h.meta, o.meta)
	return h
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// validName reports whether name is an HTTP token (RFC 9110), as metadata
// names travel as header names.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// encodeValue makes v safe as a header value: printable ASCII without
// leading or trailing blanks goes as is, anything else (and anything that
// looks encoded) as one RFC 2047 base64 word.
func encodeValue(v string) string {
	plain := !strings.HasPrefix(v, "=?") && strings.TrimSpace(v) == v
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return encodedPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + encodedSuffix
}

// decodeValue reverses encodeValue, and decodes the RFC 2047 words S3
// itself uses for non-ASCII metadata written by others.
func decodeValue(v string) string {
	if !strings.HasPrefix(v, "=?") {
		return v
	}
	if s, ok := strings.CutPrefix(v, encodedPrefix); ok {
		if s, ok := strings.CutSuffix(s, encodedSuffix); ok {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return string(b)
			}
		}
	}
	var d mime.WordDecoder
	if s, err := d.DecodeHeader(v); err == nil {
		return s
	}
	return v
}
