package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// A secret file is read again when it changes, keeps its last value while
// it is being replaced, and names itself when it cannot be read at first.
func TestSecretFileRotation(t *testing.T) {
	now := time.Unix(1000, 0)
	path := filepath.Join(t.TempDir(), "key")
	f := newSecretFile(path)
	f.now = func() time.Time { return now }
	if _, err := f.get(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing file: %v, want an error naming %s", err, path)
	}
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(secretRecheck)
	if v, err := f.get(); v != "first" || err != nil {
		t.Fatalf("get = %q, %v", v, err)
	}
	if err := os.WriteFile(path, []byte("second-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.get(); v != "first" {
		t.Fatalf("read again before secretRecheck: %q", v)
	}
	now = now.Add(secretRecheck)
	if v, _ := f.get(); v != "second-key" {
		t.Fatalf("after the rotation: %q, want second-key", v)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	now = now.Add(secretRecheck)
	if v, err := f.get(); v != "second-key" || err != nil {
		t.Fatalf("while the file is replaced: %q, %v; want the last value", v, err)
	}
}

// An S3 store whose keys are in files takes rotated keys without a
// restart: with a wrong secret in the file its calls fail, and once the
// file holds the right one they succeed (MinIO, the real SDK).
func TestS3StoreCredentialFilesAreReread(t *testing.T) {
	old := secretRecheck
	secretRecheck = 100 * time.Millisecond
	t.Cleanup(func() { secretRecheck = old })
	minio := testenv.MinIO(t)
	dir := t.TempDir()
	akf, skf := filepath.Join(dir, "ak"), filepath.Join(dir, "sk")
	if err := os.WriteFile(akf, []byte(minio.AccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skf, []byte("not-the-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := policies.Store{Name: "s3", Kind: policies.KindS3, Location: policies.Location{Cloud: "onprem", Region: "lab"},
		Bucket: minio.NewBucket(t), Endpoint: minio.Endpoint, PathStyle: true,
		Credentials: policies.Credentials{AccessKeyFile: akf, SecretKeyFile: skf}}
	st, err := openStore(t.Context(), ps, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	put := func() error {
		_, err := st.Put(t.Context(), "k", bytes.NewReader([]byte("v")), 1, store.PutOptions{})
		return err
	}
	if err := put(); err == nil {
		t.Fatal("Put with a wrong secret in the file succeeded")
	}
	if err := os.WriteFile(skf, []byte(minio.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if wait.Until(t.Context(), 10*time.Second, func() bool { err = put(); return err == nil }) != nil {
		t.Fatalf("Put still fails 10 s after the secret file was fixed: %v", err)
	}
}
