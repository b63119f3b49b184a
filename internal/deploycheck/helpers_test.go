package deploycheck_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
	"github.com/fedgate/fedgate/internal/testserver"
)

// fedgateBin is the fedgate binary the rendered files are checked with:
// built from this tree, or the one $FEDGATE_DEPLOYCHECK_BIN names (to check
// a release binary against the modules).
var fedgateBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv("FEDGATE_DEPLOYCHECK_BIN"); bin != "" {
		fedgateBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "deploycheck-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fedgateBin, err = testserver.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	tfDir       = deploycheck.TerraformDir()
	exampleDir  = filepath.Join(tfDir, "examples", "two-region")
	nodeCfgDir  = filepath.Join(tfDir, deploycheck.NodeConfigModule)
	exampleVars = filepath.Join(exampleDir, "terraform.tfvars.example")
)

// exampleRegions maps the example's module calls to the fedgate region
// names they deploy.
var exampleRegions = map[string]string{"aws": "us-east-1-gpu", "gcp": "us-central1-gpu"}

// followExample evaluates the two-region example with its
// terraform.tfvars.example and returns what module call `call` (aws, gcp)
// gives node-config.
func followExample(t *testing.T, call string) *deploycheck.Chain {
	t.Helper()
	in, err := deploycheck.ReadTFVars(exampleVars)
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploycheck.FollowRegion(exampleDir, in, call)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// host is where one rendered node runs on this machine: its own loopback
// address and its own directories, in place of the cloud's.
type host struct {
	id   string
	ip   string
	root string // every path of the node lives below it
}

func (h host) paths() cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"binary":      cty.StringVal(filepath.Join(h.root, "usr/local/bin/fedgate")),
		"config_dir":  cty.StringVal(filepath.Join(h.root, "etc/fedgate")),
		"data_dir":    cty.StringVal(filepath.Join(h.root, "var/lib/fedgate")),
		"cache_dir":   cty.StringVal(filepath.Join(h.root, "var/cache/fedgate")),
		"sbin_dir":    cty.StringVal(filepath.Join(h.root, "usr/local/sbin")),
		"systemd_dir": cty.StringVal(filepath.Join(h.root, "etc/systemd/system")),
	})
}

// testRegion is a set of hosts on loopback addresses with the production
// ports (9000, 7000, 7001) when they are free there, else free ports.
type testRegion struct {
	hosts []host
	ports map[string]int
	tls   *testCA // nil: no peer TLS
	s3tls *testCA // nil: the S3 port serves plain HTTP
}

// newTestRegion picks n loopback addresses (127.X.Y.Z; Linux routes all of
// 127/8 to lo) and the ports.
func newTestRegion(t *testing.T, ids []string) *testRegion {
	t.Helper()
	root := t.TempDir()
	r := &testRegion{ports: map[string]int{"s3": 9000, "raft": 7000, "internal": 7001}}
	for attempt := 0; ; attempt++ {
		r.hosts = r.hosts[:0]
		ok := true
		for _, id := range ids {
			ip := fmt.Sprintf("127.%d.%d.%d", 1+mrand.IntN(250), mrand.IntN(256), 1+mrand.IntN(250))
			r.hosts = append(r.hosts, host{id: id, ip: ip, root: filepath.Join(root, id)})
			for _, p := range r.ports {
				if !bindable(ip, p) {
					ok = false
				}
			}
		}
		if ok {
			break
		}
		if attempt == 5 {
			// Something holds the wildcard address on these ports: use free ones.
			for name := range r.ports {
				r.ports[name] = freePort(t)
			}
		}
		if attempt > 20 {
			t.Fatal("no free loopback addresses and ports")
		}
	}
	return r
}

func bindable(ip string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// localInputs turns the node-config inputs a region module gives (with
// values that only exist after apply) into inputs that run on this
// machine, for host h: the addresses, paths and ports become r's, the
// values generated at apply time (root keys, peer certificates, cross-cloud
// credentials) become test values. Everything else (region, policy, the
// flags, the environment variable names, the binary's URL) stays as given.
// policy, when not empty, replaces the policy file.
func (r *testRegion) localInputs(t *testing.T, in map[string]cty.Value, h host, policy string) map[string]cty.Value {
	t.Helper()
	out := map[string]cty.Value{}
	for k, v := range in {
		out[k] = v
	}
	nodes := in["nodes"]
	if !nodes.CanIterateElements() || nodes.LengthInt() != len(r.hosts) {
		t.Fatalf("nodes: want %d known nodes, got %#v", len(r.hosts), nodes)
	}
	var list []cty.Value
	for i, it := 0, nodes.ElementIterator(); it.Next(); i++ {
		_, n := it.Element()
		id := n.GetAttr("id")
		if !id.IsKnown() || id.AsString() != r.hosts[i].id {
			t.Fatalf("node %d: id %#v, want %s", i, id, r.hosts[i].id)
		}
		disk := cty.NullVal(cty.String)
		if hasKey(n, "data_disk") {
			disk = n.GetAttr("data_disk")
		}
		if !disk.IsKnown() {
			disk = cty.StringVal("/dev/disk/by-id/deploycheck-" + r.hosts[i].id)
		}
		list = append(list, cty.ObjectVal(map[string]cty.Value{
			"id": id, "address": cty.StringVal(r.hosts[i].ip), "data_disk": disk,
		}))
	}
	out["nodes"] = cty.ListVal(list)
	out["paths"] = h.paths()
	out["ports"] = cty.ObjectVal(map[string]cty.Value{
		"s3": cty.NumberIntVal(int64(r.ports["s3"])), "raft": cty.NumberIntVal(int64(r.ports["raft"])),
		"internal": cty.NumberIntVal(int64(r.ports["internal"])),
	})
	out["root_credentials"] = cty.ObjectVal(map[string]cty.Value{
		"access_key": cty.StringVal(testserver.RootAccessKey), "secret_key": cty.StringVal(testserver.RootSecretKey),
	})
	// Peer TLS is on when the region module gives a CA (unknown before apply).
	if ca := in["peer_ca_pem"]; ca != cty.NilVal && (!ca.IsKnown() || !ca.IsNull()) {
		if r.tls == nil {
			r.tls = newTestCA(t, r.hosts)
		}
		out["peer_ca_pem"] = cty.StringVal(r.tls.caPEM)
		certs := map[string]cty.Value{}
		for _, h := range r.hosts {
			certs[h.id] = cty.ObjectVal(map[string]cty.Value{
				"cert_pem": cty.StringVal(r.tls.certs[h.id][0]), "key_pem": cty.StringVal(r.tls.certs[h.id][1]),
			})
		}
		out["peer_certs"] = cty.MapVal(certs)
	}
	// So is TLS on the S3 port, with another CA.
	if ca := in["s3_ca_pem"]; ca != cty.NilVal && (!ca.IsKnown() || !ca.IsNull()) {
		if r.s3tls == nil {
			r.s3tls = newTestCA(t, r.hosts)
		}
		out["s3_ca_pem"] = cty.StringVal(r.s3tls.caPEM)
		certs := map[string]cty.Value{}
		for _, h := range r.hosts {
			certs[h.id] = cty.ObjectVal(map[string]cty.Value{
				"cert_pem": cty.StringVal(r.s3tls.certs[h.id][0]), "key_pem": cty.StringVal(r.s3tls.certs[h.id][1]),
			})
		}
		out["s3_certs"] = cty.MapVal(certs)
	}
	if policy != "" {
		out["policy"] = cty.StringVal(policy)
	}
	// A binary in a bucket gets its URL (region, identity) from the cloud
	// at apply time.
	if b := out["binary"]; !b.IsNull() {
		attrs := b.AsValueMap()
		for k, v := range map[string]string{"url": "https://deploycheck.invalid/fedgate", "aws_region": "us-east-1",
			"azure_client_id": "00000000-0000-0000-0000-000000000000"} {
			if !attrs[k].IsKnown() {
				attrs[k] = cty.StringVal(v)
			}
		}
		out["binary"] = cty.ObjectVal(attrs)
	}
	for k, v := range out {
		out[k] = replaceUnknown(t, v, "deploycheck-"+k)
	}
	return out
}

// replaceUnknown replaces every unknown string in v (a generated password,
// a key made at apply time) with a placeholder.
func replaceUnknown(t *testing.T, v cty.Value, placeholder string) cty.Value {
	t.Helper()
	out, err := cty.Transform(v, func(_ cty.Path, v cty.Value) (cty.Value, error) {
		if v.IsKnown() {
			return v, nil
		}
		if v.Type() == cty.String || v.Type() == cty.DynamicPseudoType {
			return cty.StringVal(placeholder), nil
		}
		return v, fmt.Errorf("unknown %s", v.Type().FriendlyName())
	})
	if err != nil {
		t.Fatalf("%s: %v", placeholder, err)
	}
	return out
}

// rendered is node-config's evaluation for one host.
type rendered struct {
	host      host
	args      []string          // server_args[host]
	settings  map[string]string // the rendered server config file, lists joined with ","
	unit      string            // units[host]
	files     map[string]file   // files[host] by path
	bootFiles map[string]file   // cloud-init's write_files by path
	cloudInit string            // cloud_init[host]
	outputs   map[string]cty.Value
}

type file struct {
	Path, Content, Mode, Owner string
}

// render evaluates node-config with the given inputs for host h.
func render(t *testing.T, inputs map[string]cty.Value, h host) *rendered {
	t.Helper()
	m, err := deploycheck.LoadModule(nodeCfgDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Evaluate(inputs)
	if err != nil {
		t.Fatalf("evaluating node-config: %v", err)
	}
	for name, v := range res.Outputs {
		if !v.IsWhollyKnown() {
			t.Fatalf("node-config output %s is not known with local inputs: %#v", name, v)
		}
	}
	r := &rendered{host: h, outputs: res.Outputs, files: map[string]file{}}
	for it := member(t, res.Outputs["server_args"], h.id).ElementIterator(); it.Next(); {
		_, a := it.Element()
		r.args = append(r.args, a.AsString())
	}
	r.unit = member(t, res.Outputs["units"], h.id).AsString()
	for it := member(t, res.Outputs["files"], h.id).ElementIterator(); it.Next(); {
		_, f := it.Element()
		ff := file{Path: f.GetAttr("path").AsString(), Content: f.GetAttr("content").AsString(),
			Mode: f.GetAttr("mode").AsString(), Owner: f.GetAttr("owner").AsString()}
		r.files[ff.Path] = ff
	}
	r.settings = parseServerConfig(t, r.file(t, "/etc/fedgate/server.yaml").Content)
	if ci := res.Outputs["cloud_init"]; ci.LengthInt() > 0 {
		r.cloudInit = member(t, ci, h.id).AsString()
	}
	return r
}

// member is v[key] for a map or an object.
func member(t *testing.T, v cty.Value, key string) cty.Value {
	t.Helper()
	switch {
	case v.Type().IsObjectType() && v.Type().HasAttribute(key):
		return v.GetAttr(key)
	case v.Type().IsMapType() && v.HasIndex(cty.StringVal(key)).True():
		return v.Index(cty.StringVal(key))
	}
	t.Fatalf("no %q in %#v", key, v)
	return cty.NilVal
}

// file returns the rendered file whose path ends with suffix.
func (r *rendered) file(t *testing.T, suffix string) file {
	t.Helper()
	var found []file
	for p, f := range r.files {
		if strings.HasSuffix(p, suffix) {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one rendered file ending in %s, got %d (files: %v)", r.host.id, suffix, len(found), sortedPaths(r.files))
	}
	return found[0]
}

func sortedPaths(m map[string]file) []string {
	var ps []string
	for p := range m {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// install writes the host's rendered files at their (local) paths, and the
// fedgate binary at paths.binary, as cloud-init or on-prem tooling would.
func (r *rendered) install(t *testing.T) {
	t.Helper()
	for _, f := range r.files {
		if !strings.HasPrefix(f.Path, r.host.root+"/") {
			t.Fatalf("%s: rendered file %s is outside the host's directory %s", r.host.id, f.Path, r.host.root)
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			t.Fatal(err)
		}
		mode, err := strconv.ParseUint(f.Mode, 8, 32)
		if err != nil {
			t.Fatalf("%s: mode %q: %v", f.Path, f.Mode, err)
		}
		if err := os.WriteFile(f.Path, []byte(f.Content), os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(r.host.root, "usr/local/bin/fedgate")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fedgateBin, bin); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}

// testCA is a CA and a certificate per node for the nodes' loopback
// addresses, as module peer-tls issues them for the cloud addresses.
type testCA struct {
	caPEM string
	certs map[string][2]string // id -> cert PEM, key PEM
}

func newTestCA(t *testing.T, hosts []host) *testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deploycheck-peers"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})), certs: map[string][2]string{}}
	for i, h := range hosts {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: h.id},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP(h.ip)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		ca.certs[h.id] = [2]string{
			string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
		}
	}
	return ca
}

// execStart returns the words of a unit's ExecStart= (with its line
// continuations joined), split the way systemd splits them; the rendered
// words hold no quotes, '$' or '%', so splitting at blanks is exact.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	var line string
	lines := strings.Split(unit, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "ExecStart=") {
			continue
		}
		if line != "" {
			t.Fatal("more than one ExecStart=")
		}
		line = strings.TrimPrefix(lines[i], "ExecStart=")
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
	}
	if line == "" {
		t.Fatal("no ExecStart= in the unit")
	}
	if strings.ContainsAny(line, "\"'$%;\\") {
		t.Fatalf("ExecStart has characters systemd would interpret: %q", line)
	}
	return strings.Fields(line)
}

// unitValues returns the values of KEY= in a unit file.
func unitValues(unit, key string) []string {
	var vals []string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// parseEnvFile reads a systemd EnvironmentFile as rendered: comments and
// KEY="VALUE" lines whose values hold no quotes, backslashes or '$'.
func parseEnvFile(t *testing.T, content string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for i, l := range strings.Split(content, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || strings.ContainsAny(v[1:len(v)-1], "\"\\$") {
			t.Fatalf("environment file line %d: want KEY=\"VALUE\", got %q", i+1, l)
		}
		if _, dup := env[k]; dup {
			t.Fatalf("environment file sets %s twice", k)
		}
		env[k] = v[1 : len(v)-1]
	}
	return env
}

// parseServerConfig reads a rendered server config file: flag name (no
// dashes) to value, lists joined with "," as on a command line.
func parseServerConfig(t *testing.T, content string) map[string]string {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(content), &m); err != nil {
		t.Fatalf("the rendered server config file is not YAML: %v\n%s", err, content)
	}
	out := map[string]string{}
	for k, v := range m {
		if l, ok := v.([]any); ok {
			parts := make([]string, len(l))
			for i, e := range l {
				parts[i] = fmt.Sprint(e)
			}
			out[k] = strings.Join(parts, ",")
			continue
		}
		out[k] = fmt.Sprint(v)
	}
	return out
}

// value is what the node runs with for --name: the command line's value,
// else the server config file's.
func (n *rendered) value(name string) (string, bool) {
	if v, ok := flagValue(n.args, name); ok {
		return v, true
	}
	v, ok := n.settings[strings.TrimPrefix(name, "--")]
	return v, ok
}

// flagValue returns the value of --name in args ("" and false if absent).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// hasKey reports whether a map or object has key.
func hasKey(v cty.Value, key string) bool {
	switch {
	case v.Type().IsObjectType():
		return v.Type().HasAttribute(key)
	case v.Type().IsMapType():
		return v.HasIndex(cty.StringVal(key)).True()
	}
	return false
}
