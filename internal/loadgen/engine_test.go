package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

// minioTarget is a target on the test MinIO, with a bucket name of its own
// that does not exist yet (the run creates it).
func minioTarget(t *testing.T, m *testenv.S3Server, bucket string) Target {
	t.Helper()
	return Target{
		Endpoint: m.Endpoint, Region: m.Region, PathStyle: true, Bucket: bucket,
		Credentials: credentials.NewStaticCredentialsProvider(m.AccessKey, m.SecretKey, ""),
	}
}

func minioClient(m *testenv.S3Server) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(m.Endpoint), UsePathStyle: true, Region: m.Region,
		Credentials: credentials.NewStaticCredentialsProvider(m.AccessKey, m.SecretKey, ""),
	})
}

// uniqueBucket is a bucket name no test has used (the run creates it).
func uniqueBucket(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()[:min(b.Len(), 40)]
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	return strings.Trim(name, "-") + "-" + hex.EncodeToString(rb[:])
}

// keysUnder lists bucket/prefix (nil when the bucket does not exist).
func keysUnder(t *testing.T, c *s3.Client, bucket, prefix string) (keys []string, bucketExists bool) {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys, true
}

func baseConfig(mode Mode, targets ...Target) Config {
	return Config{
		Mode: mode, Targets: targets, Sizes: MustSizes("4KiB,16KiB"), Objects: 20, Concurrency: 4,
		Duration: 700 * time.Millisecond, Rounds: 1, Mix: DefaultMix, BatchSize: 8, ContinueOnError: true,
	}
}

// GET against MinIO, compared with a second bucket of the same MinIO in
// two rounds: both measured, ratios given, progress reported per phase,
// and the objects and the buckets the run created are gone afterwards.
func TestGetCompareAgainstMinIO(t *testing.T) {
	m := testenv.MinIO(t)
	a, b := minioTarget(t, m, uniqueBucket(t)), minioTarget(t, m, uniqueBucket(t)+"b")
	cfg := baseConfig(ModeGet, a, b)
	cfg.Rounds = 2
	var mu sync.Mutex
	phases := map[string]Snapshot{}
	cfg.Progress = func(s Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		if s.Final {
			phases[string(s.Phase)+" "+s.Target+" "+string(rune('0'+s.Round))] = s
		}
	}
	cfg.ProgressEvery = 50 * time.Millisecond
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 2 || rep.Interrupted {
		t.Fatalf("report: %+v", rep)
	}
	for _, tr := range rep.Targets {
		if len(tr.Ops) != 1 || tr.Ops[0].Op != OpGet {
			t.Fatalf("%s: ops %+v, want one get row", tr.Name, tr.Ops)
		}
		g := tr.Ops[0]
		if g.Count == 0 || g.Errors != 0 || g.Bytes < g.Count*4096 || g.Latency.P50 <= 0 || g.Latency.Max < g.Latency.P99 || g.FirstByte == nil {
			t.Errorf("%s: get = %+v", tr.Name, g)
		}
		if len(tr.Rounds) != 2 || tr.Seconds < 1.4 {
			t.Errorf("%s: rounds %+v over %.2fs, want 2 of 0.7s", tr.Name, tr.Rounds, tr.Seconds)
		}
		if tr.Prepare == nil || tr.Prepare.Objects != 20 {
			t.Errorf("%s: prepare = %+v", tr.Name, tr.Prepare)
		}
		if c := tr.Cleanup; c.Removed != 20 || !c.BucketRemoved || c.Error != "" {
			t.Errorf("%s: cleanup = %+v, want 20 removed and the bucket", tr.Name, c)
		}
		if _, exists := keysUnder(t, minioClient(m), tr.Bucket, ""); exists {
			t.Errorf("bucket %s is still there", tr.Bucket)
		}
	}
	if !strings.HasSuffix(rep.Targets[0].Name, "("+a.Bucket+")") {
		t.Errorf("two targets on one endpoint are named %q and %q: want the bucket in the name", rep.Targets[0].Name, rep.Targets[1].Name)
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].OpsPerSec == nil {
		t.Errorf("ratios = %+v", rep.Ratios)
	}
	// Both targets' sizes are the same draw.
	if rep.Targets[0].Prepare.Bytes != rep.Targets[1].Prepare.Bytes {
		t.Errorf("prepared %d and %d bytes: the targets got different objects", rep.Targets[0].Prepare.Bytes, rep.Targets[1].Prepare.Bytes)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"prepare " + rep.Targets[0].Name, "run " + rep.Targets[0].Name + " 1", "run " + rep.Targets[1].Name + " 2", "cleanup " + rep.Targets[1].Name} {
		found := false
		for k, s := range phases {
			if strings.HasPrefix(k, want) {
				found = true
				if s.Phase == PhaseRun && s.Ops == 0 {
					t.Errorf("final run snapshot %q counted no operations", k)
				}
				if s.Phase == PhaseCleanup && s.Done != 20 {
					t.Errorf("final cleanup snapshot %q: %d removed", k, s.Done)
				}
			}
		}
		if !found {
			t.Errorf("no final progress snapshot for %q (got %v)", want, phases)
		}
	}
}

// Mixed mode: every kind of operation runs, and none fails: a DELETE never
// takes an object a GET or HEAD is reading, and the pool keeps objects.
// An existing bucket is used and left in place; only the run's prefix goes.
func TestMixedAgainstMinIO(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	c := minioClient(m)
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("someone-elses"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(ModeMixed, minioTarget(t, m, bucket))
	cfg.Concurrency = 8
	cfg.Duration = 1500 * time.Millisecond
	cfg.Mix = Mix{Get: 30, Stat: 20, Put: 20, Delete: 30}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Targets[0]
	got := map[Op]OpReport{}
	for _, o := range tr.Ops {
		got[o.Op] = o
	}
	for _, op := range []Op{OpGet, OpStat, OpPut, OpDelete, OpTotal} {
		o, ok := got[op]
		if !ok || o.Count == 0 || o.Errors != 0 {
			t.Errorf("%s: %+v (present %v), want operations and no errors", op, o, ok)
		}
	}
	if sum := got[OpGet].Count + got[OpStat].Count + got[OpPut].Count + got[OpDelete].Count; got[OpTotal].Count != sum {
		t.Errorf("total %d, want the sum %d", got[OpTotal].Count, sum)
	}
	if got[OpStat].Bytes != 0 || got[OpPut].Bytes == 0 {
		t.Errorf("bytes: stat %d, put %d", got[OpStat].Bytes, got[OpPut].Bytes)
	}
	if tr.Cleanup.Error != "" || tr.Cleanup.BucketRemoved {
		t.Errorf("cleanup = %+v", tr.Cleanup)
	}
	if keys, _ := keysUnder(t, c, bucket, ""); len(keys) != 1 || keys[0] != "someone-elses" {
		t.Errorf("after the run the bucket holds %v, want only someone-elses", keys)
	}
	wantRemoved := 20 + got[OpPut].Count - got[OpDelete].Count
	if tr.Cleanup.Removed != wantRemoved {
		t.Errorf("cleanup removed %d, want 20 prepared + %d put - %d deleted = %d", tr.Cleanup.Removed, got[OpPut].Count, got[OpDelete].Count, wantRemoved)
	}
}

// Ctrl-C during a PUT run: the run stops, says so, reports what it did and
// removes every object it wrote.
func TestPutInterruptedCleansUp(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	cfg := baseConfig(ModePut, minioTarget(t, m, bucket))
	cfg.Duration = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.ProgressEvery = 20 * time.Millisecond
	cfg.Progress = func(s Snapshot) {
		if s.Phase == PhaseRun && s.Ops >= 30 {
			cancel()
		}
	}
	start := time.Now()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("the run took %s after the cancel", time.Since(start))
	}
	tr := rep.Targets[0]
	if !rep.Interrupted || tr.Ops[0].Count < 30 || tr.Ops[0].Errors != 0 {
		t.Fatalf("interrupted %v, put %+v", rep.Interrupted, tr.Ops[0])
	}
	if tr.Cleanup.Removed < tr.Ops[0].Count || tr.Cleanup.Error != "" {
		t.Errorf("cleanup %+v after %d PUTs", tr.Cleanup, tr.Ops[0].Count)
	}
	if keys, _ := keysUnder(t, minioClient(m), bucket, ""); len(keys) != 0 {
		t.Errorf("%d objects left: %v", len(keys), keys[:min(5, len(keys))])
	}
}

// --keep leaves the objects under the run's prefix.
func TestKeep(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	cfg := baseConfig(ModeGet, minioTarget(t, m, bucket))
	cfg.Objects = 5
	cfg.Duration = 200 * time.Millisecond
	cfg.Keep = true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Targets[0].Cleanup.Kept || !strings.HasPrefix(rep.Workload.Prefix, "fedgate-bench-") {
		t.Fatalf("cleanup %+v, prefix %q", rep.Targets[0].Cleanup, rep.Workload.Prefix)
	}
	if keys, _ := keysUnder(t, minioClient(m), bucket, rep.Workload.Prefix); len(keys) != 5 {
		t.Fatalf("kept %d objects under %s, want 5", len(keys), rep.Workload.Prefix)
	}
}

// --prefix goes before the run's own prefix.
func TestPrefix(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	cfg := baseConfig(ModePut, minioTarget(t, m, bucket))
	cfg.Prefix = "team-a/"
	cfg.Duration = 200 * time.Millisecond
	cfg.Keep = true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := keysUnder(t, minioClient(m), bucket, "")
	if len(keys) == 0 || int64(len(keys)) != rep.Targets[0].Ops[0].Count || !strings.HasPrefix(rep.Workload.Prefix, "team-a/fedgate-bench-") {
		t.Fatalf("prefix %q, %d PUTs, keys %v", rep.Workload.Prefix, rep.Targets[0].Ops[0].Count, keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, rep.Workload.Prefix+"put/") {
			t.Fatalf("key %q is not under %s", k, rep.Workload.Prefix)
		}
	}
}

// Setup failures are errors that say what is wrong, and nothing is left.
func TestSetupErrors(t *testing.T) {
	m := testenv.MinIO(t)
	bad := minioTarget(t, m, uniqueBucket(t))
	bad.Credentials = credentials.NewStaticCredentialsProvider(m.AccessKey, "wrong-secret", "")
	_, err := Run(context.Background(), baseConfig(ModeGet, bad))
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("wrong secret: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	gone := minioTarget(t, m, "b")
	gone.Endpoint = closed
	_, err = Run(context.Background(), baseConfig(ModePut, gone))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed port: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Mode = "list" }, "unknown mode"},
		{func(c *Config) { c.Concurrency = 0 }, "concurrency"},
		{func(c *Config) { c.Objects = 0 }, "objects"},
		{func(c *Config) { c.Mode, c.Targets[0].Endpoint = ModeBatch, "" }, "batch mode needs the endpoint"},
		{func(c *Config) { c.Targets = append(c.Targets, c.Targets[0]) }, "same endpoint and bucket"},
	} {
		cfg := baseConfig(ModeGet, minioTarget(t, m, "b"))
		tc.edit(&cfg)
		if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v", tc.want, err)
		}
	}
}
