package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// awsCLI runs the real aws CLI (Debian's /usr/bin/aws, at its default
// settings) against one fedgate node as root. Missing, it skips on a
// developer's machine and fails in CI.
type awsCLI struct {
	t   *testing.T
	bin string
	env []string
}

func newAWSCLI(t *testing.T) *awsCLI {
	t.Helper()
	bin := "/usr/bin/aws"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (scripts/install-test-deps.sh installs it)", bin)
		}
		t.Skipf("%s is not installed (scripts/install-test-deps.sh installs it)", bin)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"AWS_ACCESS_KEY_ID=" + rootAK, "AWS_SECRET_ACCESS_KEY=" + rootSK, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true"}
	return &awsCLI{t: t, bin: bin, env: env}
}

// run runs `aws --endpoint-url <node> args...` and returns its stdout, or
// its error with stderr.
func (a *awsCLI) run(node *server, args ...string) (string, error) {
	cmd := exec.Command(a.bin, append([]string{"--endpoint-url", node.Endpoint}, args...)...)
	cmd.Env = a.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &cliError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// must is run, failing the test on an error.
func (a *awsCLI) must(node *server, args ...string) string {
	a.t.Helper()
	out, err := a.run(node, args...)
	if err != nil {
		a.t.Fatalf("aws %s: %v", strings.Join(args, " "), err)
	}
	return out
}

type cliError struct {
	err    error
	stderr string
}

func (e *cliError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// Issue 12's story with the aws CLI against a 3-node region: versioning
// on a write-back bucket; latest.pt PUT three times through different
// nodes; three versions listed in order on every node; the first read by
// id byte-identical; a DELETE adds a marker (GET 404, GET by id works);
// deleting the marker brings the object back.
func TestVersionedWriteBackWithAWSCLI(t *testing.T) {
	cli := newAWSCLI(t)
	r := startRegion(t, 3)
	dir := t.TempDir()
	cli.must(r.nodes[0], "s3api", "put-bucket-versioning", "--bucket", "ckpt", "--versioning-configuration", "Status=Enabled")
	if out := cli.must(r.nodes[2], "s3api", "get-bucket-versioning", "--bucket", "ckpt"); !strings.Contains(out, `"Enabled"`) {
		t.Fatalf("get-bucket-versioning through another node: %s", out)
	}
	var files []string
	var ids []string
	for i := range 3 {
		f := filepath.Join(dir, "step"+string(rune('0'+i))+".pt")
		mustOK(t, os.WriteFile(f, randBytes(t, 256<<10+i), 0o644))
		files = append(files, f)
		var put struct{ VersionId, ETag string }
		mustOK(t, json.Unmarshal([]byte(cli.must(r.nodes[i], "s3api", "put-object", "--bucket", "ckpt", "--key", "latest.pt", "--body", f)), &put))
		if put.VersionId == "" || put.VersionId == "null" {
			t.Fatalf("put-object through node %d answered version %q", i, put.VersionId)
		}
		ids = append(ids, put.VersionId)
	}
	type listing struct {
		Versions []struct {
			VersionId string
			IsLatest  bool
		}
		DeleteMarkers []struct {
			VersionId string
			IsLatest  bool
		}
	}
	list := func(node *server) listing {
		var l listing
		mustOK(t, json.Unmarshal([]byte(cli.must(node, "s3api", "list-object-versions", "--bucket", "ckpt", "--prefix", "latest.pt")), &l))
		return l
	}
	want := []string{ids[2], ids[1], ids[0]}
	for i, n := range r.nodes {
		l := list(n)
		var got []string
		for _, v := range l.Versions {
			got = append(got, v.VersionId)
		}
		if !slices.Equal(got, want) || !l.Versions[0].IsLatest || l.Versions[1].IsLatest {
			t.Fatalf("node %d lists %+v, want %v with the first latest", i, l, want)
		}
	}
	sameFile := func(got, want string) {
		t.Helper()
		a, err := os.ReadFile(got)
		mustOK(t, err)
		b, err := os.ReadFile(want)
		mustOK(t, err)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s (%d bytes) differs from %s (%d bytes)", got, len(a), want, len(b))
		}
	}
	first := filepath.Join(dir, "first.out")
	cli.must(r.nodes[1], "s3api", "get-object", "--bucket", "ckpt", "--key", "latest.pt", "--version-id", ids[0], first)
	sameFile(first, files[0])

	// `aws s3 rm` adds a delete marker: GET is 404, GET by id still works.
	cli.must(r.nodes[2], "s3", "rm", "s3://ckpt/latest.pt")
	l := list(r.nodes[0])
	if len(l.DeleteMarkers) != 1 || !l.DeleteMarkers[0].IsLatest || len(l.Versions) != 3 || l.Versions[0].IsLatest {
		t.Fatalf("after aws s3 rm: %+v", l)
	}
	_, err := cli.run(r.nodes[0], "s3api", "get-object", "--bucket", "ckpt", "--key", "latest.pt", filepath.Join(dir, "gone.out"))
	if err == nil || !strings.Contains(err.Error(), "NoSuchKey") {
		t.Fatalf("get-object behind a delete marker: %v", err)
	}
	again := filepath.Join(dir, "again.out")
	cli.must(r.nodes[0], "s3api", "get-object", "--bucket", "ckpt", "--key", "latest.pt", "--version-id", ids[0], again)
	sameFile(again, files[0])

	// Deleting the marker brings the newest version back.
	cli.must(r.nodes[1], "s3api", "delete-object", "--bucket", "ckpt", "--key", "latest.pt", "--version-id", l.DeleteMarkers[0].VersionId)
	back := filepath.Join(dir, "back.out")
	cli.must(r.nodes[2], "s3", "cp", "s3://ckpt/latest.pt", back)
	sameFile(back, files[2])

	// The same after the drain, from the store.
	r.drained(r.nodes[0], 60*time.Second)
	after := filepath.Join(dir, "after.out")
	cli.must(r.nodes[2], "s3api", "get-object", "--bucket", "ckpt", "--key", "latest.pt", "--version-id", ids[0], after)
	sameFile(after, files[0])
}
