// Package testenv runs real local stand-ins for the clouds (MinIO for S3,
// fake-gcs-server for GCS, Azurite for Azure Blob) as external processes, so
// tests can drive the official SDKs against them.
//
// Each getter ([MinIO], [FakeGCS], [Azurite]) starts its server at most once
// per test binary, on a free 127.0.0.1 port with its data in a temporary
// directory, waits until it answers, and returns the same server to every
// later caller. Tests isolate themselves by asking for a fresh bucket or
// container ([S3Server.NewBucket], [GCSServer.NewBucket],
// [AzureServer.NewContainer]).
//
// A package that uses testenv stops the servers after its tests:
//
//	func TestMain(m *testing.M) { code := m.Run(); testenv.Stop(); os.Exit(code) }
//
// The servers are installed by `scripts/testenv.sh install` into [CacheDir].
// When one is missing, its getter skips the test on a developer machine and
// fails it when the environment variable CI is non-empty, so CI cannot pass
// by skipping. See docs/testing.md.
//
// MinIO is AGPL-licensed: it is only ever run as a separate binary; never
// import its Go packages.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// CacheEnv names the environment variable that overrides [CacheDir].
const CacheEnv = "FEDGATE_TESTENV_CACHE"

// CacheDir is where the stand-ins are installed: $FEDGATE_TESTENV_CACHE if
// set, else $HOME/.cache/fedgate-testenv. Go binaries live in CacheDir()/bin
// and Azurite under CacheDir()/azurite/node_modules.
func CacheDir() string {
	return cacheDir(os.Getenv)
}

func cacheDir(getenv func(string) string) string {
	if d := getenv(CacheEnv); d != "" {
		return d
	}
	home := getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	return filepath.Join(home, ".cache", "fedgate-testenv")
}

// installHint is the command that installs every stand-in.
const installHint = "scripts/testenv.sh install"

// errMissing marks a start failure caused by a stand-in that is not
// installed; the getters turn it into a skip (or a failure under CI).
var errMissing = errors.New("not installed")

// unavailable reports a stand-in that is not installed: a skip on a
// developer machine, a fatal error when CI is set (non-empty) so that CI
// cannot go green by skipping every cloud test.
func unavailable(t testing.TB, getenv func(string) string, msg string) {
	t.Helper()
	unavailableHint(t, getenv, msg, installHint)
}

// unavailableHint is unavailable with the command that installs what is
// missing.
func unavailableHint(t testing.TB, getenv func(string) string, msg, hint string) {
	t.Helper()
	if getenv("CI") != "" {
		t.Fatalf("testenv: %s (CI is set, so this fails instead of skipping; run %s)", msg, hint)
		return
	}
	t.Skipf("testenv: %s; install with: %s", msg, hint)
}

// server is the lazily started state shared by one getter.
type server[T any] struct {
	once sync.Once
	val  *T
	err  error
}

// get starts the server on first use and reports the outcome on t.
func (s *server[T]) get(t testing.TB, start func() (*T, error)) *T {
	t.Helper()
	s.once.Do(func() {
		mu.Lock()
		stopped := isStopped
		mu.Unlock()
		if stopped {
			s.err = errors.New("testenv.Stop was already called")
			return
		}
		s.val, s.err = start()
	})
	if s.err != nil {
		if errors.Is(s.err, errMissing) {
			unavailable(t, os.Getenv, s.err.Error())
			return nil
		}
		t.Fatalf("testenv: %v", s.err)
		return nil
	}
	return s.val
}

var (
	mu        sync.Mutex
	running   []*process
	rootDir   string // this process's temp dir; every server's data lives below it
	isStopped bool
)

// workDir returns a fresh directory for one server's data and log.
func workDir(name string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if rootDir == "" {
		removeStaleRoots()
		d, err := os.MkdirTemp("", fmt.Sprintf("fedgate-testenv-%d-", os.Getpid()))
		if err != nil {
			return "", err
		}
		rootDir = d
	}
	return os.MkdirTemp(rootDir, name+"-")
}

// removeStaleRoots deletes temp dirs left behind by test binaries that died
// without calling Stop. A dir is only removed when its owner pid is gone.
func removeStaleRoots() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "fedgate-testenv-*-*"))
	for _, m := range matches {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(m), "fedgate-testenv-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if pid != os.Getpid() && !pidAlive(pid) {
			_ = os.RemoveAll(m)
		}
	}
}

// register records p for Stop. It reports false, and p must be stopped,
// when Stop already ran (a start that raced with Stop).
func register(p *process) bool {
	mu.Lock()
	defer mu.Unlock()
	if isStopped {
		return false
	}
	running = append(running, p)
	return true
}

// Stop stops every server this process started and removes their data.
// Call it from TestMain after m.Run:
//
//	func TestMain(m *testing.M) { code := m.Run(); testenv.Stop(); os.Exit(code) }
//
// Getters called after Stop fail. Stop is safe to call more than once.
func Stop() {
	mu.Lock()
	procs := running
	running = nil
	dir := rootDir
	rootDir = ""
	isStopped = true
	mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// randomHex returns n random bytes as lowercase hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

// uniqueName builds a bucket/container name of at most max characters from
// lowercase letters, digits and single hyphens, starting with a letter:
// "t-<test name>-<random>". The test name helps when reading server logs.
func uniqueName(testName string, max int) string {
	suffix := randomHex(5) // 10 chars
	var b strings.Builder
	lastHyphen := true // suppress a leading hyphen
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastHyphen = false
		case !lastHyphen:
			b.WriteByte('-')
			lastHyphen = true
		}
	}
	mid := strings.Trim(b.String(), "-")
	room := max - len("t-") - len("-") - len(suffix)
	if len(mid) > room {
		mid = strings.TrimRight(mid[:room], "-")
	}
	if mid == "" {
		return "t-" + suffix
	}
	return "t-" + mid + "-" + suffix
}
