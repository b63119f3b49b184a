package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// The mount benchmarks of issue 36 (docs/benchmarks.md, "fedgate mount"):
// `fedgate mount` next to its peers in one run, on the same warm data on
// the same disk.
//
// "Warm" is the same for every peer: nothing drops the kernel's caches
// (no drop_caches): the server's files, the plain files and the loopback's
// directory stay in the page cache, read once before any timed pass. Each
// FUSE file system is then measured twice per round:
//   - "as left": its own caches as its previous pass left them (fedgate
//     keeps the page cache across opens while the ETag is unchanged,
//     rclone's --vfs-cache-mode full keeps files on disk, s3fs keeps only
//     its stat cache);
//   - "through the daemon": before the pass, the FUSE file's own page
//     cache is dropped with posix_fadvise(DONTNEED) on each file through
//     the mount (untimed), so every read is served by the file system's
//     process (fedgate's fuse read counter shows it), while the bytes
//     behind it stay warm.
//
// Sizes can be shrunk for a quick run: FEDGATE_BENCH_MOUNT_BIG (bytes of
// the sequential file, 1 GiB), FEDGATE_BENCH_MOUNT_FILES (small files,
// 10,000), FEDGATE_BENCH_MOUNT_TREE (files for find, 100,000),
// FEDGATE_BENCH_MOUNT_WRITE (bytes of the checkpoint, 4 GiB).
// FEDGATE_BENCH_PPROF_DIR=dir saves CPU profiles of the fedgate mount
// daemon (over S3) during its first timed big-file and small-file passes.

const (
	smallSize   = 128 << 10
	readers     = 8
	treePerDir  = 1000
	treeFileLen = 16
)

// needTool returns path when it is executable; otherwise it skips (fails
// under CI) naming the Debian package that installs it.
func needTool(b *testing.B, path, pkg string) string {
	b.Helper()
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		unavailableTool(b, path+" is not installed (Debian package "+pkg+")", "scripts/install-test-deps.sh")
	}
	return path
}

func unavailableTool(b *testing.B, msg, hint string) {
	b.Helper()
	if os.Getenv("CI") != "" {
		b.Fatalf("%s (CI is set, so this fails instead of skipping; %s)", msg, hint)
	}
	b.Skipf("%s; %s", msg, hint)
}

// procMount is a file system served by a child process (fedgate mount,
// rclone mount, s3fs -f).
type procMount struct {
	name, dir string
	cmd       *exec.Cmd
	log       *bytes.Buffer
	exited    chan struct{}
	err       error
}

// startProcMount starts cmd, which mounts dir, and waits until dir is a
// mount point. ok false (with the log) when the process exits first. The
// cleanup stops the process and detaches the mount.
func startProcMount(b *testing.B, name, dir string, cmd *exec.Cmd) (*procMount, bool) {
	b.Helper()
	m := &procMount{name: name, dir: dir, cmd: cmd, log: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = m.log, m.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	go func() { m.err = cmd.Wait(); close(m.exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-m.exited
		}
		if testenv.Mounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if b.Failed() {
			b.Logf("%s log:\n%s", name, tail(m.log.String(), 4000))
		}
	})
	exited := false
	err := wait.Until(context.Background(), 60*time.Second, func() bool {
		select {
		case <-m.exited:
			exited = true
			return true
		default:
		}
		return testenv.Mounted(dir)
	})
	if exited {
		return m, false
	}
	if err != nil {
		b.Fatalf("%s: %s not mounted after 60s:\n%s", name, dir, m.log.String())
	}
	return m, true
}

// startFedgateMount runs `fedgate mount` of every bucket of endpoint with
// the root keys in the environment (as the aws CLI finds them).
func startFedgateMount(b *testing.B, name, endpoint string, args ...string) (*procMount, string, bool) {
	b.Helper()
	dir := b.TempDir()
	debug := freeAddrs(b, 1)[0]
	all := append([]string{"mount", "--endpoint", endpoint, "--debug-listen", debug, "--log-format", "text"}, args...)
	cmd := exec.Command(binary, append(all, dir)...)
	home := b.TempDir()
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+testserver.RootAccessKey, "AWS_SECRET_ACCESS_KEY="+testserver.RootSecretKey,
		"AWS_CONFIG_FILE="+filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=", "AWS_SESSION_TOKEN=")
	m, ok := startProcMount(b, name, dir, cmd)
	return m, debug, ok
}

// startRclone runs `rclone mount --vfs-cache-mode full` of every bucket of
// endpoint: an S3 remote of provider Other, path-style, us-east-1, from
// environment variables, everything else rclone's default.
func startRclone(b *testing.B, rclone, endpoint string) *procMount {
	b.Helper()
	dir, cache := b.TempDir(), b.TempDir()
	cmd := exec.Command(rclone, "mount", "fg:", dir, "--vfs-cache-mode", "full", "--cache-dir", cache)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") && !strings.HasPrefix(kv, "RCLONE_") { // AWS_CA_BUNDLE breaks rclone 1.60
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "RCLONE_CONFIG=/dev/null", "RCLONE_CONFIG_FG_TYPE=s3", "RCLONE_CONFIG_FG_PROVIDER=Other",
		"RCLONE_CONFIG_FG_ACCESS_KEY_ID="+testserver.RootAccessKey, "RCLONE_CONFIG_FG_SECRET_ACCESS_KEY="+testserver.RootSecretKey,
		"RCLONE_CONFIG_FG_ENDPOINT="+endpoint, "RCLONE_CONFIG_FG_REGION=us-east-1", "RCLONE_CONFIG_FG_FORCE_PATH_STYLE=true")
	m, ok := startProcMount(b, "rclone mount", dir, cmd)
	if !ok {
		b.Fatalf("rclone mount exited: %v\n%s", m.err, m.log.String())
	}
	return m
}

// startS3fs runs s3fs (in the foreground, so its process is known) for one
// bucket of endpoint: path-style requests, a passwd file of mode 0600,
// everything else s3fs's default.
func startS3fs(b *testing.B, s3fs, endpoint, bucket string) *procMount {
	b.Helper()
	dir := b.TempDir()
	pw := filepath.Join(b.TempDir(), "passwd-s3fs")
	if err := os.WriteFile(pw, []byte(testserver.RootAccessKey+":"+testserver.RootSecretKey+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(s3fs, bucket, dir, "-f", "-o", "passwd_file="+pw, "-o", "url="+endpoint,
		"-o", "use_path_request_style", "-o", "endpoint=us-east-1")
	m, ok := startProcMount(b, "s3fs", dir, cmd)
	if !ok {
		b.Fatalf("s3fs exited: %v\n%s", m.err, m.log.String())
	}
	return m
}

// startLoopback mounts dir through go-fuse's loopback file system in this
// process: every call goes through FUSE and a Go daemon that does nothing
// but the same call on dir, the bound of any FUSE file system here.
func startLoopback(b *testing.B, dir string) string {
	b.Helper()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	mnt := b.TempDir()
	sec := time.Second // fedgate's default --stat-ttl
	srv, err := fs.Mount(mnt, root, &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMount: true, DirectMountStrict: true, FsName: "loopback", Name: "loopback"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return mnt
}

// cpuOf sums the CPU seconds of this process (the client, and the
// loopback daemon when it runs here) and of pids.
func cpuOf(pids []int) float64 {
	c := selfCPU()
	for _, p := range pids {
		c += procCPU(p)
	}
	return c
}

// fuseReads is a fedgate mount's fedgate_mount_fuse_reads_total.
func fuseReads(debug string) float64 {
	if debug == "" {
		return 0
	}
	resp, err := http.Get("http://" + debug + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "fedgate_mount_fuse_reads_total") {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			sum += v
		}
	}
	return sum
}

// dropFUSECache drops the page cache of each file through a FUSE mount
// (posix_fadvise DONTNEED on the FUSE inode): the next read goes to the
// daemon. The bytes behind the mount stay in the page cache.
func dropFUSECache(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// profileMount saves a CPU profile of seconds of a fedgate mount daemon.
func profileMount(debug, dir, name string, seconds int, wg *sync.WaitGroup) {
	if dir == "" || debug == "" {
		return
	}
	wg.Go(func() {
		n := &regionNode{id: name, debug: debug}
		if err := n.profileCPU(context.Background(), dir, seconds, name+".pprof"); err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		}
	})
}

// mountPeer is one way to read the files: a directory (plain or a mount)
// and the processes that serve it.
type mountPeer struct {
	name  string
	root  string // the directory holding data/ and meta/ (the buckets)
	pids  []int  // processes whose CPU counts, besides this one
	fuse  bool   // a FUSE mount: also measured with its page cache dropped
	debug string // a fedgate mount's --debug-listen
}

type mountResult struct {
	rate, cpuPerGiB []float64 // per round
	daemonReads     float64   // fedgate's fuse reads in the timed passes
}

func (r *mountResult) add(rate, cpuPerGiB float64) {
	r.rate = append(r.rate, rate)
	r.cpuPerGiB = append(r.cpuPerGiB, cpuPerGiB)
}

// smallContent is small file i's bytes: a window of block.
func smallContent(block []byte, i int) []byte {
	off := (i * 4099) % (len(block) - smallSize)
	return block[off : off+smallSize]
}

func smallKey(i int) string { return fmt.Sprintf("small/c%02d/f%05d.bin", i%10, i) }

// BenchmarkMountRead: issue 36's read benchmarks of `fedgate mount` (over
// S3 and with the node's --local-socket, FUSE passthrough) against plain
// local files, a go-fuse loopback mount of them, `rclone mount
// --vfs-cache-mode full` and s3fs over the same fedgate endpoint:
//   - a 1 GiB file read sequentially (1 MiB reads);
//   - 10,000 files of 128 KiB read in random order by 8 readers (open,
//     read all, close);
//   - `find -type f -printf '%s'` (a stat of each) over 100,000 files.
//
// Each prints throughput and CPU seconds per GiB (or per 100k files) of
// client + file system daemon + fedgate server. Run with -benchtime 1x.
func BenchmarkMountRead(b *testing.B) {
	testenv.FUSE(b)
	rclone := needTool(b, "/usr/bin/rclone", "rclone")
	s3fsBin := needTool(b, "/usr/bin/s3fs", "s3fs")
	needTool(b, "/usr/bin/fusermount3", "fuse3") // rclone mount mounts through it
	bigSize := envInt(b, "FEDGATE_BENCH_MOUNT_BIG", 1<<30)
	nSmall := int(envInt(b, "FEDGATE_BENCH_MOUNT_FILES", 10000))
	nTree := int(envInt(b, "FEDGATE_BENCH_MOUNT_TREE", 100000))
	profDir := os.Getenv(pprofEnv)
	ctx := context.Background()

	// The data: plain files in plain/ (data/big.bin, data/small/...), the
	// same bytes PUT into the bucket data of fedgate's embedded posix store
	// (so --local-socket hands over the store's file: passthrough), and
	// the find tree as plain files in tree/meta/, which is the bucket meta
	// (an fs store of that directory, through the region cache).
	block := make([]byte, 1<<20)
	copy(block, bytes.Repeat([]byte("fedgate mount benchmark "), len(block)/24+1))
	rnd := rand.New(rand.NewPCG(36, 36))
	for i := 0; i < len(block); i += 8 { // not compressible, not all equal
		v := rnd.Uint64()
		for j := 0; j < 8 && i+j < len(block); j++ {
			block[i+j] ^= byte(v >> (8 * j))
		}
	}
	plain := b.TempDir()
	tree := b.TempDir()
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(plain, "data"), 0o755); err != nil {
		b.Fatal(err)
	}
	writeRepeat := func(path string, size int64) {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyN(f, &cycle{b: block}, size); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	writeRepeat(filepath.Join(plain, "data/big.bin"), bigSize)
	for i := range nSmall {
		p := filepath.Join(plain, "data", smallKey(i))
		if i < 10 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, smallContent(block, i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := range nTree {
		p := filepath.Join(tree, "meta", fmt.Sprintf("d%03d/f%05d", i/treePerDir, i))
		if i%treePerDir == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("%0*d", treeFileLen, i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("plain files written in %v", time.Since(start).Round(time.Millisecond))

	policy := "regions:\n  - {name: bench, location: onprem:lab}\nstores:\n  - {name: tree, kind: fs, location: onprem:lab, path: " + filepath.Join(tree, "meta") + ", read_only: true}\n" +
		"buckets:\n  - {name: meta, origin: tree, cache: {ttl: 1h}}\n"
	pf := filepath.Join(b.TempDir(), "policy.yaml")
	if err := os.WriteFile(pf, []byte(policy), 0o644); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "s3.sock")
	fg := testserver.Start(b, binary, b.TempDir(), "--config", pf, "--local-socket", sock)
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(fg.Endpoint), UsePathStyle: true, Credentials: staticCredentials(),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware}})
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("big.bin"),
		Body: io.LimitReader(&cycle{b: block}, bigSize), ContentLength: aws.Int64(bigSize)}); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var putErr atomic.Value
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < nSmall; i = int(next.Add(1)) - 1 {
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(smallKey(i)),
					Body: bytes.NewReader(smallContent(block, i))}); err != nil {
					putErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := putErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.Logf("objects PUT in %v", time.Since(start).Round(time.Millisecond))

	// The peers, each mounted once.
	fgS3, fgS3Debug, ok := startFedgateMount(b, "fedgate mount", fg.Endpoint)
	if !ok {
		b.Fatalf("fedgate mount exited: %v\n%s", fgS3.err, fgS3.log.String())
	}
	fgLocal, fgLocalDebug, ok := startFedgateMount(b, "fedgate mount --local-socket", fg.Endpoint, "--local-socket", sock)
	if !ok {
		b.Fatalf("fedgate mount --local-socket exited: %v\n%s", fgLocal.err, fgLocal.log.String())
	}
	fgTTL, fgTTLDebug, ok := startFedgateMount(b, "fedgate mount --stat-ttl 5m", fg.Endpoint, "--stat-ttl", "5m")
	if !ok {
		b.Fatalf("fedgate mount --stat-ttl 5m exited: %v\n%s", fgTTL.err, fgTTL.log.String())
	}
	rc := startRclone(b, rclone, fg.Endpoint)
	s3fsM := startS3fs(b, s3fsBin, fg.Endpoint, "data")
	loop := startLoopback(b, plain)
	// s3fs mounts one bucket: its root is data/; give it a parent whose
	// data/ is that mount.
	s3fsRoot := b.TempDir()
	if err := os.Symlink(s3fsM.dir, filepath.Join(s3fsRoot, "data")); err != nil {
		b.Fatal(err)
	}
	server := fg.Pid()
	peerPlain := mountPeer{name: "plain local files", root: plain}
	peerLoop := mountPeer{name: "loopback FUSE (go-fuse, in this process)", root: loop, fuse: true}
	peerS3 := mountPeer{name: "fedgate mount (over S3)", root: fgS3.dir, pids: []int{fgS3.cmd.Process.Pid, server}, fuse: true, debug: fgS3Debug}
	peerLocal := mountPeer{name: "fedgate mount --local-socket", root: fgLocal.dir, pids: []int{fgLocal.cmd.Process.Pid, server}, fuse: true, debug: fgLocalDebug}
	peerTTL := mountPeer{name: "fedgate mount --stat-ttl 5m", root: fgTTL.dir, pids: []int{fgTTL.cmd.Process.Pid, server}, fuse: true, debug: fgTTLDebug}
	peerRclone := mountPeer{name: "rclone mount --vfs-cache-mode full", root: rc.dir, pids: []int{rc.cmd.Process.Pid, server}, fuse: true}
	peerS3fs := mountPeer{name: "s3fs", root: s3fsRoot, pids: []int{s3fsM.cmd.Process.Pid, server}, fuse: true}
	rounds := *rounds

	for range b.N {
		var out strings.Builder
		fmt.Fprintf(&out, "BenchmarkMountRead: %d rounds; warm: no drop_caches, every byte read once before the timed passes; "+
			"\"as left\" = each file system's caches as its previous pass left them, \"daemon\" = the FUSE page cache of each file dropped "+
			"(fadvise DONTNEED, untimed) before the pass\n", rounds)

		// 1. One big file, sequential.
		bigPeers := []mountPeer{peerPlain, peerLoop, peerS3, peerLocal}
		bigPath := func(p mountPeer) string { return filepath.Join(p.root, "data/big.bin") }
		for _, p := range bigPeers { // warm-up and check every byte
			if err := readBig(bigPath(p), bigSize, block, true); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
		type key struct {
			peer string
			mode string
		}
		bigRes := map[key]*mountResult{}
		var order []key
		for round := range rounds {
			for _, p := range bigPeers {
				modes := []string{"as left"}
				if p.fuse {
					modes = append(modes, "daemon")
				}
				for _, mode := range modes {
					k := key{p.name, mode}
					if bigRes[k] == nil {
						bigRes[k] = &mountResult{}
						order = append(order, k)
					}
					if mode == "daemon" {
						if err := dropFUSECache([]string{bigPath(p)}); err != nil {
							b.Fatal(err)
						}
					}
					var prof sync.WaitGroup
					if round == 0 && p.name == peerS3.name {
						profileMount(p.debug, profDir, "mount-big-"+strings.ReplaceAll(mode, " ", "-"), 3, &prof)
					}
					r0, c0, t0 := fuseReads(p.debug), cpuOf(p.pids), time.Now()
					if err := readBig(bigPath(p), bigSize, block, false); err != nil {
						b.Fatalf("%s: %v", p.name, err)
					}
					el := time.Since(t0).Seconds()
					cpu := cpuOf(p.pids) - c0
					bigRes[k].daemonReads += fuseReads(p.debug) - r0
					bigRes[k].add(float64(bigSize)/el/1e6, cpu/(float64(bigSize)/(1<<30)))
					prof.Wait()
				}
			}
		}
		base := median(bigRes[key{peerPlain.name, "as left"}].rate)
		fmt.Fprintf(&out, "\n1. a %d MiB file read sequentially (1 MiB reads), one reader\n\n| peer | cache | MB/s: median (rounds) | CPU s/GiB client+daemon+server: median | fedgate FUSE reads | /plain (target fedgate >= 0.9) |\n|---|---|---|---|---|---|\n", bigSize>>20)
		for _, k := range order {
			r := bigRes[k]
			fmt.Fprintf(&out, "| %s | %s | %.0f (%s) | %.3f | %s | %.2f |\n", k.peer, k.mode, median(r.rate), spread(r.rate), median(r.cpuPerGiB), readsCol(r, k.peer), median(r.rate)/base)
		}

		// 2. Small files, 8 readers, random order.
		// peerTTL: fedgate with a stat TTL of rclone mount's default directory
		// cache time (5 min), the setting docs/mount.md gives for datasets
		// that do not change.
		smallPeers := []mountPeer{peerPlain, peerLoop, peerS3, peerTTL, peerLocal, peerRclone, peerS3fs}
		smallPaths := func(p mountPeer) []string {
			ps := make([]string, nSmall)
			for i := range ps {
				ps[i] = filepath.Join(p.root, "data", smallKey(i))
			}
			return ps
		}
		for _, p := range smallPeers { // warm-up (rclone fills its cache) and check every byte
			t0 := time.Now()
			if err := readSmall(smallPaths(p), rand.New(rand.NewPCG(0, 0)).Perm(nSmall), block); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			b.Logf("small files, first pass through %s: %.1fs", p.name, time.Since(t0).Seconds())
		}
		smallRes := map[key]*mountResult{}
		order = nil
		gib := float64(nSmall) * smallSize / (1 << 30)
		for round := range rounds {
			perm := rand.New(rand.NewPCG(uint64(round)+1, 0)).Perm(nSmall) // the same order for every peer in a round
			for _, p := range smallPeers {
				paths := smallPaths(p)
				modes := []string{"as left"}
				if p.fuse {
					modes = append(modes, "daemon")
				}
				for _, mode := range modes {
					k := key{p.name, mode}
					if smallRes[k] == nil {
						smallRes[k] = &mountResult{}
						order = append(order, k)
					}
					if mode == "daemon" {
						if err := dropFUSECache(paths); err != nil {
							b.Fatal(err)
						}
					}
					var prof sync.WaitGroup
					if round == 0 && p.name == peerS3.name {
						profileMount(p.debug, profDir, "mount-small-"+strings.ReplaceAll(mode, " ", "-"), 3, &prof)
					}
					r0, c0, t0 := fuseReads(p.debug), cpuOf(p.pids), time.Now()
					if err := readSmall(paths, perm, nil); err != nil {
						b.Fatalf("%s: %v", p.name, err)
					}
					el := time.Since(t0).Seconds()
					cpu := cpuOf(p.pids) - c0
					smallRes[k].daemonReads += fuseReads(p.debug) - r0
					smallRes[k].add(float64(nSmall)/el, cpu/gib)
					prof.Wait()
				}
			}
		}
		base = median(smallRes[key{peerPlain.name, "as left"}].rate)
		fmt.Fprintf(&out, "\n2. %d files of 128 KiB in 10 directories, read in random order by %d readers (open, read all, close)\n\n"+
			"| peer | cache | files/s: median (rounds) | MB/s | CPU s/GiB client+daemon+server: median | fedgate FUSE reads | /plain (target fedgate >= 0.5) |\n|---|---|---|---|---|---|---|\n", nSmall, readers)
		for _, k := range order {
			r := smallRes[k]
			fmt.Fprintf(&out, "| %s | %s | %.0f (%s) | %.0f | %.3f | %s | %.2f |\n", k.peer, k.mode, median(r.rate), spread(r.rate),
				median(r.rate)*smallSize/1e6, median(r.cpuPerGiB), readsCol(r, k.peer), median(r.rate)/base)
		}
		for _, mode := range []string{"as left", "daemon"} {
			f := median(smallRes[key{peerS3.name, mode}].rate)
			fl := median(smallRes[key{peerLocal.name, mode}].rate)
			rcl := median(smallRes[key{peerRclone.name, mode}].rate)
			s3 := median(smallRes[key{peerS3fs.name, mode}].rate)
			lb := median(smallRes[key{peerLoop.name, mode}].rate)
			ft := median(smallRes[key{peerTTL.name, mode}].rate)
			fmt.Fprintf(&out, "\n%s: fedgate (S3)/rclone %.2f, /s3fs %.2f, /loopback %.2f; fedgate --local-socket/rclone %.2f, /s3fs %.2f, /loopback %.2f ; fedgate --stat-ttl 5m/rclone %.2f, /s3fs %.2f, /plain %.2f (targets: >= 2 vs rclone and s3fs, >= 0.5 of plain)",
				mode, f/rcl, f/s3, f/lb, fl/rcl, fl/s3, fl/lb, ft/rcl, ft/s3, ft/base)
		}
		fmt.Fprintln(&out)

		// 3. find with a stat of every file.
		findPeers := []mountPeer{{name: "plain local files", root: tree}, peerS3, peerTTL, peerRclone}
		findRes := map[key]*mountResult{}
		order = nil
		for round := range rounds + 1 {
			for _, p := range findPeers {
				mode := "warm"
				if round == 0 {
					mode = "first walk"
				}
				k := key{p.name, mode}
				if findRes[k] == nil {
					findRes[k] = &mountResult{}
					order = append(order, k)
				}
				var prof sync.WaitGroup
				if round <= 1 && p.name == peerS3.name {
					profileMount(p.debug, profDir, "mount-find-"+strings.ReplaceAll(mode, " ", "-"), 3, &prof)
				}
				c0, t0 := cpuOf(p.pids), time.Now()
				child, err := runFind(filepath.Join(p.root, "meta"), nTree)
				if err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				el := time.Since(t0).Seconds()
				cpu := cpuOf(p.pids) - c0 + child
				findRes[k].add(float64(nTree)/el, cpu/(float64(nTree)/1e5))
				prof.Wait()
			}
		}
		fmt.Fprintf(&out, "\n3. find -type f -printf '%%s' (one stat each) over %d files in %d directories\n\n"+
			"| peer | pass | files/s: median (rounds) | CPU s per 100k files, find+daemon+server: median |\n|---|---|---|---|\n", nTree, (nTree+treePerDir-1)/treePerDir)
		for _, k := range order {
			r := findRes[k]
			fmt.Fprintf(&out, "| %s | %s | %.0f (%s) | %.3f |\n", k.peer, k.mode, median(r.rate), spread(r.rate), median(r.cpuPerGiB))
		}
		for _, mode := range []string{"first walk", "warm"} {
			rcl := median(findRes[key{peerRclone.name, mode}].rate)
			fmt.Fprintf(&out, "\n%s: fedgate mount/rclone mount %.2f; fedgate --stat-ttl 5m/rclone %.2f (target >= 2)", mode,
				median(findRes[key{peerS3.name, mode}].rate)/rcl, median(findRes[key{peerTTL.name, mode}].rate)/rcl)
		}
		fmt.Fprintln(&out)
		resultsMu.Lock()
		notes = append(notes, out.String())
		resultsMu.Unlock()
	}
}

func readsCol(r *mountResult, peer string) string {
	if !strings.HasPrefix(peer, "fedgate") {
		return "-"
	}
	return fmt.Sprintf("%.0f", r.daemonReads)
}

// readBig reads path sequentially in 1 MiB reads; check compares every
// byte with the repeating block.
func readBig(path string, size int64, block []byte, check bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, len(block))
	var off int64
	for {
		n, err := io.ReadFull(f, buf)
		if check && !bytes.Equal(buf[:n], block[:n]) {
			return fmt.Errorf("%s: bytes at %d differ", path, off)
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if off != size {
		return fmt.Errorf("%s: read %d bytes, want %d", path, off, size)
	}
	return nil
}

// readSmall reads the files in perm's order with 8 readers: open, read
// all, close. With block, each file's bytes are checked.
func readSmall(paths []string, perm []int, block []byte) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range readers {
		wg.Go(func() {
			buf := make([]byte, smallSize+1)
			for j := int(next.Add(1)) - 1; j < len(perm); j = int(next.Add(1)) - 1 {
				i := perm[j]
				f, err := os.Open(paths[i])
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				n, err := io.ReadFull(f, buf)
				f.Close()
				if err != io.ErrUnexpectedEOF || n != smallSize {
					first.CompareAndSwap(nil, fmt.Errorf("%s: %d bytes, %v", paths[i], n, err))
					return
				}
				if block != nil && !bytes.Equal(buf[:n], smallContent(block, i)) {
					first.CompareAndSwap(nil, fmt.Errorf("%s: bytes differ", paths[i]))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// runFind runs find over dir with one stat per file (%s) and checks it saw
// want files of treeFileLen bytes; it returns find's CPU seconds.
func runFind(dir string, want int) (float64, error) {
	cmd := exec.Command("find", dir, "-type", "f", "-printf", "%s\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	n, sum := 0, 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var s int
		fmt.Sscan(sc.Text(), &s)
		n++
		sum += s
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("find %s: %v: %s", dir, err, stderr.String())
	}
	if n != want || sum != want*treeFileLen {
		return 0, fmt.Errorf("find %s: %d files, %d bytes; want %d files of %d bytes", dir, n, sum, want, treeFileLen)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), nil
}

// BenchmarkMountWrite: a 4 GiB checkpoint written sequentially (1 MiB
// writes, then close) through `fedgate mount` into the write-back bucket
// ckpt of a 3-node region, against a write-back PUT of the same bytes by
// aws-sdk-go-v2 (one PutObject, UNSIGNED-PAYLOAD, through the same node).
// Each is acknowledged when durable (close returns / the PUT answers); the
// benchmark waits for the drain between them. While the mount refuses
// writes (EROFS), it reports "skipped: the mount is read-only".
func BenchmarkMountWrite(b *testing.B) {
	testenv.FUSE(b)
	size := envInt(b, "FEDGATE_BENCH_MOUNT_WRITE", 4<<30)
	r := startRegion(b, regionOptions{args: []string{"--staging-size", "12GiB"}})
	leader := r.leader(b)
	node := 0
	for i, n := range r.nodes {
		if n.id == leader {
			node = i
		}
	}
	ep := r.nodes[node].Endpoint
	// A mount that writes: --read-only=false, or the default where that
	// flag is refused (a version whose mount is read-only says so there).
	m, _, ok := startFedgateMount(b, "fedgate mount --read-only=false", ep, "--read-only=false")
	if !ok {
		refused := strings.TrimSpace(tail(m.log.String(), 400))
		if m, _, ok = startFedgateMount(b, "fedgate mount", ep); !ok {
			b.Fatalf("fedgate mount exited: %v\n%s", m.err, m.log.String())
		}
		b.Logf("--read-only=false refused (%s); probing the default mount", refused)
	}
	probe := filepath.Join(m.dir, "ckpt", "probe")
	if err := os.WriteFile(probe, []byte("x"), 0o644); err != nil {
		if errors.Is(err, syscall.EROFS) {
			// In the summary too: go test prints a benchmark's skip only with -v.
			msg := fmt.Sprintf("BenchmarkMountWrite: skipped: the mount is read-only (creating %s: %v)", probe, err)
			resultsMu.Lock()
			notes = append(notes, msg)
			resultsMu.Unlock()
			b.Skip(msg)
		}
		b.Fatalf("write through the mount: %v", err)
	}
	_ = os.Remove(probe)
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i>>8)
	}
	ctx := context.Background()
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep), UsePathStyle: true, Credentials: staticCredentials(),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware},
		HTTPClient:                 &http.Client{Transport: &http.Transport{DisableCompression: true}}})
	pids := []int{m.cmd.Process.Pid}
	for _, n := range r.nodes {
		pids = append(pids, n.Pid())
	}
	var mountRes, sdkRes mountResult
	gib := float64(size) / (1 << 30)
	for range b.N {
		for round := range *rounds {
			key := fmt.Sprintf("ckpt-%d.pt", round)
			// Through the mount: create, 1 MiB writes, close.
			c0, t0 := cpuOf(pids), time.Now()
			f, err := os.OpenFile(filepath.Join(m.dir, "ckpt", key), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(onlyWriter{f}, io.LimitReader(&cycle{b: block}, size), make([]byte, 1<<20)); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatalf("close of the checkpoint: %v", err)
			}
			mountRes.add(float64(size)/time.Since(t0).Seconds()/1e6, (cpuOf(pids)-c0)/gib)
			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(key)})
			if err != nil || aws.ToInt64(head.ContentLength) != size {
				b.Fatalf("the checkpoint written through the mount: %v, %d bytes", err, aws.ToInt64(head.ContentLength))
			}
			r.waitDrained(b, 30*time.Minute)
			// The same bytes by aws-sdk-go-v2.
			c0, t0 = cpuOf(pids), time.Now()
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String("sdk-" + key),
				Body: io.LimitReader(&cycle{b: block}, size), ContentLength: aws.Int64(size)}); err != nil {
				b.Fatal(err)
			}
			sdkRes.add(float64(size)/time.Since(t0).Seconds()/1e6, (cpuOf(pids)-c0)/gib)
			r.waitDrained(b, 30*time.Minute)
			for _, k := range []string{key, "sdk-" + key} {
				if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ckpt"), Key: aws.String(k)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	ratios := make([]float64, len(mountRes.rate))
	for i := range ratios {
		ratios[i] = mountRes.rate[i] / sdkRes.rate[i]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "BenchmarkMountWrite: a %d MiB checkpoint into the write-back bucket ckpt of a 3-node region (through the leader), %d rounds\n\n"+
		"| way | MB/s: median (rounds) | CPU s/GiB client+mount+3 nodes: median |\n|---|---|---|\n", size>>20, len(ratios))
	fmt.Fprintf(&out, "| fedgate mount: create, 1 MiB writes, close | %.0f (%s) | %.3f |\n", median(mountRes.rate), spread(mountRes.rate), median(mountRes.cpuPerGiB))
	fmt.Fprintf(&out, "| aws-sdk-go-v2 PutObject | %.0f (%s) | %.3f |\n", median(sdkRes.rate), spread(sdkRes.rate), median(sdkRes.cpuPerGiB))
	fmt.Fprintf(&out, "\nmount/SDK PUT: %.2f (%s) (target >= 0.8)\n", median(ratios), spread(ratios))
	resultsMu.Lock()
	notes = append(notes, out.String())
	resultsMu.Unlock()
}

// cycle yields its block over and over, continuing where the last Read
// stopped: byte i of the stream is b[i % len(b)].
type cycle struct {
	b   []byte
	off int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.b[c.off:])
		n += k
		c.off = (c.off + k) % len(c.b)
	}
	return n, nil
}

// onlyWriter hides os.File's ReadFrom, so io.CopyBuffer makes plain 1 MiB
// write calls (as torch.save's file object does), not copy_file_range.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
