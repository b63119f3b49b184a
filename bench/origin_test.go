package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// BenchmarkColdWarmOrigin reads one object whose origin is MinIO behind
// the fault wrapper, capped at 50 MB/s per stream (how one connection to a
// cloud behaves): (a) one GetObject straight from MinIO through the same
// cap, (b) the first (cold) read through fedgate, (c) the second (warm) one.
// FEDGATE_BENCH_ORIGIN_SIZE sets the size (default 1 GiB).
func BenchmarkColdWarmOrigin(b *testing.B) {
	size := int64(1 << 30)
	if v := os.Getenv("FEDGATE_BENCH_ORIGIN_SIZE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	const capBps = 50_000_000
	srv := testenv.MinIO(b)
	ctx := context.Background()
	minio, err := s3store.New(ctx, s3store.Config{Name: "minio", Location: policies.Location{Cloud: "aws", Region: "us-east-1"},
		Bucket: srv.NewBucket(b), Region: srv.Region, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := minio.Put(ctx, "dataset.bin", reader(size), size, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	origin := faulty.Wrap(minio, faulty.Config{BandwidthPerStream: capBps})

	for range b.N {
		// (a) one stream straight from the origin.
		start := time.Now()
		rc, err := origin.ReadRange(ctx, "dataset.bin", 0, -1, "")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size {
			b.Fatalf("direct read: %d bytes, %v", n, err)
		}
		direct := float64(size) / time.Since(start).Seconds()

		// (b), (c) through a fresh fedgate node.
		st := testserver.InProcess(b, origin, testserver.StackOptions{})
		ps := s3.NewPresignClient(s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(st.Endpoint), UsePathStyle: true,
			Credentials: staticCredentials()}))
		req, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("dataset.bin")})
		if err != nil {
			b.Fatal(err)
		}
		read := func() float64 {
			start := time.Now()
			resp, err := http.Get(req.URL)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n != size || resp.StatusCode != 200 {
				b.Fatalf("fedgate read: %s, %d bytes, %v", resp.Status, n, err)
			}
			return float64(size) / time.Since(start).Seconds()
		}
		cold, warm := read(), read()
		b.ReportMetric(direct/1e6, "direct-MB/s")
		b.ReportMetric(cold/1e6, "cold-MB/s")
		b.ReportMetric(warm/1e6, "warm-MB/s")
		b.ReportMetric(cold/direct, "cold/direct")
		b.ReportMetric(warm/direct, "warm/direct")
		resultsMu.Lock()
		notes = append(notes, fmt.Sprintf("%d MiB object, origin MinIO capped at 50 MB/s per stream: (a) direct %.1f MB/s, (b) cold through fedgate %.1f MB/s, (c) warm %.1f MB/s; b/a = %.1f, c/a = %.1f",
			size>>20, direct/1e6, cold/1e6, warm/1e6, cold/direct, warm/direct))
		resultsMu.Unlock()
	}
}
