package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mount(8)'s arguments become fedgate mount's flags; options for mount(8)
// and systemd are left out; anything else is refused naming it.
func TestParseMountHelper(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "mount.env")
	if err := os.WriteFile(creds, []byte("# keys\nAWS_ACCESS_KEY_ID=AK\nAWS_SECRET_ACCESS_KEY=\"S K\"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := parseMountHelper([]string{"datasets/imagenet", "/mnt/in", "-n", "-o",
		"ro,allow_other,_netdev,x-systemd.automount,nofail,stat_ttl=1h,endpoint=http://10.0.0.5:9000,credentials=" + creds + ",log=/tmp/m.log,uid=1000"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mount", "--bucket", "datasets/imagenet", "--read-only", "--allow-other", "--stat-ttl=1h", "--endpoint=http://10.0.0.5:9000", "--uid=1000", "/mnt/in"}
	if !slices.Equal(h.args, want) {
		t.Errorf("args %q, want %q", h.args, want)
	}
	if !slices.Equal(h.env, []string{"AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=S K"}) || h.logFile != "/tmp/m.log" || h.fake {
		t.Errorf("env %q log %q fake %v", h.env, h.logFile, h.fake)
	}

	h, err = parseMountHelper([]string{"-", "/mnt/all", "-fv"})
	if err != nil || !h.fake || !slices.Equal(h.args, []string{"mount", "/mnt/all"}) || h.logFile != "/var/log/fedgate/mount-mnt-all.log" {
		t.Errorf("every bucket, -fv: %+v %v", h, err)
	}

	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"b", "/m", "-o", "stat-tll=1s"}, `unknown option "stat-tll=1s"`},
		{[]string{"b", "/m", "-o", "endpoint"}, `unknown option "endpoint"`},
		{[]string{"b"}, "want SPEC and MOUNTPOINT"},
		{[]string{"b", "/m", "-N", "/proc/1/ns/mnt"}, "-N"},
		{[]string{"b", "/m", "-o"}, "-o needs a value"},
		{[]string{"b", "/m", "--bucket", "x"}, "unknown argument --bucket"},
		{[]string{"b", "/m", "-o", "credentials=/nonexistent/env"}, "credentials: open /nonexistent/env"},
	} {
		if _, err := parseMountHelper(c.argv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.argv, err, c.want)
		}
	}
	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseMountHelper([]string{"b", "/m", "-o", "credentials=" + creds}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("credentials readable by others: %v", err)
	}
}
