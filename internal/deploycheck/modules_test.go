package deploycheck_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

// configDirs are every module and example under terraform/.
func configDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, pattern := range []string{"modules/*", "examples/*"} {
		m, err := filepath.Glob(filepath.Join(tfDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, m...)
	}
	sort.Strings(dirs)
	if len(dirs) < 7 {
		t.Fatalf("found only %v under %s", dirs, tfDir)
	}
	return dirs
}

func rel(dir string) string {
	r, err := filepath.Rel(tfDir, dir)
	if err != nil {
		return dir
	}
	return r
}

// TestModulesInspect loads every module and example with
// terraform-config-inspect (the library the Terraform registry uses) and
// checks that each variable has a type and a description, each output a
// description, each module says which Terraform versions it needs, and
// every provider a resource uses is in required_providers with a source
// and a version constraint.
func TestModulesInspect(t *testing.T) {
	for _, dir := range configDirs(t) {
		t.Run(rel(dir), func(t *testing.T) {
			m, diags := tfconfig.LoadModule(dir)
			if diags.HasErrors() {
				t.Fatal(diags.Err())
			}
			for _, v := range m.Variables {
				if v.Type == "" {
					t.Errorf("variable %s (%s:%d) has no type", v.Name, filepath.Base(v.Pos.Filename), v.Pos.Line)
				}
				if len(v.Description) < 10 {
					t.Errorf("variable %s (%s:%d) has no description", v.Name, filepath.Base(v.Pos.Filename), v.Pos.Line)
				}
			}
			for _, o := range m.Outputs {
				if len(o.Description) < 10 {
					t.Errorf("output %s (%s:%d) has no description", o.Name, filepath.Base(o.Pos.Filename), o.Pos.Line)
				}
			}
			if len(m.RequiredCore) == 0 {
				t.Error("no terraform { required_version }")
			}
			used := map[string]bool{}
			for _, rs := range []map[string]*tfconfig.Resource{m.ManagedResources, m.DataResources} {
				for _, r := range rs {
					used[r.Provider.Name] = true
				}
			}
			delete(used, "terraform") // terraform_data is built in
			for name := range used {
				req, ok := m.RequiredProviders[name]
				if !ok || req.Source == "" || len(req.VersionConstraints) == 0 {
					t.Errorf("provider %s is used but not in required_providers with a source and a version", name)
				}
			}
			for _, c := range m.ModuleCalls {
				if !strings.HasPrefix(c.Source, "../") && !strings.HasPrefix(c.Source, "./") {
					t.Errorf("module %s: source %q is not a path inside this repository", c.Name, c.Source)
					continue
				}
				if fi, err := os.Stat(filepath.Join(dir, c.Source)); err != nil || !fi.IsDir() {
					t.Errorf("module %s: source %s is not a directory", c.Name, c.Source)
				}
			}
		})
	}
}

// moduleOutputs is the documented contract of each module's outputs
// (docs/deploy.md lists them).
var moduleOutputs = map[string][]string{
	"region-aws":    {"s3_endpoint", "node_ids", "node_addresses", "identity", "identity_name", "granted_buckets", "instance_ids", "security_group_id", "server_args"},
	"region-gcp":    {"s3_endpoint", "node_ids", "node_addresses", "identity", "identity_id", "granted_buckets", "instance_ids", "server_args"},
	"region-azure":  {"s3_endpoint", "node_ids", "node_addresses", "identity", "identity_client_id", "granted_containers", "instance_ids", "server_args"},
	"region-onprem": {"s3_endpoint", "node_ids", "node_addresses", "files", "server_args", "units", "ports"},
	"region-k8s":    {"s3_endpoint", "s3_service", "headless_service", "namespace", "release"},
	"node-config":   {"server_args", "units", "files", "cloud_init", "install_script", "region_location", "s3_port", "raft_port", "internal_port"},
	"peer-tls":      {"certs", "ca_cert_pem"},
}

// TestModuleOutputs checks that every module exposes exactly its
// documented outputs, and that docs/deploy.md names each one.
func TestModuleOutputs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(deploycheck.RepoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range moduleOutputs {
		t.Run(name, func(t *testing.T) {
			m, diags := tfconfig.LoadModule(filepath.Join(tfDir, "modules", name))
			if diags.HasErrors() {
				t.Fatal(diags.Err())
			}
			var got []string
			for o := range m.Outputs {
				got = append(got, o)
			}
			sort.Strings(got)
			w := slices.Clone(want)
			sort.Strings(w)
			if !slices.Equal(got, w) {
				t.Errorf("outputs %v, want %v", got, w)
			}
			if strings.HasPrefix(name, "region-") {
				for _, o := range want {
					if !strings.Contains(string(doc), "`"+o+"`") {
						t.Errorf("docs/deploy.md does not name output `%s`", o)
					}
				}
			}
		})
	}
	for _, dir := range configDirs(t) {
		if _, ok := moduleOutputs[filepath.Base(dir)]; !ok && strings.Contains(dir, "/modules/") {
			t.Errorf("module %s has no documented outputs in this test", rel(dir))
		}
	}
}

// TestModuleCallArguments checks every module block, in the modules and
// the example, against the module it calls, the way `terraform validate`
// would: every argument is a variable of that module, and every variable
// without a default is set.
func TestModuleCallArguments(t *testing.T) {
	for _, dir := range configDirs(t) {
		m, err := deploycheck.LoadModule(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range m.Calls {
			t.Run(rel(dir)+"/"+name, func(t *testing.T) {
				calleeDir, err := m.CallDir(name)
				if err != nil {
					t.Fatal(err)
				}
				callee, diags := tfconfig.LoadModule(calleeDir)
				if diags.HasErrors() {
					t.Fatal(diags.Err())
				}
				for arg := range c.Args {
					if _, ok := callee.Variables[arg]; !ok {
						t.Errorf("argument %s: %s has no such variable", arg, rel(calleeDir))
					}
				}
				for _, v := range callee.Variables {
					if _, ok := c.Args[v.Name]; v.Required && !ok {
						t.Errorf("required variable %s of %s is not set", v.Name, rel(calleeDir))
					}
				}
			})
		}
	}
}

// commonInputs are the inputs every cloud region module takes, with the
// same type, so that moving a region between clouds changes only the
// cloud's own inputs.
var commonInputs = []string{"name", "region", "policy", "node_count", "gpu_cidrs", "root_credentials",
	"cache_size", "staging_size", "peer_ca", "s3_ca", "s3_names", "environment", "credential_files", "extra_args"}

// TestRegionModulesShareInputs checks the common inputs of region-aws,
// region-gcp and region-azure (and those region-onprem shares), and that
// secrets are sensitive.
func TestRegionModulesShareInputs(t *testing.T) {
	mods := map[string]*tfconfig.Module{}
	for _, name := range []string{"region-aws", "region-gcp", "region-azure", "region-onprem"} {
		m, diags := tfconfig.LoadModule(filepath.Join(tfDir, "modules", name))
		if diags.HasErrors() {
			t.Fatal(diags.Err())
		}
		mods[name] = m
	}
	ref := mods["region-aws"]
	for name, m := range mods {
		for _, in := range commonInputs {
			v, ok := m.Variables[in]
			if !ok {
				if name != "region-onprem" || !slices.Contains([]string{"name", "node_count", "gpu_cidrs"}, in) {
					t.Errorf("%s has no variable %s", name, in)
				}
				continue
			}
			if r := ref.Variables[in]; v.Type != r.Type || v.Sensitive != r.Sensitive {
				t.Errorf("%s.%s is %s (sensitive %v), region-aws.%s is %s (sensitive %v)", name, in, v.Type, v.Sensitive, in, r.Type, r.Sensitive)
			}
		}
		for _, secret := range []string{"root_credentials", "peer_ca", "s3_ca", "environment", "credential_files"} {
			if !m.Variables[secret].Sensitive {
				t.Errorf("%s.%s is not sensitive", name, secret)
			}
		}
	}
}

// regionCase is a region module evaluated alone, with inputs as a user
// would give them.
type regionCase struct {
	module   string
	inputs   map[string]cty.Value
	grants   string   // the local holding what the identity is granted
	granted  []string // what it must hold: exactly the policy's stores of that cloud
	diskGlob bool     // renders the disk preparation (cloud) or not (on-prem)
}

// testPolicy declares one region per cloud and stores of every kind, some
// of which the cloud modules must not grant (another cloud's, an S3 store
// on MinIO, an emulator).
const testPolicy = `regions:
  - {name: use1, location: "aws:us-east-1"}
  - {name: usc1, location: "gcp:us-central1"}
  - {name: eus, location: "azure:eastus"}
  - {name: lga1, location: "onprem:lga1"}
stores:
  - {name: data, kind: s3, location: "aws:us-east-1", bucket: acme-data}
  - {name: ckpt-s3, kind: s3, location: "aws:us-west-2", bucket: acme-ckpt, endpoint: "https://s3.us-west-2.amazonaws.com"}
  - {name: minio, kind: s3, location: "onprem:lga1", bucket: lab, endpoint: "https://minio.lab:9000", path_style: true}
  - {name: ckpt-gcs, kind: gcs, location: "gcp:us-central1", bucket: acme-ckpt-gcs}
  - {name: fake-gcs, kind: gcs, location: "gcp:us-central1", bucket: emu, endpoint: "http://127.0.0.1:4443"}
  - {name: ckpt-az, kind: azure, location: "azure:eastus", account: acmeckpt, container: ckpt}
  - {name: nas, kind: posix, location: "onprem:lga1", path: /mnt/nas/fedgate}
buckets:
  - {name: datasets, origin: data/}
defaults: {store: data}
`

func regionCases() []regionCase {
	common := func(region string) map[string]cty.Value {
		return map[string]cty.Value{
			"region": cty.StringVal(region),
			"policy": cty.StringVal(testPolicy),
			"root_credentials": cty.ObjectVal(map[string]cty.Value{
				"access_key": cty.StringVal("ROOTACCESSKEY1234567"), "secret_key": cty.StringVal("root-secret-key-0123456789abcdefghijklm"),
			}),
			"cache_size":       cty.StringVal("1500GiB"),
			"staging_size":     cty.StringVal("300GiB"),
			"environment":      cty.MapVal(map[string]cty.Value{"EXTRA_VAR": cty.StringVal("x")}),
			"credential_files": cty.MapVal(map[string]cty.Value{"gcp.json": cty.StringVal("{}")}),
			"extra_args":       cty.ListVal([]cty.Value{cty.StringVal("--write-back-copies"), cty.StringVal("3")}),
			"writable_paths":   cty.ListVal([]cty.Value{cty.StringVal("/mnt/nas/fedgate")}),
		}
	}
	bin := func(url string, extra ...string) cty.Value {
		attrs := map[string]cty.Value{"url": cty.StringVal(url), "sha256": cty.StringVal(strings.Repeat("ab", 32))}
		if len(extra) > 0 {
			attrs["use_managed_identity"] = cty.True
		}
		return cty.ObjectVal(attrs)
	}
	with := func(m map[string]cty.Value, kv ...any) map[string]cty.Value {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(cty.Value)
		}
		return m
	}
	cidrs := cty.ListVal([]cty.Value{cty.StringVal("10.10.0.0/16")})
	return []regionCase{
		{module: "region-aws", grants: "s3_buckets", granted: []string{"acme-ckpt", "acme-data"}, diskGlob: true,
			inputs: with(common("use1"), "name", cty.StringVal("fg-use1"), "gpu_cidrs", cidrs,
				"fedgate_binary", bin("s3://acme-releases/fedgate/v1/fedgate-linux-amd64"),
				"vpc_id", cty.StringVal("vpc-0123456789abcdef0"),
				"subnet_ids", cty.ListVal([]cty.Value{cty.StringVal("subnet-0123456789abcdef0")}))},
		{module: "region-gcp", grants: "gcs_buckets", granted: []string{"acme-ckpt-gcs"}, diskGlob: true,
			inputs: with(common("usc1"), "name", cty.StringVal("fg-usc1"), "gpu_cidrs", cidrs,
				"fedgate_binary", bin("gs://acme-releases/fedgate/v1/fedgate-linux-amd64"),
				"project", cty.StringVal("acme"), "gcp_region", cty.StringVal("us-central1"),
				"zones", cty.ListVal([]cty.Value{cty.StringVal("us-central1-a"), cty.StringVal("us-central1-b")}),
				"network", cty.StringVal("gpu"), "subnetwork", cty.StringVal("projects/acme/regions/us-central1/subnetworks/gpu"))},
		{module: "region-azure", grants: "containers", granted: []string{"acmeckpt/ckpt"}, diskGlob: true,
			inputs: with(common("eus"), "name", cty.StringVal("fg-eus"), "gpu_cidrs", cidrs,
				"fedgate_binary", bin("https://acmereleases.blob.core.windows.net/fedgate/v1/fedgate-linux-amd64", "mi"),
				"resource_group_name", cty.StringVal("gpu"), "location", cty.StringVal("eastus"),
				"subnet_id", cty.StringVal("/subscriptions/0000/resourceGroups/gpu/providers/Microsoft.Network/virtualNetworks/gpu/subnets/gw"),
				"admin_ssh_public_key", cty.StringVal("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample test"))},
		{module: "region-onprem", diskGlob: false,
			inputs: with(common("lga1"),
				"hosts", cty.ListVal([]cty.Value{
					cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("n1"), "address": cty.StringVal("10.0.0.1")}),
					cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("n2"), "address": cty.StringVal("10.0.0.2")}),
					cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("n3"), "address": cty.StringVal("10.0.0.3")}),
				}))},
	}
}

// TestRegionModulesWireNodeConfig evaluates each region module alone with
// a user's inputs and checks what it gives node-config (the user's region,
// policy, keys, sizes, environment, files and flags; the cloud's local
// NVMe; the binary and how it is fetched) and what its identity is granted:
// exactly the buckets or containers of the policy's stores in its cloud.
// Then it renders node-config with those inputs on loopback hosts and
// checks the command line and the unit.
func TestRegionModulesWireNodeConfig(t *testing.T) {
	for _, rc := range regionCases() {
		t.Run(rc.module, func(t *testing.T) {
			m, err := deploycheck.LoadModule(filepath.Join(tfDir, "modules", rc.module))
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Evaluate(rc.inputs)
			if err != nil {
				t.Fatal(err)
			}
			cfg := res.Calls["config"]
			for _, same := range []string{"region", "policy", "root_credentials", "cache_size", "staging_size", "credential_files", "extra_args", "writable_paths"} {
				if !cfg[same].RawEquals(rc.inputs[same]) {
					t.Errorf("node-config gets %s = %#v, want the module's input %#v", same, cfg[same], rc.inputs[same])
				}
			}
			if env := cfg["environment"]; !hasKey(env, "EXTRA_VAR") {
				t.Errorf("node-config's environment %#v lacks the module's input", env)
			}
			if glob := cfg["cache_disk_glob"]; rc.diskGlob == (!glob.IsKnown() || glob.IsNull()) {
				t.Errorf("cache_disk_glob = %#v", glob)
			}
			if rc.grants != "" {
				var got []string
				g := res.Locals[rc.grants]
				if g.Type().IsObjectType() || g.Type().IsMapType() {
					for it := g.ElementIterator(); it.Next(); {
						k, _ := it.Element()
						got = append(got, k.AsString())
					}
				} else {
					for it := g.ElementIterator(); it.Next(); {
						_, v := it.Element()
						got = append(got, v.AsString())
					}
				}
				sort.Strings(got)
				if !slices.Equal(got, rc.granted) {
					t.Errorf("grants %v, want exactly %v", got, rc.granted)
				}
			}
			auth := map[string]string{"region-aws": "aws", "region-gcp": "gcp", "region-azure": "azure"}[rc.module]
			if b := cfg["binary"]; auth == "" && !b.IsNull() || auth != "" && !b.GetAttr("auth").RawEquals(cty.StringVal(auth)) {
				t.Errorf("binary = %#v, want one fetched with auth %q", b, auth)
			}
			if rc.module == "region-gcp" {
				if u := cfg["binary"].GetAttr("url"); !u.RawEquals(cty.StringVal("https://storage.googleapis.com/acme-releases/fedgate/v1/fedgate-linux-amd64")) {
					t.Errorf("gs:// binary URL became %#v", u)
				}
			}

			ids := []string{"n1", "n2", "n3"}
			r := newTestRegion(t, ids)
			for _, h := range r.hosts {
				n := render(t, r.localInputs(t, cfg, h, ""), h)
				region := rc.inputs["region"].AsString()
				checkCommandLine(t, r, n, region)
				for flag, want := range map[string]string{"--cache-size": "1500GiB", "--staging-size": "300GiB", "--write-back-copies": "3"} {
					if got, _ := n.value(flag); got != want {
						t.Errorf("%s = %q, want %q", flag, got, want)
					}
				}
				rw := strings.Fields(strings.Join(unitValues(n.unit, "ReadWritePaths"), " "))
				if !slices.Contains(rw, "/mnt/nas/fedgate") {
					t.Errorf("ReadWritePaths= %q lacks writable_paths /mnt/nas/fedgate", rw)
				}
				if !rc.diskGlob {
					if got := unitValues(n.unit, "Requires"); len(got) != 0 {
						t.Errorf("an on-prem unit requires %v", got)
					}
					if n.cloudInit != "" {
						t.Error("region-onprem renders a cloud-init")
					}
				}
			}
		})
	}
}

// TestRegionModulesRejectBadInputs checks that the region modules' validation
// blocks refuse bad inputs before anything is created.
func TestRegionModulesRejectBadInputs(t *testing.T) {
	bad := map[string]cty.Value{
		"root_credentials": cty.ObjectVal(map[string]cty.Value{"access_key": cty.StringVal("short"), "secret_key": cty.StringVal("short")}),
		"cache_size":       cty.StringVal("lots"),
		"extra_args":       cty.ListVal([]cty.Value{cty.StringVal("--write-back-copies 3")}),
		"writable_paths":   cty.ListVal([]cty.Value{cty.StringVal("mnt/nas")}),
		"s3_names":         cty.ListVal([]cty.Value{cty.StringVal("s3 endpoint")}),
		"environment":      cty.MapVal(map[string]cty.Value{"FEDGATE_SECRET_KEY": cty.StringVal("x")}),
		"region":           cty.StringVal("US East"),
		"policy":           cty.StringVal("not: [a policy"),
		"node_count":       cty.NumberIntVal(4),
		"gpu_cidrs":        cty.ListVal([]cty.Value{cty.StringVal("10.0.0.1")}),
	}
	for _, rc := range regionCases() {
		m, err := deploycheck.LoadModule(filepath.Join(tfDir, "modules", rc.module))
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range bad {
			if _, ok := m.Variables[name]; !ok {
				continue
			}
			in := map[string]cty.Value{}
			for k, v := range rc.inputs {
				in[k] = v
			}
			in[name] = v
			if _, err := m.Evaluate(in); err == nil || !strings.Contains(err.Error(), "var."+name) {
				t.Errorf("%s: %s = %#v: %v, want a validation error of var.%s", rc.module, name, v, err, name)
			}
		}
	}
}

// TestRegionModulesS3TLS evaluates each region module with s3_ca and
// s3_names: node-config gets the CA and a certificate per node (issued by
// a second peer-tls call with the S3 CA and the endpoint's names), and the
// rendered nodes run with --cert-file, --key-file and --ca-file and a
// unit that reloads them on `systemctl reload`. Without s3_ca nothing of
// it is there.
func TestRegionModulesS3TLS(t *testing.T) {
	ca := newTestCA(t, nil).caPEM
	for _, rc := range regionCases() {
		t.Run(rc.module, func(t *testing.T) {
			m, err := deploycheck.LoadModule(filepath.Join(tfDir, "modules", rc.module))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := m.Evaluate(rc.inputs)
			if err != nil {
				t.Fatal(err)
			}
			if v := plain.Calls["config"]["s3_ca_pem"]; !v.IsNull() {
				t.Errorf("without s3_ca node-config gets s3_ca_pem %#v", v)
			}
			if _, ok := plain.Calls["s3_tls"]; ok {
				t.Error("without s3_ca the module issues S3 certificates")
			}

			in := maps.Clone(rc.inputs)
			in["s3_ca"] = cty.ObjectVal(map[string]cty.Value{"cert_pem": cty.StringVal(ca), "key_pem": cty.StringVal("-----BEGIN EC PRIVATE KEY-----\n")})
			in["s3_names"] = cty.ListVal([]cty.Value{cty.StringVal("s3.gpu.example.internal")})
			if rc.module == "region-onprem" {
				in["s3_endpoint"] = cty.StringVal("https://fedgate.lga1.example:9000")
			}
			res, err := m.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			cfg, issue := res.Calls["config"], res.Calls["s3_tls"]
			if v := cfg["s3_ca_pem"]; !v.RawEquals(cty.StringVal(ca)) {
				t.Errorf("node-config gets s3_ca_pem %#v, want the S3 CA", v)
			}
			if issue == nil || !issue["ca_cert_pem"].RawEquals(cty.StringVal(ca)) {
				t.Fatalf("the S3 certificates are not issued with the S3 CA: %#v", issue)
			}
			if p := res.Calls["peer_tls"]; p != nil && p["ca_cert_pem"].RawEquals(cty.StringVal(ca)) {
				t.Error("the peer certificates are issued with the S3 CA")
			}
			names := issue["extra_names"]
			want := []cty.Value{cty.StringVal("s3.gpu.example.internal")}
			if rc.module == "region-onprem" {
				want = append(want, cty.StringVal("fedgate.lga1.example"))
			} else if names.LengthInt() != 2 {
				t.Errorf("extra_names %#v, want the load balancer's name and s3_names", names)
			}
			for _, w := range want {
				if !names.IsKnown() || !names.CanIterateElements() || func() bool {
					for it := names.ElementIterator(); it.Next(); {
						if _, v := it.Element(); v.IsKnown() && v.RawEquals(w) {
							return false
						}
					}
					return true
				}() {
					t.Errorf("extra_names %#v lacks %#v", names, w)
				}
			}
			if rc.module == "region-onprem" {
				if ep := res.Outputs["s3_endpoint"]; !ep.RawEquals(cty.StringVal("https://fedgate.lga1.example:9000")) {
					t.Errorf("s3_endpoint = %#v", ep)
				}
				in["s3_endpoint"] = cty.StringVal("http://fedgate.lga1.example:9000")
				if _, err := m.Evaluate(in); err == nil || !strings.Contains(err.Error(), "must start with https://") {
					t.Errorf("an http:// s3_endpoint with s3_ca: %v, want the precondition's refusal", err)
				}
			}

			r := newTestRegion(t, []string{"n1", "n2", "n3"})
			for _, h := range r.hosts {
				n := render(t, r.localInputs(t, cfg, h, ""), h)
				checkCommandLine(t, r, n, rc.inputs["region"].AsString())
				if got := unitValues(n.unit, "ExecReload"); !slices.Equal(got, []string{"/bin/kill -HUP $MAINPID"}) {
					t.Errorf("ExecReload= %q", got)
				}
			}
			if r.s3tls == nil {
				t.Fatal("the rendered nodes run without S3 TLS")
			}
		})
	}
}
