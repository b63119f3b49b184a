package bench

//lint:file-ignore SA1019 the peer is aws-sdk-go-v2's upload manager (feature/s3/manager), which the SDK deprecated in favour of transfermanager, still v0.x

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// s3PutSizeEnv overrides BenchmarkS3StorePut's object size (bytes).
const s3PutSizeEnv = "FEDGATE_BENCH_S3PUT_SIZE"

// BenchmarkS3StorePut compares, in one run, a large PUT through fedgate's
// s3 store (store/s3: parts of 16 MiB, 4 in flight, the
// store's defaults) with aws-sdk-go-v2's upload manager (feature/s3/manager,
// the same part size and concurrency, its other settings default) sending
// the same bytes straight to MinIO. Both reach MinIO through the same
// chain: an HTTP proxy that counts the S3 calls, then a TCP proxy capping
// every connection at 50 MB/s (a cloud's per-stream limit). Rounds
// alternate; each object is deleted, untimed, after its upload. The
// summary prints MB/s of each, the ratio store/manager per round, and the
// calls each made: the store's one upload (no staging copy, no
// server-side copy) plus its HEAD and sidecar PUT.
func BenchmarkS3StorePut(b *testing.B) {
	const capBps = 50_000_000
	size := int64(1 << 30)
	if v := os.Getenv(s3PutSizeEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a byte count", s3PutSizeEnv, v)
		}
		size = n
	}
	srv := testenv.MinIO(b)
	bucket := srv.NewBucket(b)
	throttle := startThrottleProxy(b, strings.TrimPrefix(srv.Endpoint, "http://"), capBps)
	kinds := testenv.CountS3Calls(b, "http://"+throttle)

	ctx := context.Background()
	st, err := s3store.New(ctx, s3store.Config{
		Name: "bench", Location: policies.Location{Cloud: "aws", Region: srv.Region}, Bucket: bucket,
		Region: srv.Region, Endpoint: kinds.URL, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	client := s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String(kinds.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	uploader := manager.NewUploader(client, func(u *manager.Uploader) {
		u.PartSize = s3store.DefaultPartSize
		u.Concurrency = s3store.DefaultConcurrency
	})
	remove := func(key string) {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
			b.Fatal(err)
		}
	}

	var storeRates, peerRates, ratios []float64
	var storeCalls, peerCalls string
	for round := range *rounds {
		kinds.Take()
		key := fmt.Sprintf("store-%d", round)
		start := time.Now()
		if _, err := st.Put(ctx, key, reader(size), size, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		sr := float64(size) / time.Since(start).Seconds()
		storeCalls = fmt.Sprint(kinds.Take())
		remove(key)

		kinds.Take()
		key = fmt.Sprintf("manager-%d", round)
		start = time.Now()
		if _, err := uploader.Upload(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: reader(size)}); err != nil {
			b.Fatal(err)
		}
		pr := float64(size) / time.Since(start).Seconds()
		peerCalls = fmt.Sprint(kinds.Take())
		remove(key)

		b.Logf("round %d: s3 store %.1f MB/s, upload manager %.1f MB/s", round, sr/1e6, pr/1e6)
		storeRates, peerRates, ratios = append(storeRates, sr), append(peerRates, pr), append(ratios, sr/pr)
	}
	b.ReportMetric(median(ratios), "store/manager")
	resultsMu.Lock()
	notes = append(notes, fmt.Sprintf("PUT of %d MiB through 50 MB/s-per-connection caps, 16 MiB parts, 4 in flight: "+
		"fedgate's s3 store %.1f MB/s, aws-sdk-go-v2 upload manager straight to MinIO %.1f MB/s; store/manager = %.2f (%s)\n"+
		"  calls of the store's last PUT: %s; the manager's: %s",
		size>>20, median(storeRates)/1e6, median(peerRates)/1e6, median(ratios), spread(ratios), storeCalls, peerCalls))
	resultsMu.Unlock()
}
