package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/wait"
)

// fedgate called as mount.fedgate, with the arguments mount(8) gives a
// helper for an fstab line of type fedgate: it returns once the bucket's
// prefix is mounted, the daemon goes on in the background with its log in
// log=FILE, an umount ends it; a bad option mounts nothing.
func TestMountHelperFstab(t *testing.T) {
	testenv.FUSE(t)
	s := startServer(t)
	c := s.root()
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("dsets")}); err != nil {
		t.Fatal(err)
	}
	body := []byte("a sample read through an fstab mount\n")
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("dsets"), Key: aws.String("train/x/0001.txt"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	helper := filepath.Join(tmp, "mount.fedgate")
	abs, err := filepath.Abs(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, helper); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(tmp, "mount.env")
	if err := os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+rootAK+"\nAWS_SECRET_ACCESS_KEY="+rootSK+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(tmp, "mount.log")
	dir := t.TempDir()
	run := func(opts string) (string, error) {
		cmd := exec.Command(helper, "dsets/train", dir, "-n", "-o", opts)
		// As mount(8) runs it: no AWS_* of the test in the environment.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "AWS_EC2_METADATA_DISABLED=true"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if testenv.Mounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})

	out, err := run("rw,stat-ttl=2s,_netdev,x-systemd.automount,stat_tll=1s,endpoint=" + s.Endpoint)
	var ee *exec.ExitError
	if err == nil || !strings.Contains(out, `unknown option "stat_tll=1s"`) || testenv.Mounted(dir) {
		t.Fatalf("a misspelt option: %v\n%s", err, out)
	} else if !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Errorf("a misspelt option: exit %v, want 1 (usage)", err)
	}

	start := time.Now()
	out, err = run("ro,allow_other,_netdev,nofail,stat_ttl=2s,endpoint=" + s.Endpoint + ",credentials=" + creds + ",log=" + logFile)
	if err != nil {
		t.Fatalf("mount.fedgate: %v\n%s", err, out)
	}
	if !testenv.Mounted(dir) {
		t.Fatalf("mount.fedgate returned 0 after %v but %s is not mounted", time.Since(start), dir)
	}
	got, err := os.ReadFile(filepath.Join(dir, "x", "0001.txt"))
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("read through the fstab mount: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x", "new.txt"), []byte("no"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write through a ro mount: %v, want EROFS", err)
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "the daemon to log that it was unmounted and end", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "unmounted from outside") && !strings.Contains(processList(t), "mount --bucket dsets/train")
	})

	// The daemon refuses its flags: the helper exits 32 with its log.
	out, err = run("part_size=1,endpoint=" + s.Endpoint + ",credentials=" + creds + ",log=" + logFile)
	if err == nil || !(errors.As(err, &ee) && ee.ExitCode() == 32) || !strings.Contains(out, "--part-size 1: must be 5 MiB") || testenv.Mounted(dir) {
		t.Errorf("a daemon that exits at once: %v (want exit 32 and its log)\n%s", err, out)
	}
}

// processList is ps's list of command lines.
func processList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ps", "-eo", "args").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
