// Package e2e tests fedgate end to end: it builds the real binary, starts it
// as a process on a loopback port and drives it with real S3 clients
// (aws-sdk-go-v2, minio-go) and raw HTTP.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "fedgate")
	build := exec.Command("go", "build", "-o", binary, "../cmd/fedgate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building fedgate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	rootAK = "ROOTACCESSKEY1234567"
	rootSK = "root-secret-key-0123456789abcdefghijklm"
)

// server is one fedgate process.
type server struct {
	t        *testing.T
	DataDir  string
	Endpoint string
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
	Stdout   *strings.Builder
}

var endpointRE = regexp.MustCompile(`S3 endpoint (http://\S+)`)

// startServer starts fedgate on a free loopback port with root credentials
// rootAK/rootSK and a fresh data dir (or dataDir if given).
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	s := &server{t: t, DataDir: t.TempDir()}
	s.args = extra
	s.start()
	t.Cleanup(func() { s.stop(syscall.SIGKILL) })
	return s
}

func (s *server) start() {
	t := s.t
	t.Helper()
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", s.DataDir,
		"--access-key", rootAK, "--secret-key", rootSK, "--log-level", "warn"}, s.args...)
	cmd := exec.Command(binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(s.DataDir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	s.Stdout = &strings.Builder{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			s.Stdout.WriteString(sc.Text() + "\n")
			if m := endpointRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	select {
	case s.Endpoint = <-found:
	case <-s.done:
		log, _ := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
		t.Fatalf("fedgate exited before serving:\n%s", log)
	case <-time.After(60 * time.Second):
		t.Fatal("fedgate did not print its endpoint within 60s")
	}
	waitFor(t, 30*time.Second, "readyz", func() bool {
		resp, err := http.Get(s.Endpoint + "/_fedgate/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// stop sends sig and waits for the process to exit.
func (s *server) stop(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(90 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// restart stops the server with sig and starts it again on the same data dir
// (on a new port).
func (s *server) restart(sig syscall.Signal) {
	s.t.Helper()
	s.stop(sig)
	s.start()
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// s3Client is an aws-sdk-go-v2 client for the server with the given keys
// and default client settings (checksums as the SDK sends them by default).
func (s *server) s3Client(ak, sk string, opts ...func(*s3.Options)) *s3.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	}}, opts...)...)
}

func (s *server) root() *s3.Client { return s.s3Client(rootAK, rootSK) }

func (s *server) minio(ak, sk string) *minio.Client {
	s.t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds:  miniocreds.NewStaticV4(ak, sk, ""),
		Region: "us-east-1",
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// fedgate runs the CLI against this server with root credentials.
func (s *server) fedgate(args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint, "FEDGATE_ACCESS_KEY="+rootAK, "FEDGATE_SECRET_KEY="+rootSK)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// fedgateAs runs the CLI with the given credentials as root credentials.
func (s *server) fedgateAs(ak, sk string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint, "FEDGATE_ACCESS_KEY="+ak, "FEDGATE_SECRET_KEY="+sk)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type netConn = net.Conn

var dialer = &net.Dialer{Timeout: 10 * time.Second}
