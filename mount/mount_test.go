package mount

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store/posix"
)

func client(endpoint, ak, sk string) *s3.Client {
	return s3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.Retryer = aws.NopRetryer{}
	})
}

// counting is the real S3 client with the ranged GETs it makes counted.
type counting struct {
	*s3.Client
	gets, inflight, peak atomic.Int64
	mu                   sync.Mutex
	ranges               map[string]int
}

func (c *counting) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.gets.Add(1)
	n := c.inflight.Add(1)
	defer c.inflight.Add(-1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	c.mu.Lock()
	c.ranges[aws.ToString(in.Range)]++
	c.mu.Unlock()
	out, err := c.Client.GetObject(ctx, in, opts...)
	if err == nil {
		// Hold the body until it is read, so that in-flight counts overlap.
		b, rerr := io.ReadAll(out.Body)
		out.Body.Close()
		out.Body = io.NopCloser(bytes.NewReader(b))
		err = rerr
	}
	return out, err
}

// stack is a real fedgate node in this process with bucket "data".
func stack(t *testing.T) *s3.Client {
	t.Helper()
	origin, err := posix.New("origin", policies.Location{Cloud: "onprem", Region: "test"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := testserver.InProcess(t, origin, testserver.StackOptions{})
	return client(st.Endpoint, testserver.RootAccessKey, testserver.RootSecretKey)
}

func put(t *testing.T, c *s3.Client, key string, b []byte) {
	t.Helper()
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testFS(t *testing.T, api API, cfg Config) *FS {
	t.Helper()
	cfg.Client = api
	cfg.Bucket = "data"
	f, err := newFS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.stop)
	return f
}

func open(t *testing.T, f *FS, key string) *handle {
	t.Helper()
	m, err := f.fileMeta(t.Context(), "data", key)
	if err != nil {
		t.Fatal(err)
	}
	h := newHandle(f, "data", key, m)
	t.Cleanup(func() { h.Release(context.Background()) })
	return h
}

func readAt(t *testing.T, h *handle, off int64, n int) ([]byte, syscall.Errno) {
	t.Helper()
	buf := make([]byte, n)
	rr, errno := h.Read(t.Context(), buf, off)
	if errno != 0 {
		return nil, errno
	}
	b, _ := rr.Bytes(nil)
	return b, 0
}

// A sequential reader of a large file: every byte right, each block fetched
// once, several GETs in flight at once, the handle's memory bounded.
func TestSequentialReadahead(t *testing.T) {
	c := stack(t)
	data := randBytes(1, 20<<20+777)
	put(t, c, "big", data)
	api := &counting{Client: c, ranges: map[string]int{}}
	f := testFS(t, api, Config{BlockSize: 1 << 20, ReadAhead: 8 << 20})
	h := open(t, f, "big")
	var got []byte
	maxBlocks := 0
	for off := int64(0); off < int64(len(data)); off += 128 << 10 {
		b, errno := readAt(t, h, off, 128<<10)
		if errno != 0 {
			t.Fatalf("read at %d: %v", off, errno)
		}
		got = append(got, b...)
		h.mu.Lock()
		maxBlocks = max(maxBlocks, len(h.blocks))
		h.mu.Unlock()
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential read differs")
	}
	if n := api.gets.Load(); n != 21 {
		t.Errorf("%d GETs for 21 blocks", n)
	}
	for r, n := range api.ranges {
		if n != 1 {
			t.Errorf("range %s fetched %d times", r, n)
		}
	}
	if p := api.peak.Load(); p < 2 {
		t.Errorf("at most %d GETs in flight: readahead is not parallel", p)
	}
	if maxBlocks > 8+4 {
		t.Errorf("the handle held %d blocks; bound is read-ahead (8) + 4", maxBlocks)
	}
	if b, _ := readAt(t, h, int64(len(data)), 10); len(b) != 0 {
		t.Errorf("read at EOF: %d bytes", len(b))
	}
}

// Random reads fetch what they need, not a readahead window.
func TestRandomReadsDoNotReadAhead(t *testing.T) {
	c := stack(t)
	data := randBytes(2, 16<<20)
	put(t, c, "big", data)
	api := &counting{Client: c, ranges: map[string]int{}}
	f := testFS(t, api, Config{BlockSize: 1 << 20, ReadAhead: 8 << 20})
	h := open(t, f, "big")
	for _, off := range []int64{9 << 20, 3<<20 + 5, 14<<20 + 100, 1 << 20} {
		b, errno := readAt(t, h, off, 4096)
		if errno != 0 || !bytes.Equal(b, data[off:off+4096]) {
			t.Fatalf("read at %d: %v", off, errno)
		}
	}
	if n := api.gets.Load(); n != 4 {
		t.Errorf("%d GETs for 4 random reads of one block each", n)
	}
}

// An object replaced after open: a read of bytes not yet fetched is EIO,
// never bytes of the new object.
func TestChangedObjectIsEIO(t *testing.T) {
	c := stack(t)
	put(t, c, "obj", randBytes(3, 4<<20))
	f := testFS(t, c, Config{BlockSize: 1 << 20, ReadAhead: 0})
	h := open(t, f, "obj")
	if _, errno := readAt(t, h, 100, 100); errno != 0 {
		t.Fatal(errno)
	}
	put(t, c, "obj", randBytes(4, 4<<20))
	if _, errno := readAt(t, h, 3<<20, 100); errno != syscall.EIO {
		t.Errorf("read after replace: %v, want EIO", errno)
	}
	// A new open reads the new object.
	h2 := open(t, f, "obj")
	if b, errno := readAt(t, h2, 3<<20, 100); errno != 0 || !bytes.Equal(b, randBytes(4, 4<<20)[3<<20:3<<20+100]) {
		t.Errorf("read of a new open: %v", errno)
	}
}

// S3 answers to errno, from a real node.
func TestErrno(t *testing.T) {
	c := stack(t)
	put(t, c, "a/b", []byte("x"))
	f := testFS(t, c, Config{})
	if _, err := f.head(t.Context(), "data", "missing"); toErrno(err) != syscall.ENOENT {
		t.Errorf("HEAD missing: %v -> %v", err, toErrno(err))
	}
	_, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("missing")})
	if toErrno(err) != syscall.ENOENT {
		t.Errorf("GET missing: %v -> %v", err, toErrno(err))
	}
	m, err := f.statPath(t.Context(), "data", "a")
	if err != nil || !m.dir {
		t.Errorf("a/b implies directory a: %+v %v", m, err)
	}
	m, err = f.statPath(t.Context(), "data", "a/b")
	if err != nil || m.dir || m.size != 1 {
		t.Errorf("a/b: %+v %v", m, err)
	}
	bad := testFS(t, client(*c.Options().BaseEndpoint, testserver.RootAccessKey, "wrong-secret-key"), Config{})
	if _, err := bad.head(t.Context(), "data", "a/b"); toErrno(err) != syscall.EACCES {
		t.Errorf("HEAD with a wrong key: %v -> %v", err, toErrno(err))
	}
	_, err = bad.getRange(t.Context(), "data", "a/b", "", 0, 1)
	if toErrno(err) != syscall.EACCES {
		t.Errorf("GET with a wrong key: %v -> %v", err, toErrno(err))
	}
}

// SlowDown is retried --tries times with backoff, then EIO; a server that
// never answers costs a deadline per try, not a hung reader.
func TestRetriesAndDeadlines(t *testing.T) {
	var calls atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(503)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
	}))
	defer slow.Close()
	f := testFS(t, client(slow.URL, "ak", "sk"), Config{Tries: 3})
	_, err := f.getRange(t.Context(), "data", "k", "", 0, 10)
	if toErrno(err) != syscall.EIO || calls.Load() != 3 {
		t.Errorf("SlowDown: %v -> %v after %d calls, want EIO after 3", err, toErrno(err), calls.Load())
	}

	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	f = testFS(t, client(hung.URL, "ak", "sk"), Config{Tries: 2, RequestTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err = f.head(t.Context(), "data", "k")
	if d := time.Since(start); toErrno(err) != syscall.EIO || d > 5*time.Second {
		t.Errorf("hung server: %v -> %v after %v", err, toErrno(err), d)
	}
}

func TestStatCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newStatCache(time.Second, 4)
	c.now = func() time.Time { return now }
	c.put("b/a", meta{size: 3})
	c.putMissing("b/x")
	if e, ok := c.get("b/a"); !ok || !e.ok || e.m.size != 3 {
		t.Errorf("fresh entry: %+v %v", e, ok)
	}
	if e, ok := c.get("b/x"); !ok || e.ok {
		t.Errorf("negative entry: %+v %v", e, ok)
	}
	now = now.Add(time.Second)
	if _, ok := c.get("b/a"); ok {
		t.Error("entry used after its TTL")
	}
	for i := range 10 {
		c.put(fmt.Sprintf("b/%d", i), meta{})
	}
	if len(c.m) > 4 {
		t.Errorf("cache holds %d entries, bound 4", len(c.m))
	}
	off := newStatCache(0, 4)
	off.put("b/a", meta{})
	if _, ok := off.get("b/a"); ok {
		t.Error("a zero TTL caches")
	}
}

// An interrupted FUSE call (its context canceled) is EINTR, which callers
// retry, not EIO.
func TestInterruptedIsEINTR(t *testing.T) {
	c := stack(t)
	f := testFS(t, c, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.statPath(ctx, "data", "whatever")
	if toErrno(err) != syscall.EINTR {
		t.Errorf("canceled lookup: %v -> %v, want EINTR", err, toErrno(err))
	}
}

// A block whose GET failed answers its error to the reads that follow
// within failedBlockTTL without new tries (the kernel retries a failed
// readahead page at once: a second round of tries would double the
// deadline of one read(2)), and is tried again after it.
func TestFailedBlockIsNotRetriedAtOnce(t *testing.T) {
	c := &counting{Client: stack(t), ranges: map[string]int{}}
	put(t, c.Client, "k", randBytes(7, 3<<20))
	var fail atomic.Bool
	api := &failing{counting: c, fail: &fail}
	f := testFS(t, api, Config{Tries: 2, BlockSize: 1 << 20})
	h := open(t, f, "k")
	defer func(d time.Duration) { failedBlockTTL = d }(failedBlockTTL)
	failedBlockTTL = 300 * time.Millisecond
	fail.Store(true)
	if _, errno := readAt(t, h, 0, 4096); errno != syscall.EIO {
		t.Fatalf("first read with the server failing: errno %v, want EIO", errno)
	}
	n := c.gets.Load()
	if _, errno := readAt(t, h, 4096, 4096); errno != syscall.EIO || c.gets.Load() != n {
		t.Errorf("read of the failed block at once: errno %v, %d new GETs; want EIO and none", errno, c.gets.Load()-n)
	}
	fail.Store(false)
	time.Sleep(failedBlockTTL + 50*time.Millisecond) // the TTL is what is tested
	if b, errno := readAt(t, h, 0, 4096); errno != 0 || !bytes.Equal(b, randBytes(7, 4096)) {
		t.Errorf("read after failedBlockTTL: errno %v, want the bytes", errno)
	}
}

// failing is counting whose GETs fail with 503 SlowDown while fail is set.
type failing struct {
	*counting
	fail *atomic.Bool
}

func (c *failing) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if c.fail.Load() {
		c.gets.Add(1)
		return nil, &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."}
	}
	return c.counting.GetObject(ctx, in, opts...)
}

// listCounting counts ListObjectsV2 calls.
type listCounting struct {
	*s3.Client
	lists atomic.Int64
}

func (c *listCounting) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c.lists.Add(1)
	return c.Client.ListObjectsV2(ctx, in, opts...)
}

func readdirNames(t *testing.T, n *node) []string {
	t.Helper()
	ds, errno := n.Readdir(t.Context())
	if errno != 0 {
		t.Fatalf("readdir: %v", errno)
	}
	var names []string
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			t.Fatalf("readdir: %v", errno)
		}
		names = append(names, e.Name)
	}
	return names
}

// A directory read again within the stat TTL is answered from its kept
// listing; a change this mount makes, or the TTL passing, lists again.
func TestDirCache(t *testing.T) {
	c := &listCounting{Client: stack(t)}
	for _, k := range []string{"d/a", "d/b", "d/sub/c"} {
		put(t, c.Client, k, []byte(k))
	}
	f := testFS(t, c, Config{StatTTL: 300 * time.Millisecond})
	// The caches' clock, moved on by the test instead of waiting.
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	f.dirs.now, f.stats.now = now, now
	d := newNode(f, "data", "d/", true)
	want := "[sub a b]"
	if got := fmt.Sprint(readdirNames(t, d)); got != want || c.lists.Load() != 1 {
		t.Fatalf("first readdir: %s after %d lists, want %s after 1", got, c.lists.Load(), want)
	}
	if got := fmt.Sprint(readdirNames(t, d)); got != want || c.lists.Load() != 1 {
		t.Errorf("readdir within the TTL: %s after %d lists, want %s and no new list", got, c.lists.Load(), want)
	}
	if errno := f.unlink(t.Context(), "data", "d/a"); errno != 0 {
		t.Fatal(errno)
	}
	if got := fmt.Sprint(readdirNames(t, d)); got != "[sub b]" || c.lists.Load() != 2 {
		t.Errorf("readdir after an unlink in this mount: %s after %d lists, want [sub b] listed again", got, c.lists.Load())
	}
	put(t, c.Client, "d/e", []byte("e")) // made elsewhere: seen after the TTL
	if got := fmt.Sprint(readdirNames(t, d)); got != "[sub b]" {
		t.Errorf("readdir within the TTL of a change made elsewhere: %s, want the kept [sub b]", got)
	}
	ahead.Add(int64(350 * time.Millisecond)) // past the TTL
	if got := fmt.Sprint(readdirNames(t, d)); got != "[sub b e]" || c.lists.Load() != 3 {
		t.Errorf("readdir after the TTL: %s after %d lists, want [sub b e] listed again", got, c.lists.Load())
	}
	f0 := testFS(t, c, Config{StatTTL: -1})
	d0 := newNode(f0, "data", "d/", true)
	n := c.lists.Load()
	readdirNames(t, d0)
	readdirNames(t, d0)
	if c.lists.Load() != n+2 {
		t.Errorf("--stat-ttl 0: %d lists for two readdirs, want 2", c.lists.Load()-n)
	}
}
