package storetest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// multipartETag is the S3 ETag of an object made of parts.
func multipartETag(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(parts))
}

func runMultipartTests(t *testing.T, newStore NewStore, caps Capabilities) {
	if _, ok := newStore(t).(store.Multiparter); !ok {
		t.Skip("store is not a Multiparter")
	}
	run := func(name string, f func(t *testing.T, s store.Multiparter, caps Capabilities)) {
		t.Run(name, func(t *testing.T) { f(t, newStore(t).(store.Multiparter), caps) })
	}
	run("Complete", testMultipartComplete)
	run("InvalidPart", testMultipartInvalidPart)
	run("NoSuchUpload", testMultipartNoSuchUpload)
	run("Abort", testMultipartAbort)
	run("IfNoneMatch", testMultipartIfNoneMatch)
	run("PartBodyError", testMultipartPartBodyError)
}

func partSize(caps Capabilities) int { return int(max(caps.MinPartSize, 256<<10)) }

func create(t testing.TB, m store.Multiparter, key string, opts store.PutOptions) string {
	t.Helper()
	id, err := m.CreateMultipart(t.Context(), key, opts)
	if err != nil {
		t.Fatalf("CreateMultipart(%s): %v", quote(key), err)
	}
	if id == "" {
		t.Fatalf("CreateMultipart(%s): empty upload id", quote(key))
	}
	return id
}

func uploadPart(t testing.TB, m store.Multiparter, key, id string, n int, b []byte) store.PartInfo {
	t.Helper()
	p, err := m.UploadPart(t.Context(), key, id, n, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("UploadPart(%d): %v", n, err)
	}
	if p.Number != n || p.Size != int64(len(b)) || p.ETag != md5hex(b) {
		t.Fatalf("UploadPart(%d) = number %d, size %d, ETag %s; want size %d, ETag %s", n, p.Number, p.Size, p.ETag, len(b), md5hex(b))
	}
	return p
}

func testMultipartComplete(t *testing.T, m store.Multiparter, caps Capabilities) {
	s := m.(store.Store)
	ps := partSize(caps)
	md := store.Metadata{ContentType: "application/x-tar", User: map[string]string{"run-id": "7"}}
	id := create(t, m, "mp/obj", store.PutOptions{Metadata: md})
	p1, p2, p3 := data(60, ps+1), data(61, ps), data(62, 1000)
	// Parts arrive out of order and at once; part 2 is uploaded twice.
	var wg sync.WaitGroup
	var infos [4]store.PartInfo
	for n, b := range map[int][]byte{3: p3, 1: p1, 2: data(63, ps+5)} {
		wg.Go(func() {
			p, err := m.UploadPart(t.Context(), "mp/obj", id, n, bytes.NewReader(b), int64(len(b)))
			if err != nil || p.ETag != md5hex(b) {
				t.Errorf("UploadPart(%d) = ETag %s, %v; want %s", n, p.ETag, err, md5hex(b))
			}
			infos[n] = p
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	infos[2] = uploadPart(t, m, "mp/obj", id, 2, p2) // replaces the first part 2
	info, err := m.CompleteMultipart(t.Context(), "mp/obj", id, infos[1:], store.PutOptions{})
	if err != nil {
		t.Fatalf("CompleteMultipart: %v", err)
	}
	whole := bytes.Join([][]byte{p1, p2, p3}, nil)
	etag := multipartETag(p1, p2, p3)
	if info.ETag != etag || info.Size != int64(len(whole)) || info.Validator == "" {
		t.Errorf("CompleteMultipart = ETag %s, size %d, Validator %q; want %s, %d", info.ETag, info.Size, info.Validator, etag, len(whole))
	}
	st := stat(t, s, "mp/obj")
	if st.ETag != etag || st.Size != int64(len(whole)) || st.Validator != info.Validator {
		t.Errorf("Stat = ETag %s, size %d, Validator %q; want %s, %d, %q", st.ETag, st.Size, st.Validator, etag, len(whole), info.Validator)
	}
	checkMetadata(t, "Stat after CompleteMultipart", st.Metadata, md)
	if got := read(t, s, "mp/obj"); !bytes.Equal(got, whole) {
		t.Errorf("object: %d bytes (md5 %s), want the %d bytes of the parts (md5 %s)", len(got), md5hex(got), len(whole), md5hex(whole))
	}
	checkRanges(t, s, "mp/obj", whole, []rangeCase{{int64(ps) - 1, 3}, {int64(ps + 1), int64(ps)}, {int64(2*ps) + 1, -1}})

	// The upload is gone.
	_, err = m.UploadPart(t.Context(), "mp/obj", id, 1, bytes.NewReader(p1), int64(len(p1)))
	wantErr(t, "UploadPart after completion", err, store.ErrNoSuchUpload)
	// One part, the smallest upload.
	id = create(t, m, "mp/one", store.PutOptions{})
	p := uploadPart(t, m, "mp/one", id, 1, []byte("x"))
	if info, err := m.CompleteMultipart(t.Context(), "mp/one", id, []store.PartInfo{p}, store.PutOptions{}); err != nil || info.ETag != multipartETag([]byte("x")) {
		t.Errorf("CompleteMultipart(one part) = ETag %s, %v; want %s", info.ETag, err, multipartETag([]byte("x")))
	}
	checkObjectETag(t, s, "mp/one", []byte("x"), multipartETag([]byte("x")))
}

func testMultipartInvalidPart(t *testing.T, m store.Multiparter, caps Capabilities) {
	s := m.(store.Store)
	ps := partSize(caps)
	id := create(t, m, "inv", store.PutOptions{})
	p1 := uploadPart(t, m, "inv", id, 1, data(70, ps))
	p2 := uploadPart(t, m, "inv", id, 2, data(71, 10))
	ctx := t.Context()
	missing := store.PartInfo{Number: 3, ETag: p2.ETag}
	_, err := m.CompleteMultipart(ctx, "inv", id, []store.PartInfo{p1, p2, missing}, store.PutOptions{})
	wantErr(t, "CompleteMultipart with a part never uploaded", err, store.ErrInvalidPart)
	wrong := p1
	wrong.ETag = md5hex([]byte("not this part"))
	_, err = m.CompleteMultipart(ctx, "inv", id, []store.PartInfo{wrong, p2}, store.PutOptions{})
	wantErr(t, "CompleteMultipart with a wrong ETag", err, store.ErrInvalidPart)
	wantNotFound(t, s, "inv")
	// The failed completions left the upload usable.
	if _, err := m.CompleteMultipart(ctx, "inv", id, []store.PartInfo{p1, p2}, store.PutOptions{}); err != nil {
		t.Fatalf("CompleteMultipart after failed ones: %v", err)
	}
	checkObjectETag(t, s, "inv", append(data(70, ps), data(71, 10)...), multipartETag(data(70, ps), data(71, 10)))
}

func testMultipartNoSuchUpload(t *testing.T, m store.Multiparter, caps Capabilities) {
	ctx := t.Context()
	for _, id := range []string{"00000000000000000000000000000000", "no-such-upload", "../../escape"} {
		_, err := m.UploadPart(ctx, "k", id, 1, strings.NewReader("x"), 1)
		wantErr(t, fmt.Sprintf("UploadPart(upload %q)", id), err, store.ErrNoSuchUpload)
		_, err = m.CompleteMultipart(ctx, "k", id, []store.PartInfo{{Number: 1, ETag: md5hex([]byte("x"))}}, store.PutOptions{})
		wantErr(t, fmt.Sprintf("CompleteMultipart(upload %q)", id), err, store.ErrNoSuchUpload)
		if err := m.AbortMultipart(ctx, "k", id); err != nil {
			t.Errorf("AbortMultipart(upload %q) = %v, want nil (idempotent)", id, err)
		}
	}
	// An upload id belongs to its key.
	id := create(t, m, "mine", store.PutOptions{})
	_, err := m.UploadPart(ctx, "other", id, 1, strings.NewReader("x"), 1)
	wantErr(t, "UploadPart with another key's upload", err, store.ErrNoSuchUpload)
}

func testMultipartAbort(t *testing.T, m store.Multiparter, caps Capabilities) {
	ctx := t.Context()
	id := create(t, m, "ab", store.PutOptions{})
	p := uploadPart(t, m, "ab", id, 1, data(80, 1000))
	for range 2 {
		if err := m.AbortMultipart(ctx, "ab", id); err != nil {
			t.Fatalf("AbortMultipart: %v", err)
		}
	}
	_, err := m.UploadPart(ctx, "ab", id, 2, strings.NewReader("x"), 1)
	wantErr(t, "UploadPart after abort", err, store.ErrNoSuchUpload)
	_, err = m.CompleteMultipart(ctx, "ab", id, []store.PartInfo{p}, store.PutOptions{})
	wantErr(t, "CompleteMultipart after abort", err, store.ErrNoSuchUpload)
	wantNotFound(t, m.(store.Store), "ab")
}

func testMultipartIfNoneMatch(t *testing.T, m store.Multiparter, caps Capabilities) {
	s := m.(store.Store)
	old := data(90, 100)
	put(t, s, "cond", old, store.PutOptions{})
	id := create(t, m, "cond", store.PutOptions{})
	p := uploadPart(t, m, "cond", id, 1, data(91, 100))
	_, err := m.CompleteMultipart(t.Context(), "cond", id, []store.PartInfo{p}, store.PutOptions{IfNoneMatch: true})
	wantErr(t, "CompleteMultipart(IfNoneMatch) over an object", err, store.ErrPreconditionFailed)
	checkObject(t, s, "cond", old)

	id = create(t, m, "fresh", store.PutOptions{})
	p = uploadPart(t, m, "fresh", id, 1, data(92, 100))
	if _, err := m.CompleteMultipart(t.Context(), "fresh", id, []store.PartInfo{p}, store.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatalf("CompleteMultipart(IfNoneMatch) on a new key: %v", err)
	}
	checkObjectETag(t, s, "fresh", data(92, 100), multipartETag(data(92, 100)))
}

func testMultipartPartBodyError(t *testing.T, m store.Multiparter, caps Capabilities) {
	s := m.(store.Store)
	b := data(93, 5000)
	id := create(t, m, "pb", store.PutOptions{})
	p := uploadPart(t, m, "pb", id, 1, b)
	_, err := m.UploadPart(t.Context(), "pb", id, 1, newFailingReader(data(94, 1<<20)), -1)
	wantErr(t, "UploadPart with failing body", err, errBoom)
	_, err = m.UploadPart(t.Context(), "pb", id, 1, io.LimitReader(bytes.NewReader(b), 10), int64(len(b)))
	wantErr(t, "UploadPart with short body", err, io.ErrUnexpectedEOF)
	if _, err := m.CompleteMultipart(t.Context(), "pb", id, []store.PartInfo{p}, store.PutOptions{}); err != nil {
		t.Fatalf("CompleteMultipart with the part before the failed re-uploads: %v", err)
	}
	checkObjectETag(t, s, "pb", b, multipartETag(b))
}

func testLocalFile(t *testing.T, s store.Store, caps Capabilities) {
	lf, ok := s.(store.LocalFiler)
	if !ok {
		t.Skip("store is not a LocalFiler")
	}
	b := data(95, 100_000)
	md := store.Metadata{ContentType: "image/png"}
	put(t, s, "local/obj", b, store.PutOptions{Metadata: md})
	f, off, info, err := lf.OpenLocal(t.Context(), "local/obj")
	if err != nil {
		t.Fatalf("OpenLocal: %v", err)
	}
	defer f.Close()
	st := stat(t, s, "local/obj")
	if info.Size != st.Size || info.ETag != st.ETag || info.Validator != st.Validator {
		t.Errorf("OpenLocal info = size %d, ETag %s, Validator %q; Stat says %d, %s, %q",
			info.Size, info.ETag, info.Validator, st.Size, st.ETag, st.Validator)
	}
	checkMetadata(t, "OpenLocal", info.Metadata, md)
	got := make([]byte, info.Size)
	if _, err := f.ReadAt(got, off); err != nil {
		t.Fatalf("ReadAt(%d bytes at %d): %v", len(got), off, err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("bytes at [%d, %d) differ from the object", off, off+info.Size)
	}
	// The file may be handed to a client (the short-circuit read), which
	// can read all of it: it holds the object and nothing else, the
	// metadata least of all (issue 35).
	if fi, err := f.Stat(); err != nil {
		t.Errorf("OpenLocal's file: %v", err)
	} else if off != 0 || fi.Size() != info.Size {
		t.Errorf("OpenLocal's file: the object at %d in a file of %d bytes; want the object's %d bytes alone", off, fi.Size(), info.Size)
	}
	_, _, _, err = lf.OpenLocal(t.Context(), "local/missing")
	wantErr(t, "OpenLocal(missing)", err, store.ErrNotFound)
}
