package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer its health
	// check. Generous: CI machines have 2 cores and build in parallel.
	readyTimeout = 2 * time.Minute
	// bindAttempts is how often a start is retried when the chosen port
	// was taken between picking it and the server binding it.
	bindAttempts = 4
	// stopGrace is how long a server gets after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
)

// process is one running server.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string        // path of the combined stdout/stderr log
	done chan struct{} // closed when the process has exited
	err  error         // exit status; valid once done is closed
}

// spec describes how to launch one server.
type spec struct {
	name  string   // for messages: "minio", "fake-gcs-server", "azurite"
	dir   string   // work dir; the log goes to dir/<name>.log
	path  string   // executable
	args  []string // arguments
	env   []string // extra environment, appended to a trimmed os.Environ
	ready func(ctx context.Context, c *http.Client) bool
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startWithPorts picks nports free ports, builds a spec with them and starts
// it, retrying with new ports when the server could not bind.
func startWithPorts(nports int, build func(ports []int, attempt int) (spec, error)) (*process, error) {
	var lastErr error
	for attempt := 0; attempt < bindAttempts; attempt++ {
		ports := make([]int, 0, nports)
		seen := map[int]bool{}
		for len(ports) < nports {
			p, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("picking a free port: %w", err)
			}
			if !seen[p] {
				seen[p] = true
				ports = append(ports, p)
			}
		}
		sp, err := build(ports, attempt)
		if err != nil {
			return nil, err
		}
		p, err := start(sp)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, lastErr
}

// errBind marks a start that failed because a port was already in use.
var errBind = errors.New("port already in use")

// start launches sp and waits until sp.ready succeeds, the process exits,
// or readyTimeout passes. On failure the process is stopped and the error
// carries the tail of its log.
func start(sp spec) (*process, error) {
	logPath := filepath.Join(sp.dir, sp.name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(sp.path, sp.args...)
	cmd.Dir = sp.dir
	cmd.Env = append(childEnv(), sp.env...)
	// A *os.File, not a pipe: no copying goroutines, and the log survives a
	// crash of the test binary.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()

	p := &process{name: sp.name, cmd: cmd, log: logPath, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The child is started and reaped on a thread locked for its whole
		// life: on Linux the child is killed (Pdeathsig) when the thread
		// that forked it exits, which then happens only when the test
		// binary dies. Not unlocking retires the thread afterwards.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	err = <-started
	logf.Close() // the child holds its own copy
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", sp.name, err)
	}

	if err := waitReady(p, sp.ready); err != nil {
		p.stop()
		tail := logTail(logPath, 4096)
		if bindFailure(tail) {
			err = fmt.Errorf("%w: %v", errBind, err)
		}
		return nil, fmt.Errorf("%s (%s %s) did not become ready: %w\n--- %s log (%s) ---\n%s",
			sp.name, sp.path, strings.Join(sp.args, " "), err, sp.name, logPath, tail)
	}
	if !register(p) {
		p.stop()
		return nil, errors.New("testenv.Stop was called while " + sp.name + " was starting")
	}
	return p, nil
}

// waitReady polls ready with a growing interval until it succeeds, the
// process exits, or readyTimeout passes.
func waitReady(p *process, ready func(context.Context, *http.Client) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	interval := 20 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("process exited: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("no healthy answer within %v", readyTimeout)
		case <-timer.C:
		}
		if ready(ctx, client) {
			return nil
		}
		interval = min(interval*3/2, 500*time.Millisecond)
		timer.Reset(interval)
	}
}

// httpReady returns a ready check that GETs url and accepts the given
// status codes (any status when none are given: the server is answering).
func httpReady(url string, codes ...int) func(context.Context, *http.Client) bool {
	return func(ctx context.Context, c *http.Client) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if len(codes) == 0 {
			return true
		}
		for _, code := range codes {
			if resp.StatusCode == code {
				return true
			}
		}
		return false
	}
}

// stop terminates the process group: SIGTERM, then SIGKILL after stopGrace.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	signalGroup(p.cmd, false)
	select {
	case <-p.done:
		return
	case <-time.After(stopGrace):
	}
	signalGroup(p.cmd, true)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		fmt.Fprintf(os.Stderr, "testenv: %s (pid %d) did not exit after SIGKILL\n", p.name, p.cmd.Process.Pid)
	}
}

// childEnv is the environment a server inherits: the test's, minus variables
// that would point the servers (or their SDK-based health checks) elsewhere.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "MINIO_"), strings.HasPrefix(k, "AZURITE_"),
			strings.EqualFold(k, "http_proxy"), strings.EqualFold(k, "https_proxy"),
			strings.EqualFold(k, "all_proxy"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

func bindFailure(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "address already in use") ||
		strings.Contains(l, "eaddrinuse") ||
		strings.Contains(l, "port is already in use")
}

// logTail returns up to the last n bytes of the file at path.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return "(empty)"
	}
	return string(b)
}

// lookBinary returns path if it is an executable file, else an error
// wrapping errMissing.
func lookBinary(what, path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s %w at %s", what, errMissing, path)
	}
	return path, nil
}
