package testenv

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// GCSServer is a running fake-gcs-server.
type GCSServer struct {
	Endpoint string // "http://127.0.0.1:PORT"; SDK endpoint is Endpoint+"/storage/v1/"
	Host     string // "127.0.0.1:PORT", the value for STORAGE_EMULATOR_HOST
}

// GCSProject is the project ID buckets are created in.
const GCSProject = "fedgate-test"

var gcsServer server[GCSServer]

// FakeGCS returns the test binary's fake-gcs-server, starting it on first
// use. It skips the test when the server is not installed (fails under CI).
func FakeGCS(t testing.TB) *GCSServer {
	t.Helper()
	return gcsServer.get(t, startFakeGCS)
}

func fakeGCSPath() string { return filepath.Join(CacheDir(), "bin", "fake-gcs-server") }

func startFakeGCS() (*GCSServer, error) {
	bin, err := lookBinary("fake-gcs-server", fakeGCSPath())
	if err != nil {
		return nil, err
	}
	dir, err := workDir("gcs")
	if err != nil {
		return nil, err
	}
	g := &GCSServer{}
	_, err = startWithPorts(1, func(ports []int, attempt int) (spec, error) {
		port := strconv.Itoa(ports[0])
		g.Host = "127.0.0.1:" + port
		g.Endpoint = "http://" + g.Host
		return spec{
			name: "fake-gcs-server",
			dir:  dir,
			path: bin,
			args: []string{
				"-scheme", "http",
				"-host", "127.0.0.1",
				"-port", port,
				"-public-host", g.Host,
				"-external-url", g.Endpoint,
				// The memory backend: the filesystem one stores each object
				// name as a file path, so "a" and "a/b" (or keys over 255
				// bytes, or "../x") cannot be held the way GCS holds them.
				"-backend", "memory",
				// No seed data: the default -data is /data.
				"-data", filepath.Join(dir, "seed"),
			},
			ready: httpReady(g.Endpoint+"/storage/v1/b?project="+GCSProject, 200),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// client returns a storage client for the server, without authentication.
func (g *GCSServer) client(ctx context.Context) (*storage.Client, error) {
	return storage.NewClient(ctx,
		option.WithEndpoint(g.Endpoint+"/storage/v1/"),
		option.WithoutAuthentication())
}

// NewBucket creates a bucket with a fresh unique name in project
// [GCSProject] and returns the name. It is not deleted after the test.
func (g *GCSServer) NewBucket(t testing.TB) string {
	t.Helper()
	name := uniqueName(t.Name(), 63)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := g.client(ctx)
	if err != nil {
		t.Fatalf("testenv: GCS client: %v", err)
	}
	defer c.Close()
	if err := c.Bucket(name).Create(ctx, GCSProject, nil); err != nil {
		t.Fatalf("testenv: creating fake-gcs bucket %q: %v", name, err)
	}
	return name
}
