package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
)

// BenchmarkBatchGet compares, in one run, samples per second of
//
//	(a) batch GETs through fedgate (POST /_fedgate/v1/batch, 256 samples a
//	    batch, batchClients batches in flight),
//	(b) per-object GETs through fedgate, 16 concurrent clients,
//	(c) per-object GETs straight from MinIO, 16 concurrent clients,
//
// for 16 KiB and 128 KiB samples of a bucket fedgate mounts from MinIO:
// warm (every sample in fedgate's cache) and cold (a fedgate bucket whose
// origin, and the direct clients of (c), reach MinIO through a proxy
// capping each connection at 50 MB/s, as the cold/warm benchmark caps one
// stream of a cloud; every cold batch reads samples never read before).
// The per-object clients use presigned URLs made once per key, so they
// spend no time signing; a batch is signed with aws-sdk-go-v2's SigV4
// signer. The summary prints a/b and a/c per round.
func BenchmarkBatchGet(b *testing.B) {
	const capBps = 50_000_000
	rtts := parseDurations(b, *coldRTTs)
	srv := testenv.MinIO(b)
	bucket := srv.NewBucket(b)
	endpoint := strings.TrimPrefix(srv.Endpoint, "http://")
	mc := s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})

	// One fedgate: bucket "data" mounted from the MinIO bucket through the
	// capped proxy, metadata trusted for an hour (a dataset's cache.ttl);
	// bucket "cold<i>" the same through a proxy that also adds round trip
	// rtts[i].
	b.Setenv("FG_BENCH_AK", srv.AccessKey)
	b.Setenv("FG_BENCH_SK", srv.SecretKey)
	store := func(name, proxy string) string {
		return fmt.Sprintf(`  - name: %s
    kind: s3
    location: aws:us-east-1
    bucket: %s
    endpoint: %s
    path_style: true
    credentials: {access_key_env: FG_BENCH_AK, secret_key_env: FG_BENCH_SK}
`, name, bucket, proxy)
	}
	proxy := "http://" + startThrottleProxy(b, endpoint, capBps)
	stores := store("origin", proxy)
	buckets := "  - {name: data, origin: origin, cache: {ttl: 1h}}\n"
	coldProxies := make([]string, len(rtts))
	for i, rtt := range rtts {
		coldProxies[i] = "http://" + startDelayProxy(b, endpoint, capBps, rtt)
		stores += store(fmt.Sprintf("origin%d", i), coldProxies[i])
		buckets += fmt.Sprintf("  - {name: cold%d, origin: origin%d, cache: {ttl: 1h}}\n", i, i)
	}
	policy := "regions:\n  - {name: bench, location: onprem:lab}\nstores:\n" + stores + "buckets:\n" + buckets
	pf := filepath.Join(b.TempDir(), "policy.yaml")
	if err := os.WriteFile(pf, []byte(policy), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{"--config", pf, "--cache-size", "4GiB"}
	if d := os.Getenv("FEDGATE_BENCH_DEBUG_LISTEN"); d != "" {
		args = append(args, "--debug-listen", d)
	}
	fg := testserver.Start(b, binary, b.TempDir(), args...)
	fgc := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(fg.Endpoint), UsePathStyle: true, Credentials: staticCredentials()})
	// One client for (a), (b) and (c). Its answers are read in 64 KiB
	// blocks, as clients/python reads a batch's tar stream (_TAR_BUFSIZE);
	// with net/http's default 4 KiB, the client made several read calls
	// per 16 KiB sample, for batches and single GETs alike.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true, ReadBufferSize: 64 << 10}}
	bc := &batchClient{endpoint: fg.Endpoint, client: client}

	var summary []string
	for _, sz := range []struct {
		name string
		size int
	}{{"16KiB", 16 << 10}, {"128KiB", 128 << 10}} {
		// The warm set: warmBatches x 256 samples, read once before.
		warm := uploadSamples(b, mc, bucket, "warm/"+sz.name, *warmBatches*batchSize, sz.size)
		if *batchWarm {
			for i := 0; i < len(warm); i += batchSize {
				bc.get(b, "data", warm[i:min(i+batchSize, len(warm))], sz.size)
			}
			perFedgate := presigner(b, fgc, "data")
			perMinIO := presigner(b, mc, bucket)
			originBefore := metric(b, fg.Endpoint, "fedgate_cache_origin_bytes_total")
			// One value per round: the last (largest b.N) run of each
			// sub-benchmark wins.
			aw, bw, cw := make([]float64, *rounds), make([]float64, *rounds), make([]float64, *rounds)
			for round := range *rounds {
				b.Run(fmt.Sprintf("warm/%s/a-batch/round%d", sz.name, round), func(b *testing.B) {
					aw[round] = measure(b, func(b *testing.B, n int) { bc.parallel(b, "data", warm, n, sz.size) })
				})
				b.Run(fmt.Sprintf("warm/%s/b-fedgate-per-object/round%d", sz.name, round), func(b *testing.B) {
					bw[round] = measure(b, func(b *testing.B, n int) { perObject(b, client, perFedgate, warm, n, sz.size) })
				})
				b.Run(fmt.Sprintf("warm/%s/c-minio-per-object/round%d", sz.name, round), func(b *testing.B) {
					cw[round] = measure(b, func(b *testing.B, n int) { perObject(b, client, perMinIO, warm, n, sz.size) })
				})
			}
			if d := metric(b, fg.Endpoint, "fedgate_cache_origin_bytes_total") - originBefore; d != 0 {
				summary = append(summary, fmt.Sprintf("note: the warm %s runs read %.0f bytes from the origin (not all warm)", sz.name, d))
			}
			var ab, acw []float64
			for i := range min(len(aw), len(bw), len(cw)) {
				ab = append(ab, aw[i]/bw[i])
				acw = append(acw, aw[i]/cw[i])
			}
			summary = append(summary,
				fmt.Sprintf("batch GET, %s samples, batches of %d, %d batches in flight: warm (a) batch %.0f samples/s, (b) fedgate per-object x16 %.0f, (c) MinIO per-object x16 %.0f; a/b = %.2f (%s), a/c = %.2f (%s)",
					sz.name, batchSize, *batchClients, median(aw), median(bw), median(cw), median(ab), spread(ab), median(acw), spread(acw)))
		}
		if !*batchCold {
			continue
		}
		coldSeq := 0
		for i, rtt := range rtts {
			coldBucket := fmt.Sprintf("cold%d", i)
			perMinIOCapped := presigner(b, s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String(coldProxies[i]), UsePathStyle: true,
				Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")}), bucket)
			ac, cc := make([]float64, *rounds), make([]float64, *rounds)
			for round := range *rounds {
				b.Run(fmt.Sprintf("cold-rtt%s/%s/a-batch/round%d", rtt, sz.name, round), func(b *testing.B) {
					ac[round] = measureCold(b, func(b *testing.B, n int) []string {
						coldSeq++
						return uploadSamples(b, mc, bucket, fmt.Sprintf("cold/%s/%d", sz.name, coldSeq), n*batchSize, sz.size)
					}, func(b *testing.B, keys []string) { bc.parallel(b, coldBucket, keys, len(keys)/batchSize, sz.size) })
				})
				b.Run(fmt.Sprintf("cold-rtt%s/%s/c-minio-capped-per-object/round%d", rtt, sz.name, round), func(b *testing.B) {
					cc[round] = measure(b, func(b *testing.B, n int) { perObject(b, client, perMinIOCapped, warm, n, sz.size) })
				})
			}
			var acc []float64
			for i := range min(len(ac), len(cc)) {
				acc = append(acc, ac[i]/cc[i])
			}
			summary = append(summary,
				fmt.Sprintf("batch GET, %s samples, cold (origin capped at 50 MB/s per connection, round trip +%s): (a) batch %.0f samples/s, (c) MinIO per-object x16 through the same proxy %.0f; a/c = %.2f (%s)",
					sz.name, rtt, median(ac), median(cc), median(acc), spread(acc)))
		}
	}
	resultsMu.Lock()
	notes = append(notes, summary...)
	resultsMu.Unlock()
}

// parseDurations parses a comma-separated list of durations ("0,50ms").
func parseDurations(b *testing.B, list string) []time.Duration {
	var out []time.Duration
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f == "0" {
			f = "0s"
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			b.Fatalf("-coldrtts: %v", err)
		}
		out = append(out, d)
	}
	return out
}

const batchSize = 256

var (
	batchClients = flag.Int("batchclients", 4, "batch GETs in flight at once in BenchmarkBatchGet (as DataLoader workers)")
	warmBatches  = flag.Int("warmbatches", 4, "batches of 256 samples in BenchmarkBatchGet's warm set")
	coldRTTs     = flag.String("coldrtts", "0,50ms", "round trips the cold origins of BenchmarkBatchGet add (comma-separated; 0: the cap alone)")
	batchWarm    = flag.Bool("batchwarm", true, "run BenchmarkBatchGet's warm variant")
	batchCold    = flag.Bool("batchcold", true, "run BenchmarkBatchGet's cold variants")
)

// measure runs b.N units of 256 samples with run and returns samples/s.
func measure(b *testing.B, run func(b *testing.B, n int)) float64 {
	b.ResetTimer()
	start := time.Now()
	run(b, b.N)
	el := time.Since(start).Seconds()
	rate := float64(b.N*batchSize) / el
	b.ReportMetric(rate, "samples/s")
	return rate
}

// measureCold makes b.N x 256 fresh samples (untimed), then times run
// over them.
func measureCold(b *testing.B, prepare func(b *testing.B, n int) []string, run func(b *testing.B, keys []string)) float64 {
	b.StopTimer()
	keys := prepare(b, b.N)
	b.StartTimer()
	start := time.Now()
	run(b, keys)
	el := time.Since(start).Seconds()
	rate := float64(len(keys)) / el
	b.ReportMetric(rate, "samples/s")
	return rate
}

// uploadSamples puts n random samples of size bytes under prefix in the
// MinIO bucket, 16 at a time, and returns their keys.
func uploadSamples(b *testing.B, c *s3.Client, bucket, prefix string, n, size int) []string {
	b.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%06d.bin", prefix, i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range 16 {
		wg.Go(func() {
			buf := make([]byte, size)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				for j := range buf {
					buf[j] = byte(i*31 + j*7)
				}
				if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[i]), Body: bytes.NewReader(buf)}); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return keys
}

// batchClient posts signed batches and reads the tar answers.
type batchClient struct {
	endpoint string
	client   *http.Client
}

type benchEntry struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// get reads one batch of keys and checks every entry's name and size.
func (c *batchClient) get(b *testing.B, bucket string, keys []string, size int) {
	req := struct {
		Entries []benchEntry `json:"entries"`
	}{}
	for _, k := range keys {
		req.Entries = append(req.Entries, benchEntry{bucket, k})
	}
	body, _ := json.Marshal(req)
	hr, err := testserver.BatchRequest(context.Background(), c.endpoint, testserver.RootAccessKey, testserver.RootSecretKey, body)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := c.client.Do(hr)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("batch: %s: %s", resp.Status, msg)
	}
	tr := tar.NewReader(resp.Body)
	for i, k := range keys {
		h, err := tr.Next()
		if err != nil {
			b.Fatalf("batch entry %d: %v", i, err)
		}
		n, err := io.Copy(io.Discard, tr)
		if err != nil || h.Name != bucket+"/"+k || n != int64(size) {
			b.Fatalf("batch entry %d: %s, %d bytes, %v", i, h.Name, n, err)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		b.Fatalf("batch: after the last entry: %v", err)
	}
}

// parallel reads n batches of 256 keys (keys shuffled, as a training
// epoch), batchClients at a time.
func (c *batchClient) parallel(b *testing.B, bucket string, keys []string, n, size int) {
	order := append([]string(nil), keys...)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var next atomic.Int64
	var wg sync.WaitGroup
	for range *batchClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := (i * batchSize) % len(order)
				batch := order[start:min(start+batchSize, len(order))]
				if len(batch) < batchSize {
					batch = append(append([]string(nil), batch...), order[:batchSize-len(batch)]...)
				}
				c.get(b, bucket, batch, size)
			}
		})
	}
	wg.Wait()
}

// presigner returns presigned GET URLs of bucket's keys, made once each.
func presigner(b *testing.B, c *s3.Client, bucket string) func(key string) string {
	ps := s3.NewPresignClient(c)
	var mu sync.Mutex
	cache := map[string]string{}
	return func(key string) string {
		mu.Lock()
		defer mu.Unlock()
		if u, ok := cache[key]; ok {
			return u
		}
		req, err := ps.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}, s3.WithPresignExpires(6*time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		cache[key] = req.URL
		return req.URL
	}
}

// perObject GETs n x 256 samples (keys shuffled) with 16 concurrent
// clients.
func perObject(b *testing.B, client *http.Client, url func(string) string, keys []string, n, size int) {
	order := append([]string(nil), keys...)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, k := range order { // presign outside the clients' loop
		url(k)
	}
	total := n * batchSize
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				resp, err := client.Get(url(order[i%len(order)]))
				if err != nil {
					b.Error(err)
					return
				}
				got, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || got != int64(size) {
					b.Errorf("GET: %s, %d bytes, %v", resp.Status, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// metric reads one unlabelled sample from a fedgate's /_fedgate/metrics.
func metric(b *testing.B, endpoint, name string) float64 {
	resp, err := http.Get(endpoint + "/_fedgate/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
