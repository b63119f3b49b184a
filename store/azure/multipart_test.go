package azure

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/fedgate/fedgate/store"
)

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func multipartETag(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

// TestMultipartRestart: an upload begun by one Store (gateway process) is
// continued, completed or aborted by another made from the same config, as
// after a restart or on another node; a superseded part's ETag is refused.
func TestMultipartRestart(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, nil)
	a := newStoreFrom(t, cfg)
	cfg.BlockSize = 64 << 10
	b := newStoreFrom(t, cfg)
	id, err := a.CreateMultipart(ctx, "ckpt/model.pt", store.PutOptions{Metadata: store.Metadata{ContentType: "application/x-pt"}})
	if err != nil {
		t.Fatal(err)
	}
	old := fill(300<<10, 1) // 5 blocks of 64 KiB on b, 2 of 256 KiB on a
	p1 := fill(300<<10, 2)
	p2 := fill(1000, 3)
	if _, err := b.UploadPart(ctx, "ckpt/model.pt", id, 1, bytes.NewReader(old), -1); err != nil {
		t.Fatal(err)
	}
	i1, err := a.UploadPart(ctx, "ckpt/model.pt", id, 1, bytes.NewReader(p1), int64(len(p1)))
	if err != nil {
		t.Fatal(err)
	}
	i2, err := b.UploadPart(ctx, "ckpt/model.pt", id, 2, bytes.NewReader(p2), int64(len(p2)))
	if err != nil {
		t.Fatal(err)
	}
	stale := store.PartInfo{Number: 1, ETag: md5hex(old)}
	if _, err := b.CompleteMultipart(ctx, "ckpt/model.pt", id, []store.PartInfo{stale, i2}, store.PutOptions{}); !errors.Is(err, store.ErrInvalidPart) {
		t.Errorf("Complete with a superseded part's ETag: %v, want ErrInvalidPart", err)
	}
	info, err := b.CompleteMultipart(ctx, "ckpt/model.pt", id, []store.PartInfo{i1, i2}, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	whole := append(append([]byte{}, p1...), p2...)
	if info.ETag != multipartETag(p1, p2) || info.Size != int64(len(whole)) {
		t.Errorf("Complete = %+v, want ETag %s size %d", info, multipartETag(p1, p2), len(whole))
	}
	st, err := a.Stat(ctx, "ckpt/model.pt")
	if err != nil || st.ETag != info.ETag || st.ContentType != "application/x-pt" || st.Validator != info.Validator {
		t.Errorf("Stat = %+v, %v", st, err)
	}
	got := readAll(t, a, "ckpt/model.pt")
	if !bytes.Equal(got, whole) {
		t.Errorf("object: %d bytes, want %d", len(got), len(whole))
	}

	// Abort on one node; the other cannot complete.
	id, err = a.CreateMultipart(ctx, "x", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.UploadPart(ctx, "x", id, 1, bytes.NewReader(nil), 0) // an empty part
	if err != nil || p.ETag != md5hex(nil) {
		t.Fatalf("UploadPart(empty) = %+v, %v", p, err)
	}
	if err := b.AbortMultipart(ctx, "x", id); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CompleteMultipart(ctx, "x", id, []store.PartInfo{p}, store.PutOptions{}); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("Complete after Abort elsewhere: %v, want ErrNoSuchUpload", err)
	}
	// An empty single part makes an empty object.
	id, _ = a.CreateMultipart(ctx, "empty", store.PutOptions{})
	p, _ = a.UploadPart(ctx, "empty", id, 1, bytes.NewReader(nil), 0)
	if info, err := b.CompleteMultipart(ctx, "empty", id, []store.PartInfo{p}, store.PutOptions{}); err != nil || info.Size != 0 {
		t.Errorf("Complete(one empty part) = %+v, %v", info, err)
	}
	if got := readAll(t, a, "empty"); len(got) != 0 {
		t.Errorf("empty object holds %d bytes", len(got))
	}
}

// TestPutStaged: unknown and known sizes over many blocks, and an IfMatch
// commit after staging.
func TestPutStaged(t *testing.T) {
	s := newStore(t, func(c *Config) { c.BlockSize = 64 << 10; c.Concurrency = 3 })
	ctx := t.Context()
	b := fill(1<<20+123, 9)
	info, err := s.Put(ctx, "big", onlyReader{bytes.NewReader(b)}, -1, store.PutOptions{})
	if err != nil || info.ETag != md5hex(b) || info.Size != int64(len(b)) {
		t.Fatalf("Put(unknown size) = %+v, %v", info, err)
	}
	b2 := fill(1<<20, 10)
	info2, err := s.Put(ctx, "big", bytes.NewReader(b2), int64(len(b2)), store.PutOptions{IfMatch: info.Validator})
	if err != nil || info2.ETag != md5hex(b2) {
		t.Fatalf("Put(IfMatch) = %+v, %v", info2, err)
	}
	_, err = s.Put(ctx, "big", bytes.NewReader(b), int64(len(b)), store.PutOptions{IfMatch: info.Validator})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("Put(stale IfMatch, staged) = %v, want ErrPreconditionFailed", err)
	}
	_, err = s.Put(ctx, "big", bytes.NewReader(b), int64(len(b)), store.PutOptions{IfNoneMatch: true})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("Put(IfNoneMatch, staged) = %v, want ErrPreconditionFailed", err)
	}
	if got := readAll(t, s, "big"); !bytes.Equal(got, b2) {
		t.Errorf("object: %d bytes (md5 %s), want %s", len(got), md5hex(got), md5hex(b2))
	}
}

type onlyReader struct{ r *bytes.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func readAll(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, 0, -1, "")
	if err != nil {
		t.Fatalf("ReadRange(%q): %v", key, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return buf.Bytes()
}
