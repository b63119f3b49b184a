package fs

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

var testLoc = policies.Location{Cloud: "onprem", Region: "lab"}

func newTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := New("t", testLoc, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newTestStore(t, Options{}) },
		storetest.Capabilities{PathKeys: true})
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for k, v := range files {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func keysOf(t *testing.T, s *Store, opts store.ListOptions) []string {
	t.Helper()
	var out []string
	for e, err := range s.List(t.Context(), opts) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		out = append(out, e.Key)
	}
	return out
}

var md5Like = regexp.MustCompile(`^[0-9a-f]{32}$`)

// A tree written by other programs is served as it is: its files are the
// keys, their ETags are not taken for MD5s, a file changed in place gets a
// new Validator and ETag, and a write through the store records an MD5
// that is dropped again once the bytes change outside it.
func TestExistingTree(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a-b": "1", "a/b": "22", "a0": "333", "with space/ünï 日本.txt": "4444", "deep/er/than/that": "5",
	})
	s, err := New("t", testLoc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []string{"a-b", "a/b", "a0", "deep/er/than/that", "with space/ünï 日本.txt"}
	if got := keysOf(t, s, store.ListOptions{}); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	ctx := t.Context()
	info, err := s.Stat(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 2 || md5Like.MatchString(info.ETag) || !strings.HasSuffix(info.ETag, "-fs") {
		t.Fatalf("Stat(a/b) = size %d, ETag %q: want 2 and an ETag that is not an MD5", info.Size, info.ETag)
	}
	if txt, _ := s.Stat(ctx, "with space/ünï 日本.txt"); !strings.HasPrefix(txt.ContentType, "text/plain") {
		t.Errorf("Content-Type of a .txt file = %q, want text/plain from its extension", txt.ContentType)
	}
	for e, err := range s.List(ctx, store.ListOptions{Prefix: "a/"}) {
		if err != nil || e.Info.ETag != info.ETag || e.Info.Validator != info.Validator {
			t.Fatalf("List entry %+v (%v) differs from Stat %+v", e.Info, err, info)
		}
	}

	// Changed in place (as `echo >> file` does): new Validator and ETag.
	f, err := os.OpenFile(filepath.Join(dir, "a/b"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x\n")
	f.Close()
	after, err := s.Stat(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if after.Validator == info.Validator || after.ETag == info.ETag || after.Size != 4 {
		t.Fatalf("after an append: %+v, before %+v", after, info)
	}
	if _, err := s.ReadRange(ctx, "a/b", 0, -1, info.Validator); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("ReadRange with the old validator: %v, want ErrPreconditionFailed", err)
	}

	// Written through the store: an MD5 ETag and its checksums, until the
	// bytes change outside it; the metadata stays with the file.
	body := "hello"
	put, err := s.Put(ctx, "a/b", strings.NewReader(body), int64(len(body)), store.PutOptions{Metadata: store.Metadata{
		ContentType: "text/x-test", User: map[string]string{"k": "v"}, Checksums: map[string]string{"CRC32": "NhCmhg=="}}})
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum([]byte(body))
	if put.ETag != hex.EncodeToString(sum[:]) {
		t.Fatalf("Put ETag %q, want the MD5", put.ETag)
	}
	got, err := s.Stat(ctx, "a/b")
	if err != nil || got.ETag != put.ETag || got.Validator != put.Validator || got.Checksums["CRC32"] != "NhCmhg==" || got.User["k"] != "v" {
		t.Fatalf("Stat after Put = %+v, %v; Put said %+v", got, err, put)
	}
	for e := range s.List(ctx, store.ListOptions{Prefix: "a/b"}) {
		if e.Info.ETag != put.ETag {
			t.Fatalf("List ETag %q, Put's %q", e.Info.ETag, put.ETag)
		}
	}
	f, _ = os.OpenFile(filepath.Join(dir, "a/b"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("!")
	f.Close()
	changed, err := s.Stat(ctx, "a/b")
	if err != nil || md5Like.MatchString(changed.ETag) || changed.Checksums != nil || changed.User["k"] != "v" || changed.ContentType != "text/x-test" {
		t.Fatalf("Stat after an outside append = %+v, %v: want a non-MD5 ETag, no checksums, the metadata kept", changed, err)
	}
}

// Symbolic links are no objects and are never followed out of the root;
// the store's temporary names are neither listed nor writable.
func TestLinksAndHiddenNames(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "s"})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"real": "r", "d/x": "x", tmpPrefix + "abc": "partial", "d/" + tmpPrefix + "1": "p"})
	for link, target := range map[string]string{"in": "real", "out": filepath.Join(outside, "secret"), "outdir": outside, "indir": "d"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New("t", testLoc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := keysOf(t, s, store.ListOptions{}); !slices.Equal(got, []string{"d/x", "real"}) {
		t.Fatalf("List = %q", got)
	}
	ctx := t.Context()
	for _, k := range []string{"in", "out", "outdir/secret", "indir/x"} {
		if _, err := s.Stat(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat(%s) = %v, want ErrNotFound", k, err)
		}
		if _, err := s.ReadRange(ctx, k, 0, -1, ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReadRange(%s) = %v, want ErrNotFound", k, err)
		}
	}
	if _, err := s.Put(ctx, "outdir/new", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Put through a link out of the root: %v, want ErrInvalidKey", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a file was written outside the root")
	}
	if _, err := s.Put(ctx, "in", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Put over a link: %v, want ErrInvalidKey", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
		t.Error("the link's target changed")
	}
	if _, err := s.Put(ctx, tmpPrefix+"x", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Put of a temporary name: %v, want ErrInvalidKey", err)
	}
}

// A write below a symbolically linked directory, in the tree or out of it,
// is a client's error (ErrInvalidKey: 400, not a 500 clients retry), and
// nothing is made through the link first (issue 35).
func TestPutBelowLinkedDirectory(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"d/x": "x"})
	for link, target := range map[string]string{"outdir": outside, "indir": "d", "d/up": "../.."} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New("t", testLoc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for _, key := range []string{"outdir/new", "outdir/a/b/new", "indir/new", "indir/a/new", "d/up/new", "d/up/q/new"} {
		_, err := s.Put(ctx, key, strings.NewReader("x"), 1, store.PutOptions{})
		if !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey naming the link", key, err)
		}
		id, err := s.CreateMultipart(ctx, key, store.PutOptions{})
		if err != nil {
			t.Fatalf("CreateMultipart(%q): %v", key, err)
		}
		p, err := s.UploadPart(ctx, key, id, 1, strings.NewReader("x"), 1)
		if err != nil {
			t.Fatalf("UploadPart(%q): %v", key, err)
		}
		if _, err := s.CompleteMultipart(ctx, key, id, []store.PartInfo{p}, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("CompleteMultipart(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, p := range []string{filepath.Join(outside, "new"), filepath.Join(outside, "a"), filepath.Join(dir, "d", "new"), filepath.Join(dir, "d", "a"), filepath.Join(dir, "new"), filepath.Join(dir, "q")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made through a link", p)
		}
	}
	if got := keysOf(t, s, store.ListOptions{}); !slices.Equal(got, []string{"d/x"}) {
		t.Errorf("List = %q", got)
	}
}

// A key that cannot be a path is refused with a reason on writes and
// simply absent on reads.
func TestImpossibleKeys(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	if _, err := s.Put(ctx, "a", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for key, why := range map[string]string{"a/b": `"a" is a file`, "dir/": "empty path segment", "x//y": "empty path segment", "x/../y": "'..'"} {
		_, err := s.Put(ctx, key, strings.NewReader("x"), 1, store.PutOptions{})
		if !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), why) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey saying %s", key, err, why)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", key, err)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) = %v", key, err)
		}
	}
	if _, err := s.Put(ctx, "d/e", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "d", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Put(d) over a directory of keys = %v", err)
	}
	if got := keysOf(t, s, store.ListOptions{}); !slices.Equal(got, []string{"a", "d/e"}) {
		t.Fatalf("List = %q", got)
	}
}

// read_only: every write is refused and the tree is not touched.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"k": "v"})
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	before := snapshot(t, dir)
	s, err := New("t", testLoc, dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.Put(ctx, "new", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, store.ErrReadOnly) || !errors.Is(err, store.ErrAccessDenied) {
		t.Errorf("Put: %v, want ErrReadOnly", err)
	}
	if err := s.Delete(ctx, "k"); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Delete: %v, want ErrReadOnly", err)
	}
	if _, err := s.CreateMultipart(ctx, "new", store.PutOptions{}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("CreateMultipart: %v, want ErrReadOnly", err)
	}
	if info, err := s.Stat(ctx, "k"); err != nil || info.Size != 1 {
		t.Errorf("Stat: %+v, %v", info, err)
	}
	if after := snapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("the tree changed: %v -> %v", before, after)
	}
}

// snapshot maps every path under dir to its mode, size, mtime and
// extended attributes.
func snapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		buf := make([]byte, 4096)
		n, _ := unix.Lgetxattr(p, metaAttr, buf)
		out[p] = fmt.Sprintf("%v %d %d %q", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), buf[:max(n, 0)])
		return nil
	})
	return out
}

// A missing root is an error (a mistyped path or an unmounted export),
// not an empty bucket.
func TestMissingRoot(t *testing.T) {
	_, err := New("t", testLoc, filepath.Join(t.TempDir(), "nope"), Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("New(missing dir) = %v", err)
	}
}

// On a filesystem without extended attributes, user metadata and content
// headers are refused (nothing written); a Content-Type and checksums are
// not kept, and the ETag is the Validator's.
func TestNoXattrs(t *testing.T) {
	s := newTestStore(t, Options{})
	s.xattrs = false // as the probe finds on such a filesystem
	ctx := t.Context()
	_, err := s.Put(ctx, "k", strings.NewReader("x"), 1, store.PutOptions{Metadata: store.Metadata{User: map[string]string{"a": "b"}}})
	if !errors.Is(err, store.ErrMetadataNotSupported) {
		t.Fatalf("Put with user metadata: %v", err)
	}
	if _, err := s.CreateMultipart(ctx, "k", store.PutOptions{Metadata: store.Metadata{CacheControl: "no-cache"}}); !errors.Is(err, store.ErrMetadataNotSupported) {
		t.Fatalf("CreateMultipart with Cache-Control: %v", err)
	}
	if got := keysOf(t, s, store.ListOptions{}); len(got) != 0 {
		t.Fatalf("refused writes left %q", got)
	}
	info, err := s.Put(ctx, "k.json", strings.NewReader("{}"), 2, store.PutOptions{Metadata: store.Metadata{ContentType: "application/json", Checksums: map[string]string{"CRC32": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stat(ctx, "k.json")
	if err != nil || st.ETag != info.ETag || md5Like.MatchString(st.ETag) || st.Checksums != nil || st.ContentType != "application/json" {
		t.Fatalf("Stat = %+v, %v; Put said %+v", st, err, info)
	}
}

// A file the gateway's user cannot read answers ErrAccessDenied for its
// key, and the rest of the tree is served. As root the read is made on a
// thread whose filesystem uid is nobody's (setfsuid drops the override of
// file modes for that thread alone).
func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"secret": "s", "open": "o"})
	if err := os.Chmod(filepath.Join(dir, "secret"), 0); err != nil {
		t.Fatal(err)
	}
	for p := dir; p != "/"; p = filepath.Dir(p) { // nobody may reach the tree
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(p, fi.Mode().Perm()|0o005)
		}
	}
	s, err := New("t", testLoc, dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if os.Geteuid() == 0 {
			unix.Setfsuid(65534)
			unix.Setfsgid(65534)
		}
		if _, err := s.Stat(t.Context(), "secret"); !errors.Is(err, store.ErrAccessDenied) {
			t.Errorf("Stat(unreadable) = %v, want ErrAccessDenied", err)
		}
		if _, err := s.ReadRange(t.Context(), "secret", 0, -1, ""); !errors.Is(err, store.ErrAccessDenied) {
			t.Errorf("ReadRange(unreadable) = %v, want ErrAccessDenied", err)
		}
		if info, err := s.Stat(t.Context(), "open"); err != nil || info.Size != 1 {
			t.Errorf("Stat(open) = %+v, %v", info, err)
		}
	}()
	<-done
}

// Keys under _fedgate/ (the region's claim on its default store, say) are
// fedgate's own: kept out of the user's tree, in a hidden folder, never
// listed; one an older build wrote into the tree is moved there when it is
// first used (issue 35).
func TestReservedKeysOutsideTree(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"data/a": "a"})
	s, err := New("t", testLoc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	const marker = "_fedgate/region-r1.json"
	body := `{"region_id":"x"}`
	if _, err := s.Put(ctx, marker, strings.NewReader(body), int64(len(body)), store.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, marker, strings.NewReader(body), int64(len(body)), store.PutOptions{IfNoneMatch: true}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("second If-None-Match Put = %v, want ErrPreconditionFailed", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "_fedgate")); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the tree has a _fedgate entry: %v", err)
	}
	for _, opts := range []store.ListOptions{{}, {Prefix: "_fedgate/"}, {Delimiter: "/"}} {
		want := []string{"data/a"}
		switch {
		case opts.Prefix != "":
			want = nil
		case opts.Delimiter != "":
			want = []string{"data/"}
		}
		if got := keysOf(t, s, opts); !slices.Equal(got, want) {
			t.Errorf("List(%+v) = %q, want %q", opts, got, want)
		}
	}
	if got := readAll(t, s, marker); got != body {
		t.Errorf("marker reads %q", got)
	}
	if err := s.Delete(ctx, marker); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, marker); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat after Delete = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, stateDir)); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the emptied state folder stays: %v", err)
	}

	// Markers an older build wrote into the tree: one alone, and one a
	// crash left both there and in the state folder.
	writeTree(t, dir, map[string]string{"_fedgate/region-old.json": "old", "_fedgate/store-marker": "legacy copy",
		stateDir + "/store-marker": "adopted"})
	ro, err := New("ro", testLoc, dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := readAll(t, ro, "_fedgate/region-old.json"); got != "old" {
		t.Errorf("read-only store reads the old marker as %q", got)
	}
	if got := keysOf(t, ro, store.ListOptions{}); !slices.Equal(got, []string{"data/a"}) {
		t.Errorf("read-only List = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "_fedgate", "region-old.json")); err != nil {
		t.Errorf("a read-only store moved the old marker: %v", err)
	}
	if got := keysOf(t, s, store.ListOptions{}); !slices.Equal(got, []string{"data/a"}) {
		t.Errorf("List with old markers in the tree = %q", got)
	}
	if got := readAll(t, s, "_fedgate/region-old.json"); got != "old" {
		t.Errorf("old marker reads %q", got)
	}
	if got := readAll(t, s, "_fedgate/store-marker"); got != "adopted" {
		t.Errorf("store marker reads %q, want the state folder's", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "_fedgate")); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the old markers stay in the tree: %v", err)
	}
	if got := readAll(t, s, "_fedgate/region-old.json"); got != "old" {
		t.Errorf("adopted marker reads %q", got)
	}
}

func readAll(t *testing.T, s *Store, key string) string {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, 0, -1, "")
	if err != nil {
		t.Fatalf("ReadRange(%s): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
