package s3

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// TestCompleteOverridesMetadata: metadata given at completion overrides
// CreateMultipart's field by field, and the ETag stays the multipart one.
func TestCompleteOverridesMetadata(t *testing.T) {
	s := newMinIO(t, nil)
	ctx := t.Context()
	id, err := s.CreateMultipart(ctx, "mp", store.PutOptions{Metadata: store.Metadata{
		ContentType: "old/type", CacheControl: "no-store", User: map[string]string{"run-id": "7"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("part one")
	p, err := s.UploadPart(ctx, "mp", id, 1, bytes.NewReader(body), -1)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.CompleteMultipart(ctx, "mp", id, []store.PartInfo{p}, store.PutOptions{
		Metadata:      store.Metadata{ContentType: "new/type"},
		LateChecksums: func() map[string]string { return map[string]string{"CRC32": "AAAAAA=="} },
	})
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := multipartETag([]store.PartInfo{p})
	st, err := s.Stat(ctx, "mp")
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != want || st.ETag != want || st.Validator != info.Validator || st.Size != int64(len(body)) {
		t.Errorf("Complete = %+v, Stat = %+v; want ETag %s", info, st, want)
	}
	if st.ContentType != "new/type" || st.CacheControl != "no-store" || st.User["run-id"] != "7" || st.Checksums["CRC32"] != "AAAAAA==" {
		t.Errorf("metadata after Complete = %+v", st.Metadata)
	}
}

// TestForeignObject: an object written without fedgate's metadata has the
// server's ETag as its ETag; an HTTP-date Expires travels as the header.
func TestForeignObject(t *testing.T) {
	s := newMinIO(t, nil)
	ctx := t.Context()
	if _, err := s.client.PutObject(ctx, putInput(s, "foreign")); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stat(ctx, "foreign")
	if err != nil || st.ETag != md5hex([]byte("x")) || string(st.Validator) != st.ETag {
		t.Errorf("Stat(foreign) = %+v, %v", st, err)
	}
	md := store.Metadata{Expires: "Sun, 06 Nov 1994 08:49:37 GMT"}
	if _, err := s.Put(ctx, "exp", strings.NewReader("x"), 1, store.PutOptions{Metadata: md}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stat(ctx, "exp"); err != nil || st.Expires != md.Expires {
		t.Errorf("Expires = %q, %v", st.Expires, err)
	}
}
