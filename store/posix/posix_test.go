package posix

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

var testLoc = policies.Location{Cloud: "onprem", Region: "test1"}

func newAt(t *testing.T, root string) *Store {
	t.Helper()
	s, err := New("posix-test", testLoc, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := newAt(t, t.TempDir())
		t.Cleanup(func() { checkNoLeftovers(t, s.dir) })
		return s
	}, storetest.Capabilities{MaxKeyLen: MaxKeyLen})
}

// checkNoLeftovers: after a test, nothing stays in staging and no upload
// that was completed or aborted stays in .multipart (the suite leaves a few
// open ones, which must hold an upload.json).
func checkNoLeftovers(t *testing.T, root string) {
	ents, err := os.ReadDir(filepath.Join(root, stagingDir))
	if err != nil || len(ents) != 0 {
		t.Errorf("staging folder: %d entries, %v; want empty", len(ents), err)
	}
	ups, _ := os.ReadDir(filepath.Join(root, multipartDir))
	for _, u := range ups {
		if _, err := os.Stat(filepath.Join(root, multipartDir, u.Name(), "upload.json")); err != nil {
			t.Errorf("multipart folder %s: %v", u.Name(), err)
		}
	}
}

func TestEncoding(t *testing.T) {
	for key, want := range map[string]string{
		"a":        "fa",
		"a/b":      "da/fb",
		"dir/":     "ddir/f",
		"a//b":     "da/d/fb",
		"/":        "d/f",
		"..":       "f..",
		"../x":     "d../fx",
		"a/./b":    "da/d./fb",
		"100%":     "f100%25",
		"tab\t":    "ftab%09",
		".staging": "f.staging",
	} {
		got, err := objectPath(key)
		if err != nil || got != want {
			t.Errorf("objectPath(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, key := range []string{"", strings.Repeat("x", MaxKeyLen+1), "a\x00b"} {
		if _, err := objectPath(key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("objectPath(%q): %v, want ErrInvalidKey", key, err)
		}
	}
	// Every component of every long key fits NAME_MAX and decodes back.
	for _, key := range []string{
		strings.Repeat("x", 1024), strings.Repeat("%", 1024), strings.Repeat("\x01", 1024),
		strings.Repeat("x", 239) + "%" + strings.Repeat("y", 700), strings.Repeat("é", 512),
	} {
		rel, _ := objectPath(key)
		var back string
		for c := range strings.SplitSeq(rel, "/") {
			if len(c) > 255 {
				t.Errorf("key of %d bytes: component of %d bytes", len(key), len(c))
			}
			typ, frag, ok := decodeName(c)
			if !ok || (typ == typeDir) {
				t.Errorf("component %q does not decode as a file or continuation", c)
			}
			back += frag
		}
		if back != key {
			t.Errorf("components of %q decode to %q", key[:20], back[:min(20, len(back))])
		}
	}
	for _, name := range []string{"", ".", "..", ".staging", "x", "f%", "f%2", "f%41", "f%00", "fa\x01", "c" + "short", "f" + strings.Repeat("x", 240)} {
		if _, _, ok := decodeName(name); ok {
			t.Errorf("decodeName(%q) accepted a name the encoding never makes", name)
		}
	}
}

// TestListOrderRandom checks the no-interleaving argument of keys.go on
// random keys built around the continuation threshold.
func TestListOrderRandom(t *testing.T) {
	s := newAt(t, t.TempDir())
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"/", "-", ".", "%", "z", "\x01", "0"}
	seen := map[string]bool{}
	for len(seen) < 300 {
		var b strings.Builder
		for b.Len() < 200+r.IntN(120) {
			b.WriteString(strings.Repeat("y", r.IntN(80)))
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		k := b.String()[:min(b.Len(), store.MaxKeyLen)]
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, err := s.Put(t.Context(), k, strings.NewReader("v"), 1, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	var got []string
	for e, err := range s.List(t.Context(), store.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List of %d random keys is not in byte order (%d entries)", len(want), len(got))
	}
	for i := 0; i < len(want); i += 37 {
		var paged []string
		for e, err := range s.List(t.Context(), store.ListOptions{StartAfter: want[i]}) {
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, e.Key)
		}
		if !slices.Equal(paged, want[i+1:]) {
			t.Errorf("List(StartAfter key %d): %d entries, want %d", i, len(paged), len(want)-i-1)
		}
	}
}

// TestNoEscape: keys with dot segments and a symlink planted in the tree
// never create anything outside the root.
func TestNoEscape(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "a", "b", "root")
	outside := filepath.Join(top, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newAt(t, root)
	ctx := t.Context()
	for _, k := range []string{"..", "../x", "../../x", "../../../outside/x", "a/../../../../x", "./..", "/../x", "../.staging/x"} {
		if _, err := s.Put(ctx, k, strings.NewReader(k), int64(len(k)), store.PutOptions{}); err != nil {
			t.Errorf("Put(%q): %v", k, err)
		}
	}
	// Someone with access to the disk links a directory name to the outside.
	if err := os.Symlink(outside, filepath.Join(root, "dlink")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(ctx, "link/x", strings.NewReader("x"), 1, store.PutOptions{})
	if err == nil {
		t.Error("Put through a symlink to outside the root succeeded")
	}
	err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == top || p == root || strings.HasPrefix(p, root+string(filepath.Separator)) ||
			strings.HasPrefix(root, p+string(filepath.Separator)) || p == outside {
			return nil
		}
		t.Errorf("created outside the root: %s", p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// objectFile returns the file of key under s's root.
func objectFile(t *testing.T, s *Store, key string) string {
	rel, err := objectPath(key)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}

// A damaged file, in either format, is ErrCorrupt naming its key: never
// served short or with another object's metadata; it can still be
// overwritten and deleted.
func TestCorruptFile(t *testing.T) {
	setAttr := func(v string) func(p string) error {
		return func(p string) error { return unix.Setxattr(p, metaAttr, []byte(v), 0) }
	}
	rewrite := func(damage func(b []byte) []byte) func(p string) error {
		return func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, damage(b), 0o644) // the same inode: its attribute stays
		}
	}
	for name, tc := range map[string]struct {
		format1 bool
		damage  func(p string) error
	}{
		"truncated":           {false, rewrite(func(b []byte) []byte { return b[:len(b)-1] })},
		"extended":            {false, rewrite(func(b []byte) []byte { return append(b, 0) })},
		"bad metadata":        {false, setAttr(`{"size":`)},
		"metadata for more":   {false, setAttr(`{"size":6,"etag":"x"}`)},
		"no metadata":         {false, func(p string) error { return unix.Removexattr(p, metaAttr) }},
		"format 1 truncated":  {true, rewrite(func(b []byte) []byte { return b[:len(b)-5] })},
		"format 1 bad magic":  {true, rewrite(func(b []byte) []byte { b[len(b)-footerSize] ^= 0xff; return b })},
		"format 1 bad size":   {true, rewrite(func(b []byte) []byte { b[len(b)-footerSize+15]++; return b })},
		"format 1 bad meta":   {true, rewrite(func(b []byte) []byte { b[len(b)-footerSize-3] ^= 0x20; return b })},
		"format 1 extended":   {true, rewrite(func(b []byte) []byte { return append(b, 0) })},
		"format 1 too short":  {true, rewrite(func(b []byte) []byte { return b[:10] })},
		"format 1 half-done":  {true, setAttr(`{"size":4,"etag":"x"}`)}, // a conversion's attribute for other bytes
		"format 1 empty file": {true, rewrite(func(b []byte) []byte { return nil })},
	} {
		t.Run(name, func(t *testing.T) {
			s := newAt(t, t.TempDir())
			ctx := t.Context()
			if tc.format1 {
				writeFormat1(t, s, "obj", "hello", store.Metadata{})
			} else if _, err := s.Put(ctx, "obj", strings.NewReader("hello"), 5, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(objectFile(t, s, "obj")); err != nil {
				t.Fatal(err)
			}
			_, err := s.Stat(ctx, "obj")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"obj"`) {
				t.Errorf("Stat: %v, want ErrCorrupt naming the key", err)
			}
			if _, err = s.ReadRange(ctx, "obj", 0, -1, ""); !errors.Is(err, ErrCorrupt) {
				t.Errorf("ReadRange: %v, want ErrCorrupt", err)
			}
			if f, _, _, err := s.OpenLocal(ctx, "obj"); !errors.Is(err, ErrCorrupt) {
				if f != nil {
					f.Close()
				}
				t.Errorf("OpenLocal: %v, want ErrCorrupt", err)
			}
			n := 0
			for e, err := range s.List(ctx, store.ListOptions{}) {
				n++
				if e.Key != "obj" || !errors.Is(err, ErrCorrupt) {
					t.Errorf("List: %q, %v; want obj with ErrCorrupt", e.Key, err)
				}
			}
			if n != 1 {
				t.Errorf("List yielded %d entries, want 1", n)
			}
			// A corrupt object can be overwritten and deleted.
			if _, err := s.Put(ctx, "obj", strings.NewReader("again"), 5, store.PutOptions{}); err != nil {
				t.Errorf("Put over a corrupt file: %v", err)
			}
			if err := s.Delete(ctx, "obj"); err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
	}
}

// TestRestart: a new Store over the same root sees the objects and can
// finish a multipart upload the old one began.
func TestRestart(t *testing.T) {
	root := t.TempDir()
	ctx := t.Context()
	s1, err := New("one", testLoc, root)
	if err != nil {
		t.Fatal(err)
	}
	md := store.Metadata{ContentType: "text/plain", User: map[string]string{"run-id": "9"}}
	before, err := s1.Put(ctx, "dir/obj", strings.NewReader("payload"), 7, store.PutOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s1.CreateMultipart(ctx, "mp", store.PutOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s1.UploadPart(ctx, "mp", id, 1, strings.NewReader("part one,"), -1)
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()

	s2 := newAt(t, root)
	info, err := s2.Stat(ctx, "dir/obj")
	if err != nil || info.Validator != before.Validator || info.ETag != before.ETag || info.ContentType != "text/plain" {
		t.Errorf("Stat after restart = %+v, %v; want %+v", info, err, before)
	}
	p2, err := s2.UploadPart(ctx, "mp", id, 2, strings.NewReader(" part two"), -1)
	if err != nil {
		t.Fatalf("UploadPart after restart: %v", err)
	}
	if _, err := s2.CompleteMultipart(ctx, "mp", id, []store.PartInfo{p1, p2}, store.PutOptions{}); err != nil {
		t.Fatalf("CompleteMultipart after restart: %v", err)
	}
	rc, err := s2.ReadRange(ctx, "mp", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "part one, part two" {
		t.Errorf("completed object = %q", got)
	}
	if info, _ := s2.Stat(ctx, "mp"); info.User["run-id"] != "9" {
		t.Errorf("completed object metadata = %+v, want CreateMultipart's", info.Metadata)
	}
	var keys []string
	for e, err := range s2.List(ctx, store.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.Key)
	}
	if !slices.Equal(keys, []string{"dir/obj", "mp"}) {
		t.Errorf("List after restart = %q", keys)
	}
}

// TestFileLayout: the object's file holds its bytes and nothing else, and
// a Delete prunes the directories it empties.
func TestFileLayout(t *testing.T) {
	s := newAt(t, t.TempDir())
	ctx := t.Context()
	body := bytes.Repeat([]byte("0123456789"), 1000)
	if _, err := s.Put(ctx, "x/y/z", bytes.NewReader(body), -1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(objectFile(t, s, "x/y/z"))
	if err != nil || !bytes.Equal(b, body) {
		t.Fatalf("the file is not the object's bytes alone (%d bytes, want %d): %v", len(b), len(body), err)
	}
	if err := s.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in the root after the last Delete: %s", e.Name())
		}
	}
}

// TestEmptyDirectories: directories left empty by a crash between a Delete
// and its pruning are neither listed nor folded into common prefixes.
func TestEmptyDirectories(t *testing.T) {
	s := newAt(t, t.TempDir())
	ctx := t.Context()
	for _, d := range []string{"dempty/dinner", "dfull", "c" + strings.Repeat("q", contThreshold)} {
		if err := os.MkdirAll(filepath.Join(s.dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "full/x", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Delimiter: "q"}} {
		var got []string
		for e, err := range s.List(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Key)
		}
		want := []string{"full/x"}
		if opts.Delimiter == "/" {
			want = []string{"full/"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%+v) = %q, want %q", opts, got, want)
		}
	}
	// A Put into an empty leftover directory works.
	if _, err := s.Put(ctx, "empty/inner/k", strings.NewReader("k"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestValidatorRewrites: rewriting identical bytes many times in a row
// never repeats a Validator, even when the filesystem reuses inode numbers.
func TestValidatorRewrites(t *testing.T) {
	s := newAt(t, t.TempDir())
	seen := map[store.Validator]int{}
	for i := range 200 {
		info, err := s.Put(t.Context(), "same", strings.NewReader("same bytes"), -1, store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := seen[info.Validator]; ok {
			t.Fatalf("rewrite %d repeated the Validator %s of rewrite %d", i, info.Validator, j)
		}
		seen[info.Validator] = i
	}
}

// TestMultipartFolders: completing or aborting an upload removes its folder.
func TestMultipartFolders(t *testing.T) {
	s := newAt(t, t.TempDir())
	ctx := t.Context()
	for _, finish := range []string{"complete", "abort"} {
		id, err := s.CreateMultipart(ctx, "k", store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.UploadPart(ctx, "k", id, 1, strings.NewReader("part"), 4)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(s.dir, multipartDir, id)
		if _, err := os.Stat(filepath.Join(dir, "1")); err != nil {
			t.Fatalf("part file: %v", err)
		}
		if finish == "complete" {
			_, err = s.CompleteMultipart(ctx, "k", id, []store.PartInfo{p}, store.PutOptions{})
		} else {
			err = s.AbortMultipart(ctx, "k", id)
		}
		if err != nil {
			t.Fatalf("%s: %v", finish, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after %s the upload folder is still there: %v", finish, err)
		}
	}
	checkNoLeftovers(t, s.dir)
}

// A store whose directory is emptied under the running node (a wiped or
// replaced disk) takes writes and multipart uploads again, and its health
// check passes; a directory removed and made anew is not the one the store
// opened, and the check says so.
func TestEmptiedUnderTheNode(t *testing.T) {
	dir := t.TempDir()
	s, err := New("nas", testLoc, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "a/b", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatalf("Put after the wipe: %v", err)
	}
	if _, err := s.CreateMultipart(ctx, "m", store.PutOptions{}); err != nil {
		t.Fatalf("CreateMultipart after the wipe: %v", err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check of an emptied store: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil {
		t.Fatal("Check passes with the store's directory gone")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "no longer the directory") {
		t.Fatalf("Check of a directory made anew = %v, want it to say it is not the one opened", err)
	}
}

// Staging files of writes whose process died (kill -9) are removed when
// the store is opened, or at a Check, once not written for StaleStaging;
// a fresh one (a write in progress, maybe another node's) stays.
func TestStaleStagingIsSwept(t *testing.T) {
	dir := t.TempDir()
	s, err := New("nas", testLoc, dir)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, stagingDir, "dead-write")
	fresh := filepath.Join(dir, stagingDir, "live-write")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-StaleStaging - time.Minute)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the stale staging file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the fresh staging file was removed: %v", err)
	}
	if files, bytes := s.Swept(); files != 1 || bytes != 1000 {
		t.Errorf("Swept = %d files, %d bytes; want 1, 1000", files, bytes)
	}
	s.Close()
	if err := os.Chtimes(fresh, past, past); err != nil {
		t.Fatal(err)
	}
	s2, err := New("nas", testLoc, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if files, _ := s2.Swept(); files != 1 {
		t.Errorf("opening the store swept %d files, want 1", files)
	}
}
