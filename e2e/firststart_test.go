package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bareServer is `fedgate server` started as an operator would, with none of
// the harness's root keys: its stdout and stderr are kept apart.
type bareServer struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
	Endpoint       string
}

var bareEndpointRE = regexp.MustCompile(`S3 endpoint (http://\S+)`)

// startBare starts `fedgate server ARGS...` without FEDGATE_* variables and
// waits until it serves; it fails the test when the server exits first.
func startBare(t *testing.T, args ...string) *bareServer {
	t.Helper()
	s := spawnBare(t, args...)
	testEndpoint := ""
	wait.For(t, 60*time.Second, "the server's endpoint", func() bool {
		select {
		case <-s.done:
			t.Fatalf("fedgate exited before serving:\nstdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		default:
		}
		if m := bareEndpointRE.FindStringSubmatch(s.stdout.String()); m != nil {
			testEndpoint = m[1]
			return true
		}
		return false
	})
	s.Endpoint = testEndpoint
	wait.For(t, 30*time.Second, "readyz", func() bool {
		resp, err := http.Get(s.Endpoint + "/_fedgate/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s
}

func spawnBare(t *testing.T, args ...string) *bareServer {
	t.Helper()
	s := &bareServer{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, append([]string{"server"}, args...)...)
	s.cmd.Env = withoutFedgateEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	mustOK(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t, syscall.SIGKILL) })
	return s
}

// stop signals the server and waits for it to exit.
func (s *bareServer) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("fedgate did not exit within 60s of %v", sig)
	}
}

// The root secret key goes only to its 0600 file: the first start prints
// the access key id and the file's path, and neither standard output nor
// the log (journald, CI logs) ever carries the secret; a restart prints
// no keys at all.
func TestFirstStartKeepsRootSecretInItsFile(t *testing.T) {
	dd := t.TempDir()
	s := startBare(t, "--listen", "127.0.0.1:0", "--data-dir", dd, "--log-level", "debug")

	file := filepath.Join(dd, "root-credentials.json")
	fi, err := os.Stat(file)
	mustOK(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %#o, want 0600", file, fi.Mode().Perm())
	}
	data, err := os.ReadFile(file)
	mustOK(t, err)
	var creds struct {
		AccessKey string `json:"access_key"`
		SecretKey string `json:"secret_key"`
	}
	mustOK(t, json.Unmarshal(data, &creds))
	if creds.AccessKey == "" || len(creds.SecretKey) < 20 {
		t.Fatalf("%s holds %s", file, data)
	}
	// The keys in the file are root's.
	_, err = clientFor(s.Endpoint, creds.AccessKey, creds.SecretKey).CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("first")})
	mustOK(t, err)

	want := "Generated root credentials: access key " + creds.AccessKey + "; the secret key is in " + file + " (mode 0600"
	if !strings.Contains(s.stdout.String(), want) {
		t.Errorf("stdout:\n%s\nwant %q", s.stdout, want)
	}
	s.stop(t, syscall.SIGTERM)
	for name, out := range map[string]string{"stdout": s.stdout.String(), "stderr": s.stderr.String()} {
		if strings.Contains(out, creds.SecretKey) {
			t.Errorf("the root secret key is on the server's %s:\n%s", name, out)
		}
	}

	// A restart on the same data dir generates nothing and prints no key.
	s2 := startBare(t, "--listen", "127.0.0.1:0", "--data-dir", dd, "--log-level", "debug")
	s2.stop(t, syscall.SIGTERM)
	if out := s2.stdout.String() + s2.stderr.String(); strings.Contains(out, "Generated root credentials") || strings.Contains(out, creds.SecretKey) {
		t.Errorf("the restart printed keys:\n%s", out)
	}
}

// Without --cache-size the cache takes 80% of the free space of its file
// system and says so; a cache dir with less than the 1 GiB floor free is
// refused naming the dir, the space and the flag; an explicit size larger
// than the free space starts with a warning.
func TestCacheSizeFromFreeSpaceAtStart(t *testing.T) {
	dd := t.TempDir()
	s := startBare(t, "--listen", "127.0.0.1:0", "--data-dir", dd, "--access-key", rootAK, "--secret-key", rootSK)
	s.stop(t, syscall.SIGTERM)
	chunks := filepath.Join(dd, "cache", "chunks")
	for _, want := range []string{`"msg":"cache size from free space: `, `% of `, ` free plus 0 B held on ` + chunks + ` (set --cache-size to choose)"`,
		`"msg":"staging size from free space: `} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("log:\n%s\nwant %q", s.stderr, want)
		}
	}

	needRoot(t)
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount a 64 MiB tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", small).Run() })
	r := spawnBare(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--cache-dir", small, "--access-key", rootAK, "--secret-key", rootSK)
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatal("a node whose cache dir has 64 MiB free did not exit within 60s")
	}
	if code := r.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit code 0 for a cache dir below the floor")
	}
	for _, want := range []string{"--cache-dir " + filepath.Join(small, "chunks") + ": only ", " MiB free on its file system", "below the 1.00 GiB", "give --cache-size explicitly"} {
		if !strings.Contains(r.stderr.String(), want) {
			t.Errorf("refusal:\n%s\nwant %q", r.stderr, want)
		}
	}

	w := startBare(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--cache-dir", small, "--cache-size", "1GiB", "--staging-size", "16MiB",
		"--access-key", rootAK, "--secret-key", rootSK)
	w.stop(t, syscall.SIGTERM)
	if !strings.Contains(w.stderr.String(), `"level":"WARN","msg":"--cache-size 1.00 GiB is more than the `) {
		t.Errorf("log of --cache-size 1GiB on a 64 MiB disk:\n%s\nwant a WARN", w.stderr)
	}
}
