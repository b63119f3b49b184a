package azure

// Object metadata on a blob.
//
// Azure metadata names must be C# identifiers and are case-insensitive
// (they travel as x-ms-meta-NAME headers, whose case Go canonicalizes), so
// every name fedgate writes is lower-case [a-z0-9_]:
//
//	fedgate_etag        the S3 ETag (hex MD5, or "<md5-of-md5s>-N")
//	fedgate_expires     the Expires header (Azure has no such property)
//	fedgate_ck_<alg>    a checksum, alg lower-cased (fedgate_ck_sha256)
//	fedgate_key         on an upload manifest: SHA-256 of the upload's key
//	u_<name>            a user metadata entry whose value is header-safe
//	b_<name>            a user metadata entry whose value is "b" + base64(value)
//
// <name> is the user name with every byte outside [a-z0-9] written as "_"
// and two lower-case hex digits: run-id -> u_run_2did, dotted.name ->
// u_dotted_2ename, under_score -> u_under_5fscore. Decoding lower-cases
// first, so it is exact whatever case Azure or the HTTP stack hands back.
// The other fields of store.Metadata are the blob's HTTP properties
// (Content-Type, Cache-Control, Content-Disposition, Content-Encoding,
// Content-Language). Metadata names fedgate did not write are ignored.

import (
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/fedgate/fedgate/store"
)

const (
	metaETag     = "fedgate_etag"
	metaExpires  = "fedgate_expires"
	metaChecksum = "fedgate_ck_"
	metaKeyHash  = "fedgate_key"
	userPlain    = "u_"
	userBase64   = "b_"
)

// encodeName writes a user metadata name as [a-z0-9_].
func encodeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteString(hex.EncodeToString([]byte{c}))
	}
	return b.String()
}

// decodeName reverses encodeName; ok is false for a name it did not write.
func decodeName(enc string) (string, bool) {
	enc = strings.ToLower(enc)
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(enc) {
			return "", false
		}
		v, err := hex.DecodeString(enc[i+1 : i+3])
		if err != nil {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), true
}

// headerSafe reports whether v can travel as an HTTP header value
// unchanged: printable ASCII without leading or trailing blanks.
func headerSafe(v string) bool {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// encodeMeta returns the blob metadata and HTTP headers for m; etag is the
// S3 ETag ("" to leave it out), extra are more reserved entries.
func encodeMeta(m store.Metadata, etag string, extra map[string]string) (map[string]*string, *blob.HTTPHeaders) {
	md := make(map[string]*string, len(m.User)+len(m.Checksums)+3)
	if etag != "" {
		md[metaETag] = to.Ptr(etag)
	}
	if m.Expires != "" {
		md[metaExpires] = to.Ptr(m.Expires)
	}
	for alg, v := range m.Checksums {
		md[metaChecksum+strings.ToLower(alg)] = to.Ptr(v)
	}
	for k, v := range m.User {
		if headerSafe(v) {
			md[userPlain+encodeName(k)] = to.Ptr(v)
		} else {
			md[userBase64+encodeName(k)] = to.Ptr("b" + base64.StdEncoding.EncodeToString([]byte(v)))
		}
	}
	for k, v := range extra {
		md[k] = to.Ptr(v)
	}
	h := &blob.HTTPHeaders{}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = to.Ptr(v)
		}
	}
	set(&h.BlobContentType, m.ContentType)
	set(&h.BlobCacheControl, m.CacheControl)
	set(&h.BlobContentDisposition, m.ContentDisposition)
	set(&h.BlobContentEncoding, m.ContentEncoding)
	set(&h.BlobContentLanguage, m.ContentLanguage)
	return md, h
}

// props are the blob properties decodeMeta reads, as both GetProperties and
// a listing return them.
type props struct {
	contentType, cacheControl, disposition, encoding, language *string
	metadata                                                   map[string]*string
}

// decodeMeta returns the store.Metadata of a blob and the reserved
// entries (fedgate_etag, fedgate_key, ...) by lower-case name.
func decodeMeta(p props) (store.Metadata, map[string]string) {
	var m store.Metadata
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	m.ContentType = str(p.contentType)
	m.CacheControl = str(p.cacheControl)
	m.ContentDisposition = str(p.disposition)
	m.ContentEncoding = str(p.encoding)
	m.ContentLanguage = str(p.language)
	reserved := map[string]string{}
	for k, v := range p.metadata {
		if v == nil {
			continue
		}
		k = strings.ToLower(k)
		switch {
		case k == metaExpires:
			m.Expires = *v
		case strings.HasPrefix(k, metaChecksum):
			if m.Checksums == nil {
				m.Checksums = map[string]string{}
			}
			m.Checksums[strings.ToUpper(k[len(metaChecksum):])] = *v
		case strings.HasPrefix(k, "fedgate_"):
			reserved[k] = *v
		case strings.HasPrefix(k, userPlain):
			if name, ok := decodeName(k[len(userPlain):]); ok {
				if m.User == nil {
					m.User = map[string]string{}
				}
				m.User[name] = *v
			}
		case strings.HasPrefix(k, userBase64):
			name, ok := decodeName(k[len(userBase64):])
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(*v, "b"))
			if ok && err == nil {
				if m.User == nil {
					m.User = map[string]string{}
				}
				m.User[name] = string(raw)
			}
		}
	}
	return m, reserved
}
