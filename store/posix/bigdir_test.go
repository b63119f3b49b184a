package posix

import (
	"bytes"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

// bigDir makes a store holding storetest.BigDirKeys under "flat/" (over
// dirindex.MinChildren keys, so the directory's index is kept between
// pages) and waits until a listing keeps the directory's index (not while
// its last change is within dirindex.RacyWindow).
func bigDir(t *testing.T) (*Store, []string) {
	t.Helper()
	s := newAt(t, t.TempDir())
	keys := storetest.BigDirKeys("flat/", 600, false)
	storetest.PutKeys(t, s, keys)
	waitIndexed(t, s, "flat/")
	return s, keys
}

// waitIndexed lists prefix's first entry until the store keeps an index.
func waitIndexed(t *testing.T, s *Store, prefix string) {
	t.Helper()
	wait.For(t, 10*time.Second, "a listing to keep the directory's index", func() bool {
		for range s.List(t.Context(), store.ListOptions{Prefix: prefix}) {
			break
		}
		_, _, n, _ := s.dirs.Stats()
		return n > 0
	})
}

// TestBigDirQueries: listings of a large flat directory mixed with nested
// keys and keys whose encoded names sort differently from the keys, with
// prefixes off directory boundaries, delimiters, StartAfter in the middle,
// paged, match the model.
func TestBigDirQueries(t *testing.T) {
	s, keys := bigDir(t)
	storetest.BigDirQueries(t, s, "flat/", keys)
}

// TestBigDirReadOncePerListing: the pages of a listing of a large
// directory read it once (the later pages find its index), not once per
// page.
func TestBigDirReadOncePerListing(t *testing.T) {
	s, keys := bigDir(t)
	hits0, misses0, _, _ := s.dirs.Stats()
	got := storetest.ListPages(t, s, store.ListOptions{Prefix: "flat/s"}, 100, nil)
	storetest.SameEntries(t, "paged", got, storetest.Expected(keys, store.ListOptions{Prefix: "flat/s"}))
	hits, misses, _, _ := s.dirs.Stats()
	pages := len(got)/100 + 1
	if misses-misses0 > 1 || hits-hits0 < int64(pages-1) {
		t.Fatalf("%d pages read the large directory %d times and found its index %d times; want it read once at most", pages, misses-misses0, hits-hits0)
	}
}

// TestBigDirChangedBetweenPages: keys put and deleted between the pages of
// a listing whose directory index is kept: the index is re-read, every key
// comes once and in order.
func TestBigDirChangedBetweenPages(t *testing.T) {
	s, keys := bigDir(t)
	storetest.ChangingListing(t, s, "flat/", keys, func(key string) {
		if _, err := s.Put(t.Context(), key, bytes.NewReader(nil), 0, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}, func(key string) {
		if err := s.Delete(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	})
}
