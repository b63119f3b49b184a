package deploycheck_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// TestExampleWiring follows the two-region example's inputs
// (terraform.tfvars.example) through module "aws" (region-aws) and module
// "gcp" (region-gcp) into node-config, and checks what each region gives
// it: the policy both apply, its own region, one node per node_count, the
// binary, peer TLS, the local NVMe devices and the credentials for the
// other cloud's stores.
func TestExampleWiring(t *testing.T) {
	vars, err := deploycheck.ReadTFVars(exampleVars)
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	for call, region := range exampleRegions {
		t.Run(call, func(t *testing.T) {
			c := followExample(t, call)
			in := c.NodeConfig
			policy := in["policy"]
			if !policy.IsWhollyKnown() {
				t.Fatal("the policy is not known before apply: it must not depend on resources")
			}
			if got := c.Root.Locals["policy"]; !got.RawEquals(policy) {
				t.Error("node-config's policy is not the example's local.policy")
			}
			policies = append(policies, policy.AsString())
			if got := in["region"]; !got.RawEquals(cty.StringVal(region)) {
				t.Errorf("region = %#v, want %q", got, region)
			}
			nodeCount := c.Root.Vars["node_count"]
			if n := in["nodes"].LengthInt(); !cty.NumberIntVal(int64(n)).RawEquals(nodeCount) {
				t.Errorf("%d nodes, want node_count %#v", n, nodeCount)
			}
			for i, it := 0, in["nodes"].ElementIterator(); it.Next(); i++ {
				_, n := it.Element()
				if id := n.GetAttr("id"); !id.RawEquals(cty.StringVal(fmt.Sprintf("n%d", i+1))) {
					t.Errorf("node %d: id %#v", i, id)
				}
			}
			bin := vars["fedgate_binary"]
			if got := in["binary"]; !got.GetAttr("url").RawEquals(bin.GetAttr("url")) || !got.GetAttr("sha256").RawEquals(bin.GetAttr("sha256")) {
				t.Errorf("binary = %#v, want the example's fedgate_binary %#v", got, bin)
			}
			if ca := in["peer_ca_pem"]; ca.IsKnown() {
				t.Errorf("peer_ca_pem = %#v, want the example's generated CA (unknown before apply)", ca)
			}
			if g := in["cache_disk_glob"]; !g.IsKnown() || g.IsNull() || !strings.HasPrefix(g.AsString(), "/dev/disk/by-id/") {
				t.Errorf("cache_disk_glob = %#v, want the cloud's local NVMe devices", g)
			}
			env := in["environment"]
			switch call {
			case "aws":
				// GCS through a key file named by GOOGLE_APPLICATION_CREDENTIALS.
				p := env.Index(cty.StringVal("GOOGLE_APPLICATION_CREDENTIALS"))
				name := strings.TrimPrefix(p.AsString(), "/etc/fedgate/credentials/")
				if files := in["credential_files"]; !hasKey(files, name) {
					t.Errorf("GOOGLE_APPLICATION_CREDENTIALS=%s, but credential_files has no %q: %#v", p.AsString(), name, files)
				}
			case "gcp":
				for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
					if !hasKey(env, k) {
						t.Errorf("environment has no %s (the S3 stores' credentials)", k)
					}
				}
			}
		})
	}
	if len(policies) == 2 && policies[0] != policies[1] {
		t.Error("the two regions apply different policy files")
	}
}

// TestExamplePolicyValidates renders the example's policy file and checks it
// with the real binary: `fedgate policy validate --all-features` (the whole
// schema) accepts it. Plain `fedgate policy validate` checks it against
// what the build serves: a build without erasure placement refuses it, and
// must do so only because of the checkpoints' erasure placement.
func TestExamplePolicyValidates(t *testing.T) {
	c := followExample(t, "aws")
	policy := c.NodeConfig["policy"].AsString()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(fedgateBin, "policy", "validate", "--all-features", path).CombinedOutput()
	if err != nil {
		t.Fatalf("fedgate policy validate --all-features: %v\n%s\npolicy:\n%s", err, out, policy)
	}
	out, err = exec.Command(fedgateBin, "policy", "validate", path).CombinedOutput()
	if err == nil {
		t.Logf("this build serves everything the example's policy asks for:\n%s", out)
	} else {
		var problems []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(l, path+":") {
				problems = append(problems, l)
			}
		}
		if len(problems) == 0 {
			t.Fatalf("fedgate policy validate failed without a file:line:column error:\n%s", out)
		}
		for _, p := range problems {
			if !strings.Contains(p, "erasure placement is not supported yet") {
				t.Errorf("unexpected policy error (only the unserved erasure placement may be refused): %s", p)
			}
		}
	}
	// Every region the example deploys is declared, in the right cloud.
	for call, region := range exampleRegions {
		want := map[string]string{"aws": "location: aws:", "gcp": "location: gcp:"}[call]
		if !strings.Contains(policy, "- name: "+region+"\n    "+want) {
			t.Errorf("the policy does not declare region %s with a %s location:\n%s", region, call, policy)
		}
	}
}

// TestRenderedNodes renders every node of both example regions with the
// example's inputs (loopback addresses, local directories and test keys in
// place of what only exists after apply) and checks the command line, the
// unit, the environment file, the cloud-init, the boot scripts, and that
// the real binary accepts the rendered command line.
func TestRenderedNodes(t *testing.T) {
	for _, call := range []string{"aws", "gcp"} {
		t.Run(call, func(t *testing.T) {
			c := followExample(t, call)
			r := newTestRegion(t, []string{"n1", "n2", "n3"})
			for _, h := range r.hosts {
				t.Run(h.id, func(t *testing.T) {
					in := r.localInputs(t, c.NodeConfig, h, "")
					n := render(t, in, h)
					checkCommandLine(t, r, n, exampleRegions[call])
					checkUnit(t, n)
					checkEnvFile(t, n, c.NodeConfig["environment"])
					checkCloudInit(t, n)
					if loc := n.outputs["region_location"]; !loc.IsKnown() || loc.IsNull() || !strings.HasPrefix(loc.AsString(), map[string]string{"aws": "aws:", "gcp": "gcp:"}[call]) {
						t.Errorf("region_location = %#v", loc)
					}
					n.install(t)
					checkFlagsParse(t, r, n)
				})
			}
		})
	}
}

func checkCommandLine(t *testing.T, r *testRegion, n *rendered, region string) {
	t.Helper()
	words := execStart(t, n.unit)
	if want := filepath.Join(n.host.root, "usr/local/bin/fedgate"); words[0] != want {
		t.Errorf("ExecStart runs %s, want paths.binary %s", words[0], want)
	}
	if !slices.Equal(words[1:], n.args) {
		t.Errorf("ExecStart arguments\n%q\ndiffer from server_args\n%q", words[1:], n.args)
	}
	args := n.args
	conf := n.file(t, "/etc/fedgate/server.yaml")
	if len(args) < 3 || args[0] != "server" || args[1] != "--server-config" || args[2] != conf.Path {
		t.Fatalf("server_args = %q, want `server --server-config %s ...`", args, conf.Path)
	}
	if conf.Mode != "0644" || conf.Owner != "root" {
		t.Errorf("server config file: mode %s owner %s, want 0644 root", conf.Mode, conf.Owner)
	}
	if b, _ := n.value("--bootstrap"); b == "true" || slices.Contains(args, "--bootstrap") {
		t.Error("a node starts with --bootstrap: a node whose disk was wiped would found a second region")
	}
	var others []string
	for _, o := range r.hosts {
		if o.id != n.host.id {
			others = append(others, o.ip+":"+strconv.Itoa(r.ports["s3"]))
		}
	}
	want := map[string]string{
		"--node-id":          n.host.id,
		"--region":           region,
		"--listen":           n.host.ip + ":" + strconv.Itoa(r.ports["s3"]),
		"--raft-addr":        n.host.ip + ":" + strconv.Itoa(r.ports["raft"]),
		"--internal-addr":    n.host.ip + ":" + strconv.Itoa(r.ports["internal"]),
		"--bootstrap-expect": strconv.Itoa(len(r.hosts)),
		"--config":           filepath.Join(n.host.root, "etc/fedgate/policy.yaml"),
		"--data-dir":         filepath.Join(n.host.root, "var/lib/fedgate"),
		"--cache-dir":        filepath.Join(n.host.root, "var/cache/fedgate"),
	}
	for flag, v := range want {
		if got, ok := n.value(flag); !ok || got != v {
			t.Errorf("%s = %q, want %q", flag, got, v)
		}
	}
	join, _ := n.value("--join")
	got := strings.Split(join, ",")
	sort.Strings(got)
	sort.Strings(others)
	if !slices.Equal(got, others) {
		t.Errorf("--join %s, want the other nodes' S3 addresses %s", join, strings.Join(others, ","))
	}
	if n.file(t, "/etc/fedgate/policy.yaml").Content == "" {
		t.Error("empty policy file")
	}
	if r.tls != nil {
		for flag, suffix := range map[string]string{"--peer-cert-file": "tls/node.pem", "--peer-key-file": "tls/node.key", "--peer-ca-file": "tls/ca.pem"} {
			p, ok := n.value(flag)
			f := n.file(t, suffix)
			if !ok || p != f.Path {
				t.Errorf("%s = %q, want the rendered %s", flag, p, f.Path)
			}
		}
		if got, want := n.file(t, "tls/node.key"), r.tls.certs[n.host.id][1]; got.Content != want || got.Mode != "0600" {
			t.Errorf("tls/node.key: mode %s, content is the node's key: %v", got.Mode, got.Content == want)
		}
	} else if _, ok := n.value("--peer-ca-file"); ok {
		t.Error("--peer-ca-file without a CA")
	}
	if r.s3tls != nil {
		for flag, suffix := range map[string]string{"--cert-file": "tls/s3.pem", "--key-file": "tls/s3.key", "--ca-file": "tls/s3-ca.pem"} {
			p, ok := n.value(flag)
			f := n.file(t, suffix)
			if !ok || p != f.Path {
				t.Errorf("%s = %q, want the rendered %s", flag, p, f.Path)
			}
		}
		if got, want := n.file(t, "tls/s3.key"), r.s3tls.certs[n.host.id][1]; got.Content != want || got.Mode != "0600" {
			t.Errorf("tls/s3.key: mode %s, content is the node's S3 key: %v", got.Mode, got.Content == want)
		}
	} else if _, ok := n.value("--cert-file"); ok {
		t.Error("--cert-file without s3_ca_pem")
	}
	for _, a := range args {
		if strings.Contains(a, testserver.RootSecretKey) || strings.Contains(a, testserver.RootAccessKey) {
			t.Error("the root keys are on the command line; they belong in the environment file")
		}
	}
	if strings.Contains(conf.Content, testserver.RootSecretKey) || strings.Contains(conf.Content, testserver.RootAccessKey) {
		t.Error("the root keys are in the server config file; they belong in the environment file")
	}
}

func checkUnit(t *testing.T, n *rendered) {
	t.Helper()
	f := n.file(t, "/etc/systemd/system/fedgate.service")
	if f.Content != n.unit || f.Mode != "0644" {
		t.Errorf("fedgate.service file differs from units output or has mode %s", f.Mode)
	}
	want := map[string]string{
		"Restart":         "always",
		"LimitNOFILE":     "1048576",
		"User":            "fedgate",
		"EnvironmentFile": filepath.Join(n.host.root, "etc/fedgate/fedgate.env"),
		"ExecReload":      "/bin/kill -HUP $MAINPID", // reloads the S3 certificate (docs/tls.md)
	}
	for k, v := range want {
		if got := unitValues(n.unit, k); !slices.Equal(got, []string{v}) {
			t.Errorf("%s= %q, want %q", k, got, v)
		}
	}
	rw := strings.Fields(strings.Join(unitValues(n.unit, "ReadWritePaths"), " "))
	if len(rw) < 2 || rw[0] != filepath.Join(n.host.root, "var/lib/fedgate") || rw[1] != filepath.Join(n.host.root, "var/cache/fedgate") {
		t.Errorf("ReadWritePaths= %q, want the data and cache dirs first", rw)
	}
	if strings.Contains(n.unit, testserver.RootSecretKey) {
		t.Error("the unit holds the root secret key")
	}
	// Cloud nodes prepare their disks before fedgate starts.
	if got := unitValues(n.unit, "Requires"); !slices.Equal(got, []string{"fedgate-disks.service"}) {
		t.Errorf("Requires= %q, want fedgate-disks.service", got)
	}
}

func checkEnvFile(t *testing.T, n *rendered, given cty.Value) {
	t.Helper()
	f := n.file(t, "/etc/fedgate/fedgate.env")
	if f.Mode != "0600" || f.Owner != "root" {
		t.Errorf("fedgate.env: mode %s owner %s, want 0600 root", f.Mode, f.Owner)
	}
	env := parseEnvFile(t, f.Content)
	if env["FEDGATE_ACCESS_KEY"] != testserver.RootAccessKey || env["FEDGATE_SECRET_KEY"] != testserver.RootSecretKey {
		t.Errorf("fedgate.env root keys = %q, %q", env["FEDGATE_ACCESS_KEY"], env["FEDGATE_SECRET_KEY"])
	}
	for it := given.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		if _, ok := env[k.AsString()]; !ok {
			t.Errorf("fedgate.env has no %s (given by the region module)", k.AsString())
		}
	}
	for _, f := range n.files {
		if strings.Contains(f.Path, "/credentials/") && (f.Mode != "0600" || f.Owner != "fedgate") {
			t.Errorf("%s: mode %s owner %s, want 0600 fedgate", f.Path, f.Mode, f.Owner)
		}
	}
}

// cloudConfig is the part of cloud-init's schema the rendered user-data uses.
type cloudConfig struct {
	Users      []any `yaml:"users"`
	WriteFiles []struct {
		Path        string `yaml:"path"`
		Owner       string `yaml:"owner"`
		Permissions string `yaml:"permissions"`
		Content     string `yaml:"content"`
		Defer       bool   `yaml:"defer"`
	} `yaml:"write_files"`
	RunCmd [][]string `yaml:"runcmd"`
}

func checkCloudInit(t *testing.T, n *rendered) {
	t.Helper()
	if !strings.HasPrefix(n.cloudInit, "#cloud-config\n") {
		t.Fatalf("cloud-init does not start with #cloud-config:\n%.200s", n.cloudInit)
	}
	var cc cloudConfig
	if err := yaml.UnmarshalWithOptions([]byte(n.cloudInit), &cc, yaml.Strict()); err != nil {
		t.Fatalf("cloud-init is not the YAML expected: %v\n%s", err, n.cloudInit)
	}
	written := map[string]file{}
	for _, w := range cc.WriteFiles {
		owner, _, _ := strings.Cut(w.Owner, ":")
		written[w.Path] = file{Path: w.Path, Content: w.Content, Mode: w.Permissions, Owner: owner}
		if w.Defer != (owner != "root") {
			t.Errorf("%s: owner %s and defer %v: files of the service user must be deferred until it exists", w.Path, owner, w.Defer)
		}
	}
	for p, f := range n.files {
		if w, ok := written[p]; !ok || w != f {
			t.Errorf("cloud-init writes %s differently from node-config's files (or not at all)", p)
		}
	}
	sbin := filepath.Join(n.host.root, "usr/local/sbin")
	for _, p := range []string{sbin + "/fedgate-install", sbin + "/fedgate-prepare-disks", filepath.Join(n.host.root, "etc/systemd/system/fedgate-disks.service")} {
		w, ok := written[p]
		if !ok {
			t.Errorf("cloud-init does not write %s", p)
			continue
		}
		if strings.HasSuffix(p, ".service") {
			continue
		}
		if w.Mode != "0755" {
			t.Errorf("%s: mode %s", p, w.Mode)
		}
		// The boot scripts are bash: check their syntax.
		cmd := exec.Command(deploycheck.Tool(t, "bash"), "-n")
		cmd.Stdin = strings.NewReader(w.Content)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", p, err, out)
		}
	}
	n.bootFiles = written
	want := [][]string{
		{sbin + "/fedgate-install"},
		{"systemctl", "daemon-reload"},
		{"systemctl", "enable", "fedgate-disks.service"},
		{"systemctl", "enable", "--now", "fedgate.service"},
	}
	if !slices.EqualFunc(cc.RunCmd, want, slices.Equal) {
		t.Errorf("runcmd = %q, want %q", cc.RunCmd, want)
	}
	if !strings.Contains(fmt.Sprint(cc.Users), "name:fedgate") || !strings.Contains(fmt.Sprint(cc.Users), "system:true") {
		t.Errorf("cloud-init does not create the system user fedgate: %v", cc.Users)
	}
}

// checkFlagsParse runs the rendered ExecStart with the rendered environment
// file and files in place, alone. The node must get past flag parsing and
// the policy check and then either listen on its S3 and Raft addresses
// (waiting for the other nodes, which this check does not start), or, with
// a build that does not serve erasure placement yet, stop exactly at the
// example policy's erasure-coded checkpoints.
func checkFlagsParse(t *testing.T, r *testRegion, n *rendered) {
	t.Helper()
	words := execStart(t, n.unit)
	env := parseEnvFile(t, n.file(t, "/etc/fedgate/fedgate.env").Content)
	var out syncBuffer
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Env = serviceEnv(env)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	up := func(port int) bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(n.host.ip, strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	var (
		ended   bool
		exitErr error
	)
	err := wait.Until(context.Background(), 30*time.Second, func() bool {
		select {
		case exitErr = <-exited:
			exited <- exitErr
			ended = true
			return true
		default:
		}
		return up(r.ports["s3"]) && up(r.ports["raft"]) // flags and policy accepted; waiting for its peers
	})
	if !ended {
		if err != nil {
			t.Fatalf("fedgate server with the rendered command line neither listens nor exits after 30s:\n%s", out.String())
		}
		return
	}
	msg := out.String()
	if exitErr == nil || !strings.Contains(msg, "erasure placement is not supported yet") {
		t.Fatalf("fedgate server with the rendered command line exited (%v) for another reason than an unserved erasure placement:\n%s", exitErr, msg)
	}
	for _, bad := range []string{"unknown flag", "invalid argument", "unknown shorthand", "Usage:"} {
		if strings.Contains(msg, bad) {
			t.Fatalf("fedgate server does not accept the rendered command line:\n%s", msg)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process's output goroutines and a
// reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serviceEnv is what systemd gives the unit: a minimal environment plus
// the EnvironmentFile's variables.
func serviceEnv(file map[string]string) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}
	for k, v := range file {
		env = append(env, k+"="+v)
	}
	return env
}

// TestSystemdAnalyzeVerify checks the rendered units with systemd's own
// parser (`systemd-analyze verify`): fedgate.service and
// fedgate-disks.service of a cloud node, with their binaries in place.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa := deploycheck.Tool(t, "systemd-analyze")
	c := followExample(t, "aws")
	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	h := r.hosts[0]
	n := render(t, r.localInputs(t, c.NodeConfig, h, ""), h)
	checkCloudInit(t, n)
	n.install(t)
	dir := filepath.Join(h.root, "etc/systemd/system")
	disks := n.bootFiles[filepath.Join(dir, "fedgate-disks.service")]
	if err := os.WriteFile(disks.Path, []byte(disks.Content), 0o644); err != nil {
		t.Fatal(err)
	}
	prep := n.bootFiles[filepath.Join(h.root, "usr/local/sbin/fedgate-prepare-disks")]
	if err := os.MkdirAll(filepath.Dir(prep.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prep.Path, []byte(prep.Content), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sa, "verify", "--man=no", "--recursive-errors=no",
		filepath.Join(dir, "fedgate.service"), filepath.Join(dir, "fedgate-disks.service"))
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	// systemd-analyze also reports on units it loads as dependencies from
	// this machine; only lines about ours count.
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "fedgate") {
			ours = append(ours, l)
		}
	}
	if len(ours) > 0 {
		t.Errorf("systemd-analyze verify (%v):\n%s", err, strings.Join(ours, "\n"))
	}
	if err != nil && len(ours) == 0 {
		t.Logf("systemd-analyze verify exited %v about other units:\n%s", err, out)
	}
}

// TestInstallScriptChecksSHA256 runs the rendered installer against a local
// HTTP server: it installs the binary whose sha256 matches, and refuses
// (installing nothing) when the bytes differ.
func TestInstallScriptChecksSHA256(t *testing.T) {
	bash := deploycheck.Tool(t, "bash")
	deploycheck.Tool(t, "curl")
	body, err := os.ReadFile(fedgateBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	serve := body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "fedgate", time.Time{}, bytes.NewReader(serve))
	}))
	defer srv.Close()

	c := followExample(t, "gcp")
	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	h := r.hosts[0]
	in := r.localInputs(t, c.NodeConfig, h, "")
	in["binary"] = cty.ObjectVal(map[string]cty.Value{
		"url": cty.StringVal(srv.URL + "/fedgate"), "sha256": cty.StringVal(hex.EncodeToString(sum[:])),
		"auth": cty.StringVal("none"), "aws_region": cty.StringVal(""), "azure_client_id": cty.StringVal(""),
	})
	n := render(t, in, h)
	script := n.outputs["install_script"].AsString()
	dest := filepath.Join(h.root, "usr/local/bin/fedgate")
	run := func() (string, error) {
		cmd := exec.Command(bash, "-s")
		cmd.Stdin = strings.NewReader(script)
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); !strings.Contains(strings.ToLower(k), "proxy") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run()
	if err != nil {
		t.Fatalf("installer: %v\n%s", err, out)
	}
	if out, err := exec.Command(dest, "version").CombinedOutput(); err != nil {
		t.Fatalf("installed binary: %v\n%s", err, out)
	}

	// Different bytes, same expected sha256: refused, the old binary stays.
	if err := os.Remove(dest); err != nil {
		t.Fatal(err)
	}
	serve = append([]byte("tampered"), body...)
	out, err = run()
	if err == nil {
		t.Fatalf("installer accepted a binary whose sha256 differs:\n%s", out)
	}
	if !strings.Contains(out, "sha256") {
		t.Errorf("installer failed without naming the sha256 mismatch: %s", out)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("installer left %s behind after a sha256 mismatch (%v)", dest, err)
	}
	if left, _ := filepath.Glob(dest + ".download.*"); len(left) > 0 {
		t.Errorf("installer left temporary files: %v", left)
	}
}
