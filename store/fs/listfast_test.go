package fs

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// TestListInfoMatchesStat: every entry a listing yields (size, mtime,
// Validator, ETag) is what Stat answers for its key: files written
// through the store (a bound MD5 ETag), written outside (no attribute),
// changed outside after a write (a stale attribute), with an attribute
// that does not parse, and files changed, replaced by links or removed
// between the pages of the listing. Links are not listed. The fast path
// itself (fstatat and getxattrat on the directory's descriptor) answers
// each file as Stat does, a too-small buffer included.
func TestListInfoMatchesStat(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	put := func(key, body string, md store.Metadata) {
		t.Helper()
		if _, err := s.Put(ctx, key, strings.NewReader(body), int64(len(body)), store.PutOptions{Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	path := func(key string) string { return filepath.Join(s.dir, key) }
	put("d/a-put", "some bytes", store.Metadata{ContentType: "text/plain", User: map[string]string{"k": strings.Repeat("v", 300)}})
	put("d/b-stale", "old", store.Metadata{})
	writeTree(t, s.dir, map[string]string{"d/c-plain": "outside", "d/e-garbage": "x", "d/f-changes": "v1",
		"d/g-becomes-link": "y", "d/h-removed": "z", "d/sub/i": "nested", "d/j-last": "last"})
	if err := os.WriteFile(path("d/b-stale"), []byte("changed outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(path("d/e-garbage"), metaAttr, []byte("{not json"), 0); err != nil {
		t.Fatal(err)
	}
	for l, to := range map[string]string{"d/d-link": "a-put", "d/sub/link": "../c-plain"} {
		if err := os.Symlink(to, path(l)); err != nil {
			t.Fatal(err)
		}
	}
	// Between pages: a file rewritten with an older mtime, one replaced by
	// a link, one removed.
	between := map[string]func(){
		"d/e-garbage": func() {
			if err := os.WriteFile(path("d/f-changes"), []byte("version two"), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Unix(1_000_000_000, 123456789)
			if err := os.Chtimes(path("d/f-changes"), old, old); err != nil {
				t.Fatal(err)
			}
		},
		"d/f-changes": func() {
			if err := os.Remove(path("d/g-becomes-link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("c-plain", path("d/g-becomes-link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path("d/h-removed")); err != nil {
				t.Fatal(err)
			}
		},
	}

	var got []string
	after := ""
	for {
		n := 0
		for e, err := range s.List(ctx, store.ListOptions{Prefix: "d/", StartAfter: after}) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			n++
			after = e.Key
			got = append(got, e.Key)
			checkAgainstStat(t, s, e)
			break // pages of one
		}
		if n == 0 {
			break
		}
		if f := between[after]; f != nil {
			f()
		}
	}
	want := []string{"d/a-put", "d/b-stale", "d/c-plain", "d/e-garbage", "d/f-changes", "d/j-last", "d/sub/i"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
	dirfd, err := unix.Open(path("d"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	if n, err, unsupported := getxattrAt(dirfd, "a-put", make([]byte, 4096)); unsupported || noGetxattrat.Load() {
		t.Log("getxattrat(2) is not available here (Linux 6.13): attributes were read by path")
	} else if err != nil || n < 300 {
		t.Errorf("getxattrat(a-put) = %d, %v; want its attribute", n, err)
	} else if n, err, _ := getxattrAt(dirfd, "d-link", make([]byte, 4096)); err == nil {
		t.Errorf("getxattrat(d-link) read %d bytes: it followed the link to a-put", n)
	}
}

// checkAgainstStat compares a listed entry, and the fast path's answer
// for its file, with Stat.
func checkAgainstStat(t *testing.T, s *Store, e store.Entry) {
	t.Helper()
	want, err := s.Stat(t.Context(), e.Key)
	if err != nil {
		t.Fatalf("Stat(%s): %v", e.Key, err)
	}
	want.Metadata = store.Metadata{} // a listing leaves it empty
	if !reflect.DeepEqual(e.Info, want) {
		t.Errorf("List entry %+v\nStat             %+v", e.Info, want)
	}
	dirfd, err := unix.Open(filepath.Join(s.dir, filepath.Dir(e.Key)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	name := filepath.Base(e.Key)
	fi, ok := lstatAt(dirfd, name)
	if !ok {
		t.Fatalf("lstatAt(%s) failed: the fast path was not taken", e.Key)
	}
	for _, size := range []int{4096, 8} { // 8: too small, read again
		info := store.ObjectInfo{Key: e.Key, Size: fi.Size(), ModTime: fi.ModTime(), Validator: validatorOf(fi),
			ETag: s.listMeta(dirfd, name, e.Key, make([]byte, size)).etag(fi)}
		if !reflect.DeepEqual(info, want) {
			t.Errorf("fast path (buffer %d) %+v\nStat                   %+v", size, info, want)
		}
	}
}

// TestListMetaWithoutGetxattrat: without getxattrat(2) (an older kernel),
// attributes are read by path and give the same ETags.
func TestListMetaWithoutGetxattrat(t *testing.T) {
	noGetxattrat.Store(true)
	t.Cleanup(func() { noGetxattrat.Store(false) })
	s := newTestStore(t, Options{})
	body := "bytes"
	info, err := s.Put(t.Context(), "k", strings.NewReader(body), int64(len(body)), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range s.List(t.Context(), store.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Info.ETag != info.ETag || !md5Like.MatchString(e.Info.ETag) {
			t.Fatalf("listed ETag %q, Put said %q", e.Info.ETag, info.ETag)
		}
	}
}
