// Package e2e tests fedgate end to end: it builds the real binary, starts it
// as a process on a loopback port and drives it with real S3 clients
// (aws-sdk-go-v2, minio-go, the fedgate CLI) and raw HTTP.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fedgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = testserver.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	rootAK = testserver.RootAccessKey
	rootSK = testserver.RootSecretKey
)

// server is one fedgate process and the clients the tests use with it.
type server struct {
	*testserver.Process
	t *testing.T
}

// startServer starts fedgate with a fresh data dir and extra flags.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	return &server{Process: testserver.Start(t, binary, t.TempDir(), extra...), t: t}
}

func (s *server) start() { s.t.Helper(); s.Launch(s.t) }

func (s *server) stop(sig syscall.Signal) { s.Stop(sig) }

// restart stops the server with sig and starts it again on the same data dir.
func (s *server) restart(sig syscall.Signal) {
	s.t.Helper()
	s.stop(sig)
	s.start()
}

// s3Client is an aws-sdk-go-v2 client for the server with the given keys
// and default client settings (checksums as the SDK sends them by default).
func (s *server) s3Client(ak, sk string, opts ...func(*s3.Options)) *s3.Client {
	return clientFor(s.Endpoint, ak, sk, opts...)
}

// clientFor is an aws-sdk-go-v2 client for endpoint with default settings.
func clientFor(endpoint, ak, sk string, opts ...func(*s3.Options)) *s3.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
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
func (s *server) fedgate(args ...string) (string, error) { return s.fedgateAs(rootAK, rootSK, args...) }

// fedgateAs runs the CLI with the given credentials as root credentials.
func (s *server) fedgateAs(ak, sk string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint, "FEDGATE_ACCESS_KEY="+ak, "FEDGATE_SECRET_KEY="+sk)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

type netConn = net.Conn

var dialer = &net.Dialer{Timeout: 10 * time.Second}
