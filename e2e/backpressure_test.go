package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/wait"
)

// TestWriteBackBackpressure: staging is bounded. While the store cannot
// take the drains, a write-back PUT that does not fit waits --staging-wait
// and then gets 503 SlowDown, storing nothing; once the store is back,
// the backlog drains, room is freed at once and the PUT succeeds. Nothing
// acknowledged is lost.
func TestWriteBackBackpressure(t *testing.T) {
	nas := t.TempDir()
	s := startServer(t, "--config", writeBackPolicy(t, nas), "--staging-size", "12MiB", "--staging-wait", "2s")
	c := s.root()
	put(t, c, "ckpt", "warm/x", []byte("x"))
	wait.For(t, 10*time.Second, "the first object to drain", func() bool { return s.metric("fedgate_writeback_backlog_objects") == 0 })

	// Break the bucket's directory in the NAS: drains now fail.
	entries, err := os.ReadDir(nas)
	mustOK(t, err)
	var dir string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dir = filepath.Join(nas, e.Name())
		}
	}
	if dir == "" {
		t.Fatalf("no bucket directory in the NAS: %v", entries)
	}
	mustOK(t, os.Rename(dir, dir+".away"))
	mustOK(t, os.WriteFile(dir, []byte("not a directory"), 0o644))

	first := payload("bp-1", 8<<20)
	put(t, c, "ckpt", "bp/1", first) // fits: acknowledged, staged, cannot drain
	start := time.Now()
	_, err = c.PutObject(ctx(t), putInput("ckpt", "bp/2", payload("bp-2", 8<<20)))
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "SlowDown" {
		t.Fatalf("PUT into full staging: %v, want 503 SlowDown", err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the PUT failed after %v, before --staging-wait (2s) had passed", waited)
	}
	if s.metric("fedgate_writeback_staging_full_total") == 0 {
		t.Fatal("the refused PUT was not counted")
	}
	if got, _ := getBytes(t, c, "ckpt", "bp/1"); string(got) != string(first) {
		t.Fatal("the acknowledged object is not served from staging while the store is down")
	}
	if _, err := c.HeadObject(ctx(t), headInput("ckpt", "bp/2")); !isNotFound(err) {
		t.Fatalf("the refused PUT left an object behind: %v", err)
	}

	// The store comes back: the backlog drains (failed drains retry with a
	// backoff of up to 30 s), room is freed, and PUTs fit again: each
	// 8 MiB PUT waits, if it must, for the drain of the one before.
	mustOK(t, os.Remove(dir))
	mustOK(t, os.Rename(dir+".away", dir))
	wait.For(t, 60*time.Second, "the backlog to drain", func() bool { return s.metric("fedgate_writeback_backlog_objects") == 0 })
	second := payload("bp-2", 8<<20)
	put(t, c, "ckpt", "bp/2", second)
	put(t, c, "ckpt", "bp/3", payload("bp-3", 8<<20))
	put(t, c, "ckpt", "bp/2", second)
	wait.For(t, 30*time.Second, "the backlog to drain", func() bool { return s.metric("fedgate_writeback_backlog_objects") == 0 })
	for key, want := range map[string][]byte{"bp/1": first, "bp/2": second} {
		if got, _ := getBytes(t, c, "ckpt", key); string(got) != string(want) {
			t.Fatalf("%s after the drain differs", key)
		}
	}
	// Drained copies stay in staging for the sweep's grace (for readers
	// still reading them) but give way to new writes: with 12 MiB of
	// staging, this 8 MiB PUT fits only if the drained copies above leave
	// at once (otherwise it would wait --staging-wait and get SlowDown).
	if used := s.metric("fedgate_writeback_staging_used_bytes"); used < 8<<20 {
		t.Fatalf("staging holds %v bytes after the drains; want the drained copies kept (at least one 8 MiB object)", used)
	}
	put(t, c, "ckpt", "bp/4", payload("bp-4", 8<<20))
}

func putInput(bucket, key string, data []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}
}

func headInput(bucket, key string) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
}
