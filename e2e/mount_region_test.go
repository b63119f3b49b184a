package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// The mount's end-to-end tests on a 3-node region (issue 36, "Done when"):
// training code (a PyTorch DataLoader, torch.save/torch.load, numpy's
// mmap) and file tools (cp, rsync, ls) through `fedgate mount` of real
// nodes, data uploaded with aws-sdk-go-v2 and the aws CLI, and a node
// frozen or killed under a reader.

// mountPython is Debian's python3, which has python3-torch and numpy (the
// python3 on PATH may be pyenv's). Missing, it skips on a developer's
// machine and fails in CI.
func mountPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	err := exec.Command(py, "-c", "import torch, numpy").Run()
	if err == nil {
		return py
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s with torch and numpy: %v (scripts/install-test-deps.sh installs python3-torch)", py, err)
	}
	t.Skipf("%s with torch and numpy: %v (scripts/install-test-deps.sh installs python3-torch)", py, err)
	return ""
}

// needTool is a command the test runs: missing, it skips on a developer's
// machine and fails in CI.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (scripts/install-test-deps.sh installs it)", name)
	}
	t.Skipf("%s is missing (scripts/install-test-deps.sh installs it)", name)
	return ""
}

// mountScript runs e2e/testdata/mount_region.py with args, its output
// collected, bounded by limit.
func mountScript(t *testing.T, py string, limit time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	script, err := filepath.Abs("testdata/mount_region.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{"-u", script}, args...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(limit):
		state := procState(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("mount_region.py %s did not finish in %v; its state then:\n%s\nstdout tail:\n%s\nstderr:\n%s",
			strings.Join(args, " "), limit, state, tail(out.String(), 2000), errb.String())
	}
	return out.String(), errb.String(), err
}

// procState is what the kernel says a process is doing: its state, the
// function it waits in, and its kernel stack (root only).
func procState(pid int) string {
	var b strings.Builder
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "State:") {
				fmt.Fprintf(&b, "%s\n", l)
			}
		}
	}
	if w, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid)); err == nil {
		fmt.Fprintf(&b, "wchan: %s\n", w)
	}
	if s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stack", pid)); err == nil {
		fmt.Fprintf(&b, "kernel stack:\n%s", s)
	}
	return b.String()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// startMountRegion starts 3 nodes over one shared NAS with the write-back
// bucket "ckpt" and the write-through bucket "datasets"
// (writeBackPolicy), each node with its own --local-socket, and waits
// until the region has 3 healthy members and a leader.
func startMountRegion(t *testing.T) (*region, []string) {
	t.Helper()
	const n = 3
	nas := t.TempDir()
	policy := writeBackPolicy(t, nas)
	addrs := freeAddrs(t, 3*n)
	httpAddrs, raftAddrs, internalAddrs := addrs[:n], addrs[n:2*n], addrs[2*n:]
	r := &region{t: t, byID: map[string]*server{}, nas: nas, internal: internalAddrs}
	var sockets []string
	for i := range n {
		var join []string
		for j := range n {
			if j != i {
				join = append(join, httpAddrs[j])
			}
		}
		id := fmt.Sprintf("n%d", i+1)
		sock := filepath.Join(t.TempDir(), "s3.sock")
		sockets = append(sockets, sock)
		p := testserver.Spawn(t, binary, t.TempDir(), "--node-id", id, "--listen", httpAddrs[i], "--raft-addr", raftAddrs[i],
			"--internal-addr", internalAddrs[i], "--bootstrap-expect", fmt.Sprint(n), "--join", strings.Join(join, ","),
			"--config", policy, "--local-socket", sock)
		s := &server{Process: p, t: t}
		r.nodes = append(r.nodes, s)
		r.byID[id] = s
	}
	for _, s := range r.nodes {
		s.WaitReady(t)
	}
	r.settle(n)
	return r, sockets
}

// npyFloat32 is a .npy file (format 1.0) of a rows×cols little-endian
// float32 array, and the array's bytes.
func npyFloat32(r *rand.Rand, rows, cols int) (file, data []byte) {
	data = make([]byte, 0, rows*cols*4)
	for range rows * cols {
		data = binenc.LittleEndian.AppendUint32(data, math.Float32bits(float32(r.NormFloat64())))
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	// magic (6) + version (2) + header length (2) + header + '\n': a multiple of 64.
	if pad := (64 - (10+len(header)+1)%64) % 64; pad > 0 {
		header += strings.Repeat(" ", pad)
	}
	header += "\n"
	file = append([]byte("\x93NUMPY\x01\x00"), binenc.LittleEndian.AppendUint16(nil, uint16(len(header)))...)
	file = append(file, header...)
	return append(file, data...), data
}

// putAll uploads want to bucket with aws-sdk-go-v2, 16 at a time, spread
// over the region's nodes.
func putAll(t *testing.T, nodes []*server, bucket string, want map[string][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	keys := make(chan string)
	for w := range 16 {
		c := nodes[w%len(nodes)].root()
		wg.Go(func() {
			for k := range keys {
				if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(want[k])}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("put %s: %w", k, err))
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
	if len(errs) > 0 {
		t.Fatalf("%d of %d uploads failed, the first: %v", len(errs), len(want), errs[0])
	}
}

// compareTree checks that dir holds exactly the files of want (keys as
// slash paths), byte for byte.
func compareTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		w, ok := want[filepath.ToSlash(rel)]
		if !ok {
			t.Errorf("%s: a file that was not uploaded", rel)
			return nil
		}
		seen++
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, w) {
			t.Errorf("%s: %d bytes (sha256 %s), uploaded %d (sha256 %s)", rel, len(got), sha256Hex(got)[:12], len(w), sha256Hex(w)[:12])
		}
		return nil
	})
	mustOK(t, err)
	if seen != len(want) {
		t.Errorf("%s holds %d of the %d files uploaded", dir, seen, len(want))
	}
}

// TestMountRegion: issue 36's "Done when" for `fedgate mount` on a 3-node
// region. One region, mounts on each node, one subtest per item; the
// node-killing one is last.
func TestMountRegion(t *testing.T) {
	testenv.FUSE(t)
	py := mountPython(t)
	r, sockets := startMountRegion(t)
	n1, n2, n3 := r.nodes[0], r.nodes[1], r.nodes[2]
	mustOK(t, must(n2.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("train")})))

	// 2,000 files of 1 B to 64 KiB in 20 class folders, a tenth of them one
	// directory deeper (ImageFolder walks each class folder recursively).
	rnd := rand.New(rand.NewPCG(36, 3))
	const files, classes = 2000, 20
	train := map[string][]byte{}
	for i := range files {
		size := 1 + rnd.IntN(64<<10)
		switch i {
		case 0:
			size = 1
		case 1:
			size = 64 << 10
		}
		key := fmt.Sprintf("class%02d/img%04d.jpg", i%classes, i)
		if i%10 == 3 {
			key = fmt.Sprintf("class%02d/extra/img%04d.jpg", i%classes, i)
		}
		train[key] = seededBytes(rnd, size)
	}
	putAll(t, r.nodes, "train", train)

	const ttl = time.Second
	m1 := startMount(t, n1, rootAK, rootSK, "--stat-ttl", ttl.String())
	m2 := startMount(t, n2, rootAK, rootSK, "--stat-ttl", ttl.String())
	m3 := startMount(t, n3, rootAK, rootSK, "--stat-ttl", ttl.String())

	t.Run("ImageFolder DataLoader with 4 workers", func(t *testing.T) {
		start := time.Now()
		out, stderr, err := mountScript(t, py, 5*time.Minute, "imagefolder", filepath.Join(m1.dir, "train"))
		if err != nil {
			t.Fatalf("imagefolder: %v\n%s\nstdout tail:\n%s", err, stderr, tail(out, 2000))
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var head struct {
			Classes []string
			Samples int
		}
		mustOK(t, json.Unmarshal([]byte(lines[0]), &head))
		var wantClasses []string
		for c := range classes {
			wantClasses = append(wantClasses, fmt.Sprintf("class%02d", c))
		}
		if !slices.Equal(head.Classes, wantClasses) || head.Samples != files {
			t.Fatalf("the Dataset found classes %v and %d samples, want %v and %d", head.Classes, head.Samples, wantClasses, files)
		}
		seen := map[string]int{}
		workers := map[int]int{}
		for _, l := range lines[1:] {
			var s struct {
				Path, Sha256        string
				Size, Class, Worker int
			}
			mustOK(t, json.Unmarshal([]byte(l), &s))
			seen[s.Path]++
			workers[s.Worker]++
			w, ok := train[s.Path]
			switch {
			case !ok:
				t.Errorf("the DataLoader returned %s, which was not uploaded", s.Path)
			case s.Size != len(w) || s.Sha256 != sha256Hex(w):
				t.Errorf("%s: %d bytes sha256 %s, uploaded %d bytes sha256 %s", s.Path, s.Size, s.Sha256, len(w), sha256Hex(w))
			case wantClasses[s.Class] != strings.SplitN(s.Path, "/", 2)[0]:
				t.Errorf("%s: class index %d (%s)", s.Path, s.Class, wantClasses[s.Class])
			}
		}
		for k := range train {
			if seen[k] != 1 {
				t.Errorf("%s seen %d times in the epoch, want once", k, seen[k])
			}
		}
		if len(workers) != 4 {
			t.Errorf("samples came from workers %v, want 4 workers", workers)
		}
		t.Logf("one epoch of %d files through node 1's mount, 4 workers: %v (samples per worker %v)", len(lines)-1, time.Since(start).Round(time.Millisecond), workers)
	})

	t.Run("cp -r and rsync -a byte-identical", func(t *testing.T) {
		rsync := needTool(t, "rsync")
		dst := t.TempDir()
		start := time.Now()
		if out, err := exec.Command("cp", "-r", filepath.Join(m2.dir, "train"), filepath.Join(dst, "cp")).CombinedOutput(); err != nil {
			t.Fatalf("cp -r out of node 2's mount: %v\n%s", err, out)
		}
		t.Logf("cp -r of %d files out of node 2's mount: %v", len(train), time.Since(start).Round(time.Millisecond))
		compareTree(t, filepath.Join(dst, "cp"), train)

		start = time.Now()
		if out, err := exec.Command(rsync, "-a", filepath.Join(m3.dir, "train")+"/", filepath.Join(dst, "rsync")+"/").CombinedOutput(); err != nil {
			t.Fatalf("rsync -a out of node 3's mount: %v\n%s", err, out)
		}
		t.Logf("rsync -a of %d files out of node 3's mount: %v", len(train), time.Since(start).Round(time.Millisecond))
		compareTree(t, filepath.Join(dst, "rsync"), train)
		// rsync -a keeps mtimes: the objects' Last-Modified, to the second.
		lm := map[string]time.Time{}
		p := s3.NewListObjectsV2Paginator(n3.root(), &s3.ListObjectsV2Input{Bucket: aws.String("train")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx(t))
			mustOK(t, err)
			for _, o := range page.Contents {
				lm[aws.ToString(o.Key)] = aws.ToTime(o.LastModified)
			}
		}
		bad := 0
		for k, want := range lm {
			st, err := os.Stat(filepath.Join(dst, "rsync", k))
			if err == nil && !st.ModTime().Equal(want.Truncate(time.Second)) {
				if bad++; bad <= 5 {
					t.Errorf("%s: rsync -a gave mtime %v, the object's Last-Modified is %v", k, st.ModTime(), want)
				}
			}
		}
	})

	t.Run("ls -lR equals aws s3 ls --recursive", func(t *testing.T) {
		cli := newAWSCLI(t)
		lsOut, err := exec.Command("ls", "-lR", filepath.Join(m1.dir, "train")).Output()
		mustOK(t, err)
		fromLS := map[string]int64{}
		dir := ""
		for _, l := range strings.Split(string(lsOut), "\n") {
			switch f := strings.Fields(l); {
			case strings.HasSuffix(l, ":") && len(f) == 1:
				rel, err := filepath.Rel(filepath.Join(m1.dir, "train"), strings.TrimSuffix(l, ":"))
				mustOK(t, err)
				dir = strings.TrimPrefix(rel+"/", "./")
			case len(f) >= 9 && strings.HasPrefix(f[0], "-"):
				size, err := strconv.ParseInt(f[4], 10, 64)
				mustOK(t, err)
				fromLS[dir+strings.Join(f[8:], " ")] = size
			case len(f) >= 9 && !strings.HasPrefix(f[0], "d"):
				t.Errorf("ls -lR: an entry neither file nor directory: %q", l)
			}
		}
		fromCLI := map[string]int64{}
		for _, l := range strings.Split(strings.TrimSpace(cli.must(n3, "s3", "ls", "--recursive", "s3://train")), "\n") {
			f := strings.Fields(l)
			if len(f) < 4 {
				t.Fatalf("aws s3 ls line %q", l)
			}
			size, err := strconv.ParseInt(f[2], 10, 64)
			mustOK(t, err)
			fromCLI[strings.Join(f[3:], " ")] = size
		}
		if len(fromCLI) != len(train) {
			t.Errorf("aws s3 ls --recursive lists %d objects, %d were uploaded", len(fromCLI), len(train))
		}
		for k, size := range fromCLI {
			if got, ok := fromLS[k]; !ok {
				t.Errorf("%s: in aws s3 ls, not in ls -lR", k)
			} else if got != size {
				t.Errorf("%s: ls -lR size %d, aws s3 ls %d", k, got, size)
			}
		}
		for k := range fromLS {
			if _, ok := fromCLI[k]; !ok {
				t.Errorf("%s: in ls -lR, not in aws s3 ls", k)
			}
		}
	})

	t.Run("replaced through another node, seen at the next open after the TTL", func(t *testing.T) {
		const key = "class05/img0005.jpg"
		path := filepath.Join(m1.dir, "train", key)
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, train[key]) {
			t.Fatalf("before: %v (equal %v)", err, bytes.Equal(got, train[key]))
		}
		next := seededBytes(rnd, len(train[key])+7777)
		put(t, n3.root(), "train", key, next)
		acked := time.Now()
		// The contract (docs/mount.md, Consistency): an open made more than
		// --stat-ttl after the replace reads the new object. Wait out the
		// TTL, then one open must see it.
		time.Sleep(time.Until(acked.Add(ttl + 100*time.Millisecond)))
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, next) {
			t.Errorf("an open %v after the replace through node 3 (TTL %v): %v, %d bytes, equal to the new object %v, to the old %v",
				time.Since(acked).Round(time.Millisecond), ttl, err, len(got), bytes.Equal(got, next), bytes.Equal(got, train[key]))
		}
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len(next)) {
			t.Errorf("stat after the replace: %v, want size %d", err, len(next))
		}
		train[key] = next
	})

	t.Run("a user without a grant reads EACCES", func(t *testing.T) {
		keys := map[string][]string{}
		for i, name := range []string{"alice", "bob"} {
			out, err := r.nodes[i].fedgate("user", "add", name)
			mustOK(t, err)
			k := keyRE.FindStringSubmatch(out)
			if k == nil {
				t.Fatalf("user add %s printed no keys:\n%s", name, out)
			}
			keys[name] = k[1:]
		}
		if out, err := n3.fedgate("user", "grant", "alice", "train", "read"); err != nil {
			t.Fatalf("grant: %v %s", err, out)
		}
		// Both users and the grant are on node 1 before they mount there.
		wait.For(t, 10*time.Second, "alice's grant on node 1", func() bool {
			_, err := n1.s3Client(keys["alice"][0], keys["alice"][1]).HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("train"), Key: aws.String("class02/img0002.jpg")})
			return err == nil
		})
		wait.For(t, 10*time.Second, "bob on node 1", func() bool {
			_, err := n1.s3Client(keys["bob"][0], keys["bob"][1]).ListBuckets(ctx(t), &s3.ListBucketsInput{})
			return err == nil
		})
		alice := startMount(t, n1, keys["alice"][0], keys["alice"][1], "--bucket", "train")
		bob := startMount(t, n1, keys["bob"][0], keys["bob"][1], "--bucket", "train")
		if got, err := os.ReadFile(filepath.Join(alice.dir, "class02/img0002.jpg")); err != nil || !bytes.Equal(got, train["class02/img0002.jpg"]) {
			t.Errorf("alice (granted read) reads class02/img0002.jpg: %v", err)
		}
		if _, err := os.ReadFile(filepath.Join(bob.dir, "class02/img0002.jpg")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("bob (no grant) reads class02/img0002.jpg: %v, want EACCES", err)
		}
		if _, err := os.ReadDir(filepath.Join(bob.dir, "class02")); !errors.Is(err, syscall.EACCES) {
			t.Errorf("bob (no grant) lists class02: %v, want EACCES", err)
		}
		alice.stop(t)
		bob.stop(t)
	})

	t.Run("np.load mmap_mode=r", func(t *testing.T) {
		file, data := npyFloat32(rnd, 3001, 2048) // 24 MiB: many blocks
		put(t, n2.root(), "datasets", "arrays/features.npy", file)
		out, stderr, err := mountScript(t, py, 3*time.Minute, "npy", filepath.Join(m3.dir, "datasets/arrays/features.npy"))
		if err != nil {
			t.Fatalf("npy: %v\n%s%s", err, out, stderr)
		}
		var got struct {
			Memmap       bool
			Dtype        string
			Shape        []int
			Sha256       string
			MidRowSha256 string `json:"mid_row_sha256"`
		}
		mustOK(t, json.Unmarshal([]byte(out), &got))
		row := 2048 * 4
		if !got.Memmap || got.Dtype != "<f4" || !slices.Equal(got.Shape, []int{3001, 2048}) ||
			got.Sha256 != sha256Hex(data) || got.MidRowSha256 != sha256Hex(data[1500*row:1501*row]) {
			t.Errorf("np.load(mmap_mode=\"r\") through node 3's mount: %+v; want a memmap <f4 [3001 2048] sha256 %s", got, sha256Hex(data))
		}
	})

	t.Run("passthrough of objects written through other nodes", func(t *testing.T) {
		// TestMountLocalSocket reads the embedded store of one node; here
		// the objects live in the region's shared NAS store and were
		// written through nodes 2 and 3, and node 1 hands them over.
		want := map[string][]byte{"pt/big.bin": seededBytes(rnd, 12<<20+99)}
		for i := range 12 {
			want[fmt.Sprintf("pt/small%02d.bin", i)] = seededBytes(rnd, 1000+i*5000)
		}
		i := 0
		for k, b := range want {
			put(t, r.nodes[1+i%2].root(), "datasets", k, b)
			i++
		}
		m := startMount(t, n1, rootAK, rootSK, "--local-socket", sockets[0])
		checkPassthrough(t, m, "datasets", want, "pt/big.bin")
		m.stop(t)
	})

	t.Run("torch.save into a write-back bucket, torch.load through another node", func(t *testing.T) {
		path := filepath.Join(m1.dir, "ckpt", "model.pt")
		out, stderr, err := mountScript(t, py, 10*time.Minute, "save", path)
		if err != nil {
			if strings.Contains(stderr, "EROFS") {
				t.Fatalf("torch.save through node 1's mount: the mount is read-only (EROFS): writes through the mount (issue 36) are not in this build\n%s", stderr)
			}
			t.Fatalf("torch.save through node 1's mount: %v\n%s%s", err, out, stderr)
		}
		var saved struct {
			TensorBytes int64 `json:"tensor_bytes"`
			FileBytes   int64 `json:"file_bytes"`
			Seconds     float64
		}
		mustOK(t, json.Unmarshal([]byte(out), &saved))
		t.Logf("torch.save of %d tensor bytes (%d file bytes) through node 1's mount: %.1fs", saved.TensorBytes, saved.FileBytes, saved.Seconds)
		head, err := n3.root().HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("ckpt"), Key: aws.String("model.pt")})
		mustOK(t, err)
		if aws.ToInt64(head.ContentLength) != saved.FileBytes {
			t.Errorf("HEAD ckpt/model.pt through node 3: %d bytes, the file written was %d", aws.ToInt64(head.ContentLength), saved.FileBytes)
		}
		out, stderr, err = mountScript(t, py, 10*time.Minute, "load", filepath.Join(m2.dir, "ckpt", "model.pt"))
		if err != nil {
			t.Fatalf("torch.load through node 2's mount: %v\n%s%s", err, out, stderr)
		}
		t.Logf("torch.load through node 2's mount: %s", strings.TrimSpace(out))
	})

	// Last: it freezes and then kills node 3.
	t.Run("node frozen or killed under a reader", func(t *testing.T) {
		// The mount's --endpoint is one URL (cmd/fedgate/mountcmd.go), so
		// a read cannot go on from another node: what is tested is EIO
		// within the documented deadline, tries × (request-timeout + 2 s).
		const tries, timeout = 2, 3 * time.Second
		deadline := tries * (timeout + 2*time.Second)
		big := map[string][]byte{"big/frozen.bin": seededBytes(rnd, 64<<20+4321), "big/killed.bin": seededBytes(rnd, 64<<20+1234)}
		for k, b := range big {
			put(t, n1.root(), "datasets", k, b)
		}
		faultMount := func(t *testing.T) *fuseMount {
			return startMount(t, n3, rootAK, rootSK, "--request-timeout", timeout.String(), "--tries", fmt.Sprint(tries),
				"--read-ahead", fmt.Sprint(8<<20), "--stat-ttl", ttl.String())
		}
		// failures logs the mount's "read failed" lines, once it has exited.
		failures := func(t *testing.T, m *fuseMount) {
			for _, l := range strings.Split(m.log.String(), "\n") {
				if strings.Contains(l, "read failed") {
					t.Logf("mount: %s", l)
				}
			}
		}

		t.Run("SIGSTOP", func(t *testing.T) {
			m := faultMount(t)
			t.Cleanup(func() { _ = n3.Signal(syscall.SIGCONT) })
			readUnderFault(t, py, m, filepath.Join(m.dir, "datasets/big/frozen.bin"), big["big/frozen.bin"], deadline, func() {
				mustOK(t, n3.Signal(syscall.SIGSTOP))
			})
			mustOK(t, n3.Signal(syscall.SIGCONT))
			// Back, the node serves the mount again: a new open reads it all.
			r.settle(3)
			wait.For(t, 30*time.Second, "big/frozen.bin read whole through the mount after SIGCONT", func() bool {
				got, err := os.ReadFile(filepath.Join(m.dir, "datasets/big/frozen.bin"))
				return err == nil && bytes.Equal(got, big["big/frozen.bin"])
			})
			m.stop(t)
			failures(t, m)
		})
		t.Run("SIGKILL", func(t *testing.T) {
			m := faultMount(t)
			readUnderFault(t, py, m, filepath.Join(m.dir, "datasets/big/killed.bin"), big["big/killed.bin"], deadline, func() {
				n3.stop(syscall.SIGKILL)
			})
			// The mount lives on, and a new call on it ends within the
			// deadline too.
			done := make(chan error, 1)
			start := time.Now()
			go func() { _, err := os.Stat(filepath.Join(m.dir, "datasets/big/never-there")); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOENT) {
					t.Errorf("stat through the mount of the killed node: %v, want EIO or ENOENT", err)
				}
				d := time.Since(start)
				if d > deadline+5*time.Second {
					t.Errorf("stat through the mount of the killed node took %v, the deadline is %v", d, deadline)
				}
				t.Logf("a stat through the mount of the killed node: %v in %v", err, d.Round(time.Millisecond))
			case <-time.After(3 * deadline):
				t.Errorf("stat through the mount of the killed node still waits after %v (deadline %v)", 3*deadline, deadline)
			}
			select {
			case <-m.exited:
				t.Errorf("fedgate mount exited when its node was killed: %v", m.err)
			default:
			}
			m.stop(t)
			failures(t, m)
		})
	})
}

// readUnderFault reads path through the mount with mount_region.py in 1
// MiB calls, applies fault once a quarter of the file is read, and then
// wants every further call to end within deadline (plus 1 s: the waits
// are timeouts, not CPU) with the right bytes or EIO. A reader that does
// not answer within 3 × deadline fails the test with its kernel state.
func readUnderFault(t *testing.T, py string, m *fuseMount, path string, want []byte, deadline time.Duration, fault func()) {
	t.Helper()
	script, err := filepath.Abs("testdata/mount_region.py")
	mustOK(t, err)
	pauseAt := len(want) / 4
	cmd := exec.Command(py, "-u", script, "read", path, fmt.Sprint(pauseAt))
	stdin, err := cmd.StdinPipe()
	mustOK(t, err)
	stdout, err := cmd.StdoutPipe()
	mustOK(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	mustOK(t, cmd.Start())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var last string
	read, faulted := 0, time.Time{}
	limit := 2 * time.Minute // before the fault: a loaded machine's normal read
	for {
		var l string
		var ok bool
		select {
		case l, ok = <-lines:
		case <-time.After(limit):
			t.Fatalf("the reader of %s answered nothing for %v (%v after the fault; documented deadline %v); at %d bytes, its last line %q; its state:\n%s\nstderr: %s",
				path, limit, time.Since(faulted).Round(time.Millisecond), deadline, read, last, procState(cmd.Process.Pid), stderr.String())
		}
		if !ok {
			t.Fatalf("the reader of %s exited without a last line (after %q): %s", path, last, stderr.String())
		}
		last = l
		f := strings.Fields(l)
		switch f[0] {
		case "paused":
			fault()
			faulted = time.Now()
			limit = 3 * deadline
			_, err := io.WriteString(stdin, "go\n")
			mustOK(t, err)
		case "chunk":
			off, _ := strconv.Atoi(f[1])
			n, _ := strconv.Atoi(f[2])
			if off != read || off+n > len(want) || f[3] != sha256Hex(want[off:off+n]) {
				t.Fatalf("the reader got %d bytes at %d that differ from the object (%s)", n, off, l)
			}
			if secs, _ := strconv.ParseFloat(f[4], 64); !faulted.IsZero() && time.Duration(secs*float64(time.Second)) > deadline+time.Second {
				t.Errorf("a read(2) after the fault took %ss, the documented deadline is about %v", f[4], deadline)
			}
			read += n
		case "eof":
			if read != len(want) {
				t.Fatalf("the reader saw EOF at %d of %d bytes", read, len(want))
			}
			t.Logf("the reader got all %d bytes right, the last %v after the fault", read, time.Since(faulted).Round(time.Millisecond))
			return
		case "error":
			secs, _ := strconv.ParseFloat(f[4], 64)
			if faulted.IsZero() {
				t.Fatalf("the read failed before the fault: %s", l)
			}
			if f[2] != "EIO" {
				t.Errorf("the reader got %s, want EIO or the data", l)
			}
			if took := time.Duration(secs * float64(time.Second)); took > deadline+time.Second {
				t.Errorf("the failing read(2) took %v, the documented deadline is about %v (docs/mount.md, Errors: tries × (request-timeout + 2 s))", took, deadline)
			}
			t.Logf("the reader got %d right bytes, then %s (that call %ss; %v after the fault; deadline %v)", read, f[2], f[4],
				time.Since(faulted).Round(time.Millisecond), deadline)
			return
		default:
			t.Fatalf("reader: %q", l)
		}
	}
}
