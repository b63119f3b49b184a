package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"sync/atomic"
	"testing"

	"github.com/fedgate/fedgate/store"
)

func testPutStat(t *testing.T, s store.Store, caps Capabilities) {
	if s.Name() == "" || s.Location().Cloud == "" {
		t.Errorf("Name() = %q, Location() = %v; want both set", s.Name(), s.Location())
	}
	b := data(1, 1000)
	pi := put(t, s, "obj", b, store.PutOptions{})
	info := stat(t, s, "obj")
	if info.Key != "obj" || info.Size != 1000 || info.ETag != pi.ETag || info.Validator != pi.Validator {
		t.Errorf("Stat = %+v; want key obj, size 1000, ETag %s, Validator %s", info, pi.ETag, pi.Validator)
	}
	if info.ModTime.IsZero() {
		t.Error("Stat: zero ModTime")
	}
	checkObject(t, s, "obj", b)

	// Overwrite with other bytes, then with an empty object.
	b2 := data(2, 3000)
	put(t, s, "obj", b2, store.PutOptions{})
	checkObject(t, s, "obj", b2)
	put(t, s, "obj", nil, store.PutOptions{})
	checkObject(t, s, "obj", nil)
}

func testETag(t *testing.T, s store.Store, caps Capabilities) {
	for i, n := range []int{0, 1, 4096, 1<<20 + 7} {
		key := fmt.Sprintf("etag/%d", i)
		b := data(uint64(i), n)
		info := put(t, s, key, b, store.PutOptions{})
		if info.ETag != md5hex(b) {
			t.Errorf("Put(%d bytes).ETag = %q, want hex MD5 %s", n, info.ETag, md5hex(b))
		}
		if got := stat(t, s, key).ETag; got != md5hex(b) {
			t.Errorf("Stat(%d bytes).ETag = %q, want %s", n, got, md5hex(b))
		}
	}
	if got := stat(t, s, "etag/0").ETag; got != "d41d8cd98f00b204e9800998ecf8427e" {
		t.Errorf("empty object ETag = %q, want the MD5 of nothing", got)
	}
}

// testValidator: the Validator is stable while the object is unchanged,
// differs whenever the bytes differ, and (unless ContentValidator) differs
// after any rewrite. It is never the ETag's job.
func testValidator(t *testing.T, s store.Store, caps Capabilities) {
	b := data(3, 5000)
	v1 := put(t, s, "v", b, store.PutOptions{}).Validator
	if a, b := stat(t, s, "v").Validator, stat(t, s, "v").Validator; a != v1 || b != v1 {
		t.Fatalf("Validator not stable: Put %q, Stat %q, Stat %q", v1, a, b)
	}
	same := put(t, s, "v", b, store.PutOptions{})
	if same.ETag != md5hex(b) {
		t.Errorf("rewrite with the same bytes: ETag %q, want %s", same.ETag, md5hex(b))
	}
	if !caps.ContentValidator && same.Validator == v1 {
		t.Errorf("rewrite with the same bytes kept Validator %q", v1)
	}
	seen := map[store.Validator]bool{v1: true, same.Validator: true}
	for i := range 5 {
		other := data(uint64(10+i), 5000) // same size, other bytes
		v := put(t, s, "v", other, store.PutOptions{}).Validator
		if seen[v] {
			t.Errorf("rewrite %d with other bytes reused Validator %q", i, v)
		}
		seen[v] = true
		if got := stat(t, s, "v").Validator; got != v {
			t.Errorf("Stat after rewrite %d: Validator %q, Put said %q", i, got, v)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func crc32c(b []byte) string {
	return b64(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))))
}

func sha256b64(b []byte) string {
	h := sha256.Sum256(b)
	return b64(h[:])
}

func fullMetadata(body []byte) store.Metadata {
	return store.Metadata{
		ContentType:        "application/x-fedgate; charset=utf-8",
		CacheControl:       "max-age=60, private",
		ContentDisposition: `attachment; filename="a b.bin"`,
		ContentEncoding:    "gzip",
		ContentLanguage:    "en-US",
		Expires:            "Thu, 01 Dec 2094 16:00:00 GMT",
		User: map[string]string{
			"run-id":      "r-42",
			"owner":       "Ada Lovelace",
			"under_score": "x",
			"dotted.name": "v=1;w=2",
		},
		Checksums: map[string]string{"SHA256": sha256b64(body)},
	}
}

// checkMetadata asserts got holds want: every field equal, User equal,
// and every checksum of want present (a store may add its own).
func checkMetadata(t testing.TB, what string, got, want store.Metadata) {
	t.Helper()
	g, w := got, want
	g.User, g.Checksums, w.User, w.Checksums = nil, nil, nil, nil
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s: metadata\n got %+v\nwant %+v", what, g, w)
	}
	if len(got.User) != 0 || len(want.User) != 0 {
		if !maps.Equal(got.User, want.User) {
			t.Errorf("%s: user metadata\n got %v\nwant %v", what, got.User, want.User)
		}
	}
	for k, v := range want.Checksums {
		if got.Checksums[k] != v {
			t.Errorf("%s: checksum %s = %q, want %q (all: %v)", what, k, got.Checksums[k], v, got.Checksums)
		}
	}
}

func testMetadata(t *testing.T, s store.Store, caps Capabilities) {
	b := data(4, 70_000)
	md := fullMetadata(b)
	put(t, s, "m", b, store.PutOptions{Metadata: md})
	checkMetadata(t, "Stat", stat(t, s, "m").Metadata, md)
	checkObject(t, s, "m", b)

	// A rewrite replaces the metadata; it does not merge it.
	put(t, s, "m", b, store.PutOptions{Metadata: store.Metadata{ContentType: "text/plain"}})
	got := stat(t, s, "m").Metadata
	if got.ContentType != "text/plain" || got.CacheControl != "" || len(got.User) != 0 {
		t.Errorf("after rewrite: metadata %+v, want only ContentType text/plain", got)
	}
}

// eofReader records when its reader has returned io.EOF.
type eofReader struct {
	r   io.Reader
	eof atomic.Bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof.Store(true)
	}
	return n, err
}

func testLateChecksums(t *testing.T, s store.Store, caps Capabilities) {
	b := data(5, 300_000)
	body := &eofReader{r: onlyReader{bytes.NewReader(b)}}
	var calls atomic.Int32
	opts := store.PutOptions{
		Metadata: store.Metadata{ContentType: "application/octet-stream"},
		LateChecksums: func() map[string]string {
			calls.Add(1)
			if !body.eof.Load() {
				t.Error("LateChecksums called before the body returned io.EOF")
			}
			return map[string]string{"CRC32C": crc32c(b)}
		},
	}
	if _, err := s.Put(t.Context(), "late", body, -1, opts); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("LateChecksums called %d times, want 1", n)
	}
	checkMetadata(t, "Stat", stat(t, s, "late").Metadata, store.Metadata{
		ContentType: "application/octet-stream",
		Checksums:   map[string]string{"CRC32C": crc32c(b)},
	})
	checkObject(t, s, "late", b)
}

func testUnknownSize(t *testing.T, s store.Store, caps Capabilities) {
	for _, n := range []int{0, 1, 1<<20 + 3} {
		b := data(6, n)
		key := fmt.Sprintf("unknown/%d", n)
		info, err := s.Put(t.Context(), key, onlyReader{bytes.NewReader(b)}, -1, store.PutOptions{})
		if err != nil {
			t.Fatalf("Put(size -1, %d bytes): %v", n, err)
		}
		if info.Size != int64(n) || info.ETag != md5hex(b) {
			t.Errorf("Put(size -1, %d bytes) = size %d, ETag %s; want %d, %s", n, info.Size, info.ETag, n, md5hex(b))
		}
		checkObject(t, s, key, b)
	}
}

func testShortBody(t *testing.T, s store.Store, caps Capabilities) {
	b := data(7, 1000)
	_, err := s.Put(t.Context(), "short", onlyReader{bytes.NewReader(b)}, 2000, store.PutOptions{})
	wantErr(t, "Put(1000 of 2000 bytes)", err, io.ErrUnexpectedEOF)
	wantNotFound(t, s, "short")
}

func testBodyErrorNew(t *testing.T, s store.Store, caps Capabilities) {
	b := data(8, 1<<20)
	for _, size := range []int64{-1, 2 << 20} {
		_, err := s.Put(t.Context(), "broken", newFailingReader(b), size, store.PutOptions{})
		wantErr(t, fmt.Sprintf("Put(failing body, size %d)", size), err, errBoom)
		wantNotFound(t, s, "broken")
		_, err = s.Put(t.Context(), "broken", newFailingReader(b), size, store.PutOptions{IfNoneMatch: true})
		wantErr(t, fmt.Sprintf("Put(failing body, size %d, IfNoneMatch)", size), err, errBoom)
		wantNotFound(t, s, "broken")
	}
	for e, err := range s.List(t.Context(), store.ListOptions{}) {
		t.Errorf("List after failed Puts: %+v, %v; want nothing", e.Key, err)
	}
	// The key is still free for create-if-absent.
	put(t, s, "broken", b, store.PutOptions{IfNoneMatch: true})
}

func testBodyErrorOverwrite(t *testing.T, s store.Store, caps Capabilities) {
	old := data(9, 200_000)
	md := store.Metadata{ContentType: "old/type", User: map[string]string{"v": "1"}}
	before := put(t, s, "keep", old, store.PutOptions{Metadata: md})
	_, err := s.Put(t.Context(), "keep", newFailingReader(data(10, 1<<20)), -1,
		store.PutOptions{Metadata: store.Metadata{ContentType: "new/type"}})
	wantErr(t, "overwrite with failing body", err, errBoom)
	_, err = s.Put(t.Context(), "keep", newFailingReader(data(10, 1<<20)), -1,
		store.PutOptions{IfMatch: before.Validator})
	wantErr(t, "IfMatch overwrite with failing body", err, errBoom)
	after := stat(t, s, "keep")
	if after.Validator != before.Validator || after.ETag != before.ETag {
		t.Errorf("failed overwrite changed the object: Validator %q -> %q, ETag %q -> %q",
			before.Validator, after.Validator, before.ETag, after.ETag)
	}
	checkMetadata(t, "after failed overwrite", after.Metadata, md)
	checkObject(t, s, "keep", old)
}

func testCanceled(t *testing.T, s store.Store, caps Capabilities) {
	ctx, cancel := context.WithCancel(t.Context())
	b := data(11, 1<<20)
	// Cancel while the body is being read.
	body := &cancelingReader{r: bytes.NewReader(b), after: 256 << 10, cancel: cancel}
	_, err := s.Put(ctx, "canceled", body, int64(len(b)), store.PutOptions{})
	wantErr(t, "Put with ctx canceled mid-body", err, context.Canceled)
	wantNotFound(t, s, "canceled")
	_, err = s.Put(ctx, "canceled", bytes.NewReader(b), int64(len(b)), store.PutOptions{})
	wantErr(t, "Put with canceled ctx", err, context.Canceled)
	wantNotFound(t, s, "canceled")
}

// cancelingReader calls cancel once after bytes have been read, then keeps
// reading, as a network body would.
type cancelingReader struct {
	r      io.Reader
	n      int
	after  int
	cancel func()
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n >= c.after {
		c.cancel()
	}
	return n, err
}

func testNotFound(t *testing.T, s store.Store, caps Capabilities) {
	wantNotFound(t, s, "missing")
	_, err := readRange(t, s, "missing", 0, -1, "")
	wantErr(t, `ReadRange("missing")`, err, store.ErrNotFound)
	put(t, s, "dir/obj", []byte("x"), store.PutOptions{})
	put(t, s, "file", []byte("x"), store.PutOptions{})
	// Neither a "directory" nor a path through an object is an object.
	for _, k := range []string{"dir", "dir/", "dir/o", "dir/obj/", "dir/obj/x", "file/", "file/x", "fil"} {
		wantNotFound(t, s, k)
		_, err := readRange(t, s, k, 0, -1, "")
		wantErr(t, "ReadRange("+quote(k)+")", err, store.ErrNotFound)
	}
}

func testDelete(t *testing.T, s store.Store, caps Capabilities) {
	ctx := t.Context()
	if err := s.Delete(ctx, "never-existed"); err != nil {
		t.Errorf("Delete(missing key) = %v, want nil", err)
	}
	if err := s.Delete(ctx, "no/such/dir/key"); err != nil {
		t.Errorf("Delete(missing nested key) = %v, want nil", err)
	}
	a, ab, abc := data(12, 100), data(13, 100), data(14, 100)
	kA, kAB, kABC := "a", "a/b", "a/b/c"
	if caps.PathKeys { // no file beside a directory of the same name
		kA, kAB, kABC = "a", "d/b", "d/c/e"
	}
	put(t, s, kA, a, store.PutOptions{})
	put(t, s, kAB, ab, store.PutOptions{})
	put(t, s, kABC, abc, store.PutOptions{})
	for range 2 {
		if err := s.Delete(ctx, kAB); err != nil {
			t.Fatalf("Delete(%s): %v", kAB, err)
		}
	}
	wantNotFound(t, s, kAB)
	checkObject(t, s, kA, a)
	checkObject(t, s, kABC, abc)
	if err := s.Delete(ctx, kABC); err != nil {
		t.Fatalf("Delete(%s): %v", kABC, err)
	}
	if err := s.Delete(ctx, kA); err != nil {
		t.Fatalf("Delete(%s): %v", kA, err)
	}
	for e, err := range s.List(ctx, store.ListOptions{}) {
		t.Errorf("List after deleting everything: %q, %v", e.Key, err)
	}
	// The emptied "directories" are usable again.
	put(t, s, kABC, abc, store.PutOptions{})
	checkObject(t, s, kABC, abc)
	if caps.PathKeys { // and an emptied directory's name can be a file
		if err := s.Delete(ctx, kABC); err != nil {
			t.Fatal(err)
		}
		put(t, s, "d", a, store.PutOptions{})
		checkObject(t, s, "d", a)
	}
}

// testVerifyAtEOF: Put reads the body to its end even when size is known,
// because a verifying reader (checksum, signature) reports a mismatch in
// place of io.EOF; such a write stores nothing and calls no LateChecksums.
// A body longer than size is refused too.
func testVerifyAtEOF(t *testing.T, s store.Store, caps Capabilities) {
	b := data(11, 300_000)
	late := false
	_, err := s.Put(t.Context(), "verified", newFailingReader(b), int64(len(b)),
		store.PutOptions{LateChecksums: func() map[string]string { late = true; return nil }})
	wantErr(t, "Put(exact size, reader failing at EOF)", err, errBoom)
	wantNotFound(t, s, "verified")
	if late {
		t.Error("LateChecksums called although the body failed at its end")
	}
	_, err = s.Put(t.Context(), "too-long", onlyReader{bytes.NewReader(b)}, int64(len(b)-1), store.PutOptions{})
	if err == nil {
		t.Error("Put of a body longer than its size succeeded")
	}
	wantNotFound(t, s, "too-long")
	if mp, ok := s.(store.Multiparter); ok {
		id, err := mp.CreateMultipart(t.Context(), "verified-mp", store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = mp.UploadPart(t.Context(), "verified-mp", id, 1, newFailingReader(b), int64(len(b)))
		wantErr(t, "UploadPart(exact size, reader failing at EOF)", err, errBoom)
		_ = mp.AbortMultipart(t.Context(), "verified-mp", id)
	}
}
