package posix

// How keys become paths.
//
// A key is split at "/" into segments. Every segment but the last is a
// directory, the last is a file; each name carries a one-byte type prefix:
//
//	'f' + esc(segment)   a file: the object whose key ends here
//	'd' + esc(segment)   a directory: keys that continue with segment + "/"
//	'c' + esc(chunk)     a continuation directory: keys that continue with
//	                     chunk and then more bytes of the same segment
//
// so "a" and "a/b" are "fa" and "da/fb", "dir/" is "ddir/f", "a//b" is
// "da/d/fb". No name is ever "." or "..", nor starts with "." (the store's
// own folders, .staging and .multipart, do), so no key escapes the root or
// collides with the store's housekeeping.
//
// esc escapes '%', the control bytes and DEL as %XX and keeps every other
// byte, so one byte becomes 1 or 3. A segment whose escaped length reaches
// contThreshold is split: its chunk is the shortest prefix whose escaped
// length reaches contThreshold (so a name is at most 1+contThreshold+2
// bytes, under NAME_MAX), and the remainder, possibly empty, is encoded the
// same way inside the continuation directory.
//
// Listing in S3 byte order sorts a directory's children by their fragment
// (file "x" -> "x", directory "x" -> "x/", continuation "X" -> "X") and
// recurses. The children's key sets never interleave: every key of a child
// starts with its fragment, and no fragment is a proper prefix of a
// sibling's fragment unless it is a file's (whose only key is the fragment
// itself, smaller than every extension). A directory fragment ends in its
// only "/"; a continuation chunk is the shortest prefix reaching the
// threshold, so no other chunk extends it, and every file or directory
// segment stays below the threshold, so it cannot extend a chunk either.

import (
	"strings"

	"github.com/fedgate/fedgate/store"
)

const (
	typeFile = 'f'
	typeDir  = 'd'
	typeCont = 'c'

	// contThreshold is the escaped length at which a segment is split into
	// continuation directories; names stay at most contThreshold+3 bytes.
	contThreshold = 240

	stagingDir   = ".staging"
	multipartDir = ".multipart"
)

// MaxKeyLen is the longest key the posix store holds: S3's 1024 bytes plus
// room for the "<bucket>/" prefix the namespace puts in front of the keys of
// buckets created through S3.
const MaxKeyLen = store.MaxKeyLen + 64

// checkKey returns store.ErrInvalidKey for a key no store holds.
func checkKey(key string) error {
	switch {
	case key == "":
		return store.ErrInvalidKey
	case len(key) > MaxKeyLen:
		return store.ErrInvalidKey
	case strings.IndexByte(key, 0) >= 0:
		return store.ErrInvalidKey
	}
	return nil
}

func needsEscape(b byte) bool { return b < 0x20 || b == 0x7f || b == '%' }

func escWidth(b byte) int {
	if needsEscape(b) {
		return 3
	}
	return 1
}

func escLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n += escWidth(s[i])
	}
	return n
}

const hexDigits = "0123456789ABCDEF"

func escape(s string) string {
	if escLen(s) == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(escLen(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescape reverses escape; it reports false for anything escape would not
// have produced, so one fragment has exactly one name.
func unescape(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, escLen(s) == len(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if needsEscape(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		v := hi<<4 | lo
		if !ok1 || !ok2 || !needsEscape(v) || v == 0 {
			return "", false
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), true
}

// splitSegment returns the continuation chunks of one segment and the
// remainder that is named as a file or directory.
func splitSegment(seg string) (chunks []string, rest string) {
	for {
		n, i := 0, 0
		for i < len(seg) && n < contThreshold {
			n += escWidth(seg[i])
			i++
		}
		if n < contThreshold {
			return chunks, seg
		}
		chunks = append(chunks, seg[:i])
		seg = seg[i:]
	}
}

// objectPath returns the path, relative to the root, of key's file.
// ErrInvalidKey for a key checkKey refuses.
func objectPath(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	var b strings.Builder
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		chunks, rest := splitSegment(seg)
		for _, c := range chunks {
			b.WriteByte(typeCont)
			b.WriteString(escape(c))
			b.WriteByte('/')
		}
		if i < len(segs)-1 {
			b.WriteByte(typeDir)
			b.WriteString(escape(rest))
			b.WriteByte('/')
		} else {
			b.WriteByte(typeFile)
			b.WriteString(escape(rest))
		}
	}
	return b.String(), nil
}

// prefixDir returns the deepest directory (relative to the root) that holds
// every key starting with prefix, and the key prefix that directory stands
// for (a prefix of prefix).
func prefixDir(prefix string) (dir, base string) {
	var d, k strings.Builder
	d.WriteByte('.')
	segs := strings.Split(prefix, "/")
	for i, seg := range segs {
		chunks, rest := splitSegment(seg)
		for _, c := range chunks {
			d.WriteString("/c")
			d.WriteString(escape(c))
			k.WriteString(c)
		}
		if i < len(segs)-1 {
			d.WriteString("/d")
			d.WriteString(escape(rest))
			k.WriteString(rest)
			k.WriteByte('/')
		}
	}
	return d.String(), k.String()
}

// decodeName parses a directory entry name into its type and the key
// fragment it stands for (with the "/" of a directory). It reports false for
// names the encoding never produces, which List skips.
func decodeName(name string) (typ byte, frag string, ok bool) {
	if name == "" {
		return 0, "", false
	}
	seg, ok := unescape(name[1:])
	if !ok {
		return 0, "", false
	}
	long := escLen(seg) >= contThreshold
	switch typ = name[0]; typ {
	case typeFile:
		return typ, seg, !long
	case typeDir:
		return typ, seg + "/", !long
	case typeCont:
		// A chunk is the shortest prefix reaching the threshold.
		return typ, seg, long && escLen(seg)-escWidth(seg[len(seg)-1]) < contThreshold
	}
	return 0, "", false
}

// parentDir returns the directory part of a relative path ("." for none).
func parentDir(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "."
	}
	return rel[:i]
}

// ObjectPath returns the path, relative to the store's root, of the file
// that holds key (the encoding above); ErrInvalidKey for a key the store
// cannot hold. Tools that lay out a tree directly (the scale benchmark in
// bench/) use it.
func ObjectPath(key string) (string, error) { return objectPath(key) }
