package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
)

// TestMetricsAndAccessLog: every S3 request is counted by operation and
// status and logged as one JSON line carrying the request id the client saw.
func TestMetricsAndAccessLog(t *testing.T) {
	s := startServer(t, "--log-level", "info")
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("ops")})
	mustOK(t, err)
	put(t, c, "ops", "k", bytes.Repeat([]byte("m"), 1000))
	getBytes(t, c, "ops", "k")
	_, err = c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("ops"), Key: aws.String("missing")})
	wantCode(t, err, "NoSuchKey")

	resp, err := http.Get(s.Endpoint + "/_fedgate/metrics")
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`fedgate_s3_requests_total{op="PutObject",status="200"} 1`,
		`fedgate_s3_requests_total{op="GetObject",status="404"} 1`,
		`fedgate_s3_bytes_out_total{op="GetObject"}`,
		`fedgate_s3_bytes_in_total{op="PutObject"}`,
		`fedgate_s3_request_duration_seconds_bucket{op="GetObject"`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Fatalf("metrics lack %s", want)
		}
	}

	// The 404's request id appears in exactly one access-log line.
	req, _ := http.NewRequest(http.MethodGet, s.Endpoint+"/ops/anon", nil)
	resp, err = http.DefaultClient.Do(req)
	mustOK(t, err)
	resp.Body.Close()
	id := resp.Header.Get("x-amz-request-id")
	var line map[string]any
	wait.For(t, 10*time.Second, "the access-log line", func() bool {
		f, err := os.Open(filepath.Join(s.DataDir, "server.log"))
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.Contains(sc.Text(), id) {
				return json.Unmarshal(sc.Bytes(), &line) == nil
			}
		}
		return false
	})
	if line["msg"] != "request" || line["request_id"] != id || line["status"] != float64(403) || line["error_code"] != "AccessDenied" ||
		line["bucket"] != "ops" || line["key"] != "anon" {
		t.Fatalf("access-log line: %v", line)
	}
	if strings.Contains(s.Log(), rootSK) {
		t.Fatal("the root secret key appears in the server log")
	}
}

// TestSIGTERMDrains: a request in flight when SIGTERM arrives completes,
// the server exits 0, and new connections are refused afterwards.
func TestSIGTERMDrains(t *testing.T) {
	s := startServer(t)
	c := s.root()
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("drain")})
	mustOK(t, err)
	const size = 8 << 20
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	req, _ := http.NewRequest(http.MethodPut, s.Endpoint+"/drain/slow", pr)
	req.ContentLength = size
	req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
	mustOK(t, v4.NewSigner().SignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()))
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		done <- err
	}()
	// Half the body, then SIGTERM, then the rest.
	if _, err := pw.Write(bytes.Repeat([]byte("a"), size/2)); err != nil {
		t.Fatal(err)
	}
	// The PUT must have reached a handler before SIGTERM: a connection still
	// in the listen backlog when the listener closes is reset, by design.
	wait.For(t, 10*time.Second, "the PUT to be in flight", func() bool {
		return s.metric("fedgate_s3_requests_in_flight") >= 1
	})
	if err := s.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "readyz to fail", func() bool {
		resp, err := http.Get(s.Endpoint + "/_fedgate/readyz")
		if err != nil {
			return true // the listener is already closed
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
	if _, err := pw.Write(bytes.Repeat([]byte("b"), size/2)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("in-flight PUT failed during drain: %v", err)
	}
	if code := s.ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM:\n%s", code, s.Log())
	}
	s.start()
	got, _ := getBytes(t, s.root(), "drain", "slow")
	if len(got) != size || got[0] != 'a' || got[size-1] != 'b' {
		t.Fatalf("drained PUT stored %d bytes", len(got))
	}
}
