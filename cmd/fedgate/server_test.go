package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/node"
)

// sample is a valid YAML value for a flag of the given type, and the
// flag's String() after setting it. A flag of a type not listed here fails
// TestServerConfigEveryFlag: add its type (and to docs/server-config.md).
func sample(f *pflag.Flag) (yaml, want string, ok bool) {
	switch f.Value.Type() {
	case "string":
		return `"x-` + f.Name + `"`, "x-" + f.Name, true
	case "int", "uint64":
		return "7", "7", true
	case "bool":
		return "true", "true", true
	case "duration":
		return "42s", "42s", true
	case "stringSlice":
		return "[a:1, b:2]", "[a:1,b:2]", true
	}
	return "", "", false
}

func noEnv(string) string { return "" }

// Every flag of `fedgate server` is a key of the server config file, with
// no second list to keep in sync.
func TestServerConfigEveryFlag(t *testing.T) {
	cmd := newServerCmd()
	var doc strings.Builder
	wants := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == serverConfigFlag || f.Name == "check" {
			return
		}
		y, w, ok := sample(f)
		if !ok {
			t.Errorf("flag --%s has type %s, which TestServerConfigEveryFlag has no sample for", f.Name, f.Value.Type())
			return
		}
		fmt.Fprintf(&doc, "%s: %s\n", f.Name, y)
		wants[f.Name] = w
	})
	if len(wants) < 30 {
		t.Fatalf("only %d flags seen", len(wants))
	}
	path := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(path, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f := serverFlags{serverConfig: path}
	if err := applyServerConfig(cmd, &f, noEnv); err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	for name, w := range wants {
		fl := cmd.Flags().Lookup(name)
		if !fl.Changed || fl.Value.String() != w {
			t.Errorf("--%s = %q (changed %v), want %q from the file", name, fl.Value.String(), fl.Changed, w)
		}
	}
	if len(f.fileRes.Set) != len(wants) {
		t.Errorf("file set %d keys, want %d", len(f.fileRes.Set), len(wants))
	}
	if f.fileMsg != nil {
		t.Errorf("a 0600 file with the secret key gave a warning: %v", f.fileMsg)
	}
}

// A flag on the command line wins over the file, the file over the
// environment; FEDGATE_SERVER_CONFIG names the file when the flag does not.
func TestServerConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.yaml")
	doc := "listen: 10.0.0.1:9000\nnode-id: n2\nsecret-key: from-file-secret\njoin: [10.0.0.2:9000, 10.0.0.3:9000]\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FEDGATE_SERVER_CONFIG": path, "FEDGATE_ACCESS_KEY": "envaccess", "FEDGATE_SECRET_KEY": "envsecret"}
	cmd := newServerCmd()
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:9100"}); err != nil {
		t.Fatal(err)
	}
	var f serverFlags
	if err := applyServerConfig(cmd, &f, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	if get("listen") != "127.0.0.1:9100" || get("node-id") != "n2" || get("join") != "[10.0.0.2:9000,10.0.0.3:9000]" {
		t.Errorf("listen %s node-id %s join %s", get("listen"), get("node-id"), get("join"))
	}
	if f.serverConfig != path || strings.Join(f.fileRes.Overridden, ",") != "listen" {
		t.Errorf("serverConfig %q overridden %v", f.serverConfig, f.fileRes.Overridden)
	}
	if get("secret-key") != "from-file-secret" {
		t.Errorf("secret-key = %q, want the file's", get("secret-key"))
	}
	if f.fileMsg == nil || !strings.Contains(fmt.Sprint(f.fileMsg...), "chmod 600") {
		t.Errorf("a 0644 file holding the secret key gave no warning: %v", f.fileMsg)
	}
}

func TestServerConfigErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(path, []byte("listen: 10.0.0.1:9000\ndata-dri: /var/lib/fedgate\nbootstrap-expect: three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := applyServerConfig(newServerCmd(), &serverFlags{serverConfig: path}, noEnv)
	for _, want := range []string{
		path + `:2:1: data-dri: unknown key "data-dri" (did you mean "data-dir"?)`,
		path + `:3:19: bootstrap-expect: want a whole number, got the string "three"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to hold %s", err, want)
		}
	}
	err = applyServerConfig(newServerCmd(), &serverFlags{serverConfig: path + ".missing"}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "--server-config: open "+path+".missing") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLogFormat(t *testing.T) {
	var b bytes.Buffer
	for format, want := range map[string]string{"text": "level=INFO msg=hello", "json": `"msg":"hello"`, "": `"msg":"hello"`} {
		b.Reset()
		log, err := newLogger("info", format, &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello")
		if !strings.Contains(b.String(), want) {
			t.Errorf("--log-format %q wrote %q, want %q", format, b.String(), want)
		}
	}
	if _, err := newLogger("info", "xml", &b); err == nil || !strings.Contains(err.Error(), `--log-format "xml": want text or json`) {
		t.Errorf("err = %v", err)
	}
}

// docs/server-config.md's full example names every flag (commented or
// not) and is a valid file.
func TestServerConfigDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/server-config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## A full example")
	_, block, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/server-config.md has no yaml block under ## A full example")
	}
	cmd := newServerCmd()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == serverConfigFlag || f.Name == "help" || f.Name == "check" {
			return
		}
		if !strings.Contains(block, "\n"+f.Name+":") && !strings.Contains(block, "\n# "+f.Name+":") {
			t.Errorf("the example in docs/server-config.md does not show the key %s", f.Name)
		}
	})
	path := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := applyServerConfig(cmd, &serverFlags{serverConfig: path}, noEnv); err != nil {
		t.Errorf("the example in docs/server-config.md: %v", err)
	}
}

// --egress-reuse-objects reaches the node's config: the default, 0 (off),
// and a negative or absurd number refused with the flag's name.
func TestServerEgressReuseObjects(t *testing.T) {
	parse := func(args ...string) (node.Config, error) {
		cmd := newServerCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		n, err := cmd.Flags().GetInt("egress-reuse-objects")
		if err != nil {
			t.Fatal(err)
		}
		f := serverFlags{listen: "127.0.0.1:0", dataDir: t.TempDir(), nodeID: "n1", writeBackCopies: 2, egressRetention: "0", egressReuseObjects: n}
		return f.nodeConfig(slog.New(slog.DiscardHandler))
	}
	if cfg, err := parse(); err != nil || cfg.EgressReuseObjects != federation.DefaultReuseObjects {
		t.Errorf("default: %d, %v; want %d", cfg.EgressReuseObjects, err, federation.DefaultReuseObjects)
	}
	if cfg, err := parse("--egress-reuse-objects", "0"); err != nil || cfg.EgressReuseObjects != 0 {
		t.Errorf("0: %d, %v", cfg.EgressReuseObjects, err)
	}
	for _, bad := range []string{"-1", "2000000000"} {
		if _, err := parse("--egress-reuse-objects", bad); err == nil || !strings.Contains(err.Error(), "--egress-reuse-objects") {
			t.Errorf("%s: error %v, want one naming --egress-reuse-objects", bad, err)
		}
	}
}

// Size flags take SI and IEC units (docs/units.md) and say why a value is
// refused.
func TestParseSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"10GB": 10_000_000_000, "10GiB": 10 << 30, "1.5TiB": 3 << 39, "4096": 4096, "2 MiB": 2 << 20} {
		if got, err := parseSizeFlag("cache-size", in, "500GiB"); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"10gb": `--cache-size "10gb": unknown size unit "gb" in "10gb" (did you mean "GB"?); want a size like 500GiB (KiB, MiB, GiB, TiB: powers of 1024; KB, MB, GB, TB: powers of 1000)`,
		"0":    `--cache-size "0": want a size above 0, like 500GiB`,
	} {
		if _, err := parseSizeFlag("cache-size", in, "500GiB"); err == nil || err.Error() != want {
			t.Errorf("%q: %v; want %s", in, err, want)
		}
	}
}
