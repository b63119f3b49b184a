package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/internal/testenv"
)

// InstallHint is the command that installs the tools the checks run.
const InstallHint = "scripts/install-test-deps.sh (or scripts/deploytools.sh install)"

// Tool returns the path of an external program a check runs: the one in
// testenv.CacheDir()/bin (where scripts/deploytools.sh installs tofu and
// tflint), else the one on PATH. When it is in neither place the test is
// skipped on a developer machine and fails when the environment variable CI
// is non-empty, so that CI cannot pass by skipping.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if p := filepath.Join(testenv.CacheDir(), "bin", name); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("deploycheck: %s is not installed (CI is set, so this fails instead of skipping; run %s)", name, InstallHint)
	}
	t.Skipf("deploycheck: %s is not installed; install it with %s", name, InstallHint)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TerraformDir is the repository's terraform/ directory.
func TerraformDir() string { return filepath.Join(RepoRoot(), "terraform") }

// ToolEnv is the environment for tofu and tflint: the machine's CLI
// configuration (TF_CLI_CONFIG_FILE may name a file that does not exist)
// and update checks are left out.
func ToolEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "TF_CLI_CONFIG_FILE="), strings.HasPrefix(kv, "TF_LOG"),
			strings.HasPrefix(kv, "TF_PLUGIN_CACHE_DIR="), strings.HasPrefix(kv, "TF_VAR_"), strings.HasPrefix(kv, "TF_CLI_ARGS"):
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"), extra...)
}
