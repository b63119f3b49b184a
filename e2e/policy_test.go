package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
)

func writePolicy(t *testing.T, nas string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	yaml := `regions:
  - name: lga-gpu
    location: onprem:lga1
stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: ` + nas + `
buckets:
  - name: datasets
    placement: {single: nas}
defaults: {store: nas}
`
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyBuckets: buckets of the policy file exist for every user to see
// as root's, cannot be created again or deleted through S3, and S3-created
// buckets go to the policy's default store. The file seeds the region once.
func TestPolicyBuckets(t *testing.T) {
	nas := t.TempDir()
	s := startServer(t, "--config", writePolicy(t, nas))
	c := s.root()
	put(t, c, "datasets", "imagenet/shard-0", []byte("shard"))
	if _, err := os.Stat(nas); err != nil {
		t.Fatal(err)
	}
	// Root owns the policy's buckets: creating one again is S3's "you own
	// it already", 200 in us-east-1.
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("datasets")})
	mustOK(t, err)
	out, err := s.fedgate("user", "add", "dave", "--access-key", "DAVEACCESSKEY0000001", "--secret-key", "dave-secret-key-00001")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	dave := s.s3Client("DAVEACCESSKEY0000001", "dave-secret-key-00001")
	_, err = dave.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("datasets")})
	wantCode(t, err, "BucketAlreadyExists")
	_, err = dave.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("imagenet/shard-0")})
	wantCode(t, err, "AccessDenied")
	_, err = c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("datasets"), Key: aws.String("imagenet/shard-0")})
	mustOK(t, err)
	_, err = c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("datasets")})
	wantCode(t, err, "InvalidBucketState")

	// An S3-created bucket lands in the default store (the NAS path).
	_, err = c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})
	mustOK(t, err)
	put(t, c, "scratch", "x", []byte("x"))
	if entries, _ := os.ReadDir(nas); len(entries) == 0 {
		t.Fatal("nothing written under the policy's posix store path")
	}

	// Restarted without --config, the region keeps its seeded policy.
	s.Args = nil
	s.restart(syscall.SIGTERM)
	if got, _ := getBytes(t, s.root(), "scratch", "x"); string(got) != "x" {
		t.Fatal("scratch lost")
	}
	_, err = s.root().HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("datasets")})
	mustOK(t, err)

	// A different file later only earns a warning naming `fedgate policy diff`.
	other := writePolicy(t, t.TempDir())
	s.Args = []string{"--config", other, "--log-level", "info"}
	s.restart(syscall.SIGTERM)
	if !strings.Contains(s.Log(), "fedgate policy diff") {
		t.Fatalf("no warning about a differing policy file in the log:\n%s", s.Log())
	}
	if got, _ := getBytes(t, s.root(), "scratch", "x"); string(got) != "x" {
		t.Fatal("scratch lost after starting with a different file")
	}
}

// TestBadPolicyRefused: a policy with errors stops the server
// before it changes anything, naming file, line and column.
func TestBadPolicyRefused(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.yaml")
	os.WriteFile(p, []byte("stores:\n  - name: ckpt\n    kind: posix\n    location: onprem:lga1\n    path: "+filepath.Join(dir, "nas")+"\n"+
		"  - name: ckpt2\n    kind: posix\n    location: onprem:lga2\n    path: "+filepath.Join(dir, "nas2")+"\n"+
		"buckets:\n  - name: x1\n    placement: {replicate: [ckpt, ckpt2]}\n    colour: blue\n"+
		"routing: {prefer: nearst}\n"), 0o644)
	data := filepath.Join(dir, "data")
	out, err := exec.Command(binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", p).CombinedOutput()
	if err == nil {
		t.Fatal("server started with a policy it cannot serve")
	}
	for _, want := range []string{p + ":14:19: routing.prefer", `did you mean "nearest"`, p + ":13:5: buckets[0].colour"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("error output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "raft")); !os.IsNotExist(err) {
		t.Fatalf("a refused policy left region state behind: %v", err)
	}
	out, err = exec.Command(binary, "policy", "validate", p).CombinedOutput()
	if err == nil || !strings.Contains(string(out), ":13:5:") {
		t.Fatalf("policy validate: %v %s", err, out)
	}
}

// TestRegionFlag: a file with several regions needs --region, and the error
// lists them.
func TestRegionFlag(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "two.yaml")
	os.WriteFile(p, []byte("regions:\n  - name: us-east-gpu\n    location: aws:us-east-1\n  - name: lga-gpu\n    location: onprem:lga1\n"), 0o644)
	out, err := exec.Command(binary, "server", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--config", p).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "us-east-gpu, lga-gpu") {
		t.Fatalf("two regions without --region: %v\n%s", err, out)
	}
	s := startServer(t, "--config", p, "--region", "lga-gpu")
	if !strings.Contains(s.Stdout(), `region "lga-gpu"`) {
		t.Fatalf("banner does not name the region:\n%s", s.Stdout())
	}
}

// TestPolicyApplyHot: `fedgate policy diff` shows a change against the
// region's active policy and `fedgate policy apply` puts it in force on
// every node without a restart; a bad file or one that would strand a
// bucket changes nothing.
func TestPolicyApplyHot(t *testing.T) {
	r := startRegion(t, 3)
	n1, n3 := r.nodes[0], r.nodes[2]
	_, err := n1.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("s3made")})
	mustOK(t, err)
	base, err := os.ReadFile(writeBackPolicy(t, r.nas))
	mustOK(t, err)
	dir := t.TempDir()
	next := filepath.Join(dir, "next.yaml")
	mustOK(t, os.WriteFile(next, append(base, []byte("  - name: fresh-data\n    placement: {single: nas}\n    cache: {ttl: 1h, prefetch: on-apply}\n")...), 0o644))
	// The appended bucket must land in the buckets list: move defaults last.
	data, _ := os.ReadFile(next)
	data = []byte(strings.Replace(string(data), "defaults: {store: nas}\n", "", 1) + "defaults: {store: nas}\n")
	mustOK(t, os.WriteFile(next, data, 0o644))

	out, err := n1.fedgate("policy", "diff", next)
	if err != nil || !strings.Contains(out, "+ bucket fresh-data") || !strings.Contains(out, "version 1") {
		t.Fatalf("policy diff: %v\n%s", err, out)
	}
	out, err = n1.fedgate("policy", "apply", next)
	if err != nil || !strings.Contains(out, "+ bucket fresh-data") || !strings.Contains(out, "version 2") ||
		!strings.Contains(out, "preload job") {
		t.Fatalf("policy apply: %v\n%s", err, out)
	}
	if jobs := n3.jobs(); len(jobs) != 1 || jobs[0].Bucket != "fresh-data" {
		t.Fatalf("prefetch: on-apply started no preload of the new bucket: %+v", jobs)
	}
	// In force on another node at once.
	put(t, n3.root(), "fresh-data", "k", []byte("v"))
	if got, _ := getBytes(t, r.nodes[1].root(), "fresh-data", "k"); string(got) != "v" {
		t.Fatalf("read through node 2: %q", got)
	}
	if out, _ := n3.fedgate("policy", "diff", next); !strings.Contains(out, "No changes") {
		t.Fatalf("diff after apply: %s", out)
	}

	// A file with an error: file:line:column, exit 1, nothing applied.
	bad := filepath.Join(dir, "bad.yaml")
	mustOK(t, os.WriteFile(bad, []byte(strings.Replace(string(data), "cache: {ttl: 1h,", "cache: {ttl: soon,", 1)), 0o644))
	out, err = n1.fedgate("policy", "apply", bad)
	if err == nil || !strings.Contains(out, bad+":") || !strings.Contains(out, "ttl") {
		t.Fatalf("apply of a bad file: %v\n%s", err, out)
	}
	// A policy without the store an S3-created bucket lives on is refused.
	moved := filepath.Join(dir, "moved.yaml")
	mustOK(t, os.WriteFile(moved, []byte(strings.ReplaceAll(string(data), "nas", "nas2")), 0o644))
	out, err = n1.fedgate("policy", "apply", moved)
	if err == nil || !strings.Contains(out, `"s3made"`) {
		t.Fatalf("apply stranding a bucket: %v\n%s", err, out)
	}
	if out, _ := n1.fedgate("policy", "diff", next); !strings.Contains(out, "No changes") || !strings.Contains(out, "version 2") {
		t.Fatalf("a refused apply changed the active policy:\n%s", out)
	}
}

// TestBucketGlobRules: a policy entry whose name is a glob gives its store
// and rules to the buckets created through S3 that it matches: "ckpt-*"
// buckets are write-back and live on the second NAS; others keep the
// default store and write-through.
func TestBucketGlobRules(t *testing.T) {
	nas, nas2 := t.TempDir(), t.TempDir()
	p := filepath.Join(t.TempDir(), "glob.yaml")
	mustOK(t, os.WriteFile(p, []byte("stores:\n  - {name: nas, kind: posix, location: onprem:lga1, path: "+nas+"}\n"+
		"  - {name: nas2, kind: posix, location: onprem:lga1, path: "+nas2+"}\n"+
		"buckets:\n  - name: \"ckpt-*\"\n    placement: {single: nas2}\n    write: write-back\n"+
		"defaults: {store: nas}\n"), 0o644))
	s := startServer(t, "--config", p)
	c := s.root()
	for _, b := range []string{"ckpt-run1", "other-1"} {
		_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(b)})
		mustOK(t, err)
	}
	put(t, c, "other-1", "k", []byte("plain"))
	if s.metric("fedgate_writeback_staged_bytes_total") != 0 {
		t.Fatal("a bucket outside the glob was written back")
	}
	put(t, c, "ckpt-run1", "k", []byte("checkpoint"))
	if got := s.metric("fedgate_writeback_staged_bytes_total"); got != float64(len("checkpoint")) {
		t.Fatalf("a bucket matching ckpt-* was not written back (staged %v bytes)", got)
	}
	wait.For(t, 10*time.Second, "the drain", func() bool { return s.metric("fedgate_writeback_backlog_objects") == 0 })
	if got, _ := getBytes(t, c, "ckpt-run1", "k"); string(got) != "checkpoint" {
		t.Fatalf("read back %q", got)
	}
	dirsIn := func(d string) int {
		n := 0
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "d_fedgate" { // the region marker
				n++
			}
		}
		return n
	}
	if dirsIn(nas2) != 1 || dirsIn(nas) != 1 {
		t.Fatalf("bucket directories: %d in nas2 (want ckpt-run1), %d in nas (want other-1)", dirsIn(nas2), dirsIn(nas))
	}
	out, err := exec.Command(binary, "policy", "validate", p).CombinedOutput()
	if err != nil {
		t.Fatalf("validate: %v %s", err, out)
	}
}
