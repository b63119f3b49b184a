package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
)

// originKind is one cloud stand-in as these tests use it: how to declare
// it in a policy, and how to change its objects directly (outside fedgate).
type originKind struct {
	name   string
	store  func(t *testing.T) (yaml string, env map[string]string)
	put    func(t *testing.T, key string, data []byte)
	delete func(t *testing.T, key string)
	get    func(t *testing.T, key string) ([]byte, error)
}

func s3Origin(t *testing.T) originKind {
	srv := testenv.MinIO(t)
	bucket := srv.NewBucket(t)
	c := clientFor(srv.Endpoint, srv.AccessKey, srv.SecretKey)
	return originKind{name: "s3",
		store: func(t *testing.T) (string, map[string]string) {
			return fmt.Sprintf("    kind: s3\n    location: aws:us-east-1\n    bucket: %s\n    endpoint: %s\n    path_style: true\n"+
					"    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n", bucket, srv.Endpoint),
				map[string]string{"FG_E2E_AK": srv.AccessKey, "FG_E2E_SK": srv.SecretKey}
		},
		put: func(t *testing.T, key string, data []byte) {
			_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
			mustOK(t, err)
		},
		delete: func(t *testing.T, key string) {
			_, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			mustOK(t, err)
		},
		get: func(t *testing.T, key string) ([]byte, error) {
			out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
	}
}

func gcsOrigin(t *testing.T) originKind {
	srv := testenv.FakeGCS(t)
	bucket := srv.NewBucket(t)
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	mustOK(t, err)
	t.Cleanup(func() { c.Close() })
	return originKind{name: "gcs",
		store: func(t *testing.T) (string, map[string]string) {
			return fmt.Sprintf("    kind: gcs\n    location: gcp:us-central1\n    bucket: %s\n    endpoint: %s\n", bucket, srv.Endpoint), nil
		},
		put: func(t *testing.T, key string, data []byte) {
			w := c.Bucket(bucket).Object(key).NewWriter(ctx(t))
			_, err := w.Write(data)
			mustOK(t, err)
			mustOK(t, w.Close())
		},
		delete: func(t *testing.T, key string) { mustOK(t, c.Bucket(bucket).Object(key).Delete(ctx(t))) },
		get: func(t *testing.T, key string) ([]byte, error) {
			r, err := c.Bucket(bucket).Object(key).NewReader(ctx(t))
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return io.ReadAll(r)
		},
	}
}

func azureOrigin(t *testing.T) originKind {
	srv := testenv.Azurite(t)
	container := srv.NewContainer(t)
	c, err := azblob.NewClientFromConnectionString(srv.ConnectionString, nil)
	mustOK(t, err)
	return originKind{name: "azure",
		store: func(t *testing.T) (string, map[string]string) {
			return fmt.Sprintf("    kind: azure\n    location: azure:eastus\n    account: %s\n    container: %s\n    endpoint: %s\n"+
					"    credentials: {account_key_env: FG_E2E_AZKEY}\n", srv.Account, container, srv.Endpoint),
				map[string]string{"FG_E2E_AZKEY": srv.AccountKey}
		},
		put: func(t *testing.T, key string, data []byte) {
			_, err := c.UploadBuffer(ctx(t), container, key, data, nil)
			mustOK(t, err)
		},
		delete: func(t *testing.T, key string) {
			_, err := c.DeleteBlob(ctx(t), container, key, nil)
			mustOK(t, err)
		},
		get: func(t *testing.T, key string) ([]byte, error) {
			out, err := c.DownloadStream(ctx(t), container, key, nil)
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
	}
}

// fsOrigin is an existing file tree (an fs store): objects are plain
// files, changed in place by ordinary writes.
func fsOrigin(t *testing.T) originKind {
	dir := t.TempDir()
	path := func(key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }
	return originKind{name: "fs",
		store: func(t *testing.T) (string, map[string]string) {
			return "    kind: fs\n    location: onprem:lab\n    path: " + dir + "\n", nil
		},
		put: func(t *testing.T, key string, data []byte) {
			mustOK(t, os.MkdirAll(filepath.Dir(path(key)), 0o755))
			mustOK(t, os.WriteFile(path(key), data, 0o644)) // in place: same inode when it exists
		},
		delete: func(t *testing.T, key string) { mustOK(t, os.Remove(path(key))) },
		get:    func(t *testing.T, key string) ([]byte, error) { return os.ReadFile(path(key)) },
	}
}

// metric reads one unlabelled counter or gauge from /_fedgate/metrics.
func (s *server) metric(name string) float64 {
	s.t.Helper()
	resp, err := http.Get(s.Endpoint + "/_fedgate/metrics")
	mustOK(s.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		s.t.Fatalf("metric %s not exported", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	mustOK(s.t, err)
	return v
}

// TestMountedOrigins mounts an existing bucket of each cloud stand-in as a
// fedgate bucket: existing objects are listed and read at once, a second
// read comes from the cache, changes and deletes made directly in the cloud
// are seen (ttl 0s), and writes through fedgate land in the cloud bucket.
func TestMountedOrigins(t *testing.T) {
	for name, kind := range map[string]func(*testing.T) originKind{"s3": s3Origin, "gcs": gcsOrigin, "azure": azureOrigin, "fs": fsOrigin} {
		t.Run(name, func(t *testing.T) {
			o := kind(t)
			data := randBytes(t, 18<<20+333)
			o.put(t, "datasets/train/shard-0000.tar", data)
			o.put(t, "datasets/train/shard-0001.tar", []byte("small shard"))
			o.put(t, "outside/ignored", []byte("not under the origin prefix"))

			storeYAML, env := o.store(t)
			policy := "regions:\n  - name: e2e\n    location: onprem:lab\nstores:\n  - name: origin\n" + storeYAML +
				"  - name: nas\n    kind: posix\n    location: onprem:lab\n    path: " + t.TempDir() + "\n" +
				"buckets:\n  - name: mounted\n    origin: origin/datasets/\n    cache: {ttl: 0s, quota: 1GiB}\n" +
				"defaults: {store: nas}\n"
			pf := filepath.Join(t.TempDir(), "policy.yaml")
			mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
			for k, v := range env {
				t.Setenv(k, v)
			}
			s := startServer(t, "--config", pf, "--cache-size", "2GiB")
			c := s.root()

			lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("mounted"), Prefix: aws.String("train/")})
			mustOK(t, err)
			if len(lo.Contents) != 2 || *lo.Contents[0].Key != "train/shard-0000.tar" || *lo.Contents[0].Size != int64(len(data)) {
				t.Fatalf("existing objects not listed: %+v", lo.Contents)
			}
			got, _ := getBytes(t, c, "mounted", "train/shard-0000.tar")
			if !bytes.Equal(got, data) {
				t.Fatal("cold read differs")
			}
			// The cold read's last fills may still be finishing (written
			// and synced) after its last byte was sent: a read joining one
			// fetches nothing but is no hit either.
			wait.For(t, 10*time.Second, "the cold read's fills to finish", func() bool { return s.metric("fedgate_cache_fills_in_progress") == 0 })
			origin := s.metric("fedgate_cache_origin_bytes_total")
			served := s.metric("fedgate_cache_served_bytes_total")
			got, _ = getBytes(t, c, "mounted", "train/shard-0000.tar")
			if !bytes.Equal(got, data) {
				t.Fatal("warm read differs")
			}
			if after := s.metric("fedgate_cache_origin_bytes_total"); after != origin {
				t.Fatalf("the warm read fetched %v bytes from the origin", after-origin)
			}
			if s.metric("fedgate_cache_served_bytes_total")-served < float64(len(data)) {
				t.Fatal("the warm read was not served from the cache")
			}

			o.put(t, "datasets/train/shard-0001.tar", []byte("replaced in the cloud"))
			if got, _ := getBytes(t, c, "mounted", "train/shard-0001.tar"); string(got) != "replaced in the cloud" {
				t.Fatalf("a change made in the cloud was not seen: %q", got)
			}
			o.delete(t, "datasets/train/shard-0001.tar")
			_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("mounted"), Key: aws.String("train/shard-0001.tar")})
			wantCode(t, err, "NoSuchKey")

			put(t, c, "mounted", "results/metrics.json", []byte(`{"loss":0.1}`))
			if got, err := o.get(t, "datasets/results/metrics.json"); err != nil || string(got) != `{"loss":0.1}` {
				t.Fatalf("a write through fedgate is not in the cloud bucket: %q %v", got, err)
			}
			// S3-created buckets go to the default store.
			_, err = c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})
			mustOK(t, err)
			put(t, c, "scratch", "k", []byte("v"))
		})
	}
}
