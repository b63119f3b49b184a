package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
)

// preloadOrigin is a MinIO bucket mounted as fedgate bucket "mounted"
// (origin prefix datasets/), reached through endpoint (MinIO's, or a proxy
// in front of it).
type preloadOrigin struct {
	minio  *testenv.S3Server
	bucket string
	client *s3.Client
}

func newPreloadOrigin(t *testing.T) *preloadOrigin {
	srv := testenv.MinIO(t)
	return &preloadOrigin{minio: srv, bucket: srv.NewBucket(t), client: clientFor(srv.Endpoint, srv.AccessKey, srv.SecretKey)}
}

func (o *preloadOrigin) put(t *testing.T, key string, data []byte) {
	t.Helper()
	_, err := o.client.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(o.bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	mustOK(t, err)
}

// policy writes a policy file mounting the bucket through endpoint and
// returns its path.
func (o *preloadOrigin) policy(t *testing.T, endpoint string) string {
	t.Helper()
	t.Setenv("FG_E2E_AK", o.minio.AccessKey)
	t.Setenv("FG_E2E_SK", o.minio.SecretKey)
	policy := "regions:\n  - name: e2e\n    location: onprem:lab\nstores:\n  - name: origin\n" +
		fmt.Sprintf("    kind: s3\n    location: aws:us-east-1\n    bucket: %s\n    endpoint: %s\n    path_style: true\n"+
			"    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n", o.bucket, endpoint) +
		"  - name: nas\n    kind: posix\n    location: onprem:lab\n    path: " + t.TempDir() + "\n" +
		"buckets:\n  - name: mounted\n    origin: origin/datasets/\n    cache: {ttl: 0s, quota: 1GiB}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	return pf
}

// fedgateWithin runs the CLI like fedgate, killing it after timeout.
func (s *server) fedgateWithin(timeout time.Duration, args ...string) (string, error) {
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, binary, args...)
	cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint, "FEDGATE_ACCESS_KEY="+rootAK, "FEDGATE_SECRET_KEY="+rootSK)
	out, err := cmd.CombinedOutput()
	if c.Err() != nil {
		err = fmt.Errorf("fedgate %s did not finish within %v (is the server's preloader running?)", strings.Join(args, " "), timeout)
	}
	return string(out), err
}

// jobs runs `fedgate cache jobs --json`.
func (s *server) jobs() []adminapi.Job {
	s.t.Helper()
	out, err := s.fedgate("cache", "jobs", "--json")
	if err != nil {
		s.t.Fatalf("cache jobs: %v\n%s", err, out)
	}
	var jobs []adminapi.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		s.t.Fatalf("cache jobs --json: %v\n%s", err, out)
	}
	return jobs
}

// pins runs `fedgate cache pins --json`.
func (s *server) pins() []adminapi.Pin {
	s.t.Helper()
	out, err := s.fedgate("cache", "pins", "--json")
	if err != nil {
		s.t.Fatalf("cache pins: %v\n%s", err, out)
	}
	var pins []adminapi.Pin
	if err := json.Unmarshal([]byte(out), &pins); err != nil {
		s.t.Fatalf("cache pins --json: %v\n%s", err, out)
	}
	return pins
}

// TestPreloadAndPin preloads a prefix of a mounted MinIO bucket with the
// CLI (pinned), then checks that the job is done, the bytes are cached and
// pinned, every object is then read without touching the origin, and that
// unpin releases the pin.
func TestPreloadAndPin(t *testing.T) {
	o := newPreloadOrigin(t)
	const n, size = 5, 20 << 20
	data := make([][]byte, n)
	for i := range data {
		data[i] = randBytes(t, size)
		o.put(t, fmt.Sprintf("datasets/train/shard-%04d.tar", i), data[i])
	}
	o.put(t, "datasets/val/shard-0000.tar", []byte("not under the preloaded prefix"))
	s := startServer(t, "--config", o.policy(t, o.minio.Endpoint), "--cache-size", "2GiB")

	out, err := s.fedgateWithin(2*time.Minute, "cache", "preload", "mounted/train/", "--pin")
	if err != nil {
		t.Fatalf("cache preload: %v\n%s\nserver log:\n%s", err, out, s.Log())
	}
	if !strings.Contains(out, "done: 5 objects") {
		t.Fatalf("cache preload output:\n%s", out)
	}
	jobs := s.jobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs: %+v", jobs)
	}
	j := jobs[0]
	if j.State != "done" || !j.Done || j.Bucket != "mounted" || j.Prefix != "train/" || !j.Pin ||
		j.Objects != n || j.TotalObjects != n || j.Bytes != n*size || j.TotalBytes != n*size || j.Errors != 0 {
		t.Fatalf("job after preload: %+v", j)
	}
	if got := s.metric("fedgate_cache_pinned_bytes"); got != n*size {
		t.Fatalf("fedgate_cache_pinned_bytes = %v, want %d", got, n*size)
	}
	if got := s.metric("fedgate_cache_used_bytes"); got < n*size {
		t.Fatalf("fedgate_cache_used_bytes = %v, want at least %d", got, n*size)
	}
	origin := s.metric("fedgate_cache_origin_bytes_total")
	if origin != n*size {
		t.Fatalf("the preload read %v bytes from the origin, want %d", origin, n*size)
	}
	c := s.root()
	for i := range data {
		got, _ := getBytes(t, c, "mounted", fmt.Sprintf("train/shard-%04d.tar", i))
		if !bytes.Equal(got, data[i]) {
			t.Fatalf("shard %d differs after the preload", i)
		}
	}
	if after := s.metric("fedgate_cache_origin_bytes_total"); after != origin {
		t.Fatalf("reads after the preload fetched %v bytes from the origin", after-origin)
	}

	if p := s.pins(); len(p) != 1 || p[0].Bucket != "mounted" || p[0].Prefix != "train/" {
		t.Fatalf("pins: %+v", p)
	}
	if out, err := s.fedgate("cache", "unpin", "mounted/train/"); err != nil {
		t.Fatalf("cache unpin: %v\n%s", err, out)
	}
	if p := s.pins(); len(p) != 0 {
		t.Fatalf("pins after unpin: %+v", p)
	}
	wait.For(t, 10*time.Second, "the chunks to be unpinned", func() bool { return s.metric("fedgate_cache_pinned_bytes") == 0 })

	// Errors exit 1 with a message that names what is wrong.
	out, err = s.fedgate("cache", "preload", "nosuchbucket/x/")
	if err == nil || !strings.Contains(out, `bucket "nosuchbucket" does not exist`) {
		t.Fatalf("preload of a missing bucket: %v\n%s", err, out)
	}
	out, err = s.fedgate("cache", "unpin", "mounted/train/")
	if err == nil || !strings.Contains(out, "NoSuchPin") {
		t.Fatalf("unpin of a missing pin: %v\n%s", err, out)
	}
	out, err = s.fedgate("cache", "cancel", "nosuchjob")
	if err == nil || !strings.Contains(out, `preload job "nosuchjob" does not exist`) {
		t.Fatalf("cancel of a missing job: %v\n%s", err, out)
	}
	// Cancelling a finished job forgets it.
	if out, err := s.fedgate("cache", "cancel", j.ID); err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("cancel of a done job: %v\n%s", err, out)
	}
	if jobs := s.jobs(); len(jobs) != 0 {
		t.Fatalf("jobs after cancel: %+v", jobs)
	}
}

// TestPreloadResumesAfterKill kills the server (kill -9) in the middle of a
// preload from a slow origin; after a restart the job resumes where it
// stopped and finishes, counting every object once.
func TestPreloadResumesAfterKill(t *testing.T) {
	o := newPreloadOrigin(t)
	const n, size = 8, 16 << 20 // two chunks each
	for i := range n {
		o.put(t, fmt.Sprintf("datasets/epoch/part-%04d", i), randBytes(t, size))
	}
	proxy := newSlowProxy(t, strings.TrimPrefix(o.minio.Endpoint, "http://"))
	proxy.setRate(8 << 20) // the whole preload takes ~16s
	s := startServer(t, "--config", o.policy(t, "http://"+proxy.addr), "--cache-size", "2GiB")

	out, err := s.fedgate("cache", "preload", "mounted/epoch/", "--detach")
	if err != nil || !strings.Contains(out, "started") {
		t.Fatalf("cache preload --detach: %v\n%s", err, out)
	}
	var before adminapi.Job
	wait.For(t, 60*time.Second, "the preload to record progress", func() bool {
		jobs := s.jobs()
		if len(jobs) != 1 {
			t.Fatalf("jobs: %+v", jobs)
		}
		before = jobs[0]
		return before.Objects >= 2
	})
	if before.Done || before.Objects >= n {
		t.Fatalf("the preload finished before the kill: %+v", before)
	}
	s.restart(syscall.SIGKILL)
	proxy.setRate(0)

	var j adminapi.Job
	wait.For(t, 60*time.Second, "the resumed preload to finish", func() bool {
		j = s.jobs()[0]
		return j.Done
	})
	if j.Objects != n || j.TotalObjects != n || j.Bytes != n*size || j.TotalBytes != n*size || j.Errors != 0 {
		t.Fatalf("job after the restart: %+v (before the kill: %+v)", j, before)
	}
	for _, p := range j.Nodes {
		if p.After != fmt.Sprintf("epoch/part-%04d", n-1) {
			t.Fatalf("node progress: %+v", p)
		}
	}
	// The objects finished before the kill were not fetched again.
	origin := s.metric("fedgate_cache_origin_bytes_total")
	if limit := float64((n - before.Objects) * size); origin > limit {
		t.Fatalf("after the restart the preload fetched %v bytes, more than the %v left", origin, limit)
	}
	c := s.root()
	for i := range n {
		getBytes(t, c, "mounted", fmt.Sprintf("epoch/part-%04d", i))
	}
	if after := s.metric("fedgate_cache_origin_bytes_total"); after != origin {
		t.Fatalf("reads after the preload fetched %v bytes from the origin", after-origin)
	}
}

// slowProxy forwards TCP connections to a server, holding the bytes it
// sends back to a shared rate (0: no limit).
type slowProxy struct {
	addr string
	rate atomic.Int64
	mu   sync.Mutex
	next time.Time // when the bytes sent so far are due, at the rate
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustOK(t, err)
	p := &slowProxy{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); out.Close() }()
				buf := make([]byte, 32<<10)
				for {
					k, err := out.Read(buf)
					if k > 0 {
						p.wait(k)
						if _, werr := in.Write(buf[:k]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	}()
	return p
}

func (p *slowProxy) setRate(bytesPerSecond int64) { p.rate.Store(bytesPerSecond) }

// wait holds k bytes until the shared rate allows them.
func (p *slowProxy) wait(k int) {
	rate := p.rate.Load()
	if rate <= 0 {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(k) / float64(rate) * float64(time.Second)))
	due := p.next
	p.mu.Unlock()
	time.Sleep(time.Until(due)) // pacing: the origin's read rate
}

// TestPolicyPinnedBucket: a bucket whose policy says cache.pin: true keeps
// every chunk it reads pinned (fedgate_cache_pinned_bytes), without any
// `fedgate cache pin`.
func TestPolicyPinnedBucket(t *testing.T) {
	o := newPreloadOrigin(t)
	data := randBytes(t, 12<<20+7)
	o.put(t, "datasets/w.bin", data)
	pf := o.policy(t, o.minio.Endpoint)
	raw, err := os.ReadFile(pf)
	mustOK(t, err)
	mustOK(t, os.WriteFile(pf, bytes.Replace(raw, []byte("cache: {ttl: 0s, quota: 1GiB}"), []byte("cache: {ttl: 0s, quota: 1GiB, pin: true}"), 1), 0o644))
	s := startServer(t, "--config", pf, "--cache-size", "1GiB")
	if got, _ := getBytes(t, s.root(), "mounted", "w.bin"); !bytes.Equal(got, data) {
		t.Fatal("read differs")
	}
	wait.For(t, 10*time.Second, "the bucket's chunks to be pinned", func() bool {
		return s.metric("fedgate_cache_pinned_bytes") == float64(len(data))
	})
}
