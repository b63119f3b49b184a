package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
)

// Helpers that every store kind needs the same way.

// RandomID returns 32 random hex digits: the ids stores give the uploads
// and temporary objects they create.
func RandomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidRandomID reports whether id has RandomID's form (a store checks an
// upload id from a client before it names a path with it).
func ValidRandomID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !strings.ContainsRune("0123456789abcdef", rune(id[i])) {
			return false
		}
	}
	return true
}

// ContextReader returns a reader whose reads fail with ctx's error once
// ctx is done (a body a client stopped sending, or a write given up).
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ErrBodyTooLong: a body had more bytes than the size given to Put.
var ErrBodyTooLong = errors.New("store: body longer than its declared size")

// ExpectEOF reads from r, which should be exhausted, until it reports its
// end: nil for io.EOF, ErrBodyTooLong for more bytes, the reader's error
// otherwise. Stores call it after reading a body of known size, so a
// verifying reader (checksums, chunk signatures) can fail the write there.
func ExpectEOF(r io.Reader) error {
	var one [1]byte
	for range 100 {
		n, err := r.Read(one[:])
		switch {
		case n > 0:
			return ErrBodyTooLong
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
	return io.ErrNoProgress
}

// Override returns m with every field o sets replaced and o's User and
// Checksums entries added, as a multipart completion's options apply over
// the metadata given when the upload was created. m's maps are not modified.
func (m Metadata) Override(o Metadata) Metadata {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&m.ContentType, o.ContentType)
	set(&m.CacheControl, o.CacheControl)
	set(&m.ContentDisposition, o.ContentDisposition)
	set(&m.ContentEncoding, o.ContentEncoding)
	set(&m.ContentLanguage, o.ContentLanguage)
	set(&m.Expires, o.Expires)
	m.User = MergeMaps(m.User, o.User)
	m.Checksums = MergeMaps(m.Checksums, o.Checksums)
	return m
}

// MergeMaps returns a copy of dst with src's entries added (dst itself when
// src is empty).
func MergeMaps(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	out := maps.Clone(dst)
	if out == nil {
		out = make(map[string]string, len(src))
	}
	maps.Copy(out, src)
	return out
}

// CheckRoot reports whether root, opened at dir, is still the directory at
// dir: removed and recreated, or a filesystem mounted over it, fails it.
// what names the store in the error ("posix store \"nas\"").
func CheckRoot(what, dir string, root *os.Root) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ri, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !os.SameFile(fi, ri) {
		return fmt.Errorf("%s: %s is no longer the directory this node opened (removed and recreated, or a filesystem mounted over it): restart the node to use the new one", what, dir)
	}
	return nil
}

// MetaJSON is an object's Metadata as the stores that keep it themselves
// write it in JSON (posix trailers, fs extended attributes). Its names are
// an on-disk format: keep them. Embedded in a store's own record, its
// fields are that record's.
type MetaJSON struct {
	ContentType        string            `json:"content_type,omitempty"`
	CacheControl       string            `json:"cache_control,omitempty"`
	ContentDisposition string            `json:"content_disposition,omitempty"`
	ContentEncoding    string            `json:"content_encoding,omitempty"`
	ContentLanguage    string            `json:"content_language,omitempty"`
	Expires            string            `json:"expires,omitempty"`
	User               map[string]string `json:"user,omitempty"`
	Checksums          map[string]string `json:"checksums,omitempty"`
}

// MetaJSONOf copies m (its maps too).
func MetaJSONOf(m Metadata) MetaJSON {
	return MetaJSON{
		ContentType: m.ContentType, CacheControl: m.CacheControl, ContentDisposition: m.ContentDisposition,
		ContentEncoding: m.ContentEncoding, ContentLanguage: m.ContentLanguage, Expires: m.Expires,
		User: MergeMaps(nil, m.User), Checksums: MergeMaps(nil, m.Checksums),
	}
}

// Metadata is m as Metadata (sharing its maps).
func (m MetaJSON) Metadata() Metadata { return Metadata(m) }
