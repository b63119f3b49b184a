package fs

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fedgate/fedgate/store"
)

// FuzzKeyPath: a key keyPath takes is a clean relative path below the root
// (fedgate's own keys, under reservedPrefix, in stateDir)
// whose segments are the key's, none of them empty, "." or "..", a
// temporary name or longer than 255 bytes; every other key is refused with
// ErrInvalidKey.
func FuzzKeyPath(f *testing.F) {
	for _, k := range []string{"a", "a/b", "dir/", "/a", "a//b", ".", "..", "a/../b", "a/./b", tmpPrefix + "x",
		"x/" + tmpPrefix, "ünï 日本/s p.bin", strings.Repeat("z", 256), "nul\x00", "\xff", "a-b/c0", "_fedgate/region-r.json", "_fedgate/", "_fedgate"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		rel, err := keyPath(key)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidKey) {
				t.Fatalf("keyPath(%q) = %v, not ErrInvalidKey", key, err)
			}
			return
		}
		want := key
		if rest, ok := strings.CutPrefix(key, reservedPrefix); ok {
			want = stateDir + "/" + rest // fedgate's own keys: out of the tree
		}
		if rel != want || filepath.Clean(rel) != rel || filepath.IsAbs(rel) || !filepath.IsLocal(rel) ||
			!utf8.ValidString(key) || len(key) > store.MaxKeyLen {
			t.Fatalf("keyPath(%q) = %q: not a clean local path", key, rel)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." || len(seg) > 255 || hidden(seg) || strings.ContainsRune(seg, 0) {
				t.Fatalf("keyPath(%q) took segment %q", key, seg)
			}
		}
	})
}
