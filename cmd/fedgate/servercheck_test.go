package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkPolicyFile is a policy a multi-node region accepts: a shared
// default store.
const checkPolicyFile = `regions:
  - {name: lab, location: onprem:dc1}
stores:
  - {name: shared, kind: posix, location: onprem:dc1, path: /mnt/fedgate-shared}
defaults:
  store: shared
`

// runServerCheck runs `fedgate server --check` with args (and the server
// config file text, when not empty) and returns its output and error.
func runServerCheck(t *testing.T, dir, serverYAML string, args ...string) (string, error) {
	t.Helper()
	if serverYAML != "" {
		p := filepath.Join(dir, "server.yaml")
		if err := os.WriteFile(p, []byte(serverYAML), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--server-config", p)
	}
	cmd := newServerCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--check"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

// --check validates flags, the server config file and the policy file as a
// start would, and opens and writes nothing: the S3 port it names is held
// by the test, and the data dir is never created.
func TestServerCheck(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(checkPolicyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dataDir := filepath.Join(dir, "data")
	t.Setenv("FEDGATE_ACCESS_KEY", "AKCHECK")
	t.Setenv("FEDGATE_SECRET_KEY", "secret-for-the-check")
	cluster := "listen: " + ln.Addr().String() + "\ndata-dir: " + dataDir + "\nconfig: " + policy +
		"\ninternal-addr: 127.0.0.1:7101\nbootstrap-expect: 3\njoin: [127.0.0.1:9002, 127.0.0.1:9003]\n"
	out, err := runServerCheck(t, dir, cluster, "--node-id", "n1", "--raft-addr", "127.0.0.1:7100")
	if err != nil {
		t.Fatalf("--check of a valid 3-node config: %v\n%s", err, out)
	}
	for _, want := range []string{"server config: ", `region "lab", 1 store(s)`, "forms a region of 3", "--check: OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("--check created the data dir %s (stat: %v)", dataDir, err)
	}

	bad := filepath.Join(dir, "bad-policy.yaml")
	if err := os.WriteFile(bad, []byte("stores:\n  - {name: s, kind: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noStore := filepath.Join(dir, "no-store.yaml")
	if err := os.WriteFile(noStore, []byte("regions:\n  - {name: lab, location: onprem:dc1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"unknown key", "data-dri: /x\n", nil, `unknown key "data-dri"`},
		{"bad policy", "", []string{"--config", bad, "--data-dir", dataDir}, bad},
		{"no shared store", "", []string{"--config", noStore, "--data-dir", dataDir, "--raft-addr", "127.0.0.1:7100", "--bootstrap-expect", "3", "--join", "a:1,b:2"}, "shared default store"},
		{"too few joins", "", []string{"--config", policy, "--raft-addr", "127.0.0.1:7100", "--bootstrap-expect", "3", "--join", "a:1"}, "at least 2 --join"},
		{"cert without key", "", []string{"--cert-file", filepath.Join(dir, "none.pem")}, "without --key-file"},
		{"missing cert", "", []string{"--cert-file", filepath.Join(dir, "none.pem"), "--key-file", filepath.Join(dir, "none.key")}, "none.pem"},
		{"bad size", "", []string{"--cache-size", "lots"}, "--cache-size"},
		{"bad port", "", []string{"--listen", "127.0.0.1:99999"}, "--listen"},
	} {
		out, err := runServerCheck(t, t.TempDir(), c.yaml, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: --check got %v, want an error naming %q\n%s", c.name, err, c.want, out)
		}
		if strings.Contains(out, "--check: OK") {
			t.Errorf("%s: --check printed OK:\n%s", c.name, out)
		}
	}
}

// `fedgate mount --check` validates the flags as a mount would and mounts
// nothing; bad values are refused naming the flag.
func TestMountCheck(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := newMountCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--check"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	mp := filepath.Join(t.TempDir(), "mnt")
	out, err := run("--endpoint", "http://fedgate.ns.svc:9000", "--read-only", "--allow-other", "--stat-ttl", "10s", mp)
	if err != nil || !strings.Contains(out, "--check: OK") {
		t.Fatalf("mount --check of valid flags: %v\n%s", err, out)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Errorf("mount --check created %s", mp)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint", "fedgate:9000", mp}, "--endpoint"},
		{[]string{"--part-size", "1024", mp}, "--part-size"},
		{[]string{"--max-memory", "1", mp}, "--max-memory"},
		{[]string{"--log-level", "loud", mp}, "--log-level"},
		{[]string{"--bucket", "/x", mp}, "--bucket"},
		{[]string{"--stat-tt", "1s", mp}, "unknown flag"},
		{[]string{}, "arg"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mount --check %v: got %v, want an error naming %q\n%s", c.args, err, c.want, out)
		}
	}
}
