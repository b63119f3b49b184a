package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// Key families every store holds side by side.
var keyFamilies = []struct {
	name string
	keys []string
}{
	{"FileAndDirectory", []string{
		"a", "a/b", "a/b/c", "a/", "a//", "a//b", "a/b/", "dir/", "dir/x", "dir//",
		"/", "//", "/lead", "trail/", "x/y/z/deep/er/than/that/file",
	}},
	{"Long", []string{
		strings.Repeat("x", store.MaxKeyLen),   // one segment
		strings.Repeat("x", store.MaxKeyLen-1), // its prefix
		strings.Repeat("x", 300) + "/" + strings.Repeat("y", 300),
		strings.Repeat("a/", store.MaxKeyLen/2-1) + "ab", // many segments
		strings.Repeat("/", store.MaxKeyLen),             // only slashes
		strings.Repeat("%", store.MaxKeyLen),             // escapes, if any
		strings.Repeat("é", store.MaxKeyLen/2),           // two-byte runes
		strings.Repeat("z", 239), strings.Repeat("z", 240), strings.Repeat("z", 241),
		strings.Repeat("z", 255), strings.Repeat("z", 256),
		strings.Repeat("z", 240) + "/", strings.Repeat("z", 240) + "-", strings.Repeat("z", 240) + "/a",
		strings.Repeat("z", 480), strings.Repeat("z", 480) + "/", strings.Repeat("z", 481) + "!",
	}},
	{"Characters", []string{
		"with space", " leading", "trailing ", "dash-key", "-", "--", "_under",
		"unicode/é/日本語/🙂", "percent%", "percent%20", "percent%2F", "%%", "%2e%2e",
		"tab\there", "new\nline", "back\\slash", "star*?[]", `quote"'`, "plus+and=&",
		"ctrl\x01\x1f\x7f", "~tilde", "#hash", "semi;colon:", "<tag>", "{brace}", "a.b", "a..b",
	}},
	{"DotSegments", []string{
		".", "..", "./x", "../x", "a/.", "a/..", "a/./b", "a/../b", "../../../../../../escape",
		"a/../../../../../../escape", ".../x", ".hidden", "a/.hidden", "./", "../", ".staging", ".multipart/x",
	}},
}

func runKeyTests(t *testing.T, newStore NewStore, caps Capabilities) {
	for _, fam := range keyFamilies {
		t.Run("Keys"+fam.name, func(t *testing.T) {
			testKeys(t, newStore(t), caps.keep(fam.keys), fam.name == "DotSegments" || caps.PathKeys)
		})
	}
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, newStore(t), caps) })
}

func keyData(i int, key string) []byte {
	return append(data(uint64(200+i), 100+i), key...)
}

// testKeys puts every key, then reads each back, lists them all in byte
// order, and deletes them. With mayReject, a key may instead be refused
// with ErrInvalidKey (and then must be absent everywhere).
func testKeys(t *testing.T, s store.Store, keys []string, mayReject bool) {
	ctx := t.Context()
	var held []string
	for i, k := range keys {
		b := keyData(i, k)
		_, err := s.Put(ctx, k, bytes.NewReader(b), int64(len(b)), store.PutOptions{})
		switch {
		case err == nil:
			held = append(held, k)
		case mayReject && errors.Is(err, store.ErrInvalidKey):
			t.Logf("key %s rejected: %v", quote(k), err)
		default:
			t.Errorf("Put(%s): %v", quote(k), err)
		}
	}
	for i, k := range keys {
		if slices.Contains(held, k) {
			checkObject(t, s, k, keyData(i, k))
		} else {
			_, err := s.Stat(ctx, k)
			if !errors.Is(err, store.ErrInvalidKey) && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Stat(rejected key %s): %v, want ErrInvalidKey or ErrNotFound", quote(k), err)
			}
		}
	}
	slices.Sort(held)
	checkList(t, s, store.ListOptions{}, objects(held...))

	// Delete every other key; the rest stay intact.
	for i, k := range held {
		if i%2 == 0 {
			if err := s.Delete(ctx, k); err != nil {
				t.Errorf("Delete(%s): %v", quote(k), err)
			}
		}
	}
	var rest []string
	for i, k := range held {
		if i%2 == 0 {
			wantNotFound(t, s, k)
		} else {
			rest = append(rest, k)
			checkObject(t, s, k, keyData(slices.Index(keys, k), k))
		}
	}
	checkList(t, s, store.ListOptions{}, objects(rest...))
}

func testInvalidKeys(t *testing.T, s store.Store, caps Capabilities) {
	ctx := t.Context()
	bad := []string{"", strings.Repeat("k", caps.maxKeyLen()+1), "nul\x00byte", "\x00", "a/\x00/b"}
	for _, k := range bad {
		_, err := s.Put(ctx, k, strings.NewReader("x"), 1, store.PutOptions{})
		wantErr(t, fmt.Sprintf("Put(%s)", quote(k)), err, store.ErrInvalidKey)
		_, err = s.Put(ctx, k, strings.NewReader("x"), 1, store.PutOptions{IfNoneMatch: true})
		wantErr(t, fmt.Sprintf("Put(%s, IfNoneMatch)", quote(k)), err, store.ErrInvalidKey)
		if _, err := s.Stat(ctx, k); !errors.Is(err, store.ErrInvalidKey) && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat(%s): %v, want ErrInvalidKey or ErrNotFound", quote(k), err)
		}
		if err := s.Delete(ctx, k); err != nil && !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Delete(%s): %v, want nil or ErrInvalidKey", quote(k), err)
		}
	}
	for e, err := range s.List(ctx, store.ListOptions{}) {
		t.Errorf("List after invalid Puts: %s, %v", quote(e.Key), err)
	}
}
