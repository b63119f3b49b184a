package sigv4

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// scratch holds the buffers one verification needs, pooled so that the hot
// path does not allocate them per request.
type scratch struct {
	buf   []byte   // canonical request, then string to sign
	qbuf  []byte   // encoded query components
	pairs []qpair  // offsets into qbuf
	mac   macer    // HMAC-SHA256 without per-call allocation
	tmp   [32]byte // scratch digest
}

type qpair struct{ k0, k1, v0, v1 int }

var scratchPool = sync.Pool{New: func() any {
	return &scratch{buf: make([]byte, 0, 1024), mac: macer{h: sha256.New()}}
}}

// macer computes HMAC-SHA256 with a 32-byte key, reusing one hash.
type macer struct {
	h   hash.Hash
	sum [sha256.Size]byte
	pad [sha256.BlockSize]byte
}

func newMacer() macer { return macer{h: sha256.New()} }

// mac returns HMAC-SHA256(key, msg).
func (m *macer) mac(key *[32]byte, msg []byte) [32]byte {
	for i := range m.pad {
		m.pad[i] = 0x36
	}
	for i, b := range key {
		m.pad[i] ^= b
	}
	m.h.Reset()
	m.h.Write(m.pad[:])
	m.h.Write(msg)
	m.h.Sum(m.sum[:0])
	for i := range m.pad {
		m.pad[i] ^= 0x36 ^ 0x5c
	}
	m.h.Reset()
	m.h.Write(m.pad[:])
	m.h.Write(m.sum[:])
	m.h.Sum(m.sum[:0])
	return m.sum
}

// deriveKey computes the SigV4 signing key.
func deriveKey(secret, date, region, service string) [32]byte {
	k := hmacSum([]byte("AWS4"+secret), date)
	k = hmacSum(k, region)
	k = hmacSum(k, service)
	k = hmacSum(k, Terminal)
	var out [32]byte
	copy(out[:], k)
	return out
}

func hmacSum(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// maxCachedKeys bounds the signing key cache. Keys change once a day per
// credential, so a few hundred entries cover a busy gateway.
const maxCachedKeys = 512

type keyID struct{ secret, date, region, service string }

// keyCache caches derived signing keys per (secret, date, region, service).
type keyCache struct {
	mu sync.RWMutex
	m  map[keyID][32]byte
}

func (c *keyCache) get(secret string, cred *Credential) [32]byte {
	id := keyID{secret, cred.Date, cred.Region, cred.Service}
	c.mu.RLock()
	k, ok := c.m[id]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = deriveKey(secret, cred.Date, cred.Region, cred.Service)
	id = keyID{strings.Clone(secret), strings.Clone(cred.Date), strings.Clone(cred.Region), strings.Clone(cred.Service)}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[keyID][32]byte)
	}
	if len(c.m) >= maxCachedKeys {
		for old := range c.m { // evict an arbitrary entry
			delete(c.m, old)
			break
		}
	}
	c.m[id] = k
	c.mu.Unlock()
	return k
}

// request describes what goes into the canonical request.
type request struct {
	r             *http.Request
	cred          *Credential
	t             time.Time
	signedHeaders []string
	payload       string
	presign       bool // exclude X-Amz-Signature from the canonical query
}

// signature computes the request's signature with key.
func (s *scratch) signature(q *request, key *[32]byte) [32]byte {
	r := q.r
	b := append(s.buf[:0], r.Method...)
	b = append(b, '\n')
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b = appendCanonicalPath(b, path)
	b = append(b, '\n')
	b = s.appendCanonicalQuery(b, r.URL.RawQuery, q.presign)
	b = append(b, '\n')
	for _, name := range q.signedHeaders {
		b = append(b, name...)
		b = append(b, ':')
		b = appendHeaderValue(b, r, name)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	for i, name := range q.signedHeaders {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, name...)
	}
	b = append(b, '\n')
	b = append(b, q.payload...)
	s.tmp = sha256.Sum256(b)

	b = append(b[:0], Algorithm+"\n"...)
	b = q.t.UTC().AppendFormat(b, timeFormat)
	b = append(b, '\n')
	b = append(b, q.cred.Scope...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, s.tmp[:])
	s.buf = b
	return s.mac.mac(key, b)
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

const upperHex = "0123456789ABCDEF"

func appendEscaped(b []byte, c byte) []byte {
	if isUnreserved(c) {
		return append(b, c)
	}
	return append(b, '%', upperHex[c>>4], upperHex[c&15])
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// percentAt decodes s[i:i+3] if it is a valid %XX escape.
func percentAt(s string, i int) (byte, bool) {
	if s[i] != '%' || i+2 >= len(s) {
		return 0, false
	}
	hi, ok1 := unhex(s[i+1])
	lo, ok2 := unhex(s[i+2])
	return hi<<4 | lo, ok1 && ok2
}

// appendCanonicalPath URI-encodes an escaped request path the way S3 does:
// once, with every byte outside the unreserved set percent-encoded in upper
// case. A literal '/' separates segments; an escaped one (%2F) stays escaped.
func appendCanonicalPath(b []byte, path string) []byte {
	for i := 0; i < len(path); i++ {
		c := path[i]
		if d, ok := percentAt(path, i); ok {
			i += 2
			if d == '/' {
				b = append(b, "%2F"...)
				continue
			}
			b = appendEscaped(b, d)
			continue
		}
		if c == '/' {
			b = append(b, c)
			continue
		}
		b = appendEscaped(b, c)
	}
	return b
}

// appendQueryComponent decodes a raw query key or value ('+' is a space) and
// re-encodes it per SigV4 (space as %20).
func appendQueryComponent(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if d, ok := percentAt(s, i); ok {
			i += 2
			c = d
		} else if c == '+' {
			c = ' '
		}
		b = appendEscaped(b, c)
	}
	return b
}

// appendCanonicalQuery appends the canonical query string: every parameter
// decoded and re-encoded, then sorted by key and value.
func (s *scratch) appendCanonicalQuery(b []byte, raw string, presign bool) []byte {
	if raw == "" {
		return b
	}
	qb := s.qbuf[:0]
	pairs := s.pairs[:0]
	for seg := range strings.SplitSeq(raw, "&") {
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		if presign && k == querySignature {
			continue
		}
		var p qpair
		p.k0 = len(qb)
		qb = appendQueryComponent(qb, k)
		p.k1, p.v0 = len(qb), len(qb)
		qb = appendQueryComponent(qb, v)
		p.v1 = len(qb)
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(x, y qpair) int {
		if c := bytes.Compare(qb[x.k0:x.k1], qb[y.k0:y.k1]); c != 0 {
			return c
		}
		return bytes.Compare(qb[x.v0:x.v1], qb[y.v0:y.v1])
	})
	for i, p := range pairs {
		if i > 0 {
			b = append(b, '&')
		}
		b = append(b, qb[p.k0:p.k1]...)
		b = append(b, '=')
		b = append(b, qb[p.v0:p.v1]...)
	}
	s.qbuf, s.pairs = qb, pairs
	return b
}

// appendHeaderValue appends the canonical value of the signed header name:
// values joined by commas, each trimmed with runs of spaces collapsed.
func appendHeaderValue(b []byte, r *http.Request, name string) []byte {
	switch name {
	case "host":
		return appendTrimmed(b, r.Host)
	case "content-length":
		if _, ok := r.Header["Content-Length"]; !ok && r.ContentLength >= 0 {
			return strconv.AppendInt(b, r.ContentLength, 10)
		}
	case "transfer-encoding":
		if _, ok := r.Header["Transfer-Encoding"]; !ok {
			return appendTrimmed(b, strings.Join(r.TransferEncoding, ","))
		}
	}
	for i, v := range headerValues(r.Header, name) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTrimmed(b, v)
	}
	return b
}

func appendTrimmed(b []byte, v string) []byte {
	v = strings.Trim(v, " \t")
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b = append(b, c)
	}
	return b
}

// canonicalKeys maps the lower-case header names clients usually sign to the
// keys net/http stores them under, sparing an allocation per lookup.
var canonicalKeys = map[string]string{}

func init() {
	for _, k := range []string{
		"Content-Type", "Content-Md5", "Content-Length", "Content-Encoding",
		"Content-Disposition", "Content-Language", "Cache-Control", "Expires",
		"Date", "Range", "If-Match", "If-None-Match", "If-Modified-Since",
		"If-Unmodified-Since", "X-Amz-Date", "X-Amz-Content-Sha256",
		"X-Amz-Decoded-Content-Length", "X-Amz-Trailer", "X-Amz-Security-Token",
		"X-Amz-Sdk-Checksum-Algorithm", "X-Amz-Checksum-Crc32", "X-Amz-Checksum-Crc32c",
		"X-Amz-Checksum-Crc64nvme", "X-Amz-Checksum-Sha1", "X-Amz-Checksum-Sha256",
		"X-Amz-User-Agent", "X-Amz-Acl", "X-Amz-Copy-Source", "X-Amz-Storage-Class",
		"Amz-Sdk-Invocation-Id", "Amz-Sdk-Request",
	} {
		canonicalKeys[strings.ToLower(k)] = k
	}
}

// headerValues returns the values of the header whose lower-case name is
// given.
func headerValues(h http.Header, lower string) []string {
	key, ok := canonicalKeys[lower]
	if !ok {
		key = textproto.CanonicalMIMEHeaderKey(lower)
	}
	if v, ok := h[key]; ok {
		return v
	}
	for k, v := range h { // keys net/http could not canonicalize
		if strings.EqualFold(k, lower) {
			return v
		}
	}
	return nil
}
