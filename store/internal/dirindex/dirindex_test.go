package dirindex

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func makeDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		// Written out of order, with names whose byte order is not their
		// numeric order.
		name := fmt.Sprintf("k%d", (i*7919)%n)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func get(t *testing.T, c *Cache, dir string) *Index {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ix, err := c.Get(f, dir, func(f *os.File, b *Builder) error {
		return ReadNames(f, func(name string, typ int) {
			if typ == TypeDir {
				name += "/"
			}
			b.Add(name, byte(typ))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestIndexSortedAndSearch: an index holds every entry, sorted by bytes,
// and Search finds the first key at or after a target.
func TestIndexSortedAndSearch(t *testing.T) {
	const n = 1000
	dir := makeDir(t, n)
	ix := get(t, nil, dir)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("k%d", i))
	}
	want = append(want, "sub/")
	slices.Sort(want)
	var got []string
	for i := range ix.Len() {
		k, _ := ix.At(i)
		got = append(got, k)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("index holds %d keys, first %q; want %d, first %q", len(got), got[:3], len(want), want[:3])
	}
	for _, target := range []string{"", "k5", "k50", "k500x", "sub", "zz"} {
		i, _ := slices.BinarySearch(want, target)
		if j := ix.Search(target); j != i {
			t.Errorf("Search(%q) = %d, want %d", target, j, i)
		}
	}
	if i := ix.First("p/", "p/sub/x", func(k byte) bool { return k != TypeDir }); i != len(want)-1 {
		t.Errorf("First into sub/ = %d, want %d", i, len(want)-1)
	}
}

// TestCacheValidity: a kept index is found while the directory is
// unchanged, and read again after a change, after TTL unused, and never
// kept when it exceeds MaxBytes or the directory changed within
// RacyWindow of the read.
func TestCacheValidity(t *testing.T) {
	dir := makeDir(t, MinChildren+10)
	now := time.Now().Add(time.Hour) // every change is older than RacyWindow
	c := New()
	c.Now = func() time.Time { return now }
	reads := func() int64 { _, m, _, _ := c.Stats(); return m }

	get(t, c, dir)
	get(t, c, dir)
	if r := reads(); r != 1 {
		t.Fatalf("two gets of an unchanged directory read it %d times", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ix := get(t, c, dir); ix.Len() != MinChildren+12 || reads() != 2 {
		t.Fatalf("after a change: %d entries, %d reads", ix.Len(), reads())
	}
	now = now.Add(DefaultTTL)
	get(t, c, dir)
	if reads() != 3 {
		t.Fatalf("an index unused for the TTL was used (%d reads)", reads())
	}
	c.MaxBytes = 100
	now = now.Add(DefaultTTL)
	get(t, c, dir)
	if _, _, n, _ := c.Stats(); n != 0 {
		t.Fatalf("an index over MaxBytes was kept (%d held)", n)
	}
	c.MaxBytes = DefaultMaxBytes
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := stampOf(fi)
	now = st.changed().Add(RacyWindow / 2) // read just after the last change
	get(t, c, dir)
	if _, _, n, _ := c.Stats(); n != 0 {
		t.Fatalf("an index read within RacyWindow of a change was kept (%d held)", n)
	}
}
