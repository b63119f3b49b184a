package testenv

import (
	"os"
	"testing"

	"github.com/fedgate/fedgate/internal/mountinfo"
)

// FUSE skips a test that mounts a FUSE file system on a machine without
// root or /dev/fuse, and fails it when CI is set: CI must not go green by
// skipping the mount.
func FUSE(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		why = "no /dev/fuse: " + err.Error()
	} else {
		f.Close()
	}
	if why != "" {
		unavailableHint(t, os.Getenv, "a FUSE mount needs root and /dev/fuse: "+why, "run as root on Linux with /dev/fuse")
	}
}

// Mounted reports whether dir is a mount point (from /proc/self/mountinfo;
// false when that cannot be read).
func Mounted(dir string) bool {
	_, ok := mountinfo.FSType(dir)
	return ok
}
