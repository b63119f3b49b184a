package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// chromiumHint is the command that installs Debian's Chromium.
const chromiumHint = "scripts/install-test-deps.sh (apt-get install chromium)"

// chromiumNames are the executables Chromium finds under, Debian's first.
var chromiumNames = []string{"chromium", "chromium-headless-shell", "chromium-browser", "google-chrome"}

// Chromium returns the path of a Chromium browser for headless tests (the
// console's, e2e/console_test.go). Like the cloud stand-ins, a missing
// browser skips the test on a developer machine and fails it when CI is
// set.
func Chromium(t testing.TB) string {
	t.Helper()
	return chromium(t, exec.LookPath, os.Getenv)
}

func chromium(t testing.TB, lookPath func(string) (string, error), getenv func(string) string) string {
	t.Helper()
	for _, name := range chromiumNames {
		if p, err := lookPath(name); err == nil {
			return p
		}
	}
	unavailableHint(t, getenv, "no Chromium browser on PATH", chromiumHint)
	return ""
}
