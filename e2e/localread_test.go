package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/clients/localread"
	"github.com/fedgate/fedgate/internal/wait"
)

// readAll reads f whole through ReadAt, in pieces that straddle the
// cache's 8 MiB chunks.
func readAll(t *testing.T, f *localread.File) []byte {
	t.Helper()
	out := make([]byte, f.Size())
	for off := int64(0); off < f.Size(); {
		n := min(int64(3<<20+17), f.Size()-off)
		if _, err := f.ReadAt(out[off:off+n], off); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
		}
		off += n
	}
	return out
}

// The short-circuit read (issue 14): through --local-socket a client gets
// the node's chunk files (a cached fs origin) or the store's file (the
// embedded posix store) and reads them itself, byte-identical, with pread
// and with O_DIRECT; it is authorized as a GET; the bytes it holds stay
// the version it opened when the object is replaced; without the socket
// the client falls back to HTTP; the route is refused on TCP.
func TestLocalSocketRead(t *testing.T) {
	tree := t.TempDir()
	big := randBytes(t, 20<<20+4321) // 3 chunks
	mustOK(t, os.MkdirAll(filepath.Join(tree, "train"), 0o755))
	mustOK(t, os.WriteFile(filepath.Join(tree, "train/shard-0.tar"), big, 0o644))
	policy := "regions:\n  - {name: e2e, location: onprem:lab}\nstores:\n  - {name: nas, kind: fs, location: onprem:lab, path: " + tree + "}\n" +
		"buckets:\n  - {name: datasets, origin: nas, cache: {ttl: 0s}}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	sock := filepath.Join(t.TempDir(), "s3.sock")
	s := startServer(t, "--config", pf, "--local-socket", sock, "--local-lease", "2s")
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})))
	small := randBytes(t, 123457)
	put(t, c, "scratch", "dir/small.bin", small)

	fi, err := os.Stat(sock)
	mustOK(t, err)
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want 0660", fi.Mode().Perm())
	}
	lc := &localread.Client{Socket: sock, Endpoint: s.Endpoint, AccessKey: rootAK, SecretKey: rootSK}
	for _, direct := range []bool{false, true} {
		lc := &localread.Client{Socket: sock, Endpoint: s.Endpoint, AccessKey: rootAK, SecretKey: rootSK, Direct: direct}
		for _, o := range []struct {
			bucket, key string
			data        []byte
			minExtents  int
		}{{"datasets", "train/shard-0.tar", big, 3}, {"scratch", "dir/small.bin", small, 1}} {
			f, err := lc.OpenLocal(ctx(t), o.bucket, o.key)
			if err != nil {
				t.Fatalf("OpenLocal(%s/%s, direct %v): %v\n%s", o.bucket, o.key, direct, err, s.Log())
			}
			exts, files := f.Extents()
			if len(exts) < o.minExtents || len(files) == 0 {
				t.Fatalf("%s: %d extents in %d files, want at least %d", o.key, len(exts), len(files), o.minExtents)
			}
			for _, e := range exts {
				if (e.FileOffset-e.ObjectOffset)%localread.Align != 0 {
					t.Errorf("extent %+v: file and object offsets are not aligned alike", e)
				}
			}
			if got := readAll(t, f); !bytes.Equal(got, o.data) {
				t.Fatalf("%s/%s read by short-circuit (direct %v) differs", o.bucket, o.key, direct)
			}
			mustOK(t, f.Close())
		}
	}

	// The bytes a client holds are pinned in the cache while it holds
	// them, and are the version it opened past its lease (2s) and after
	// the object is replaced.
	f, err := lc.OpenLocal(ctx(t), "datasets", "train/shard-0.tar")
	mustOK(t, err)
	if p := s.metric("fedgate_cache_pinned_bytes"); p < float64(len(big)) {
		t.Fatalf("%v bytes pinned while a short-circuit reader holds a %d-byte object", p, len(big))
	}
	wait.For(t, 10*time.Second, "the lease to end and unpin", func() bool { return s.metric("fedgate_cache_pinned_bytes") == 0 })
	mustOK(t, os.WriteFile(filepath.Join(tree, "train/shard-0.tar"), bytes.Repeat([]byte("new"), 1000), 0o644))
	wait.For(t, 10*time.Second, "the node to serve the replaced object", func() bool {
		got, _ := getBytes(t, s.root(), "datasets", "train/shard-0.tar")
		return string(got) == strings.Repeat("new", 1000)
	})
	if got := readAll(t, f); !bytes.Equal(got, big) {
		t.Fatal("an open short-circuit read changed under its reader")
	}
	f.Close()
	f, err = lc.OpenLocal(ctx(t), "datasets", "train/shard-0.tar")
	mustOK(t, err)
	if got := readAll(t, f); string(got) != strings.Repeat("new", 1000) {
		t.Fatalf("the replaced object was not read new (%d bytes)", len(got))
	}
	f.Close()

	// Authorized as a GET: a user without a grant is refused, and so is a
	// wrong secret; a missing key is NoSuchKey. None of these falls back.
	out, err := s.fedgate("user", "add", "bob")
	mustOK(t, err)
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	for _, tc := range []struct {
		name, ak, sk, key, code string
	}{
		{"no grant", m[1], m[2], "dir/small.bin", "AccessDenied"},
		{"wrong secret", rootAK, "not-the-secret-key-0000000000000000000", "dir/small.bin", "SignatureDoesNotMatch"},
		{"missing key", rootAK, rootSK, "dir/none", "NoSuchKey"},
	} {
		bad := &localread.Client{Socket: sock, Endpoint: s.Endpoint, AccessKey: tc.ak, SecretKey: tc.sk}
		_, err := bad.Open(ctx(t), "scratch", tc.key)
		var se *localread.Error
		if !errors.As(err, &se) || se.Code != tc.code {
			t.Errorf("%s: Open = %v, want %s", tc.name, err, tc.code)
		}
	}

	// No socket: the same calls over HTTP.
	fb := &localread.Client{Socket: filepath.Join(t.TempDir(), "absent.sock"), Endpoint: s.Endpoint, AccessKey: rootAK, SecretKey: rootSK}
	hf, err := fb.Open(ctx(t), "scratch", "dir/small.bin")
	mustOK(t, err)
	if hf.Local() {
		t.Fatal("Open without a socket claims a local read")
	}
	got, err := io.ReadAll(hf)
	mustOK(t, err)
	if !bytes.Equal(got, small) {
		t.Fatal("the HTTP fallback read differs")
	}

	// The route is the socket's only.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.Endpoint+localread.Path, strings.NewReader(`{"bucket":"scratch","key":"dir/small.bin"}`))
	resp, err := http.DefaultClient.Do(req)
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !bytes.Contains(body, []byte("Unix socket")) {
		t.Fatalf("POST %s over TCP: %d %s", localread.Path, resp.StatusCode, body)
	}
}

// A short-circuit read hands over a descriptor of the posix store's file;
// reading that file past the object's end yields nothing, so a user who
// may read the object but not its ACL or tags learns neither (issue 35: the
// metadata trailer used to follow the object's bytes in the same file).
func TestLocalReadPastTheEndRevealsNoMetadata(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s3.sock")
	s := startServer(t, "--local-socket", sock)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("private")})))
	_, err := s.fedgate("user", "add", "aclgrantee")
	mustOK(t, err)
	out, err := s.fedgate("user", "add", "reader")
	mustOK(t, err)
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	ak, sk := m[1], m[2]
	data := randBytes(t, 5000)
	mustOK(t, must(c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("private"), Key: aws.String("ckpt.bin"),
		Body: bytes.NewReader(data), Tagging: aws.String("secret-tag=TAGVALUE-91c2"),
		Metadata: map[string]string{"note": "METAVALUE-5be0"}, GrantRead: aws.String(`id="aclgrantee"`)})))
	_, err = s.fedgate("user", "grant", "reader", "private", "read")
	mustOK(t, err)
	lc := &localread.Client{Socket: sock, Endpoint: s.Endpoint, AccessKey: ak, SecretKey: sk}
	f, err := lc.OpenLocal(ctx(t), "private", "ckpt.bin")
	if err != nil {
		t.Fatalf("OpenLocal: %v\n%s", err, s.Log())
	}
	defer f.Close()
	exts, files := f.Extents()
	if len(files) == 0 {
		t.Fatal("no descriptor handed over")
	}
	for i, fd := range files {
		e := exts[i]
		buf := make([]byte, 1<<16)
		n, err := fd.ReadAt(buf, e.FileOffset+e.Length)
		if n > 0 {
			t.Fatalf("descriptor %d: %d bytes past the object's end (%v): %q", i, n, err, buf[:min(n, 200)])
		}
		// Nor anywhere else in the file.
		whole, err := io.ReadAll(io.NewSectionReader(fd, 0, 1<<30))
		mustOK(t, err)
		for _, secret := range []string{"TAGVALUE-91c2", "METAVALUE-5be0", "aclgrantee"} {
			if bytes.Contains(whole, []byte(secret)) {
				t.Fatalf("descriptor %d holds %q", i, secret)
			}
		}
	}
}
