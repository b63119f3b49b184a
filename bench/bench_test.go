// Package bench compares fedgate with a ceiling in the same run: a plain Go
// net/http file server, in its own process, serving the same bytes from the
// same disk. `make bench` runs it; docs/benchmarks.md records the numbers.
//
// Both servers get the same raw net/http client. fedgate's requests are
// presigned URLs made once per object, so the client does no signing per
// request while fedgate still verifies every signature.
package bench

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/store"
)

const ceilingEnv = "FEDGATE_BENCH_CEILING_DIR"

var (
	binary string
	// results[size][op][target][round] = bytes/s; the last b.N probe of a
	// round's sub-benchmark wins.
	resultsMu sync.Mutex
	results   = map[string]map[string]map[string][]float64{}
	// rounds: fedgate and the ceiling alternate this many times per size and
	// operation, so a burst of noise on this shared machine hits both.
	rounds = flag.Int("rounds", 3, "rounds of fedgate-vs-ceiling measurements")
	notes  []string
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(ceilingEnv); dir != "" {
		runCeiling(dir)
		return
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // `go test ./...`: nothing to measure, nothing to build
	}
	tmp, err := os.MkdirTemp("", "fedgate-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = testserver.Build(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.Stop()
	printSummary()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// runCeiling is the ceiling server: GET is http.FileServer; PUT streams the
// body to a temp file, fsyncs it and renames it into place (the same
// durability fedgate gives a PUT). A PUT under /md5/ is the least an S3
// server must do for a PUT: it also computes the body's MD5 for the ETag,
// with the copy loop of fedgate's fs store (256 KiB blocks, Go's
// crypto/md5 on its own goroutine), and fsyncs the directory after the
// rename, without which an acknowledged object can lose its name in a
// power cut.
func runCeiling(dir string) {
	files := http.FileServer(http.Dir(dir))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			files.ServeHTTP(w, r)
			return
		}
		name := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/")))
		_ = os.MkdirAll(filepath.Dir(name), 0o755)
		f, err := os.CreateTemp(dir, ".put-")
		if err == nil && strings.HasPrefix(r.URL.Path, "/md5/") {
			h := store.NewPipeHash(md5.New())
			_, err = io.CopyBuffer(io.MultiWriter(f, h), r.Body, make([]byte, 256<<10))
			w.Header().Set("ETag", `"`+hex.EncodeToString(h.Sum(nil))+`"`)
		} else if err == nil {
			_, err = io.Copy(f, r.Body)
		}
		if err == nil {
			err = f.Sync()
		}
		if f != nil {
			f.Close()
		}
		if err == nil {
			err = os.Rename(f.Name(), name)
		}
		if err == nil && strings.HasPrefix(r.URL.Path, "/md5/") {
			var d *os.File
			if d, err = os.Open(filepath.Dir(name)); err == nil {
				err = d.Sync()
				d.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	fmt.Printf("ceiling http://%s\n", ln.Addr())
	_ = http.Serve(ln, h)
}

// target is one server under test: how to address an object.
type target struct {
	name   string
	getURL func(key string) string
	putURL func(key string) (string, http.Header)
}

type env struct {
	// fedgate is an unversioned bucket, versioned the same server's bucket
	// with versioning Enabled (every PUT a new version).
	fedgate, versioned, ceiling target
	// ceilingMD5 is the ceiling's PUT that also hashes and fsyncs the
	// directory: the least an S3 server does (PUT only).
	ceilingMD5 target
	fg         *testserver.Process
	client     *http.Client
	s3         *s3.Client
}

func setup(b *testing.B) *env {
	b.Helper()
	var args []string
	if d := os.Getenv("FEDGATE_BENCH_DEBUG_LISTEN"); d != "" {
		args = append(args, "--debug-listen", d) // go tool pprof http://$d/debug/pprof/profile
	}
	fg := testserver.Start(b, binary, b.TempDir(), args...)
	cdir := b.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), ceilingEnv+"="+cdir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var line [128]byte
	n, _ := out.Read(line[:])
	ceilingURL := strings.TrimSpace(strings.TrimPrefix(string(line[:n]), "ceiling "))

	e := &env{fg: fg, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	e.s3 = s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(fg.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(testserver.RootAccessKey, testserver.RootSecretKey, "")})
	if _, err := e.s3.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.s3.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("benchv")}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.s3.PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{Bucket: aws.String("benchv"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		b.Fatal(err)
	}
	e.fedgate = e.presigned(b, "fedgate", "bench")
	e.versioned = e.presigned(b, "versioned", "benchv")
	e.ceiling = target{name: "ceiling",
		getURL: func(key string) string { return ceilingURL + "/" + key },
		putURL: func(key string) (string, http.Header) { return ceilingURL + "/" + key, http.Header{} },
	}
	e.ceilingMD5 = target{name: "minimal-s3",
		putURL: func(key string) (string, http.Header) { return ceilingURL + "/md5/" + key, http.Header{} },
	}
	return e
}

// presigned is a target that reads and writes bucket of the fedgate server
// through presigned URLs (made once per GET key).
func (e *env) presigned(b *testing.B, name, bucket string) target {
	ps := s3.NewPresignClient(e.s3)
	return target{name: name,
		getURL: presigner(b, e.s3, bucket),
		putURL: func(key string) (string, http.Header) {
			req, err := ps.PresignPutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}, s3.WithPresignExpires(6*time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			return req.URL, req.SignedHeader
		},
	}
}

// reader yields size pseudo-random bytes without holding them all.
func reader(size int64) io.Reader {
	block := make([]byte, 1<<20)
	_, _ = rand.Read(block)
	return io.LimitReader(repeat{block}, size)
}

type repeat struct{ b []byte }

func (r repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r.b)
	}
	return n, nil
}

func (e *env) put(tb testing.TB, t target, key string, size int64) {
	u, h := t.putURL(key)
	req, _ := http.NewRequest(http.MethodPut, u, reader(size))
	req.ContentLength = size
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := e.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		tb.Fatalf("%s PUT %s: %s", t.name, key, resp.Status)
	}
}

func (e *env) get(tb testing.TB, t target, key string, size int64) {
	resp, err := e.client.Get(t.getURL(key))
	if err != nil {
		tb.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != size {
		tb.Fatalf("%s GET %s: %s, %d bytes, %v", t.name, key, resp.Status, n, err)
	}
}

var sizes = []struct {
	name string
	size int64
	par  int // concurrent clients
}{
	{"64KiB", 64 << 10, 16},
	{"8MiB", 8 << 20, 4},
	{"256MiB", 256 << 20, 2},
}

func record(round int, size, op, target string, bytesPerSec float64) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if results[size] == nil {
		results[size] = map[string]map[string][]float64{}
	}
	if results[size][op] == nil {
		results[size][op] = map[string][]float64{}
	}
	r := results[size][op][target]
	for len(r) <= round {
		r = append(r, 0)
	}
	r[round] = bytesPerSec
	results[size][op][target] = r
}

// BenchmarkGetPut measures GET and PUT throughput of fedgate and of the
// ceiling for each size; the summary prints fedgate/ceiling ratios.
func BenchmarkGetPut(b *testing.B) {
	e := setup(b)
	for _, sz := range sizes {
		// Objects to read: one per concurrent client.
		for _, t := range []target{e.fedgate, e.versioned, e.ceiling} {
			for i := range sz.par {
				e.put(b, t, fmt.Sprintf("get/%s/%d", sz.name, i), sz.size)
			}
		}
		for _, op := range []string{"GET", "PUT"} {
			for round := range *rounds {
				ts := []target{e.fedgate, e.versioned, e.ceiling}
				if op == "PUT" {
					ts = append(ts, e.ceilingMD5)
				}
				for _, t := range ts {
					b.Run(fmt.Sprintf("%s/%s/%s/round%d", op, sz.name, t.name, round), func(b *testing.B) {
						b.SetBytes(sz.size)
						var next sync.Mutex
						i := 0
						start := time.Now()
						b.SetParallelism((sz.par + 1) / 2) // GOMAXPROCS(2) × this = clients
						b.RunParallel(func(pb *testing.PB) {
							next.Lock()
							me := i % sz.par
							i++
							next.Unlock()
							n := 0
							for pb.Next() {
								if op == "GET" {
									e.get(b, t, fmt.Sprintf("get/%s/%d", sz.name, me), sz.size)
								} else {
									e.put(b, t, fmt.Sprintf("put/%s/%d/%d", sz.name, me, n%4), sz.size)
								}
								n++
							}
						})
						el := time.Since(start).Seconds()
						bps := float64(b.N) * float64(sz.size) / el
						b.ReportMetric(float64(b.N)/el, "req/s")
						record(round, sz.name, op, t.name, bps)
					})
				}
			}
		}
	}
}

// BenchmarkRSS32Streams: 32 clients each PUT then GET a 256 MiB object
// through fedgate at once; reports fedgate's peak RSS (VmHWM).
func BenchmarkRSS32Streams(b *testing.B) {
	e := setup(b)
	const clients, size = 32, 256 << 20
	for range b.N {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				key := fmt.Sprintf("rss/%d", c)
				e.put(b, e.fedgate, key, size)
				e.get(b, e.fedgate, key, size)
			})
		}
		wg.Wait()
	}
	peak, err := e.fg.PeakRSS()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peakRSS-MiB")
	resultsMu.Lock()
	notes = append(notes, fmt.Sprintf("peak RSS of fedgate with %d clients each streaming a 256 MiB object in and out: %.0f MiB", clients, float64(peak)/(1<<20)))
	resultsMu.Unlock()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// spread lists the per-round ratios, so a reader sees how noisy they were.
func spread(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

func printSummary() {
	if len(results) == 0 && len(notes) == 0 {
		return
	}
	var out bytes.Buffer
	if len(results) > 0 {
		fmt.Fprintln(&out, "\n| size | op | fedgate MB/s | ceiling MB/s | fedgate req/s | ceiling req/s | fedgate/ceiling: median (each round) | versioned bucket/ceiling: median (each round) | minimal S3 PUT/ceiling (each round) | fedgate/minimal S3 PUT (each round) |")
		fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|")
	}
	for _, sz := range sizes {
		ops := results[sz.name]
		if ops == nil {
			continue
		}
		var keys []string
		for op := range ops {
			keys = append(keys, op)
		}
		sort.Strings(keys)
		for _, op := range keys {
			fs, vs, cs, ms := ops[op]["fedgate"], ops[op]["versioned"], ops[op]["ceiling"], ops[op]["minimal-s3"]
			ratio := func(a, b []float64) []float64 {
				var r []float64
				for i := range min(len(a), len(b)) {
					r = append(r, a[i]/b[i])
				}
				return r
			}
			ratios, vratios := ratio(fs, cs), ratio(vs, cs)
			f, c := median(fs), median(cs)
			md5Cols := "- | -"
			if len(ms) > 0 {
				mr, fr := ratio(ms, cs), ratio(fs, ms)
				md5Cols = fmt.Sprintf("%.2f (%s) | %.2f (%s)", median(mr), spread(mr), median(fr), spread(fr))
			}
			fmt.Fprintf(&out, "| %s | %s | %.1f | %.1f | %.0f | %.0f | %.2f (%s) | %.2f (%s) | %s |\n", sz.name, op, f/1e6, c/1e6,
				f/float64(sz.size), c/float64(sz.size), median(ratios), spread(ratios), median(vratios), spread(vratios), md5Cols)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(&out, "\n"+n)
	}
	os.Stdout.Write(out.Bytes())
}

func staticCredentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(testserver.RootAccessKey, testserver.RootSecretKey, "")
}
