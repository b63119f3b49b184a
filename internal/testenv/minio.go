package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Server is a running MinIO server.
type S3Server struct {
	Endpoint  string // "http://127.0.0.1:PORT"; use path-style addressing
	AccessKey string // random root user of this server
	SecretKey string // random root password of this server
	Region    string // "us-east-1"
}

var minioServer server[S3Server]

// MinIO returns the test binary's MinIO server, starting it on first use.
// It skips the test when MinIO is not installed (fails under CI).
func MinIO(t testing.TB) *S3Server {
	t.Helper()
	return minioServer.get(t, startMinIO)
}

func minioPath() string { return filepath.Join(CacheDir(), "bin", "minio") }

func startMinIO() (*S3Server, error) {
	bin, err := lookBinary("minio", minioPath())
	if err != nil {
		return nil, err
	}
	dir, err := workDir("minio")
	if err != nil {
		return nil, err
	}
	s := &S3Server{
		AccessKey: "fg" + randomHex(9),
		SecretKey: randomHex(20),
		Region:    "us-east-1",
	}
	_, err = startWithPorts(2, func(ports []int, attempt int) (spec, error) {
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		s.Endpoint = "http://" + addr
		data := filepath.Join(dir, fmt.Sprintf("data%d", attempt))
		return spec{
			name: "minio",
			dir:  dir,
			path: bin,
			args: []string{
				"server", data,
				"--address", addr,
				"--console-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
				"--certs-dir", filepath.Join(dir, "certs"),
				"--quiet",
			},
			env: []string{
				"MINIO_ROOT_USER=" + s.AccessKey,
				"MINIO_ROOT_PASSWORD=" + s.SecretKey,
				"MINIO_REGION=" + s.Region,
				"MINIO_BROWSER=off",
				"MINIO_UPDATE=off",
				"MINIO_CALLHOME_ENABLE=off",
				// Allows a data dir on the root disk and relaxes other
				// production-only checks.
				"MINIO_CI_CD=1",
			},
			ready: httpReady(s.Endpoint+"/minio/health/ready", 200),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// client returns an S3 client for the server with static credentials and
// path-style addressing.
func (s *S3Server) client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// NewBucket creates a bucket with a fresh unique name and returns the name.
// The bucket is not deleted after the test; the server's data goes at Stop.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := uniqueName(t.Name(), 63)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A MinIO that answers its readiness probe may still refuse requests
	// for a moment while it initializes (XMinioServerNotInitialized), more
	// so on a loaded machine: retry that, and only that, until ctx ends.
	for {
		_, err := s.client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		if err == nil {
			return name
		}
		if !strings.Contains(err.Error(), "XMinioServerNotInitialized") || ctx.Err() != nil {
			t.Fatalf("testenv: creating MinIO bucket %q: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
