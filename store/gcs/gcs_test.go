package gcs

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

var testLoc = policies.Location{Cloud: "gcp", Region: "test1"}

// testChunk is small so that bodies over 256 KiB take the staged path
// (temporary object, then compose) and parts stream in several requests.
const testChunk = 256 << 10

// newTestStore makes a store on a fresh bucket of the test's fake-gcs-server.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	srv := testenv.FakeGCS(t)
	s, err := New(t.Context(), Config{
		Name: "gcs-test", Location: testLoc, Bucket: srv.NewBucket(t),
		Endpoint: srv.Endpoint, WithoutAuthentication: true, ChunkSize: testChunk,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// caps are the gaps of GCS itself and of fake-gcs-server, each with its
// reason.
var caps = storetest.Capabilities{
	// GCS object names cannot hold CR or LF (documented limit): Put refuses
	// them with ErrInvalidKey.
	SkipKey: func(key string) bool { return strings.ContainsAny(key, "\r\n") },
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := newTestStore(t)
		t.Cleanup(func() { checkNoLeftovers(t, s) })
		return s
	}, caps)
}

// TestConformanceSmallPages runs the suite with listings fetched 7 entries
// at a time, so that every listing spans pages (the merge of objects and
// prefixes across page boundaries, restarts after folded prefixes).
func TestConformanceSmallPages(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s := newTestStore(t)
		s.listPage = 7
		return s
	}, caps)
}

// checkNoLeftovers: after a test no temporary upload and no intermediate
// compose object remains (the suite leaves some uploads open, whose records
// and parts stay).
func checkNoLeftovers(t *testing.T, s *Store) {
	for _, name := range rawNames(t, s, reservedPrefix) {
		if strings.HasPrefix(name, tmpPrefix) || strings.Contains(name, "/c/") {
			t.Errorf("leftover %s", name)
		}
	}
}

// rawNames lists the bucket's object names under prefix, bypassing List.
func rawNames(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	var names []string
	it := s.bkt.Objects(context.Background(), &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if err != nil {
			break
		}
		names = append(names, a.Name)
	}
	return names
}

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

func multipartETag(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

func readAll(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, 0, -1, "")
	if err != nil {
		t.Fatalf("ReadRange(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestComposeTree completes an upload of more parts than one compose takes
// (the fan-in lowered to 4, so 70 parts need four levels), and checks that
// the intermediate objects are gone.
func TestComposeTree(t *testing.T) {
	s := newTestStore(t)
	s.fanIn = 4
	ctx := t.Context()
	id, err := s.CreateMultipart(ctx, "tree", store.PutOptions{Metadata: store.Metadata{ContentType: "x/y"}})
	if err != nil {
		t.Fatal(err)
	}
	var parts []store.PartInfo
	var bodies [][]byte
	for n := 1; n <= 70; n++ {
		b := []byte(strings.Repeat(fmt.Sprintf("<%d>", n), n))
		p, err := s.UploadPart(ctx, "tree", id, n, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		parts, bodies = append(parts, p), append(bodies, b)
	}
	info, err := s.CompleteMultipart(ctx, "tree", id, parts, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := multipartETag(bodies...); info.ETag != want {
		t.Errorf("ETag %s, want %s", info.ETag, want)
	}
	if got, want := readAll(t, s, "tree"), bytes.Join(bodies, nil); !bytes.Equal(got, want) {
		t.Errorf("object: %d bytes, want %d", len(got), len(want))
	}
	if left := rawNames(t, s, mpuPrefix+id); len(left) != 0 {
		t.Errorf("left after completion: %v", left)
	}
}

// TestReservedPrefix: keys under .fedgate/ are refused, and no listing
// shows the store's own objects, whatever the prefix and delimiter.
func TestReservedPrefix(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	_, err := s.Put(ctx, ".fedgate/x", strings.NewReader("x"), 1, store.PutOptions{})
	if !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Put(.fedgate/x): %v, want ErrInvalidKey", err)
	}
	keys := []string{".fedga", ".fedgate", ".fedgate-x", ".fedgate0", ".fedgate0/y", ".fedgatf", "a"}
	for _, k := range keys {
		if _, err := s.Put(ctx, k, strings.NewReader(k), int64(len(k)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	id, err := s.CreateMultipart(ctx, "a", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UploadPart(ctx, "a", id, 1, strings.NewReader("p"), 1); err != nil {
		t.Fatal(err)
	}
	if len(rawNames(t, s, reservedPrefix)) == 0 {
		t.Fatal("the open upload left nothing under the reserved prefix")
	}
	for _, o := range []store.ListOptions{
		{}, {Prefix: "."}, {Prefix: ".fedgate"}, {Prefix: ".fedgate/"}, {Delimiter: "/"}, {Delimiter: "g"},
		{Delimiter: "te/"}, {Prefix: ".fed", Delimiter: "/"}, {StartAfter: ".fedgate"}, {StartAfter: ".fedgate/zzz"},
	} {
		for e, err := range s.List(ctx, o) {
			if err != nil {
				t.Fatalf("List(%+v): %v", o, err)
			}
			if strings.HasPrefix(e.Key, reservedPrefix) {
				t.Errorf("List(%+v) yielded %q", o, e.Key)
			}
		}
	}
}

// TestUploadSurvivesRestart: another Store (another client, as after a
// restart or on another node) continues and completes an upload.
func TestUploadSurvivesRestart(t *testing.T) {
	s1 := newTestStore(t)
	ctx := t.Context()
	md := store.Metadata{ContentType: "application/x-ckpt", User: map[string]string{"run-id": "9"}}
	id, err := s1.CreateMultipart(ctx, "ckpt", store.PutOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s1.UploadPart(ctx, "ckpt", id, 1, strings.NewReader("one"), 3)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(ctx, Config{Name: "again", Location: testLoc, Bucket: s1.bucket,
		Endpoint: testenv.FakeGCS(t).Endpoint, WithoutAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p2, err := s2.UploadPart(ctx, "ckpt", id, 2, strings.NewReader("two"), -1)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s2.CompleteMultipart(ctx, "ckpt", id, []store.PartInfo{p1, p2}, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != md.ContentType || info.User["run-id"] != "9" || info.ETag != multipartETag([]byte("one"), []byte("two")) {
		t.Errorf("completed object: %+v", info)
	}
	if got := string(readAll(t, s1, "ckpt")); got != "onetwo" {
		t.Errorf("object %q, want onetwo", got)
	}
}

// TestForeignObject: an object written without fedgate gets GCS's MD5 as
// its ETag and its metadata names lower-cased as user metadata; a user
// name that looks reserved round-trips without touching the ETag.
func TestForeignObject(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	w := s.bkt.Object("foreign").NewWriter(ctx)
	w.Metadata = map[string]string{"Owner": "ops"}
	w.Write([]byte("hello"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "foreign")
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != md5hex([]byte("hello")) || info.User["owner"] != "ops" {
		t.Errorf("foreign object: ETag %s, user %v", info.ETag, info.User)
	}
	md := store.Metadata{User: map[string]string{"fedgate-etag": "mine", "fedgate-u-x": "y"}}
	if _, err := s.Put(ctx, "k", strings.NewReader("abc"), 3, store.PutOptions{Metadata: md}); err != nil {
		t.Fatal(err)
	}
	info, err = s.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != md5hex([]byte("abc")) || len(info.User) != 2 || info.User["fedgate-etag"] != "mine" || info.User["fedgate-u-x"] != "y" {
		t.Errorf("ETag %s, user %v", info.ETag, info.User)
	}
}

// TestStagedConditional: bodies over the chunk size are committed by a
// compose, which carries the write's precondition.
func TestStagedConditional(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, testChunk+1000) }
	put := func(key string, b []byte, opts store.PutOptions) (store.ObjectInfo, error) {
		return s.Put(ctx, key, bytes.NewReader(b), int64(len(b)), opts)
	}
	v1, err := put("k", big('a'), store.PutOptions{IfNoneMatch: true})
	if err != nil || v1.ETag != md5hex(big('a')) {
		t.Fatalf("create: %+v, %v", v1, err)
	}
	if _, err := put("k", big('b'), store.PutOptions{IfNoneMatch: true}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("second create: %v, want ErrPreconditionFailed", err)
	}
	v2, err := put("k", big('c'), store.PutOptions{IfMatch: v1.Validator})
	if err != nil || v2.Validator == v1.Validator {
		t.Fatalf("IfMatch current: %+v, %v", v2, err)
	}
	for _, v := range []store.Validator{v1.Validator, "not-a-generation"} {
		if _, err := put("k", big('d'), store.PutOptions{IfMatch: v}); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("IfMatch %q: %v, want ErrPreconditionFailed", v, err)
		}
	}
	if _, err := put("absent", big('e'), store.PutOptions{IfMatch: v2.Validator}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("IfMatch on a missing key: %v, want ErrPreconditionFailed", err)
	}
	if got := readAll(t, s, "k"); !bytes.Equal(got, big('c')) {
		t.Errorf("object changed by failed writes")
	}
	if left := rawNames(t, s, tmpPrefix); len(left) != 0 {
		t.Errorf("temporary objects left: %v", left)
	}
}

// TestReadEdges: empty ranges and ranges at the end.
func TestReadEdges(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	info, err := s.Put(ctx, "r", strings.NewReader("0123456789"), 10, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		v      store.Validator
		want   string
		err    error
	}{
		{0, 0, "", "", nil},
		{10, -1, "", "", nil},
		{5, 0, info.Validator, "", nil},
		{8, 5, info.Validator, "89", nil},
		{0, 0, "1", "", store.ErrPreconditionFailed},
	} {
		rc, err := s.ReadRange(ctx, "r", c.off, c.n, c.v)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ReadRange(%d, %d, %q): %v, want %v", c.off, c.n, c.v, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ReadRange(%d, %d, %q): %v", c.off, c.n, c.v, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != c.want {
			t.Errorf("ReadRange(%d, %d, %q) = %q, %v; want %q", c.off, c.n, c.v, b, err, c.want)
		}
	}
	if _, err := s.ReadRange(ctx, "missing", 0, 0, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("empty read of a missing key: %v", err)
	}
}

// TestListOddDelimiters: delimiters GCS does not fold for us (longer than
// a byte), including one after which no UTF-8 offset exists.
func TestListOddDelimiters(t *testing.T) {
	s := newTestStore(t)
	s.listPage = 2
	ctx := t.Context()
	keys := []string{"a\x7f\x7f1", "a\x7f\x7f2", "a\x7f\x7f3", "aé1", "aé2", "b", "bé", "c"}
	for _, k := range keys {
		if _, err := s.Put(ctx, k, strings.NewReader(k), int64(len(k)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		opts store.ListOptions
		want []string
	}{
		{store.ListOptions{Delimiter: "\x7f\x7f"}, []string{"P:a\x7f\x7f", "aé1", "aé2", "b", "bé", "c"}},
		{store.ListOptions{Delimiter: "é"}, []string{"a\x7f\x7f1", "a\x7f\x7f2", "a\x7f\x7f3", "P:aé", "b", "P:bé", "c"}},
		{store.ListOptions{Delimiter: "é", StartAfter: "aé"}, []string{"b", "P:bé", "c"}},
		{store.ListOptions{Prefix: "a", Delimiter: "\x7f\x7f", StartAfter: "a\x7f\x7f2"}, []string{"aé1", "aé2"}},
	} {
		var got []string
		for e, err := range s.List(ctx, c.opts) {
			if err != nil {
				t.Fatal(err)
			}
			if e.IsPrefix {
				e.Key = "P:" + e.Key
			}
			got = append(got, e.Key)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%+q) = %q, want %q", c.opts, got, c.want)
		}
	}
}
