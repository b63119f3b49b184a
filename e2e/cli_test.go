package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// Scripts can trust the CLI's exit status: a mistyped subcommand or flag
// fails with "did you mean" (a subcommand used to print help and exit 0), and
// `cluster status --check` exits 0 on a healthy region and 2 when a member
// is down.
func TestCLIExitCodes(t *testing.T) {
	for _, args := range [][]string{{"policy", "aply"}, {"cluster", "stauts"}, {"polcy"}, {"cluster", "status", "--jsn"}, {"server", "--data-dri", "x"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "did you mean") {
			t.Fatalf("fedgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command(binary, "cluster").CombinedOutput(); err != nil || !strings.Contains(string(out), "Available Commands") {
		t.Fatalf("fedgate cluster with no subcommand should print its help and exit 0: %v\n%s", err, out)
	}

	r := startRegion(t, 3)
	if out, err := r.nodes[0].fedgate("cluster", "status", "--check"); err != nil {
		t.Fatalf("cluster status --check on a healthy region: %v\n%s", err, out)
	}
	r.nodes[2].stop(syscall.SIGKILL)
	wait.For(t, 30*time.Second, "cluster status --check to exit 2", func() bool {
		out, err := r.nodes[0].fedgate("cluster", "status", "--check")
		var ee *exec.ExitError
		return errors.As(err, &ee) && ee.ExitCode() == 2 && strings.Contains(out, "not healthy") && strings.Contains(out, "n3")
	})
}
