package posix

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/store"
)

// writeFormat1 writes key's file as builds before format 2 did: the bytes,
// then the metadata trailer (writeTrailer, the old writer, still used for
// multipart parts).
func writeFormat1(t *testing.T, s *Store, key, body string, md store.Metadata) {
	t.Helper()
	p := objectFile(t, s, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	m := metaOf(md)
	m.ETag = "etag-of-" + key
	if err := writeTrailer(f, int64(len(body)), &m); err != nil {
		t.Fatal(err)
	}
}

// secretMeta is metadata a reader of the object's bytes must not see: the
// gateway keeps an object's ACL and tags in its user metadata.
func secretMeta(pad int) store.Metadata {
	return store.Metadata{ContentType: "text/x-secret-type", User: map[string]string{
		"fedgate-acl":  `{"owner":"SECRET-OWNER","grants":["SECRET-GRANT"]}`,
		"fedgate-tags": "project=SECRET-TAG" + strings.Repeat("x", pad),
	}}
}

// passFD hands f's descriptor to the other end of a Unix socket pair with
// SCM_RIGHTS, as the short-circuit read does (gateway/localread.go), and
// returns the descriptor received there.
func passFD(t *testing.T, f *os.File) *os.File {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	if err := unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(pair[1], buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages: %v, %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights: %v, %v", fds, err)
	}
	got := os.NewFile(uintptr(fds[0]), "passed")
	t.Cleanup(func() { got.Close() })
	return got
}

// checkOnlyObject reads the passed descriptor as a client would, past the
// object's end too: it must hold the object's bytes and nothing else.
func checkOnlyObject(t *testing.T, s *Store, key, body string) {
	t.Helper()
	f, off, info, err := s.OpenLocal(t.Context(), key)
	if err != nil {
		t.Fatalf("OpenLocal(%s): %v", key, err)
	}
	defer f.Close()
	if off != 0 || info.Size != int64(len(body)) {
		t.Fatalf("OpenLocal(%s): offset %d, size %d; want 0, %d", key, off, info.Size, len(body))
	}
	c := passFD(t, f)
	buf := make([]byte, 64<<10)
	n, err := unix.Pread(int(c.Fd()), buf, info.Size)
	if n != 0 || err != nil {
		t.Errorf("%s: pread past the object's end gave %d bytes (%q), %v; want none", key, n, buf[:n], err)
	}
	n, _ = unix.Pread(int(c.Fd()), buf, 0)
	if string(buf[:n]) != body {
		t.Errorf("%s: the file holds %d bytes (%.80q...), want the object's %d alone", key, n, buf[:n], len(body))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(c.Fd()), &st); err != nil || st.Size != info.Size {
		t.Errorf("%s: the file is %d bytes, the object %d (%v)", key, st.Size, info.Size, err)
	}
	if bytes.Contains(buf[:n], []byte("SECRET")) {
		t.Errorf("%s: the file shows the object's ACL or tags", key)
	}
}

// The file a short-circuit read hands out holds the object's bytes and
// nothing else: a client that preads past the object's end reads nothing,
// not the metadata with its ACL and tags (issue 35). So for every way the
// metadata is kept, and for a file written by a build before format 2.
func TestShortCircuitFileHoldsOnlyTheObject(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noAttrs bool
		pad     int
	}{
		{"attribute", false, 0},
		{"record too large for the attribute", false, 70 << 10},
		{"filesystem without attributes", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAt(t, t.TempDir())
			s.noAttrs.Store(tc.noAttrs)
			ctx := t.Context()
			md := secretMeta(tc.pad)
			body := "the object's bytes"
			if _, err := s.Put(ctx, "put", strings.NewReader(body), -1, store.PutOptions{Metadata: md}); err != nil {
				t.Fatal(err)
			}
			id, err := s.CreateMultipart(ctx, "mp", store.PutOptions{Metadata: md})
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.UploadPart(ctx, "mp", id, 1, strings.NewReader(body), -1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CompleteMultipart(ctx, "mp", id, []store.PartInfo{p}, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			_, attrErr := unix.Getxattr(objectFile(t, s, "put"), metaAttr, nil)
			_, dirErr := os.Stat(filepath.Join(s.dir, recordDir))
			if inAttr := tc.pad == 0 && !tc.noAttrs; (attrErr == nil) != inAttr || (dirErr == nil) == inAttr {
				t.Errorf("metadata in the attribute: %v, in a record file: %v; want the attribute %v", attrErr, dirErr, inAttr)
			}
			writeFormat1(t, s, "old", body, md)
			for _, key := range []string{"put", "mp", "old"} {
				checkOnlyObject(t, s, key, body)
				info, err := s.Stat(ctx, key)
				if err != nil || info.User["fedgate-acl"] != md.User["fedgate-acl"] || info.User["fedgate-tags"] != md.User["fedgate-tags"] ||
					info.ContentType != md.ContentType {
					t.Errorf("%s: Stat = %+v, %v; the metadata is lost", key, info.Metadata, err)
				}
			}
		})
	}
}

// A file written by a build before format 2 (its metadata in a trailer)
// is read as it is, and converted by OpenLocal, keeping its metadata: in
// place where the record fits in the file's extended attribute (a crash
// halfway leaves a file read right and finished later), rewritten with a
// record file otherwise (issue 35).
func TestFormat1Conversion(t *testing.T) {
	ctx := t.Context()
	md := store.Metadata{ContentType: "text/plain", CacheControl: "no-cache", User: map[string]string{"run": "7"},
		Checksums: map[string]string{"CRC32C": "abc="}}
	body := strings.Repeat("payload ", 1000)
	check := func(t *testing.T, s *Store, key string) store.ObjectInfo {
		t.Helper()
		info, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%s): %v", key, err)
		}
		if info.Size != int64(len(body)) || info.ETag != "etag-of-"+key || info.ContentType != "text/plain" ||
			info.CacheControl != "no-cache" || info.User["run"] != "7" || info.Checksums["CRC32C"] != "abc=" {
			t.Errorf("Stat(%s) = %+v", key, info)
		}
		rc, err := s.ReadRange(ctx, key, 0, -1, info.Validator)
		if err != nil {
			t.Fatalf("ReadRange(%s): %v", key, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != body {
			t.Errorf("ReadRange(%s) = %d bytes, want %d", key, len(b), len(body))
		}
		return info
	}

	t.Run("in place", func(t *testing.T) {
		s := newAt(t, t.TempDir())
		writeFormat1(t, s, "a/old", body, md)
		p := objectFile(t, s, "a/old")
		before, _ := os.Stat(p)
		v1 := check(t, s, "a/old").Validator
		var keys []string
		for e, err := range s.List(ctx, store.ListOptions{}) {
			if err != nil || e.Info.ETag != "etag-of-a/old" || e.Info.Size != int64(len(body)) {
				t.Errorf("List: %+v, %v", e, err)
			}
			keys = append(keys, e.Key)
		}
		if len(keys) != 1 {
			t.Errorf("List = %q", keys)
		}
		if after, _ := os.Stat(p); after.Size() != before.Size() {
			t.Fatal("reading converted the file: only OpenLocal does")
		}
		checkOnlyObject(t, s, "a/old", body)
		after, err := os.Stat(p)
		if err != nil || !os.SameFile(before, after) || after.Size() != int64(len(body)) {
			t.Fatalf("after OpenLocal: %v, same inode %v, %d bytes; want the same file cut to %d", err, os.SameFile(before, after), after.Size(), len(body))
		}
		if _, err := unix.Getxattr(p, metaAttr, nil); err != nil {
			t.Errorf("no %s after the conversion: %v", metaAttr, err)
		}
		if v2 := check(t, s, "a/old").Validator; v2 == v1 {
			t.Error("the Validator did not change with the file")
		}
		// A second store (another node on the NAS, a restart) reads it.
		check(t, newAt(t, s.dir), "a/old")
	})

	t.Run("crash halfway", func(t *testing.T) {
		s := newAt(t, t.TempDir())
		writeFormat1(t, s, "k", body, md)
		p := objectFile(t, s, "k")
		// The attribute set and fsynced, the trailer not yet cut.
		m := metaOf(md)
		m.ETag = "etag-of-k"
		js, _ := json.Marshal(record{Size: int64(len(body)), meta: m})
		if err := unix.Setxattr(p, metaAttr, js, 0); err != nil {
			t.Fatal(err)
		}
		check(t, s, "k")
		checkOnlyObject(t, s, "k", body)
		check(t, s, "k")
	})

	t.Run("rewritten with a record file", func(t *testing.T) {
		s := newAt(t, t.TempDir())
		s.noAttrs.Store(true)
		writeFormat1(t, s, "k", body, md)
		before, _ := os.Stat(objectFile(t, s, "k"))
		check(t, s, "k")
		checkOnlyObject(t, s, "k", body)
		after, err := os.Stat(objectFile(t, s, "k"))
		if err != nil || os.SameFile(before, after) || after.Size() != int64(len(body)) {
			t.Fatalf("after OpenLocal: %v, same inode %v, %d bytes; want a new file of %d", err, os.SameFile(before, after), after.Size(), len(body))
		}
		if _, err := os.Stat(filepath.Join(s.dir, recordPath(after))); err != nil {
			t.Errorf("no record file: %v", err)
		}
		check(t, s, "k")
		checkNoLeftovers(t, s.dir)
	})
}

// Record files (a filesystem without user extended attributes) go with
// their objects: an overwrite or a delete removes the old one, and a
// staging file swept after its process died takes its record along.
func TestRecordFiles(t *testing.T) {
	s := newAt(t, t.TempDir())
	s.noAttrs.Store(true)
	ctx := t.Context()
	records := func() []string {
		var out []string
		filepath.WalkDir(filepath.Join(s.dir, recordDir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				out = append(out, filepath.Base(p))
			}
			return nil
		})
		return out
	}
	i1, err := s.Put(ctx, "k", strings.NewReader("one"), 3, store.PutOptions{Metadata: secretMeta(0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := records(); len(got) != 1 || got[0] != string(i1.Validator) {
		t.Fatalf("records after a Put: %q, want [%s]", got, i1.Validator)
	}
	if b, _ := os.ReadFile(objectFile(t, s, "k")); string(b) != "one" {
		t.Fatalf("object file = %q", b)
	}
	i2, err := s.Put(ctx, "k", strings.NewReader("two!"), 4, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := records(); len(got) != 1 || got[0] != string(i2.Validator) {
		t.Errorf("records after an overwrite: %q, want [%s]", got, i2.Validator)
	}
	if info, err := newAt(t, s.dir).Stat(ctx, "k"); err != nil || info.ETag != i2.ETag || len(info.User) != 0 {
		t.Errorf("another store's Stat = %+v, %v", info, err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := records(); len(got) != 0 {
		t.Errorf("records after the Delete: %q", got)
	}
	// A write that died after its record, before its commit.
	st, err := s.newStaged()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.copyBody(ctx, strings.NewReader("dead"), 4); err != nil {
		t.Fatal(err)
	}
	if err := st.finish("dead", &meta{ETag: st.etag}); err != nil {
		t.Fatal(err)
	}
	st.f.Close()
	if len(records()) != 1 {
		t.Fatal("no record for the staged file")
	}
	if err := os.Chtimes(filepath.Join(s.dir, filepath.FromSlash(st.rel)), st.fi.ModTime(), st.fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	s.sweepStaging(st.fi.ModTime().Add(StaleStaging + 1))
	if got := records(); len(got) != 0 {
		t.Errorf("records after the sweep: %q", got)
	}
	if _, err := os.Stat(filepath.Join(s.dir, filepath.FromSlash(st.rel))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the staging file stays: %v", err)
	}
}

// helperEnv marks the test binary run as TestOtherUserReadsOnlyTheBytes's
// helper, as another user, with the object's file as descriptor 3.
const helperEnv = "FEDGATE_POSIX_OTHER_USER_HELPER"

// A client that runs as another user than the node (the short-circuit
// socket's users) reads the object's bytes through the descriptor it is
// handed, and nothing else: not the extended attribute that holds the
// metadata (fgetxattr on the descriptor is checked against the file's
// mode), nor the file opened again through /proc (issue 35). Runs where
// the test may start a process as another user (root).
func TestOtherUserReadsOnlyTheBytes(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run the client as another user")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, where the other user can run it.
	dir, err := os.MkdirTemp("", "posix-other-user-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "posix.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newAt(t, t.TempDir())
	ctx := t.Context()
	body := "the object's bytes"
	if _, err := s.Put(ctx, "put", strings.NewReader(body), -1, store.PutOptions{Metadata: secretMeta(0)}); err != nil {
		t.Fatal(err)
	}
	writeFormat1(t, s, "old", body, secretMeta(0))
	for _, key := range []string{"put", "old"} {
		f, _, info, err := s.OpenLocal(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestOtherUserHelper$", "-test.v")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), helperEnv+"="+strconv.FormatInt(info.Size, 10))
		cmd.ExtraFiles = []*os.File{f}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestOtherUserHelper") {
			t.Errorf("%s: the other user's client: %v\n%s", key, err, out)
		}
	}
}

// TestOtherUserHelper is TestOtherUserReadsOnlyTheBytes's client.
func TestOtherUserHelper(t *testing.T) {
	want := os.Getenv(helperEnv)
	if want == "" {
		t.Skip("run by TestOtherUserReadsOnlyTheBytes")
	}
	if os.Getuid() == 0 {
		t.Fatal("the helper runs as root")
	}
	const fd = 3
	var all []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Pread(fd, buf, int64(len(all)))
		if n <= 0 || err != nil {
			break
		}
		all = append(all, buf[:n]...)
	}
	if strconv.Itoa(len(all)) != want || bytes.Contains(all, []byte("SECRET")) {
		t.Errorf("read %d bytes (%q) through the descriptor, want the object's %s alone", len(all), all, want)
	}
	if n, err := unix.Fgetxattr(fd, metaAttr, buf); err == nil {
		t.Errorf("fgetxattr %s on the descriptor gave %q", metaAttr, buf[:n])
	} else if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
		t.Errorf("fgetxattr %s: %v, want EACCES", metaAttr, err)
	}
	if f, err := os.Open("/proc/self/fd/3"); err == nil {
		f.Close()
		t.Error("the file opened again through /proc/self/fd")
	}
}
