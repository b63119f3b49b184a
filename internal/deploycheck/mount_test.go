package deploycheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

// mountVal is one element of node-config's mounts; an empty string or
// an id of -1 is null (the module's default).
func mountVal(name, bucket, mountpoint, endpoint, statTTL string, allowOther, readOnly bool, uid, gid int) cty.Value {
	str := func(s string) cty.Value {
		if s == "" {
			return cty.NullVal(cty.String)
		}
		return cty.StringVal(s)
	}
	num := func(n int) cty.Value {
		if n == -1 {
			return cty.NullVal(cty.Number)
		}
		return cty.NumberIntVal(int64(n))
	}
	return cty.ObjectVal(map[string]cty.Value{
		"name": cty.StringVal(name), "bucket": cty.StringVal(bucket), "mountpoint": cty.StringVal(mountpoint),
		"endpoint": str(endpoint), "stat_ttl": str(statTTL), "allow_other": cty.BoolVal(allowOther),
		"read_only": cty.BoolVal(readOnly), "uid": num(uid), "gid": num(gid),
	})
}

// TestNodeConfigMounts renders node-config for a GPU node that runs a
// gateway and mounts two buckets (docs/deploy.md, "fedgate mount on GPU
// nodes"): one fedgate-mount-NAME.service per mount with exactly the
// flags given (the node's own S3 port by default, the local socket, the
// read-only mode spelled out), flags the real binary parses, units
// systemd's own parser accepts, a 0600 environment file with the mounts'
// keys, the server serving the local socket from a RuntimeDirectory, and
// cloud-init enabling the mounts after fedgate. Without mounts nothing of
// it is rendered; invalid mounts are refused.
func TestNodeConfigMounts(t *testing.T) {
	c := followExample(t, "aws")
	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	h := r.hosts[0]
	plain := r.localInputs(t, c.NodeConfig, h, "")

	// Without mounts: no mount unit, no mount.env, no socket.
	n0 := render(t, plain, h)
	for p := range n0.files {
		if strings.Contains(p, "fedgate-mount") || strings.HasSuffix(p, "/mount.env") {
			t.Errorf("without mounts, node-config renders %s", p)
		}
	}
	if _, ok := n0.settings["local-socket"]; ok || len(unitValues(n0.unit, "RuntimeDirectory")) > 0 {
		t.Error("without local_socket, the server gets a local socket")
	}

	in := map[string]cty.Value{}
	for k, v := range plain {
		in[k] = v
	}
	const sock = "/run/fedgate/s3.sock"
	datasets := filepath.Join(h.root, "mnt/imagenet")
	ckpt := filepath.Join(h.root, "mnt/ckpt")
	in["local_socket"] = cty.StringVal(sock)
	in["mounts"] = cty.ListVal([]cty.Value{
		mountVal("datasets", "imagenet", datasets, "", "10s", true, true, -1, -1),
		mountVal("ckpt", "checkpoints/run-7", ckpt, "http://gw.gpu.internal:9000", "", false, false, 1000, 1001),
	})
	in["mount_credentials"] = cty.ObjectVal(map[string]cty.Value{
		"access_key": cty.StringVal("MOUNTACCESSKEY000001"), "secret_key": cty.StringVal("mount-secret-key-0123456789abcdefghij"),
	})
	n := render(t, in, h)
	bin := filepath.Join(h.root, "usr/local/bin/fedgate")
	envPath := filepath.Join(h.root, "etc/fedgate/mount.env")
	want := map[string][]string{
		"datasets": {bin, "mount", "--endpoint", "http://" + h.ip + ":" + strconv.Itoa(r.ports["s3"]), "--bucket", "imagenet",
			"--read-only=true", "--stat-ttl", "10s", "--allow-other", "--local-socket", sock, datasets},
		"ckpt": {bin, "mount", "--endpoint", "http://gw.gpu.internal:9000", "--bucket", "checkpoints/run-7",
			"--read-only=false", "--uid", "1000", "--gid", "1001", "--local-socket", sock, ckpt},
	}
	n.install(t)
	var unitPaths []string
	for name, words := range want {
		f := n.file(t, "/etc/systemd/system/fedgate-mount-"+name+".service")
		unitPaths = append(unitPaths, f.Path)
		if f.Mode != "0644" || f.Owner != "root" {
			t.Errorf("%s: mode %s owner %s, want 0644 root", f.Path, f.Mode, f.Owner)
		}
		got := execStart(t, f.Content)
		if !slices.Equal(got, words) {
			t.Errorf("%s ExecStart\n%q\nwant\n%q", name, got, words)
		}
		mp := words[len(words)-1]
		for k, v := range map[string]string{"EnvironmentFile": envPath, "ExecStartPre": "/bin/mkdir -p " + mp,
			"After": "network-online.target fedgate.service", "KillSignal": "SIGTERM", "WantedBy": "multi-user.target"} {
			if got := unitValues(f.Content, k); !slices.Equal(got, []string{v}) {
				t.Errorf("%s: %s= %q, want %q", name, k, got, v)
			}
		}
		if len(unitValues(f.Content, "User")) > 0 {
			t.Errorf("%s: the mount runs as User=%v; it mounts /dev/fuse directly and must run as root", name, unitValues(f.Content, "User"))
		}
		// The real binary parses the rendered flags (--help stops before
		// mounting, after every flag and value is parsed).
		out, err := exec.Command(got[0], append(slices.Clone(got[1:]), "--help")...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") {
			t.Errorf("%s: fedgate does not parse the rendered mount flags: %v\n%s", name, err, out)
		}
	}
	env := n.file(t, "/etc/fedgate/mount.env")
	if env.Path != envPath || env.Mode != "0600" || env.Owner != "root" {
		t.Errorf("mount.env: %s mode %s owner %s, want %s 0600 root", env.Path, env.Mode, env.Owner, envPath)
	}
	vars := parseEnvFile(t, env.Content)
	if vars["AWS_ACCESS_KEY_ID"] != "MOUNTACCESSKEY000001" || vars["AWS_SECRET_ACCESS_KEY"] != "mount-secret-key-0123456789abcdefghij" || len(vars) != 2 {
		t.Errorf("mount.env = %v, want the mount_credentials only", vars)
	}
	if got := n.settings["local-socket"]; got != sock {
		t.Errorf("server config local-socket = %q, want %s", got, sock)
	}
	if got := unitValues(n.unit, "RuntimeDirectory"); !slices.Equal(got, []string{"fedgate"}) {
		t.Errorf("fedgate.service RuntimeDirectory= %q, want fedgate (for %s under ProtectSystem=strict)", got, sock)
	}
	var cc cloudConfig
	if err := yaml.UnmarshalWithOptions([]byte(n.cloudInit), &cc, yaml.Strict()); err != nil {
		t.Fatalf("cloud-init: %v", err)
	}
	runcmd := cc.RunCmd
	if len(runcmd) < 2 || !slices.Equal(runcmd[len(runcmd)-2], []string{"systemctl", "enable", "--now", "fedgate-mount-datasets.service"}) ||
		!slices.Equal(runcmd[len(runcmd)-1], []string{"systemctl", "enable", "--now", "fedgate-mount-ckpt.service"}) ||
		!slices.ContainsFunc(runcmd, func(c []string) bool {
			return slices.Equal(c, []string{"systemctl", "enable", "--now", "fedgate.service"})
		}) {
		t.Errorf("cloud-init runcmd %q does not start fedgate, then each mount", runcmd)
	}
	written := map[string]bool{}
	for _, w := range cc.WriteFiles {
		written[w.Path] = true
	}
	for _, p := range append(slices.Clone(unitPaths), envPath) {
		if !written[p] {
			t.Errorf("cloud-init does not write %s", p)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil || os.Getenv("CI") != "" {
		if err != nil {
			t.Fatal("systemd-analyze not found (scripts/install-test-deps.sh installs systemd)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, sa, append([]string{"verify", "--man=no", "--recursive-errors=no"}, unitPaths...)...)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice")
		out, _ := cmd.CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "fedgate-mount") {
				t.Errorf("systemd-analyze verify: %s", l)
			}
		}
	}

	// With TLS on the S3 port, the default endpoint is https and the
	// mounts trust the region's S3 CA.
	tls := newTestCA(t, r.hosts)
	in["s3_ca_pem"] = cty.StringVal(tls.caPEM)
	certs := map[string]cty.Value{}
	for _, o := range r.hosts {
		certs[o.id] = cty.ObjectVal(map[string]cty.Value{"cert_pem": cty.StringVal(tls.certs[o.id][0]), "key_pem": cty.StringVal(tls.certs[o.id][1])})
	}
	in["s3_certs"] = cty.MapVal(certs)
	nt := render(t, in, h)
	if got := execStart(t, nt.file(t, "fedgate-mount-datasets.service").Content)[3]; got != "https://"+h.ip+":"+strconv.Itoa(r.ports["s3"]) {
		t.Errorf("with s3_ca_pem the default endpoint is %s", got)
	}
	if got := parseEnvFile(t, nt.file(t, "/etc/fedgate/mount.env").Content)["AWS_CA_BUNDLE"]; got != nt.file(t, "tls/s3-ca.pem").Path {
		t.Errorf("with s3_ca_pem, AWS_CA_BUNDLE = %q, want the rendered s3-ca.pem", got)
	}

	// Invalid mounts are refused.
	m, err := deploycheck.LoadModule(nodeCfgDir)
	if err != nil {
		t.Fatal(err)
	}
	one := func(v cty.Value) cty.Value { return cty.ListVal([]cty.Value{v}) }
	bad := map[string]map[string]cty.Value{
		"socket outside /run/fedgate": {"local_socket": cty.StringVal("/tmp/s3.sock")},
		"relative mountpoint":         {"mounts": one(mountVal("d", "imagenet", "mnt/x", "", "", true, true, -1, -1))},
		"mountpoint with ..":          {"mounts": one(mountVal("d", "imagenet", "/mnt/../etc", "", "", true, true, -1, -1))},
		"bucket with a space":         {"mounts": one(mountVal("d", "image net", "/mnt/x", "", "", true, true, -1, -1))},
		"stat_ttl not a duration":     {"mounts": one(mountVal("d", "imagenet", "/mnt/x", "", "10 s", true, true, -1, -1))},
		"endpoint with a quote":       {"mounts": one(mountVal("d", "imagenet", "/mnt/x", "http://gw'x:9000", "", true, true, -1, -1))},
		"negative uid":                {"mounts": one(mountVal("d", "imagenet", "/mnt/x", "", "", true, true, -5, -1))},
		"two mounts, one name": {"mounts": cty.ListVal([]cty.Value{
			mountVal("d", "imagenet", "/mnt/x", "", "", true, true, -1, -1), mountVal("d", "other", "/mnt/y", "", "", true, true, -1, -1)})},
		"short mount key": {"mount_credentials": cty.ObjectVal(map[string]cty.Value{"access_key": cty.StringVal("short"), "secret_key": cty.StringVal("mount-secret-key-0123456789abcdefghij")})},
	}
	for what, set := range bad {
		b := map[string]cty.Value{}
		for k, v := range plain {
			b[k] = v
		}
		for k, v := range set {
			b[k] = v
		}
		if _, err := m.Evaluate(b); err == nil {
			t.Errorf("%s: node-config accepts it", what)
		}
	}
}
