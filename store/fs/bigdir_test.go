package fs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

// writeKeys writes keys as files under dir (each key's bytes as its
// content), outside the store, as another program would.
func writeKeys(t *testing.T, dir string, keys []string) {
	t.Helper()
	files := make(map[string]string, len(keys))
	for _, k := range keys {
		files[k] = k
	}
	writeTree(t, dir, files)
}

// bigDir makes a store over a tree holding storetest.BigDirKeys under
// "flat/", written outside the store, and waits until a listing keeps the
// directory's index (not while its last change is within
// dirindex.RacyWindow).
func bigDir(t *testing.T) (*Store, string, []string) {
	t.Helper()
	dir := t.TempDir()
	keys := storetest.BigDirKeys("flat/", 1200, true)
	writeKeys(t, dir, keys)
	s, err := New("t", testLoc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	wait.For(t, 10*time.Second, "a listing to keep the directory's index", func() bool {
		for range s.List(t.Context(), store.ListOptions{Prefix: "flat/"}) {
			break
		}
		_, _, n, _ := s.dirs.Stats()
		return n > 0
	})
	return s, dir, keys
}

// TestBigDirQueries: listings of a large flat directory mixed with nested
// keys, with prefixes off directory boundaries, delimiters, StartAfter in
// the middle, paged, match the model.
func TestBigDirQueries(t *testing.T) {
	s, _, keys := bigDir(t)
	storetest.BigDirQueries(t, s, "flat/", keys)
}

// TestBigDirReadOncePerListing: the pages of a listing of a large
// directory read it once, not once per page.
func TestBigDirReadOncePerListing(t *testing.T) {
	s, _, keys := bigDir(t)
	hits0, misses0, _, _ := s.dirs.Stats()
	got := storetest.ListPages(t, s, store.ListOptions{Prefix: "flat/s"}, 100, nil)
	storetest.SameEntries(t, "paged", got, storetest.Expected(keys, store.ListOptions{Prefix: "flat/s"}))
	hits, misses, _, _ := s.dirs.Stats()
	pages := len(got)/100 + 1
	if misses-misses0 > 1 || hits-hits0 < int64(pages-1) {
		t.Fatalf("%d pages read the large directory %d times and found its index %d times; want it read once at most", pages, misses-misses0, hits-hits0)
	}
}

// TestBigDirChangedOutside: files created and removed by another program
// between the pages of a listing whose directory index is kept: the
// directory's changed mtime makes the store re-read it, and every key comes
// once and in order.
func TestBigDirChangedOutside(t *testing.T) {
	s, dir, keys := bigDir(t)
	storetest.ChangingListing(t, s, "flat/", keys, func(key string) {
		writeKeys(t, dir, []string{key})
	}, func(key string) {
		if err := os.Remove(filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	})
}
