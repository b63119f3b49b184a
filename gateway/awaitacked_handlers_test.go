package gateway_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// The fake stands for a follower that acknowledged a write before applying
// it (gatewaytest.Fake.Acknowledge): the object is there only once
// Backend.AwaitAcked has run. Every read path must call it before reading,
// or it misses the write its client saw acknowledged.
func TestReadYourWritesOnFollower(t *testing.T) {
	const body = "acknowledged, not applied"
	for _, tc := range []struct {
		name string
		read func(e *env) (string, error)
	}{
		{"GetObject", func(e *env) (string, error) {
			out, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
			if err != nil {
				return "", err
			}
			defer out.Body.Close()
			b, err := io.ReadAll(out.Body)
			return string(b), err
		}},
		{"HeadObject", func(e *env) (string, error) {
			out, err := e.root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d bytes", aws.ToInt64(out.ContentLength)), nil
		}},
		{"ListObjectsV2", func(e *env) (string, error) {
			out, err := e.root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt")})
			if err != nil {
				return "", err
			}
			if len(out.Contents) != 1 {
				return "", fmt.Errorf("%d objects listed, want 1", len(out.Contents))
			}
			return aws.ToString(out.Contents[0].Key), nil
		}},
		{"batch", func(e *env) (string, error) {
			resp, b := e.rootBatch(gateway.BatchRequest{Entries: []gateway.BatchEntry{{Bucket: "bkt", Key: "k"}}})
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			tr := tar.NewReader(bytes.NewReader(b))
			h, err := tr.Next()
			if err != nil {
				return "", err
			}
			data, err := io.ReadAll(tr)
			return h.Name + ":" + string(data), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			e.fake.Acknowledge("bkt", "k", []byte(body))
			got, err := tc.read(e)
			if err != nil {
				t.Fatalf("read after an acknowledged write: %v (AwaitAcked called %d times)", err, e.fake.AwaitAckedCalls())
			}
			want := map[string]string{"GetObject": body, "HeadObject": fmt.Sprintf("%d bytes", len(body)),
				"ListObjectsV2": "k", "batch": "bkt/k:" + body}[tc.name]
			if got != want {
				t.Fatalf("read %q, want %q", got, want)
			}
			if n := e.fake.AwaitAckedCalls(); n != 1 {
				t.Fatalf("AwaitAcked called %d times, want once per request", n)
			}
		})
	}
}

// A node that cannot catch up answers 503 SlowDown before it reads
// anything: Stat, made to fail otherwise, is never reached.
func TestAwaitAckedBehindRefusesBeforeReading(t *testing.T) {
	e := newEnv(t)
	e.bucket("bkt")
	e.object("bkt", "k", "old")
	e.fake.Fail(gatewaytest.OpAwaitAcked, fmt.Errorf("%w: test", backend.ErrBehind))
	e.fake.Fail(gatewaytest.OpStat, errors.New("Stat reached before AwaitAcked"))
	_, err := e.root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	resp := wantErr(t, err, "SlowDown", http.StatusServiceUnavailable)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if n := e.fake.AwaitAckedCalls(); n != 1 {
		t.Fatalf("AwaitAcked called %d times, want 1", n)
	}
}
