// Package testserver builds the fedgate binary and runs it as a separate
// process on a free loopback port, for end-to-end tests and benchmarks.
package testserver

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// Root credentials every test server starts with.
const (
	RootAccessKey = "ROOTACCESSKEY1234567"
	RootSecretKey = "root-secret-key-0123456789abcdefghijklm"
)

// Build compiles ./cmd/fedgate into dir and returns the binary's path.
func Build(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "fedgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fedgate")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building fedgate: %w", err)
	}
	return bin, nil
}

// Process is one running fedgate server.
type Process struct {
	Binary   string
	DataDir  string
	Endpoint string
	Args     []string
	cmd      *exec.Cmd
	done     chan struct{}
	found    chan string // the endpoint, once printed
	mu       sync.Mutex  // guards stdout
	stdout   strings.Builder
}

var endpointRE = regexp.MustCompile(`S3 endpoint (https?://\S+)`)

// Start runs `fedgate server` on 127.0.0.1:0 with the root credentials and
// dataDir, plus args, and waits until /_fedgate/readyz answers 200. The
// process is killed when the test ends.
func Start(tb testing.TB, binary, dataDir string, args ...string) *Process {
	tb.Helper()
	p := &Process{Binary: binary, DataDir: dataDir, Args: args}
	p.Launch(tb)
	tb.Cleanup(func() { p.Stop(syscall.SIGKILL) })
	return p
}

// Spawn starts `fedgate server` like Start but returns without waiting for
// it to serve: call WaitReady. Nodes of one multi-node region must all run
// before any of them is ready. The process is killed when the test ends.
func Spawn(tb testing.TB, binary, dataDir string, args ...string) *Process {
	tb.Helper()
	p := &Process{Binary: binary, DataDir: dataDir, Args: args}
	p.spawn(tb)
	tb.Cleanup(func() { p.Stop(syscall.SIGKILL) })
	return p
}

// Launch starts the process (again) on the same data dir (and a new port,
// unless Args give --listen) and waits until it serves.
func (p *Process) Launch(tb testing.TB) {
	tb.Helper()
	p.spawn(tb)
	p.WaitReady(tb)
}

func (p *Process) spawn(tb testing.TB) {
	tb.Helper()
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", p.DataDir,
		"--access-key", RootAccessKey, "--secret-key", RootSecretKey, "--log-level", "warn"}, p.Args...)
	cmd := exec.Command(p.Binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(p.DataDir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	found := make(chan string, 1)
	p.found = found
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := endpointRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
}

// WaitReady waits until the process has printed its endpoint and
// /_fedgate/readyz answers 200.
func (p *Process) WaitReady(tb testing.TB) {
	tb.Helper()
	select {
	case p.Endpoint = <-p.found:
	case <-p.done:
		log, _ := os.ReadFile(filepath.Join(p.DataDir, "server.log"))
		tb.Fatalf("fedgate exited before serving:\n%s", log)
	case <-time.After(60 * time.Second):
		tb.Fatal("fedgate did not print its endpoint within 60s")
	}
	c := http.DefaultClient
	if strings.HasPrefix(p.Endpoint, "https://") {
		// A server with --cert-file: this only waits until it serves;
		// the tests check its certificate with the CA they made.
		c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		defer c.CloseIdleConnections()
	}
	wait.For(tb, 30*time.Second, "readyz", func() bool {
		resp, err := c.Get(p.Endpoint + "/_fedgate/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the process's exit status once it has ended.
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Stop sends sig and waits for the process to exit (killing it after 90s).
func (p *Process) Stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil || p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Log returns what the server wrote to stderr so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.DataDir, "server.log"))
	return string(b)
}

// PeakRSS returns the process's peak resident set size in bytes (VmHWM).
func (p *Process) PeakRSS() (int64, error) {
	return procStatusKB(p.Pid(), "VmHWM:")
}

func procStatusKB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// Signal sends sig to the process without waiting.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Stdout returns what the server printed on stdout so far (its banner).
func (p *Process) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}
