package fs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reference lists keys as S3 does: sorted, filtered by prefix and
// startAfter, folded by delimiter.
func reference(keys []string, prefix, startAfter, delim string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		e := k
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				e = k[:len(prefix)+i+len(delim)] + "\x00" // a common prefix
			}
		}
		if strings.TrimSuffix(e, "\x00") <= startAfter {
			continue
		}
		if len(out) > 0 && out[len(out)-1] == e {
			continue
		}
		out = append(out, e)
	}
	return out
}

func listed(t *testing.T, root *os.Root, prefix, startAfter, delim string) []string {
	t.Helper()
	var out []string
	for e, err := range walk(root, nil, prefix, startAfter, delim) {
		if err != nil {
			t.Fatalf("walk(%q, %q, %q): %v", prefix, startAfter, delim, err)
		}
		k := e.Key
		if e.IsPrefix {
			k += "\x00"
		} else if e.Info == nil || !e.Info.Mode().IsRegular() {
			t.Fatalf("key %q without file info", k)
		}
		out = append(out, k)
	}
	return out
}

func makeTree(t *testing.T, keys []string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for _, k := range keys {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// TestWalkOrder: byte order across directories, where "-" < "/" < "0"
// puts a file between a directory's siblings, with names with spaces and
// unicode; empty directories, hidden temp files and symlinks are not keys.
func TestWalkOrder(t *testing.T) {
	keys := []string{"a-b", "a/b", "a/c/d", "a0", "a b/x", "ü/1", "a/c-", "a/c/e f", "b", "a.txt", "a/.x"}
	root := makeTree(t, keys)
	dir := root.Name()
	os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", tmpPrefix+"123"), []byte("partial"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	os.Symlink("a", filepath.Join(dir, "dirlink"))
	want := reference(keys, "", "", "")
	if got := listed(t, root, "", "", ""); !slices.Equal(got, want) {
		t.Errorf("walk = %q\nwant   %q", got, want)
	}
	if got := listed(t, root, "", "", "/"); !slices.Equal(got, reference(keys, "", "", "/")) {
		t.Errorf("walk with delimiter = %q (the empty directory must not show)", got)
	}
}

// TestWalkMatchesS3: random trees, prefixes, markers and delimiters list
// exactly as S3's rules say.
func TestWalkMatchesS3(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "b", "-", "0", " ", "é", ".", "a/", "b/", "/"}
	for trial := range 40 {
		var keys []string
		seen := map[string]bool{}
	next:
		for len(keys) < 60 {
			var sb strings.Builder
			for range 1 + rng.IntN(7) {
				sb.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			k := sb.String()
			if strings.HasPrefix(k, "/") || strings.HasSuffix(k, "/") || strings.Contains(k, "//") || seen[k] {
				continue
			}
			for _, seg := range strings.Split(k, "/") {
				if seg == "." || seg == ".." {
					continue next
				}
			}
			// A key cannot be both a file and a directory.
			for o := range seen {
				if strings.HasPrefix(o, k+"/") || strings.HasPrefix(k, o+"/") {
					continue next
				}
			}
			seen[k] = true
			keys = append(keys, k)
		}
		root := makeTree(t, keys)
		sorted := reference(keys, "", "", "")
		for q := range 25 {
			prefix, after, delim := "", "", ""
			if rng.IntN(2) == 0 {
				k := sorted[rng.IntN(len(sorted))]
				prefix = k[:rng.IntN(len(k)+1)]
			}
			if rng.IntN(2) == 0 {
				k := sorted[rng.IntN(len(sorted))]
				after = k[:rng.IntN(len(k)+1)]
			}
			delim = []string{"", "/", "-", "a/"}[rng.IntN(4)]
			want := reference(keys, prefix, after, delim)
			if got := listed(t, root, prefix, after, delim); !slices.Equal(got, want) {
				t.Fatalf("trial %d query %d: walk(prefix %q, after %q, delim %q)\n got %q\nwant %q\nkeys %q",
					trial, q, prefix, after, delim, got, want, sorted)
			}
		}
	}
}

func TestWalkStops(t *testing.T) {
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("d%d/k", i))
	}
	root := makeTree(t, keys)
	n := 0
	for range walk(root, nil, "", "", "") {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("stopped after %d", n)
	}
}
