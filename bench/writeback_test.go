package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
)

// Environment variables the region's s3 store reads its MinIO keys from
// (fedgate servers inherit this process's environment).
const (
	wbMinIOAKEnv = "FEDGATE_BENCH_MINIO_AK"
	wbMinIOSKEnv = "FEDGATE_BENCH_MINIO_SK"
)

func envInt(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// BenchmarkWriteBackPut measures PUT throughput of large objects into a
// write-back bucket of a 3-node region of real processes, and in the same
// run:
//
//   - (a) the disk's limit: the same bytes written as --write-back-copies
//     (2) copies with plain os.File writes into two directories of the same
//     disk, then both fsynced (every node of this region shares one disk);
//   - (b) a write-through PUT of the same object, through the same node, to
//     a bucket of the same region whose store is MinIO (internal/testenv)
//     behind a proxy that caps every TCP connection at 50 MB/s each way
//     (how one connection to a cloud behaves; the s3 store sends 4 parts
//     at once, each on its own connection);
//   - (b0), once: one presigned PUT straight to MinIO through the same
//     proxy (one stream).
//
// Objects go one at a time, object i through node i mod 3 (so through the
// leader and the followers); after each write-back PUT the benchmark waits
// for the drain to the NAS store to finish (and reports how long it took),
// so the drain never overlaps a measurement. Bodies are streamed from a
// repeating 1 MiB block, never held in memory.
//
// FEDGATE_BENCH_WB_SIZE (bytes, default 1 GiB) and FEDGATE_BENCH_WB_OBJECTS
// (default 3) set the size and count. With FEDGATE_BENCH_PPROF_DIR set, a
// 4-second CPU profile of every node is saved there during the first
// write-back PUT (through the leader). Run it with -benchtime 1x.
func BenchmarkWriteBackPut(b *testing.B) {
	size := envInt(b, "FEDGATE_BENCH_WB_SIZE", 1<<30)
	objects := int(envInt(b, "FEDGATE_BENCH_WB_OBJECTS", 3))
	const capBps = 50_000_000

	srv := testenv.MinIO(b)
	mbucket := srv.NewBucket(b)
	proxy := startThrottleProxy(b, srv.Endpoint[len("http://"):], capBps)
	os.Setenv(wbMinIOAKEnv, srv.AccessKey)
	os.Setenv(wbMinIOSKEnv, srv.SecretKey)
	r := startRegion(b, regionOptions{
		stores: `  - name: cloud
    kind: s3
    location: aws:us-east-1
    bucket: ` + mbucket + `
    endpoint: http://` + proxy + `
    path_style: true
    credentials: {access_key_env: ` + wbMinIOAKEnv + `, secret_key_env: ` + wbMinIOSKEnv + `}
`,
		buckets: `  - name: cloudwt
    placement: {single: cloud}
`,
		args:  []string{"--staging-size", "8GiB"},
		debug: os.Getenv(pprofEnv) != "",
	})
	// Object i goes through order[i mod 3]: the leader first, then the
	// followers.
	leader := r.leader(b)
	var order []int
	for i, s := range r.nodes {
		if s.id == leader {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}

	for range b.N {
		var rows []wbRow
		for i := range objects {
			node := order[i%len(order)]
			role := "follower"
			if i%len(order) == 0 {
				role = "leader"
			}
			row := wbRow{node: r.nodes[node].id + " (" + role + ")"}
			key := fmt.Sprintf("obj-%d", i)
			ps := s3.NewPresignClient(r.s3Client(node))

			// fedgate, write-back.
			var prof sync.WaitGroup
			if dir := os.Getenv(pprofEnv); dir != "" && i == 0 {
				profileNodes(b, r, dir, &prof)
			}
			row.writeBack = timedPut(b, hc, ps, "ckpt", key, size)
			prof.Wait()
			start := time.Now()
			r.waitDrained(b, 30*time.Minute)
			row.drain = float64(size) / time.Since(start).Seconds()

			// (a) two copies, plain files, fsynced.
			row.files = twoCopies(b, size)

			// (b) fedgate, write-through to capped MinIO.
			row.writeThrough = timedPut(b, hc, ps, "cloudwt", key, size)
			rows = append(rows, row)
		}
		// (b0) one stream straight to MinIO through the cap.
		mc := s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String("http://" + proxy), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
		direct := timedPut(b, hc, s3.NewPresignClient(mc), mbucket, "direct", size)

		wb, files, wt := aggregate(rows)
		b.ReportMetric(wb/1e6, "writeback-MB/s")
		b.ReportMetric(files/1e6, "2copies-MB/s")
		b.ReportMetric(wt/1e6, "writethrough-MB/s")
		resultsMu.Lock()
		notes = append(notes, wbSummary(size, rows, direct))
		resultsMu.Unlock()
	}
}

type wbRow struct {
	node                                  string
	writeBack, drain, files, writeThrough float64 // bytes/s
}

func wbSummary(size int64, rows []wbRow, direct float64) string {
	var out bytes.Buffer
	fmt.Fprintf(&out, "Write-back PUT of %d MiB objects, one at a time (MB/s; ratios are write-back / peer):\n\n", size>>20)
	fmt.Fprintln(&out, "| object via | fedgate write-back | (a) 2 fsynced file copies | (b) fedgate write-through, MinIO capped 50 MB/s/conn | write-back/(a) | write-back/(b) | drain to NAS after it |")
	fmt.Fprintln(&out, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f |\n", r.node, r.writeBack/1e6, r.files/1e6, r.writeThrough/1e6,
			r.writeBack/r.files, r.writeBack/r.writeThrough, r.drain/1e6)
	}
	wb, files, wt := aggregate(rows)
	fmt.Fprintf(&out, "| all (total bytes / total time) | %.1f | %.1f | %.1f | %.2f | %.1f | |\n", wb/1e6, files/1e6, wt/1e6, wb/files, wb/wt)
	fmt.Fprintf(&out, "\n(b0) one presigned PUT straight to MinIO through the same 50 MB/s cap: %.1f MB/s\n", direct/1e6)
	return out.String()
}

// timedPut streams size bytes to bucket/key with a presigned PUT (the
// client does no hashing: UNSIGNED-PAYLOAD) and returns bytes/s.
func timedPut(b *testing.B, hc *http.Client, ps *s3.PresignClient, bucket, key string, size int64) float64 {
	b.Helper()
	req, err := ps.PresignPutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)},
		s3.WithPresignExpires(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPut, req.URL, reader(size))
	hr.ContentLength = size
	for k, v := range req.SignedHeader {
		hr.Header[k] = v
	}
	start := time.Now()
	resp, err := hc.Do(hr)
	if err != nil {
		b.Fatalf("PUT %s/%s: %v", bucket, key, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	el := time.Since(start).Seconds()
	if resp.StatusCode != 200 {
		b.Fatalf("PUT %s/%s: %s %s", bucket, key, resp.Status, msg)
	}
	return float64(size) / el
}

// twoCopies writes size bytes into a file in each of two directories,
// fsyncs both, and returns bytes/s (of one copy, like a PUT). The files
// are removed afterwards.
func twoCopies(b *testing.B, size int64) float64 {
	b.Helper()
	var fs []*os.File
	for range 2 {
		f, err := os.Create(filepath.Join(b.TempDir(), "copy"))
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	defer func() {
		for _, f := range fs {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	start := time.Now()
	body := reader(size)
	buf := make([]byte, 256<<10) // fedgate's staging copy buffer
	for {
		n, err := body.Read(buf)
		for _, f := range fs {
			if _, werr := f.Write(buf[:n]); werr != nil {
				b.Fatal(werr)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(fs))
	for i, f := range fs {
		wg.Go(func() { errs[i] = f.Sync() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return float64(size) / time.Since(start).Seconds()
}

// aggregate is each column's total bytes over total time (the objects are
// the same size, so this is the harmonic mean of the rates).
func aggregate(rows []wbRow) (wb, files, wt float64) {
	hm := func(f func(wbRow) float64) float64 {
		var inv float64
		for _, r := range rows {
			inv += 1 / f(r)
		}
		return float64(len(rows)) / inv
	}
	return hm(func(r wbRow) float64 { return r.writeBack }), hm(func(r wbRow) float64 { return r.files }),
		hm(func(r wbRow) float64 { return r.writeThrough })
}

// profileNodes starts 4-second CPU profiles of every node, saved in dir as
// writeback-<id>.pprof; wg is done when they are.
func profileNodes(b *testing.B, r *region, dir string, wg *sync.WaitGroup) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, s := range r.nodes {
		wg.Go(func() {
			time.Sleep(500 * time.Millisecond) // pacing: start the profiles half a second into the PUT
			if err := s.profileCPU(context.Background(), dir, 4, "writeback-"+s.id+".pprof"); err != nil {
				b.Error(err)
			}
		})
	}
}
