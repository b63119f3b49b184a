package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/loadgen"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
)

// bench runs `fedgate bench args...` with an environment without AWS
// settings (keys come as flags) and returns stdout, stderr and the exit
// status.
func bench(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"bench"}, args...)...)
	cmd.Env = benchEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// benchEnv is the process environment without AWS_* settings, so that
// only the flags a test gives say where and as whom to connect.
func benchEnv() []string {
	var env []string
	for _, kv := range exec.Command("true").Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return env
}

// bucketGone reports whether bucket no longer exists at c.
func bucketGone(t *testing.T, c *s3.Client, bucket string) bool {
	t.Helper()
	_, err := c.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchBucket")
}

// `fedgate bench get --compare`: fedgate against MinIO in alternating
// rounds, as a table and as JSON; both runs create the bucket on each side
// and leave nothing behind.
func TestBenchCompareWithMinIO(t *testing.T) {
	m := testenv.MinIO(t)
	s := startServer(t)
	common := []string{
		"--endpoint", s.Endpoint, "--access-key", rootAK, "--secret-key", rootSK,
		"--compare", m.Endpoint, "--compare-access-key", m.AccessKey, "--compare-secret-key", m.SecretKey,
		"--bucket", "bench-e2e", "--size", "16KiB", "--objects", "20", "--concurrency", "4",
	}

	out, errOut, code := bench(t, append([]string{"get", "--duration", "2s", "--rounds", "2", "--json"}, common...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if len(rep.Targets) != 2 || rep.Targets[0].Endpoint != s.Endpoint || rep.Targets[1].Endpoint != m.Endpoint || rep.Workload.Rounds != 2 {
		t.Fatalf("report targets %+v", rep.Targets)
	}
	for _, tr := range rep.Targets {
		if len(tr.Ops) != 1 {
			t.Fatalf("%s: ops %+v", tr.Name, tr.Ops)
		}
		g := tr.Ops[0]
		if g.Op != loadgen.OpGet || g.Count == 0 || g.Errors != 0 || g.Bytes != g.Count*16384 || g.Latency.P99 <= 0 || len(tr.Rounds) != 2 {
			t.Errorf("%s: get %+v, rounds %+v", tr.Name, g, tr.Rounds)
		}
		if tr.Cleanup.Removed != 20 || !tr.Cleanup.BucketRemoved {
			t.Errorf("%s: cleanup %+v", tr.Name, tr.Cleanup)
		}
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].OpsPerSec == nil || rep.Ratios[0].P50 == nil {
		t.Errorf("ratios %+v", rep.Ratios)
	}
	// Progress without a terminal: one line per phase at least.
	for _, want := range []string{s.Endpoint + ": writing the objects to read: 20 of 20", s.Endpoint + " round 2/2:", m.Endpoint + " round 1/2:", m.Endpoint + ": removing the objects written: 20 removed"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	mc := clientFor(m.Endpoint, m.AccessKey, m.SecretKey)
	if !bucketGone(t, s.root(), "bench-e2e") || !bucketGone(t, mc, "bench-e2e") {
		t.Errorf("a bucket the run created is still there")
	}

	out, errOut, code = bench(t, append([]string{"get", "--duration", "1s"}, common...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"fedgate bench get: sizes 16KiB, 20 objects, concurrency 4, 3 rounds of 1s per endpoint",
		s.Endpoint + "  bucket bench-e2e",
		"OP      ", "OPS/S", "MiB/S", "P50", "P99", "MAX",
		"get first byte: p50",
		"per round (ops/s): ",
		"Ratio " + s.Endpoint + " / " + m.Endpoint,
		"Removed 20 objects under s3://bench-e2e/fedgate-bench-",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !bucketGone(t, s.root(), "bench-e2e") || !bucketGone(t, mc, "bench-e2e") {
		t.Errorf("a bucket the run created is still there")
	}
}

// Mixed load on fedgate itself: every kind of request answers without an
// error; an existing bucket keeps what was in it, and only that.
func TestBenchMixedOnFedgate(t *testing.T) {
	s := startServer(t)
	c := s.root()
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("mine")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("mine"), Key: aws.String("keep-me"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := bench(t, "mixed", "--endpoint", s.Endpoint, "--access-key", rootAK, "--secret-key", rootSK, "--bucket", "mine",
		"--size", "1KiB-256KiB", "--objects", "30", "--concurrency", "6", "--duration", "2s", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Targets[0].Ops {
		if o.Count == 0 || o.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors %v", o.Op, o.Count, o.Errors, o.ErrorSamples)
		}
	}
	if len(rep.Targets[0].Ops) != 5 {
		t.Errorf("ops %+v: want get, put, stat, delete and total", rep.Targets[0].Ops)
	}
	lst, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("mine")})
	if err != nil {
		t.Fatal(err)
	}
	if len(lst.Contents) != 1 || aws.ToString(lst.Contents[0].Key) != "keep-me" {
		t.Errorf("bucket holds %d objects after the run, want only keep-me", len(lst.Contents))
	}
}

// Ctrl-C stops the run: it prints what it measured, marked interrupted,
// exits 130, and removes every object it wrote.
func TestBenchInterruptRemovesObjects(t *testing.T) {
	s := startServer(t)
	c := s.root()
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("ctrlc")}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "bench", "put", "--endpoint", s.Endpoint, "--access-key", rootAK, "--secret-key", rootSK,
		"--bucket", "ctrlc", "--size", "8KiB", "--concurrency", "4", "--duration", "5m")
	cmd.Env = benchEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	count := func() int {
		lst, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("ctrlc")})
		if err != nil {
			t.Fatal(err)
		}
		return len(lst.Contents)
	}
	wait.For(t, 30*time.Second, "the bench to write 50 objects", func() bool { return count() >= 50 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit 60s after SIGINT\nstderr:\n%s", errb.String())
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("exit: %v, want status 130\nstderr:\n%s", err, errb.String())
		}
	}
	if n := count(); n != 0 {
		t.Errorf("%d objects left after Ctrl-C", n)
	}
	for _, want := range []string{"INTERRUPTED", "Removed ", "put "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "Stopping; removing the objects written") {
		t.Errorf("stderr:\n%s", errb.String())
	}
}

// batch mode against MinIO (no batch GET) fails with a message that says
// so, and writes nothing.
func TestBenchBatchWithoutBatchGET(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	out, errOut, code := bench(t, "batch", "--endpoint", m.Endpoint, "--access-key", m.AccessKey, "--secret-key", m.SecretKey,
		"--bucket", bucket, "--objects", "10", "--duration", "1s")
	if code != 1 || !strings.Contains(errOut, "does not serve fedgate's batch GET: POST /_fedgate/v1/batch answered 400") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	lst, err := clientFor(m.Endpoint, m.AccessKey, m.SecretKey).ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil || len(lst.Contents) != 0 {
		t.Fatalf("bucket after the run: %v, %v", lst, err)
	}
}
