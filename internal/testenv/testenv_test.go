package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestMain(m *testing.M) { code := m.Run(); Stop(); os.Exit(code) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestMinIORoundTrip(t *testing.T) {
	t.Parallel()
	s := MinIO(t)
	if s != MinIO(t) {
		t.Fatal("second MinIO call started another server")
	}
	bucket := s.NewBucket(t)
	if other := s.NewBucket(t); other == bucket {
		t.Fatalf("NewBucket returned %q twice", bucket)
	}
	ctx := ctxT(t)
	c := s.client()
	body := []byte("hello from fedgate testenv")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("dir/obj"), Body: bytes.NewReader(body),
	}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/obj")})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("GetObject body = %q, %v; want %q", got, err, body)
	}
}

func TestFakeGCSRoundTrip(t *testing.T) {
	t.Parallel()
	g := FakeGCS(t)
	if want := "http://" + g.Host; g.Endpoint != want {
		t.Fatalf("Endpoint %q, Host %q: want Endpoint %q", g.Endpoint, g.Host, want)
	}
	bucket := g.NewBucket(t)
	ctx := ctxT(t)
	c, err := g.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := []byte("hello from fedgate testenv")
	obj := c.Bucket(bucket).Object("dir/obj")
	w := obj.NewWriter(ctx)
	if _, err := w.Write(body); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("writer Close: %v", err)
	}
	r, err := obj.NewReader(ctx)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read body = %q, %v; want %q", got, err, body)
	}
	if _, err := c.Bucket(bucket).Object("missing").Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("Attrs(missing) = %v, want storage.ErrObjectNotExist", err)
	}
}

func TestAzuriteRoundTrip(t *testing.T) {
	t.Parallel()
	a := Azurite(t)
	container := a.NewContainer(t)
	ctx := ctxT(t)
	c, err := azblob.NewClientFromConnectionString(a.ConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("hello from fedgate testenv")
	if _, err := c.UploadBuffer(ctx, container, "dir/obj", body, nil); err != nil {
		t.Fatalf("UploadBuffer: %v", err)
	}
	resp, err := c.DownloadStream(ctx, container, "dir/obj", nil)
	if err != nil {
		t.Fatalf("DownloadStream: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("download body = %q, %v; want %q", got, err, body)
	}
	if !strings.HasSuffix(a.Endpoint, "/"+a.Account) || !strings.Contains(a.ConnectionString, "BlobEndpoint="+a.Endpoint+";") {
		t.Fatalf("Endpoint %q and ConnectionString %q disagree", a.Endpoint, a.ConnectionString)
	}
}

// fakeTB records Skip and Fatal instead of stopping the test. Embedding
// testing.TB satisfies the interface's unexported method.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func TestUnavailableSkipsLocallyFailsInCI(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		wantFailed bool
	}{
		{"", false},
		{"1", true},
		{"true", true},
	} {
		f := &fakeTB{}
		getenv := func(k string) string {
			if k == "CI" {
				return tc.ci
			}
			return ""
		}
		unavailable(f, getenv, "minio not installed at /x")
		if f.failed != tc.wantFailed || f.skipped == tc.wantFailed {
			t.Errorf("CI=%q: failed=%v skipped=%v, want failed=%v", tc.ci, f.failed, f.skipped, tc.wantFailed)
		}
		if !strings.Contains(f.msg, installHint) || !strings.Contains(f.msg, "minio not installed") {
			t.Errorf("CI=%q: message %q lacks the cause or the install command", tc.ci, f.msg)
		}
	}
}

func TestMissingBinarySkipsOrFails(t *testing.T) {
	var s server[S3Server]
	start := func() (*S3Server, error) { return nil, fmt.Errorf("minio %w at /nowhere", errMissing) }
	f := &fakeTB{}
	if got := s.get(f, start); got != nil {
		t.Fatalf("got a server from a failed start")
	}
	// Which of the two depends on CI in the environment running this test.
	if f.skipped == f.failed || !strings.Contains(f.msg, "/nowhere") {
		t.Fatalf("skipped=%v failed=%v msg=%q", f.skipped, f.failed, f.msg)
	}
	f2 := &fakeTB{}
	s.get(f2, func() (*S3Server, error) { t.Fatal("started twice"); return nil, nil })
	if f2.msg != f.msg {
		t.Fatalf("second call: %q, want the first outcome %q", f2.msg, f.msg)
	}
}

func TestCacheDir(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	if got := cacheDir(func(k string) string { return env[k] }); got != "/home/u/.cache/fedgate-testenv" {
		t.Errorf("cacheDir = %q", got)
	}
	env[CacheEnv] = "/c"
	if got := cacheDir(func(k string) string { return env[k] }); got != "/c" {
		t.Errorf("cacheDir with %s = %q", CacheEnv, got)
	}
}

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`)

func TestUniqueName(t *testing.T) {
	for _, in := range []string{
		"", "T", "TestX/sub_test#01", "--__--", strings.Repeat("Ab/", 60),
		"TestÜnïcode/Ω", "Test--double", strings.Repeat("a", 52) + "-b",
	} {
		got := uniqueName(in, 63)
		if len(got) < 3 || len(got) > 63 || !validName.MatchString(got) {
			t.Errorf("uniqueName(%q) = %q: not a valid bucket/container name", in, got)
		}
		if got == uniqueName(in, 63) {
			t.Errorf("uniqueName(%q) repeated %q", in, got)
		}
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	dir := t.TempDir()
	_, err := start(spec{
		name:  "sh",
		dir:   dir,
		path:  "/bin/sh",
		args:  []string{"-c", "echo boom-from-the-server >&2; exit 3"},
		ready: httpReady("http://127.0.0.1:1/"),
	})
	if err == nil || !strings.Contains(err.Error(), "boom-from-the-server") {
		t.Fatalf("start error = %v, want the server's log in it", err)
	}
}

func TestBindFailureIsRetried(t *testing.T) {
	dir := t.TempDir()
	attempts := 0
	_, err := startWithPorts(1, func(ports []int, attempt int) (spec, error) {
		attempts++
		return spec{
			name:  "sh",
			dir:   dir,
			path:  "/bin/sh",
			args:  []string{"-c", "echo 'listen tcp: bind: address already in use' >&2; exit 1"},
			ready: httpReady("http://127.0.0.1:1/"),
		}, nil
	})
	if err == nil || attempts != bindAttempts {
		t.Fatalf("err = %v after %d attempts, want an error after %d", err, attempts, bindAttempts)
	}
}

func TestChromiumMissingSkipsOrFails(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	for _, ci := range []string{"", "1"} {
		f := &fakeTB{}
		getenv := func(k string) string {
			if k == "CI" {
				return ci
			}
			return ""
		}
		if p := chromium(f, none, getenv); p != "" {
			t.Fatalf("CI=%q: path %q from a failed lookup", ci, p)
		}
		if f.failed != (ci != "") || f.skipped == (ci != "") || !strings.Contains(f.msg, chromiumHint) {
			t.Errorf("CI=%q: failed=%v skipped=%v msg=%q", ci, f.failed, f.skipped, f.msg)
		}
	}
	found := func(name string) (string, error) {
		if name == "chromium-headless-shell" {
			return "/usr/bin/chromium-headless-shell", nil
		}
		return "", errors.New("not found")
	}
	f := &fakeTB{}
	if p := chromium(f, found, func(string) string { return "" }); p != "/usr/bin/chromium-headless-shell" || f.skipped || f.failed {
		t.Fatalf("path %q, skipped=%v failed=%v", p, f.skipped, f.failed)
	}
}
