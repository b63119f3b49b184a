package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/store"
)

// byteRange is a resolved, satisfiable range [Start, Start+Length).
type byteRange struct {
	Start, Length int64
}

var errRangeSyntax = errors.New("range: not a single bytes range")

// parseRange resolves an HTTP Range header against an object of size bytes.
// It returns (nil, nil) when the header is absent or, as S3 does, when it is
// syntactically invalid or names several ranges (the whole object is sent).
// An unsatisfiable range is errInvalidRange.
func parseRange(h string, size int64) (*byteRange, error) {
	if h == "" {
		return nil, nil
	}
	br, err := parseRangeSpec(h, size)
	if errors.Is(err, errRangeSyntax) {
		return nil, nil
	}
	return br, err
}

func parseRangeSpec(h string, size int64) (*byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return nil, errRangeSyntax
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return nil, errRangeSyntax
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		// Suffix range: the last n bytes.
		n, err := parseDigits(last)
		if err != nil {
			return nil, errRangeSyntax
		}
		if n == 0 {
			return nil, errInvalidRange
		}
		if size == 0 {
			return nil, errInvalidRange
		}
		n = min(n, size)
		return &byteRange{Start: size - n, Length: n}, nil
	}
	a, err := parseDigits(first)
	if err != nil {
		return nil, errRangeSyntax
	}
	end := size - 1
	if last != "" {
		b, err := parseDigits(last)
		if err != nil || b < a {
			return nil, errRangeSyntax
		}
		end = min(b, size-1)
	}
	if a >= size {
		return nil, errInvalidRange
	}
	return &byteRange{Start: a, Length: end - a + 1}, nil
}

// parseDigits accepts only ASCII digits (no sign, no spaces) that fit int64.
func parseDigits(s string) (int64, error) {
	if s == "" {
		return 0, errRangeSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errRangeSyntax
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// etagMatches reports whether an If-Match / If-None-Match list matches etag.
func etagMatches(list, etag string) bool {
	for _, c := range strings.Split(list, ",") {
		c = strings.TrimSpace(c)
		c = strings.TrimPrefix(c, "W/")
		if c == "*" || strings.Trim(c, `"`) == etag {
			return true
		}
	}
	return false
}

func parseHTTPTime(s string) (time.Time, bool) {
	t, err := http.ParseTime(s)
	return t, err == nil
}

// checkConditions applies If-Match, If-None-Match, If-Modified-Since and
// If-Unmodified-Since (with the prefix "x-amz-copy-source-" for CopyObject's
// source) with S3's precedence. It returns nil, errPrecondition, or
// errNotModified.
func checkConditions(h http.Header, prefix string, info store.ObjectInfo) error {
	mod := info.ModTime.Truncate(time.Second)
	im := h.Get(prefix + "If-Match")
	inm := h.Get(prefix + "If-None-Match")
	ims := h.Get(prefix + "If-Modified-Since")
	ius := h.Get(prefix + "If-Unmodified-Since")
	if im != "" {
		if !etagMatches(im, info.ETag) {
			return errPrecondition
		}
	} else if ius != "" {
		if t, ok := parseHTTPTime(ius); ok && mod.After(t) {
			return errPrecondition
		}
	}
	notModified := errNotModified
	if prefix != "" {
		notModified = errPrecondition // a copy source never yields 304
	}
	if inm != "" {
		if etagMatches(inm, info.ETag) {
			return notModified
		}
	} else if ims != "" {
		if t, ok := parseHTTPTime(ims); ok && !mod.After(t) {
			return notModified
		}
	}
	return nil
}

// errNotModified is answered as a bare 304, never as an XML error.
var errNotModified = errors.New("not modified")
