package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/internal/mountinfo"
)

// mount.fedgate: fedgate called under that name (a symlink in /sbin) is the
// helper mount(8) runs for file systems of type "fedgate" — an fstab line
// such as
//
//	datasets/imagenet  /mnt/imagenet  fedgate  ro,allow_other,_netdev,endpoint=http://10.0.0.5:9000,credentials=/etc/fedgate/mount.env  0 0
//
// It turns the options into `fedgate mount` flags, starts that in the
// background (its own session, logs to a file), and returns once the file
// system is mounted, or with the mount's error. docs/mount.md, "fstab".

// mountHelperName is the name mount(8) runs for type fedgate.
const mountHelperName = "mount.fedgate"

// mountHelperFlags are the `fedgate mount` flags an fstab option may set
// as name=value ('_' may stand for '-': stat_ttl=1h).
var mountHelperFlags = map[string]bool{
	"endpoint": true, "region": true, "stat-ttl": true, "uid": true, "gid": true,
	"local-socket": true, "debug-listen": true, "log-level": true, "log-format": true,
	"read-ahead": true, "block-size": true, "max-parallel": true, "request-timeout": true,
	"tries": true, "part-size": true, "write-parallel": true, "max-memory": true,
}

// mountHelperIgnored are options for mount(8), systemd or fstab's readers
// that mean nothing to the FUSE daemon.
var mountHelperIgnored = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "user": true, "users": true, "nouser": true,
	"nofail": true, "_netdev": true, "exec": true, "noexec": true, "suid": true, "nosuid": true,
	"dev": true, "nodev": true, "async": true, "atime": true, "noatime": true, "relatime": true,
	"nodiratime": true, "rw": true,
}

// mountHelperArgs is what the helper makes of mount(8)'s arguments.
type mountHelperArgs struct {
	args    []string // fedgate mount's arguments, MOUNTPOINT last
	env     []string // from credentials=FILE
	logFile string
	fake    bool // -f: do everything but mount
	dir     string
}

// parseMountHelper reads `mount.fedgate SPEC DIR [-sfnv] [-o OPTS]
// [-t TYPE] [-N NS]` as mount(8) passes it. SPEC is a bucket,
// bucket/prefix, or "-" for every bucket.
func parseMountHelper(argv []string) (mountHelperArgs, error) {
	var h mountHelperArgs
	pos, opts, err := h.splitArgv(argv)
	if err != nil {
		return h, err
	}
	if len(pos) != 2 {
		return h, fmt.Errorf("want SPEC and MOUNTPOINT (a bucket, bucket/prefix or - for every bucket, then a directory), got %q", pos)
	}
	spec, dir := pos[0], pos[1]
	h.dir = dir
	args := []string{"mount"}
	if spec != "-" {
		args = append(args, "--bucket", spec)
	}
	for _, o := range opts {
		if args, err = h.option(o, args); err != nil {
			return h, err
		}
	}
	if h.logFile == "" {
		h.logFile = "/var/log/fedgate/mount" + strings.ReplaceAll(filepath.Clean(dir), "/", "-") + ".log"
	}
	h.args = append(args, dir)
	return h, nil
}

// splitArgv sorts mount(8)'s arguments into the positional ones and the -o
// options, and notes -f.
func (h *mountHelperArgs) splitArgv(argv []string) (pos, opts []string, err error) {
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(argv) {
				return nil, nil, fmt.Errorf("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, strings.Split(argv[i], ",")...)
			case "-N":
				return nil, nil, errors.New("-N (another mount namespace) is not supported")
			}
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			opts = append(opts, strings.Split(a[2:], ",")...)
		case strings.HasPrefix(a, "-") && len(a) > 1 && strings.Trim(a[1:], "sfnv") == "":
			h.fake = h.fake || strings.Contains(a, "f")
		case strings.HasPrefix(a, "-") && a != "-":
			return nil, nil, fmt.Errorf("unknown argument %s (mount(8) passes SPEC DIR [-sfnv] [-o OPTIONS])", a)
		default:
			pos = append(pos, a)
		}
	}
	return pos, opts, nil
}

// option applies one -o option: fedgate mount's flags appended to args,
// credentials and log kept in h, mount(8)'s own options ignored.
func (h *mountHelperArgs) option(o string, args []string) ([]string, error) {
	if o == "" {
		return args, nil
	}
	name, value, hasValue := strings.Cut(o, "=")
	flag := strings.ReplaceAll(name, "_", "-")
	switch {
	case mountHelperIgnored[name] || strings.HasPrefix(name, "x-") || name == "comment":
	case name == "ro" && !hasValue:
		args = append(args, "--read-only")
	case name == "allow_other" && !hasValue:
		args = append(args, "--allow-other")
	case name == "credentials" && hasValue:
		env, err := readEnvFile(value)
		if err != nil {
			return args, err
		}
		h.env = append(h.env, env...)
	case name == "log" && hasValue:
		h.logFile = value
	case mountHelperFlags[flag] && hasValue:
		args = append(args, "--"+flag+"="+value)
	default:
		return args, fmt.Errorf("unknown option %q (fedgate mount's flags as name=value: %s; ro, allow_other, credentials=FILE, log=FILE; docs/mount.md)", o, strings.Join(slices.Sorted(maps.Keys(mountHelperFlags)), ", "))
	}
	return args, nil
}

// readEnvFile reads KEY=VALUE lines (blank lines and # comments skipped),
// as a systemd EnvironmentFile holds them: the credentials stay out of
// fstab, which every user may read.
func readEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials: %s is readable by others (mode %04o): chmod 600 it", path, st.Mode().Perm())
	}
	var env []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("credentials: %s:%d: want KEY=VALUE", path, n)
		}
		env = append(env, strings.TrimSpace(k)+"="+strings.Trim(strings.TrimSpace(v), `"'`))
	}
	return env, sc.Err()
}

// mountHelperWait is how long the helper waits for the mount to appear.
var mountHelperWait = 60 * time.Second

// runMountHelper is main for mount.fedgate; it returns the exit status
// mount(8) expects (0 mounted, 1 bad usage, 32 the mount failed).
func runMountHelper(argv []string, stderr io.Writer) int {
	h, err := parseMountHelper(argv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", mountHelperName, err)
		return 1
	}
	if h.fake {
		return 0
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", mountHelperName, err)
		return 32
	}
	if err := os.MkdirAll(filepath.Dir(h.logFile), 0o755); err != nil {
		fmt.Fprintf(stderr, "%s: log: %v\n", mountHelperName, err)
		return 32
	}
	logf, err := os.OpenFile(h.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		fmt.Fprintf(stderr, "%s: log: %v\n", mountHelperName, err)
		return 32
	}
	defer logf.Close()
	start, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(self, h.args...)
	cmd.Env = append(os.Environ(), h.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives mount(8)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", mountHelperName, err)
		return 32
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(mountHelperWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	fail := func(why string) int {
		fmt.Fprintf(stderr, "%s: mounting %s: %s\n", mountHelperName, h.dir, why)
		if b, err := os.ReadFile(h.logFile); err == nil && int64(len(b)) > start {
			fmt.Fprintf(stderr, "%s", b[start:])
		}
		return 32
	}
	for {
		select {
		case err := <-exited:
			return fail(fmt.Sprintf("fedgate mount exited (%v); its log, %s:", err, h.logFile))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fail(fmt.Sprintf("not mounted after %v; fedgate mount stopped; its log, %s:", mountHelperWait, h.logFile))
		case <-tick.C:
			if isFedgateMount(h.dir) {
				_ = cmd.Process.Release()
				return 0
			}
		}
	}
}

// isFedgateMount reports whether dir is the mount point of a fedgate FUSE
// file system (fuse.fedgate in /proc/self/mountinfo).
func isFedgateMount(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	typ, ok := mountinfo.FSType(abs)
	return ok && typ == "fuse.fedgate"
}
