// Package storetest is the conformance suite every store.Store passes. A
// store's test calls Run with a function that makes a fresh, empty store
// (each subtest gets its own) and the Capabilities that declare the store's
// known gaps; a step is skipped only by a declared capability.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := posix.New("t", loc, t.TempDir())
//			...
//			return s
//		}, storetest.Capabilities{})
//	}
//
// The suite asserts the exact sentinel errors of package store with
// errors.Is, and the contracts documented on store.Store, store.Multiparter
// and store.LocalFiler. RunVersions is the suite of store.Versioner, for
// the stores that pass an origin bucket's own versions through.
package storetest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// Capabilities declares what a store is known not to do, and sizes.
type Capabilities struct {
	// NoReadPreconditions: ReadRange ignores ifMatch (fake-gcs-server). The
	// checks that a stale ifMatch fails are skipped.
	NoReadPreconditions bool
	// ContentValidator: the Validator is derived from the bytes (an S3 MD5
	// ETag), so rewriting identical bytes may keep it. Without it every
	// rewrite must change the Validator. Different bytes always must.
	ContentValidator bool
	// SkipKey, when set, names keys the store is known not to hold (MinIO
	// refuses "a//b", say); the key tests and listings leave them out.
	SkipKey func(key string) bool
	// PathKeys: keys are file paths (an fs store), so a key with an empty
	// or dot segment, or one that would be a file where another key needs
	// a directory ("a" beside "a/b"), may be refused with ErrInvalidKey;
	// the key tests accept that refusal in every family.
	PathKeys bool
	// Short shrinks the large object and the key counts; `go test -short`
	// sets it too.
	Short bool
	// ChunkSize is the range size the large-object test is built around:
	// the object is 2*ChunkSize+ChunkSize/8+3 bytes and ranges start and end
	// on and around multiples of ChunkSize. Default 8 MiB (the cache's
	// chunk), 1 MiB when short.
	ChunkSize int64
	// ManyKeys is the number of keys of the pagination test (default 2000,
	// 300 when short).
	ManyKeys int
	// MinPartSize is the smallest multipart part, other than the last, the
	// store accepts (S3: 5 MiB); 0 for any size.
	MinPartSize int64
	// MaxKeyLen is the longest key the store accepts; longer keys must get
	// ErrInvalidKey. Default store.MaxKeyLen (S3's 1024 bytes).
	MaxKeyLen int
}

func (c Capabilities) maxKeyLen() int {
	if c.MaxKeyLen > 0 {
		return c.MaxKeyLen
	}
	return store.MaxKeyLen
}

func (c Capabilities) short() bool { return c.Short || testing.Short() }

func (c Capabilities) chunkSize() int64 {
	switch {
	case c.ChunkSize > 0:
		return c.ChunkSize
	case c.short():
		return 1 << 20
	}
	return 8 << 20
}

func (c Capabilities) manyKeys() int {
	switch {
	case c.ManyKeys > 0:
		return c.ManyKeys
	case c.short():
		return 300
	}
	return 2000
}

func (c Capabilities) skip(key string) bool { return c.SkipKey != nil && c.SkipKey(key) }

func (c Capabilities) keep(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !c.skip(k) {
			out = append(out, k)
		}
	}
	return out
}

// NewStore makes a fresh, empty store for one subtest; it registers its
// own cleanup with t.
type NewStore func(t *testing.T) store.Store

// Run runs the whole suite, one subtest per behaviour, each on a fresh store.
func Run(t *testing.T, newStore NewStore, caps Capabilities) {
	run := func(name string, f func(t *testing.T, s store.Store, caps Capabilities)) {
		t.Run(name, func(t *testing.T) { f(t, newStore(t), caps) })
	}
	run("PutStat", testPutStat)
	run("ETag", testETag)
	run("Validator", testValidator)
	run("Metadata", testMetadata)
	run("LateChecksums", testLateChecksums)
	run("UnknownSize", testUnknownSize)
	run("ShortBody", testShortBody)
	run("VerifyAtEOF", testVerifyAtEOF)
	run("BodyErrorLeavesNothing", testBodyErrorNew)
	run("BodyErrorKeepsOld", testBodyErrorOverwrite)
	run("Canceled", testCanceled)
	run("NotFound", testNotFound)
	run("Delete", testDelete)
	run("IfNoneMatch", testIfNoneMatch)
	run("IfNoneMatchRace", testIfNoneMatchRace)
	run("IfMatch", testIfMatch)
	run("ReadRange", testReadRangeSmall)
	run("ReadRangeChunkBoundaries", testReadRangeChunks)
	run("ReadRangeIfMatch", testReadRangeIfMatch)
	run("ReadFirst", testReadFirst)
	runKeyTests(t, newStore, caps)
	runListTests(t, newStore, caps)
	run("ConcurrentKeys", testConcurrentKeys)
	run("DeleteRacesPut", testDeleteRacesPut)
	run("ConcurrentDeletes", testConcurrentDeletes)
	t.Run("Multipart", func(t *testing.T) { runMultipartTests(t, newStore, caps) })
	run("LocalFile", testLocalFile)
}

// Helpers shared by the tests.

var errBoom = errors.New("storetest: body read failed")

// data returns n deterministic pseudo-random bytes for seed.
func data(seed uint64, n int) []byte {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	r := rand.NewChaCha8(s)
	b := make([]byte, n)
	r.Read(b)
	return b
}

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

func put(t testing.TB, s store.Store, key string, b []byte, opts store.PutOptions) store.ObjectInfo {
	t.Helper()
	info, err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), opts)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(b), err)
	}
	if info.Size != int64(len(b)) || info.ETag != md5hex(b) || info.Validator == "" {
		t.Fatalf("Put(%q) = size %d, ETag %q, Validator %q; want size %d, ETag %s and a Validator",
			key, info.Size, info.ETag, info.Validator, len(b), md5hex(b))
	}
	return info
}

func stat(t testing.TB, s store.Store, key string) store.ObjectInfo {
	t.Helper()
	info, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	return info
}

func readRange(t testing.TB, s store.Store, key string, off, n int64, v store.Validator) ([]byte, error) {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, off, n, v)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func read(t testing.TB, s store.Store, key string) []byte {
	t.Helper()
	b, err := readRange(t, s, key, 0, -1, "")
	if err != nil {
		t.Fatalf("ReadRange(%q, 0, -1): %v", key, err)
	}
	return b
}

// checkObject asserts that key holds exactly want.
func checkObject(t testing.TB, s store.Store, key string, want []byte) {
	t.Helper()
	checkObjectETag(t, s, key, want, md5hex(want))
}

// checkObjectETag asserts that key holds exactly want, with ETag etag.
func checkObjectETag(t testing.TB, s store.Store, key string, want []byte, etag string) {
	t.Helper()
	info := stat(t, s, key)
	if info.Key != key || info.Size != int64(len(want)) || info.ETag != etag {
		t.Errorf("Stat(%q) = key %q, size %d, ETag %s; want size %d, ETag %s",
			key, info.Key, info.Size, info.ETag, len(want), etag)
	}
	if got := read(t, s, key); !bytes.Equal(got, want) {
		t.Errorf("ReadRange(%q): got %d bytes (md5 %s), want %d (md5 %s)", key, len(got), md5hex(got), len(want), md5hex(want))
	}
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func wantNotFound(t testing.TB, s store.Store, key string) {
	t.Helper()
	_, err := s.Stat(t.Context(), key)
	wantErr(t, "Stat("+quote(key)+")", err, store.ErrNotFound)
}

func quote(key string) string {
	if len(key) > 60 {
		return strconv.Quote(key[:40]) + "..." + strconv.Quote(key[len(key)-10:])
	}
	return strconv.Quote(key)
}

// failingReader yields b and then fails with errBoom.
type failingReader struct{ r io.Reader }

func newFailingReader(b []byte) io.Reader { return &failingReader{bytes.NewReader(b)} }

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errBoom
	}
	return n, err
}

// onlyReader hides every method but Read (no WriterTo, no Seeker), as a
// network body would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
