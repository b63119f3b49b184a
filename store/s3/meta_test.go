package s3

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"testing/iotest"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/store"
)

func TestValueEncoding(t *testing.T) {
	for _, v := range []string{"", "plain", "Ada Lovelace", " lead", "trail ", "é日本", "=?UTF-8?B?eA==?=", "=?x", "tab\there", "nl\n", "v=1;w=2"} {
		enc := encodeValue(v)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] >= 0x7f {
				t.Errorf("encodeValue(%q) = %q: not printable ASCII", v, enc)
				break
			}
		}
		if got := decodeValue(enc); got != v {
			t.Errorf("decodeValue(encodeValue(%q)) = %q", v, got)
		}
	}
	// S3's own RFC 2047 words (metadata written by others) decode too.
	if got := decodeValue("=?UTF-8?Q?caf=C3=A9?="); got != "café" {
		t.Errorf("decodeValue(Q word) = %q", got)
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	md := store.Metadata{
		ContentType: "text/plain", Expires: "Sun, 06 Nov 1994 08:49:37 GMT",
		User:      map[string]string{"run-id": "1", "fedgate-etag": "mine", "fedgate-u-x": "y", "note": "é"},
		Checksums: map[string]string{"SHA256": "abc="},
	}
	h, err := toHeaders(md, "etag-1", map[string]string{"CRC32C": "crc="})
	if err != nil {
		t.Fatal(err)
	}
	if h.expires == nil || h.meta[metaExpires] != "" {
		t.Errorf("an HTTP-date Expires should go as the header: %+v", h)
	}
	info := h.info("k", `"server"`)
	if info.ETag != "etag-1" || info.Validator != "server" || !maps.Equal(info.User, md.User) ||
		info.Checksums["SHA256"] != "abc=" || info.Checksums["CRC32C"] != "crc=" || info.Expires != md.Expires {
		t.Errorf("round trip: %+v", info)
	}
	if _, err := toHeaders(store.Metadata{User: map[string]string{"bad name": "x"}}, "", nil); err == nil {
		t.Error("a user name with a space was accepted")
	}
	// Without the reserved ETag (someone else's object) the server's is used.
	if info := (headers{}).info("k", `"abc-2"`); info.ETag != "abc-2" || info.Validator != "abc-2" {
		t.Errorf("foreign object: %+v", info)
	}
}

func TestMinIORefuses(t *testing.T) {
	for k, want := range map[string]bool{
		"a": false, "a/": false, "a/b": false, ".hidden": false, "a..b": false, "a/.x": false,
		"/": true, "/a": true, "a//b": true, "a//": true, ".": true, "a/..": true, "./x": true,
		strings.Repeat("z", 255): false, strings.Repeat("z", 256): true,
		strings.Repeat("z", 246) + "/": false, strings.Repeat("z", 247) + "/": true,
	} {
		if got := MinIORefuses(k); got != want {
			t.Errorf("MinIORefuses(%.20q) = %v, want %v", k, got, want)
		}
	}
}

func TestExactReader(t *testing.T) {
	b := []byte("0123456789")
	for name, tc := range map[string]struct {
		r    io.Reader
		size int64
		want error
	}{
		"exact":        {bytes.NewReader(b), 10, nil},
		"one by one":   {iotest.OneByteReader(bytes.NewReader(b)), 10, nil},
		"data and EOF": {iotest.DataErrReader(bytes.NewReader(b)), 10, nil},
		"short":        {bytes.NewReader(b), 11, io.ErrUnexpectedEOF},
		"long":         {bytes.NewReader(b), 9, errTooLong},
		"fail at EOF":  {failAtEOF{bytes.NewReader(b)}, 10, errBoom},
		"empty":        {bytes.NewReader(nil), 0, nil},
		"empty, long":  {bytes.NewReader(b), 0, errTooLong},
	} {
		x := newExactReader(tc.r, tc.size)
		got, err := io.ReadAll(x)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if tc.want == nil && (!bytes.Equal(got, b[:tc.size]) || md5hex(got) != md5hex(b[:tc.size])) {
			t.Errorf("%s: read %q", name, got)
		}
		// On failure the last byte is never delivered.
		if tc.want != nil && int64(len(got)) >= tc.size && tc.size > 0 {
			t.Errorf("%s: delivered all %d bytes despite %v", name, len(got), err)
		}
	}
}

func TestCopySource(t *testing.T) {
	if got := copySource("b", "a b/c+d/é?%"); got != "b/a%20b/c%2Bd/%C3%A9%3F%25" {
		t.Errorf("copySource = %q", got)
	}
}

// TestStagingHidden: keys under StagingPrefix and MetaPrefix are refused,
// and staging objects and sidecars are never listed.
func TestStagingHidden(t *testing.T) {
	s := newMinIO(t, nil)
	ctx := t.Context()
	for _, p := range []string{StagingPrefix, MetaPrefix} {
		if _, err := s.Put(ctx, p+"x", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Put under %s: %v, want ErrInvalidKey", p, err)
		}
	}
	// A staging object left by a crashed Put of an earlier version, and a
	// sidecar.
	s.client.PutObject(ctx, putInput(s, StagingPrefix+"leftover"))
	s.client.PutObject(ctx, putInput(s, sidecarKey("a", "0123-2")))
	if _, err := s.Put(ctx, "a", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: ".fedgate"}} {
		var keys []string
		for e, err := range s.List(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, e.Key)
		}
		if want := map[bool][]string{true: nil, false: {"a"}}[opts.Prefix != ""]; !slicesEqual(keys, want) {
			t.Errorf("List(%+v) = %q, want %q", opts, keys, want)
		}
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

func putInput(s *Store, key string) *awss3.PutObjectInput {
	return &awss3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: strings.NewReader("x")}
}
