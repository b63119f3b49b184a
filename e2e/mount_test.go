package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
)

// fuseMount is one `fedgate mount` process.
type fuseMount struct {
	dir, debug string
	cmd        *exec.Cmd
	log        *bytes.Buffer
	exited     chan struct{}
	err        error
}

// startMount runs `fedgate mount` with ak/sk in the environment, as the aws
// CLI would find them, and waits until dir is mounted. Cleanup stops it and
// detaches the mount even when the test failed.
func startMount(t *testing.T, s *server, ak, sk string, args ...string) *fuseMount {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	debug := ln.Addr().String()
	ln.Close()
	m := &fuseMount{dir: dir, debug: debug, log: &bytes.Buffer{}, exited: make(chan struct{})}
	all := append([]string{"mount", "--endpoint", s.Endpoint, "--debug-listen", debug, "--log-format", "text"}, args...)
	m.cmd = exec.Command(binary, append(all, dir)...)
	home := t.TempDir()
	m.cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+ak, "AWS_SECRET_ACCESS_KEY="+sk,
		"AWS_CONFIG_FILE="+filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=", "AWS_SESSION_TOKEN=")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	// If the test binary dies without its cleanups, the mount still unmounts.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.err = m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
		if testenv.Mounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if t.Failed() {
			t.Logf("fedgate mount log:\n%s", m.log.String())
		}
	})
	wait.For(t, 20*time.Second, "the mount at "+dir, func() bool {
		select {
		case <-m.exited:
			t.Fatalf("fedgate mount exited: %v\n%s", m.err, m.log.String())
		default:
		}
		return testenv.Mounted(dir)
	})
	return m
}

// metric sums the samples of the series whose line starts with prefix.
func (m *fuseMount) metric(t *testing.T, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + m.debug + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			sum += v
		}
	}
	return sum
}

func seededBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestMountReadOnly is issue 36's first slice: a bucket of class folders
// and a large file read through `fedgate mount --read-only` (every write EROFS).
func TestMountReadOnly(t *testing.T) {
	testenv.FUSE(t)
	s := startServer(t)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("train")})))
	r := rand.New(rand.NewPCG(36, 1))
	want := map[string][]byte{}
	for i := range 300 {
		size := r.IntN(48 << 10)
		if i == 7 {
			size = 0
		}
		want[fmt.Sprintf("class%02d/img%03d.jpg", i%10, i)] = seededBytes(r, size)
	}
	want["big/blob.bin"] = seededBytes(r, 20<<20+12345)
	var wg sync.WaitGroup
	var mu sync.Mutex
	keys := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range keys {
				_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("train"), Key: aws.String(k), Body: bytes.NewReader(want[k])})
				if err != nil {
					mu.Lock()
					t.Errorf("put %s: %v", k, err)
					mu.Unlock()
				}
			}
		})
	}
	for k := range want {
		keys <- k
	}
	close(keys)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	ttl := time.Second
	m := startMount(t, s, rootAK, rootSK, "--stat-ttl", ttl.String(), "--read-only")
	root := filepath.Join(m.dir, "train")

	t.Run("walk", func(t *testing.T) {
		listed := map[string]s3ObjectInfo{}
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("train")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx(t))
			mustOK(t, err)
			for _, o := range page.Contents {
				listed[aws.ToString(o.Key)] = s3ObjectInfo{aws.ToInt64(o.Size), aws.ToTime(o.LastModified)}
			}
		}
		if es, err := os.ReadDir(m.dir); err != nil || len(es) != 1 || es[0].Name() != "train" || !es[0].IsDir() {
			t.Errorf("the mount's root lists %v (%v), want the one bucket train", es, err)
		}
		heads := m.metric(t, `fedgate_mount_s3_requests_total{op="HeadObject"`)
		seen := map[string]bool{}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			if d.IsDir() != st.IsDir() {
				t.Errorf("%s: readdir type dir=%v, stat dir=%v", path, d.IsDir(), st.IsDir())
			}
			if st.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			seen[rel] = true
			o, ok := listed[rel]
			switch {
			case !ok:
				t.Errorf("%s in the mount, not in the listing", rel)
			case st.Size() != o.size:
				t.Errorf("%s: size %d, listing says %d", rel, st.Size(), o.size)
			case !st.ModTime().Equal(o.mtime.Truncate(time.Second)):
				t.Errorf("%s: mtime %v, listing says %v (the mount keeps seconds, as HEAD does)", rel, st.ModTime(), o.mtime)
			}
			return nil
		})
		mustOK(t, err)
		for k := range listed {
			if !seen[k] {
				t.Errorf("%s listed in S3, not in the mount", k)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("walk saw %d files, want %d", len(seen), len(want))
		}
		// READDIRPLUS and the stats come from the listings: no HEAD per entry.
		if d := m.metric(t, `fedgate_mount_s3_requests_total{op="HeadObject"`) - heads; d > 0 {
			t.Errorf("the walk made %v HEAD requests; want none (stats from the listing)", d)
		}
	})

	t.Run("--bucket name/prefix", func(t *testing.T) {
		p := startMount(t, s, rootAK, rootSK, "--bucket", "train/class02")
		es, err := os.ReadDir(p.dir)
		mustOK(t, err)
		if len(es) != 30 {
			t.Errorf("train/class02 mounted lists %d entries, want 30", len(es))
		}
		got, err := os.ReadFile(filepath.Join(p.dir, "img012.jpg"))
		if err != nil || !bytes.Equal(got, want["class02/img012.jpg"]) {
			t.Errorf("img012.jpg under the prefix mount: %v", err)
		}
		p.stop(t)
	})

	t.Run("mmap", func(t *testing.T) {
		f, err := os.Open(filepath.Join(root, "big/blob.bin"))
		mustOK(t, err)
		defer f.Close()
		data, err := syscall.Mmap(int(f.Fd()), 0, len(want["big/blob.bin"]), syscall.PROT_READ, syscall.MAP_SHARED)
		mustOK(t, err)
		defer syscall.Munmap(data)
		if !bytes.Equal(data, want["big/blob.bin"]) {
			t.Error("mmap of big/blob.bin differs from the object")
		}
	})

	t.Run("read", func(t *testing.T) {
		paths := make(chan string)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for k := range paths {
					got, err := os.ReadFile(filepath.Join(root, k))
					if err != nil {
						t.Errorf("read %s: %v", k, err)
					} else if !bytes.Equal(got, want[k]) {
						t.Errorf("read %s: %d bytes differ from the %d put", k, len(got), len(want[k]))
					}
				}
			})
		}
		for k := range want {
			paths <- k
		}
		close(paths)
		wg.Wait()
	})

	t.Run("page cache kept across opens", func(t *testing.T) {
		// Past the TTL, so the second open asks S3 again and finds the same ETag.
		path := filepath.Join(root, "class05/img015.jpg")
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want["class05/img015.jpg"]) {
			t.Fatalf("first read: %v", err)
		}
		// Wait until a stat past the TTL asks S3 again (the kernel's attribute
		// timeout is the TTL too): the next open then checks the ETag afresh.
		heads := m.metric(t, `fedgate_mount_s3_requests_total{op="HeadObject"`)
		wait.For(t, ttl+10*time.Second, "a stat past the TTL to HEAD the object", func() bool {
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			return m.metric(t, `fedgate_mount_s3_requests_total{op="HeadObject"`) > heads
		})
		reads := m.metric(t, "fedgate_mount_fuse_reads_total")
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want["class05/img015.jpg"]) {
			t.Fatalf("second read: %v", err)
		}
		if d := m.metric(t, "fedgate_mount_fuse_reads_total") - reads; d != 0 {
			t.Errorf("a second open of an unchanged object made %v FUSE reads; want 0 (FOPEN_KEEP_CACHE)", d)
		}
	})

	t.Run("changed mid-read is EIO", func(t *testing.T) {
		// A fresh object: nothing of it is in the kernel's page cache.
		want["big/changing.bin"] = seededBytes(r, 8<<20)
		_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("train"), Key: aws.String("big/changing.bin"), Body: bytes.NewReader(want["big/changing.bin"])})
		mustOK(t, err)
		f, err := os.Open(filepath.Join(root, "big/changing.bin"))
		mustOK(t, err)
		defer f.Close()
		mustOK(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM))
		buf := make([]byte, 4096)
		if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, want["big/changing.bin"][:4096]) {
			t.Fatalf("first read: %v", err)
		}
		_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("train"), Key: aws.String("big/changing.bin"), Body: bytes.NewReader(seededBytes(r, 8<<20))})
		mustOK(t, err)
		_, err = f.ReadAt(buf, 7<<20)
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("read after the object changed: %v, want EIO", err)
		}
	})

	t.Run("replaced object seen after the TTL", func(t *testing.T) {
		path := filepath.Join(root, "class03/img003.jpg")
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want["class03/img003.jpg"]) {
			t.Fatalf("before: %v", err)
		}
		next := seededBytes(r, 70000)
		replaced := time.Now()
		_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("train"), Key: aws.String("class03/img003.jpg"), Body: bytes.NewReader(next)})
		mustOK(t, err)
		wait.For(t, ttl+10*time.Second, "the replaced object through the mount", func() bool {
			got, err := os.ReadFile(path)
			return err == nil && bytes.Equal(got, next)
		})
		t.Logf("the replaced object was read through the mount %v after the PUT (TTL %v)", time.Since(replaced).Round(time.Millisecond), ttl)
		st, err := os.Stat(path)
		if err != nil || st.Size() != int64(len(next)) {
			t.Errorf("stat after replace: %v %v, want size %d", st, err, len(next))
		}
	})

	t.Run("errno", func(t *testing.T) {
		for _, p := range []string{"nope", "class01/missing.jpg", "../nobucket/x"} {
			if _, err := os.Stat(filepath.Join(root, p)); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("stat %s: %v, want ENOENT", p, err)
			}
		}
		if _, err := os.Open(filepath.Join(root, "class01/missing.jpg")); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("open missing: %v, want ENOENT", err)
		}
		writes := map[string]func() error{
			"create": func() error { return os.WriteFile(filepath.Join(root, "new.txt"), []byte("x"), 0o644) },
			"open for write": func() error {
				f, err := os.OpenFile(filepath.Join(root, "class01/img001.jpg"), os.O_WRONLY, 0)
				f.Close()
				return err
			},
			"truncate": func() error { return os.Truncate(filepath.Join(root, "class01/img001.jpg"), 0) },
			"mkdir":    func() error { return os.Mkdir(filepath.Join(root, "newdir"), 0o755) },
			"unlink":   func() error { return os.Remove(filepath.Join(root, "class01/img001.jpg")) },
			"rename": func() error {
				return os.Rename(filepath.Join(root, "class01/img001.jpg"), filepath.Join(root, "x.jpg"))
			},
		}
		for name, w := range writes {
			if err := w(); !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s with --read-only: %v, want EROFS", name, err)
			}
		}
		if got, err := os.ReadFile(filepath.Join(root, "class01/img001.jpg")); err != nil || !bytes.Equal(got, want["class01/img001.jpg"]) {
			t.Errorf("class01/img001.jpg after refused writes: %v", err)
		}
	})

	t.Run("access denied is EACCES", func(t *testing.T) {
		out, err := s.fedgate("user", "add", "eve")
		mustOK(t, err)
		k := keyRE.FindStringSubmatch(out)
		if k == nil {
			t.Fatalf("user add printed no keys:\n%s", out)
		}
		eve := startMount(t, s, k[1], k[2], "--bucket", "train", "--uid", "1234", "--gid", "2345")
		if st, err := os.Stat(eve.dir); err != nil || st.Sys().(*syscall.Stat_t).Uid != 1234 || st.Sys().(*syscall.Stat_t).Gid != 2345 {
			t.Errorf("--uid 1234 --gid 2345: the root is %v %v", st.Sys(), err)
		}
		if _, err := os.ReadFile(filepath.Join(eve.dir, "class02/img002.jpg")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("eve reads class02/img002.jpg: %v, want EACCES", err)
		}
		if _, err := os.ReadDir(eve.dir); !errors.Is(err, syscall.EACCES) {
			t.Errorf("eve lists the bucket: %v, want EACCES", err)
		}
		eve.stop(t)
	})

	t.Run("SIGTERM unmounts", func(t *testing.T) {
		// A file still open does not keep the mount (or the process) alive.
		f, err := os.Open(filepath.Join(root, "class04/img004.jpg"))
		mustOK(t, err)
		defer f.Close()
		m.stop(t)
		if _, err := f.Read(make([]byte, 1)); err == nil {
			t.Error("a file left open on the unmounted file system still reads")
		}
	})
}

type s3ObjectInfo struct {
	size  int64
	mtime time.Time
}

// stop sends SIGTERM and checks the process exits 0 and leaves dir a plain
// empty directory.
func (m *fuseMount) stop(t *testing.T) {
	t.Helper()
	mustOK(t, m.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("fedgate mount did not exit 20s after SIGTERM")
	}
	if m.err != nil {
		t.Errorf("fedgate mount exited with %v after SIGTERM", m.err)
	}
	if testenv.Mounted(m.dir) {
		t.Errorf("%s is still mounted", m.dir)
	}
	if es, err := os.ReadDir(m.dir); err != nil || len(es) != 0 {
		t.Errorf("mount point after unmount: %v entries, %v", len(es), err)
	}
}

// TestMountLocalSocket: with --local-socket the mount opens files by
// short-circuit. A file the node hands over whole (the embedded posix
// store's file) is read through FUSE passthrough: the daemon's read
// counter does not move while it is read end to end, mmap included. An
// object of several cached chunks is read with pread of the descriptors.
func TestMountLocalSocket(t *testing.T) {
	testenv.FUSE(t)
	tree := t.TempDir()
	r := rand.New(rand.NewPCG(36, 2))
	shard := seededBytes(r, 20<<20+4321) // 3 cache chunks
	mustOK(t, os.MkdirAll(filepath.Join(tree, "train"), 0o755))
	mustOK(t, os.WriteFile(filepath.Join(tree, "train/shard-0.tar"), shard, 0o644))
	policy := "regions:\n  - {name: e2e, location: onprem:lab}\nstores:\n  - {name: nas, kind: fs, location: onprem:lab, path: " + tree + "}\n" +
		"buckets:\n  - {name: datasets, origin: nas, cache: {ttl: 0s}}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	sock := filepath.Join(t.TempDir(), "s3.sock")
	s := startServer(t, "--config", pf, "--local-socket", sock)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})))
	want := map[string][]byte{"big.bin": seededBytes(r, 12<<20+99)}
	for i := range 20 {
		want[fmt.Sprintf("small/%02d.bin", i)] = seededBytes(r, 1000+i*3000)
	}
	for k, b := range want {
		put(t, c, "scratch", k, b)
	}

	m := startMount(t, s, rootAK, rootSK, "--local-socket", sock)
	opens := func(path string) float64 {
		return m.metric(t, `fedgate_mount_opens_total{path="`+path+`"}`)
	}
	checkPassthrough(t, m, "scratch", want, "big.bin")

	got, err := os.ReadFile(filepath.Join(m.dir, "datasets/train/shard-0.tar"))
	if err != nil || !bytes.Equal(got, shard) {
		t.Fatalf("read of a 3-chunk object by short-circuit: %v (equal %v)", err, bytes.Equal(got, shard))
	}
	if opens("local") < 1 {
		t.Error("the 3-chunk object was not opened by short-circuit (pread)")
	}
	if opens("s3") != 0 {
		t.Errorf("%v opens fell back to S3 with the node's socket there", opens("s3"))
	}
	m.stop(t)
}

// needTorch is Debian's python3 with torch (python3-torch), which the
// checkpoint tests run; missing, it skips, or fails when CI is set.
func needTorch(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s with torch and numpy is needed (apt-get install python3-torch): %v\n%s", py, err, out)
		}
		t.Skipf("%s with torch and numpy is needed: %v", py, err)
	}
	return py
}

func getObject(t *testing.T, c *s3.Client, bucket, key string) ([]byte, error) {
	t.Helper()
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(out.Body)
	return b.Bytes(), err
}

func openUploadsIn(t *testing.T, c *s3.Client, bucket string) int {
	t.Helper()
	out, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	mustOK(t, err)
	return len(out.Uploads)
}

// TestMountWrite: files written through `fedgate mount` (issue 36, writes):
// cp of a multi-part file, Python's open/close and torch.save/torch.load
// into a write-back bucket, stat while written, unlink/mkdir/rmdir/rename
// seen through S3, refused writes with their errno, and a writer killed
// by SIGKILL leaving no object and no multipart upload.
func TestMountWrite(t *testing.T) {
	testenv.FUSE(t)
	s := startServer(t, "--config", writeBackPolicy(t, t.TempDir()))
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})))
	m := startMount(t, s, rootAK, rootSK, "--stat-ttl", "1s", "--part-size", fmt.Sprint(8<<20))
	scratch := filepath.Join(m.dir, "scratch")
	r := rand.New(rand.NewPCG(36, 3))

	t.Run("cp of a multi-part file", func(t *testing.T) {
		data := seededBytes(r, 40<<20+4321)
		src := filepath.Join(t.TempDir(), "big.bin")
		mustOK(t, os.WriteFile(src, data, 0o644))
		uploads := m.metric(t, `fedgate_mount_uploads_total{result="ok"}`)
		if out, err := exec.Command("cp", src, filepath.Join(scratch, "big.bin")).CombinedOutput(); err != nil {
			t.Fatalf("cp into the mount: %v\n%s", err, out)
		}
		got, err := getObject(t, c, "scratch", "big.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the object cp wrote: %v, %d bytes, equal %v", err, len(got), bytes.Equal(got, data))
		}
		head, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("scratch"), Key: aws.String("big.bin")})
		mustOK(t, err)
		if !strings.HasSuffix(strings.Trim(aws.ToString(head.ETag), `"`), "-6") {
			t.Errorf("ETag %s: want a multipart upload of 6 parts of 8 MiB", aws.ToString(head.ETag))
		}
		// Seen at once in this mount: the size and mtime S3 has.
		st, err := os.Stat(filepath.Join(scratch, "big.bin"))
		if err != nil || st.Size() != int64(len(data)) || !st.ModTime().Equal(aws.ToTime(head.LastModified)) {
			t.Errorf("stat after close: %v %v, want size %d mtime %v", st, err, len(data), aws.ToTime(head.LastModified))
		}
		if d := m.metric(t, `fedgate_mount_uploads_total{result="ok"}`) - uploads; d != 1 {
			t.Errorf("uploads ok went up by %v, want 1", d)
		}
		if b := m.metric(t, "fedgate_mount_write_bytes_total"); b < float64(len(data)) {
			t.Errorf("write bytes %v < %d", b, len(data))
		}
		back, err := os.ReadFile(filepath.Join(scratch, "big.bin"))
		if err != nil || !bytes.Equal(back, data) {
			t.Errorf("read back through the mount: %v", err)
		}
	})

	t.Run("python and torch.save into a write-back bucket", func(t *testing.T) {
		py := needTorch(t)
		dir := filepath.Join(m.dir, "ckpt", "run1")
		script := `
import os, sys, torch
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "hello.txt"), "wb") as f:
    f.write(b"hello from python\n")
open(os.path.join(d, "empty"), "wb").close()
g = torch.Generator().manual_seed(36)
sd = {"w": torch.randn(512, 1024, generator=g), "b": torch.arange(1000, dtype=torch.float64), "step": 7}
torch.save(sd, os.path.join(d, "model.pt"))
back = torch.load(os.path.join(d, "model.pt"))
assert back["step"] == 7 and torch.equal(back["w"], sd["w"]) and torch.equal(back["b"], sd["b"]), "torch.load differs"
print("ok", os.stat(os.path.join(d, "model.pt")).st_size)
`
		out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Fatalf("python: %v\n%s", err, out)
		}
		if got, err := getObject(t, c, "ckpt", "run1/hello.txt"); err != nil || string(got) != "hello from python\n" {
			t.Errorf("hello.txt through S3: %q %v", got, err)
		}
		if got, err := getObject(t, c, "ckpt", "run1/empty"); err != nil || len(got) != 0 {
			t.Errorf("an empty file created and closed: %d bytes, %v; want an empty object", len(got), err)
		}
		var size int64
		fmt.Sscan(strings.TrimPrefix(strings.TrimSpace(string(out)), "ok "), &size)
		if got, err := getObject(t, c, "ckpt", "run1/model.pt"); err != nil || int64(len(got)) != size || size < 2<<20 {
			t.Errorf("model.pt through S3: %d bytes, %v; python saw %d", len(got), err, size)
		}
		// Read by a fresh mount (another reader): torch.load equal.
		m2 := startMount(t, s, rootAK, rootSK, "--bucket", "ckpt", "--read-only")
		check := `
import sys, torch
g = torch.Generator().manual_seed(36)
w = torch.randn(512, 1024, generator=g)
back = torch.load(sys.argv[1])
assert torch.equal(back["w"], w) and back["step"] == 7
print("ok")
`
		if out, err := exec.Command(py, "-c", check, filepath.Join(m2.dir, "run1/model.pt")).CombinedOutput(); err != nil {
			t.Errorf("torch.load through a second mount: %v\n%s", err, out)
		}
		m2.stop(t)
	})

	t.Run("stat while written", func(t *testing.T) {
		path := filepath.Join(scratch, "growing.bin")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		mustOK(t, err)
		defer f.Close()
		chunk := seededBytes(r, 3<<20)
		_, err = f.Write(chunk)
		mustOK(t, err)
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len(chunk)) {
			t.Errorf("stat of the path while written: %v %v, want size %d", st, err, len(chunk))
		}
		if st, err := f.Stat(); err != nil || st.Size() != int64(len(chunk)) {
			t.Errorf("fstat while written: %v %v", st, err)
		}
		es, err := os.ReadDir(scratch)
		mustOK(t, err)
		found := false
		for _, e := range es {
			found = found || e.Name() == "growing.bin"
		}
		if !found {
			t.Errorf("a file being written is not in its directory's listing: %v", es)
		}
		if _, err := os.Open(path); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("open for reading while written: %v, want EBUSY", err)
		}
		mustOK(t, f.Close())
		if got, err := getObject(t, c, "scratch", "growing.bin"); err != nil || !bytes.Equal(got, chunk) {
			t.Errorf("after close: %v", err)
		}
		// O_TRUNC of the existing file replaces the object at close.
		mustOK(t, os.WriteFile(path, []byte("replaced"), 0o644))
		if got, err := getObject(t, c, "scratch", "growing.bin"); err != nil || string(got) != "replaced" {
			t.Errorf("after an O_TRUNC overwrite: %q %v", got, err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len("replaced")) {
			t.Errorf("stat after the overwrite: %v %v", st, err)
		}
	})

	t.Run("refused writes", func(t *testing.T) {
		path := filepath.Join(scratch, "random.bin")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		mustOK(t, err)
		data := seededBytes(r, 20<<20)
		_, err = f.Write(data)
		mustOK(t, err)
		if _, err := f.WriteAt([]byte("x"), 100); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("write into an uploaded part: %v, want EOPNOTSUPP", err)
		}
		// Inside the part not yet uploaded: fine.
		_, err = f.WriteAt([]byte("tail"), int64(len(data)-10))
		mustOK(t, err)
		copy(data[len(data)-10:], "tail")
		mustOK(t, f.Close())
		if got, err := getObject(t, c, "scratch", "random.bin"); err != nil || !bytes.Equal(got, data) {
			t.Errorf("after refused and tail writes: %v", err)
		}
		if !strings.Contains(m.log.String(), "key=random.bin") {
			t.Error("no log line names the file of the refused write")
		}
		g, err := os.OpenFile(path, os.O_WRONLY, 0)
		mustOK(t, err)
		if _, err := g.Write([]byte("x")); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("write to a file opened without O_TRUNC: %v, want EOPNOTSUPP", err)
		}
		mustOK(t, g.Close())
		if err := os.Truncate(path, 5); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("truncate of a closed file to 5: %v, want EOPNOTSUPP", err)
		}
		mustOK(t, os.Truncate(path, 0))
		if got, err := getObject(t, c, "scratch", "random.bin"); err != nil || len(got) != 0 {
			t.Errorf("truncate to 0: %d bytes, %v", len(got), err)
		}
		// chmod, chown and utimes are accepted (cp -p, rsync -a).
		mustOK(t, os.Chmod(path, 0o600))
		mustOK(t, os.Chtimes(path, time.Now(), time.Now()))
		mustOK(t, os.Chown(path, 0, 0))
		src := filepath.Join(t.TempDir(), "p.txt")
		mustOK(t, os.WriteFile(src, []byte("preserved"), 0o640))
		if out, err := exec.Command("cp", "-p", src, filepath.Join(scratch, "p.txt")).CombinedOutput(); err != nil {
			t.Errorf("cp -p: %v\n%s", err, out)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		d := filepath.Join(scratch, "dir")
		mustOK(t, os.Mkdir(d, 0o755))
		if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("scratch"), Key: aws.String("dir/")}); err != nil {
			t.Errorf("mkdir made no dir/ marker: %v", err)
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("stat of the new directory: %v", err)
		}
		mustOK(t, os.WriteFile(filepath.Join(d, "a.txt"), []byte("aaa"), 0o644))
		mustOK(t, os.Rename(filepath.Join(d, "a.txt"), filepath.Join(d, "b.txt")))
		if got, err := getObject(t, c, "scratch", "dir/b.txt"); err != nil || string(got) != "aaa" {
			t.Errorf("renamed: %q %v", got, err)
		}
		if _, err := getObject(t, c, "scratch", "dir/a.txt"); err == nil {
			t.Error("rename left the source")
		}
		if got, err := os.ReadFile(filepath.Join(d, "b.txt")); err != nil || string(got) != "aaa" {
			t.Errorf("read of the renamed file: %q %v", got, err)
		}
		if err := os.Rename(d, filepath.Join(scratch, "dir2")); !errors.Is(err, syscall.EXDEV) {
			t.Errorf("rename of a directory: %v, want EXDEV", err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(scratch, "p.txt"), unix.AT_FDCWD, filepath.Join(d, "b.txt"), unix.RENAME_NOREPLACE); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("RENAME_NOREPLACE onto a file: %v, want EEXIST", err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(scratch, "p.txt"), unix.AT_FDCWD, filepath.Join(d, "b.txt"), unix.RENAME_EXCHANGE); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("RENAME_EXCHANGE: %v, want EINVAL", err)
		}
		if err := os.Remove(d); !errors.Is(err, syscall.ENOTEMPTY) {
			t.Errorf("rmdir of a directory with a file: %v, want ENOTEMPTY", err)
		}
		mustOK(t, os.Remove(filepath.Join(d, "b.txt")))
		if _, err := getObject(t, c, "scratch", "dir/b.txt"); err == nil {
			t.Error("unlink left the object")
		}
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the emptied directory (its marker) is gone: %v", err)
		}
		mustOK(t, os.Remove(d))
		if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("scratch"), Key: aws.String("dir/")}); err == nil {
			t.Error("rmdir left the dir/ marker")
		}
	})

	t.Run("rsync -a and tar x into the mount", func(t *testing.T) {
		src := t.TempDir()
		files := map[string][]byte{"a.txt": []byte("alpha"), "sub/b.bin": seededBytes(r, 9<<20+7), "sub/deeper/c": seededBytes(r, 1000)}
		for k, b := range files {
			mustOK(t, os.MkdirAll(filepath.Dir(filepath.Join(src, k)), 0o755))
			mustOK(t, os.WriteFile(filepath.Join(src, k), b, 0o640))
		}
		check := func(prefix string) {
			t.Helper()
			for k, b := range files {
				if got, err := getObject(t, c, "scratch", prefix+k); err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s%s through S3: %v, equal %v", prefix, k, err, bytes.Equal(got, b))
				}
			}
		}
		if out, err := exec.Command("rsync", "-a", src+"/", filepath.Join(scratch, "rsynced")+"/").CombinedOutput(); err != nil {
			t.Errorf("rsync -a into the mount: %v\n%s", err, out)
		}
		check("rsynced/")
		tarball := filepath.Join(t.TempDir(), "t.tar")
		if out, err := exec.Command("tar", "-C", src, "-cf", tarball, ".").CombinedOutput(); err != nil {
			t.Fatalf("tar c: %v\n%s", err, out)
		}
		mustOK(t, os.Mkdir(filepath.Join(scratch, "untarred"), 0o755))
		if out, err := exec.Command("tar", "-C", filepath.Join(scratch, "untarred"), "-xf", tarball).CombinedOutput(); err != nil {
			t.Errorf("tar x into the mount: %v\n%s", err, out)
		}
		check("untarred/")
		if n := openUploadsIn(t, c, "scratch"); n != 0 {
			t.Errorf("%d multipart uploads left open", n)
		}
	})

	t.Run("killed writer leaves nothing", func(t *testing.T) {
		py := needTorch(t)
		path := filepath.Join(scratch, "killed.bin")
		script := `
import os, sys, time
f = open(sys.argv[1], "wb")
f.write(os.urandom(30 << 20))
f.flush()
print("ready", flush=True)
time.sleep(600)
`
		cmd := exec.Command(py, "-c", script, path)
		stdout, err := cmd.StdoutPipe()
		mustOK(t, err)
		mustOK(t, cmd.Start())
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			t.Fatalf("writer: %q %v", line, err)
		}
		wait.For(t, 30*time.Second, "the killed writer's multipart upload to start", func() bool { return openUploadsIn(t, c, "scratch") == 1 })
		mustOK(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		wait.For(t, 30*time.Second, "the upload of a killed writer to be aborted", func() bool { return openUploadsIn(t, c, "scratch") == 0 })
		if _, err := getObject(t, c, "scratch", "killed.bin"); err == nil {
			t.Error("a killed writer left an object")
		}
		if d := m.metric(t, `fedgate_mount_uploads_total{result="aborted"}`); d < 1 {
			t.Errorf("uploads aborted: %v", d)
		}
	})

	t.Run("mount stopped with a file open for writing", func(t *testing.T) {
		py := needTorch(t)
		m2 := startMount(t, s, rootAK, rootSK, "--bucket", "scratch", "--part-size", fmt.Sprint(8<<20))
		script := `
import os, sys, time
f = open(sys.argv[1], "wb")
f.write(os.urandom(20 << 20))
f.flush()
print("ready", flush=True)
time.sleep(600)
`
		cmd := exec.Command(py, "-c", script, filepath.Join(m2.dir, "orphan.bin"))
		stdout, err := cmd.StdoutPipe()
		mustOK(t, err)
		mustOK(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("writer: %q %v", line, err)
		}
		wait.For(t, 30*time.Second, "the writer's multipart upload to start", func() bool { return openUploadsIn(t, c, "scratch") == 1 })
		m2.stop(t)
		if n := openUploadsIn(t, c, "scratch"); n != 0 {
			t.Errorf("the stopped mount left %d multipart uploads", n)
		}
		if !strings.Contains(m2.log.String(), "aborted the uploads of files still open for writing") {
			t.Errorf("no log line of the aborted upload:\n%s", m2.log.String())
		}
	})
	m.stop(t)
}

// checkPassthrough reads every file of want (keys under bucket) through m
// and maps big whole: every byte right, each opened by FUSE passthrough
// (the opens counter), and the daemon's read counter unmoved.
func checkPassthrough(t *testing.T, m *fuseMount, bucket string, want map[string][]byte, big string) {
	t.Helper()
	opens := func(path string) float64 {
		return m.metric(t, `fedgate_mount_opens_total{path="`+path+`"}`)
	}
	before := opens("passthrough")
	reads := m.metric(t, "fedgate_mount_fuse_reads_total")
	for k, b := range want {
		got, err := os.ReadFile(filepath.Join(m.dir, bucket, k))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("read %s/%s through passthrough: %v (equal %v)", bucket, k, err, bytes.Equal(got, b))
		}
	}
	f, err := os.Open(filepath.Join(m.dir, bucket, big))
	mustOK(t, err)
	data, err := syscall.Mmap(int(f.Fd()), 0, len(want[big]), syscall.PROT_READ, syscall.MAP_SHARED)
	mustOK(t, err)
	if !bytes.Equal(data, want[big]) {
		t.Error("mmap of a passthrough file differs")
	}
	syscall.Munmap(data)
	f.Close()
	if p := opens("passthrough") - before; p < float64(len(want)+1) {
		t.Errorf("%v passthrough opens of %d whole-file objects (local %v, s3 %v)", p, len(want)+1, opens("local"), opens("s3"))
	}
	if d := m.metric(t, "fedgate_mount_fuse_reads_total") - reads; d != 0 {
		t.Errorf("passthrough files made %v FUSE reads in the daemon; want 0", d)
	}
}
