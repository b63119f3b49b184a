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

// HelmProviderVersion is the hashicorp/helm provider scripts/deploytools.sh
// builds from its source into [PluginDir].
const HelmProviderVersion = "3.2.0"

// PluginDir returns the directory `tofu init -plugin-dir` reads the Helm
// provider from (testenv.CacheDir()/tofu-plugins, where
// scripts/deploytools.sh builds it). When the provider is not there the
// test is skipped, or fails when CI is set, as with [Tool].
func PluginDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testenv.CacheDir(), "tofu-plugins")
	bin := filepath.Join(dir, "registry.opentofu.org", "hashicorp", "helm", HelmProviderVersion,
		runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-helm_v"+HelmProviderVersion)
	if isExecutable(bin) {
		return dir
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("deploycheck: the hashicorp/helm provider is not built at %s (CI is set, so this fails instead of skipping; run scripts/deploytools.sh install helm-provider)", bin)
	}
	t.Skipf("deploycheck: the hashicorp/helm provider is not built at %s; build it with scripts/deploytools.sh install helm-provider", bin)
	return ""
}

// ChartDir returns the fedgate Helm chart (deploy/helm/fedgate) that
// terraform/modules/region-k8s installs. When this checkout has no chart
// the test is skipped, or fails when CI is set, as with [Tool].
func ChartDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "deploy", "helm", "fedgate")
	if _, err := os.Stat(filepath.Join(dir, "values.yaml")); err == nil {
		return dir
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("deploycheck: %s/values.yaml is missing (CI is set, so this fails instead of skipping)", dir)
	}
	t.Skipf("deploycheck: %s/values.yaml is missing in this checkout: the chart's values cannot be compared", dir)
	return ""
}
