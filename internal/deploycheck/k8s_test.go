package deploycheck_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

var (
	k8sModuleDir  = filepath.Join(tfDir, "modules", "region-k8s")
	k8sExampleDir = filepath.Join(tfDir, "examples", "region-k8s")
)

// k8sPolicy is a one-region policy whose shared store takes its keys from
// the environment (store_credentials).
const k8sPolicy = `regions:
  - {name: k8s-gpu, location: "aws:us-east-1"}
stores:
  - name: shared
    kind: s3
    location: "aws:us-east-1"
    bucket: acme-shared
    credentials: {access_key_env: SHARED_AK, secret_key_env: SHARED_SK}
defaults: {store: shared}
`

// oddSecret has every character Helm's --set parser treats specially.
const oddSecret = `{a,b}c\d=e/f+g,`

// k8sFullInputs sets every input of region-k8s to something other than its
// default.
func k8sFullInputs() map[string]cty.Value {
	s := cty.StringVal
	strs := func(vs ...string) cty.Value {
		var l []cty.Value
		for _, v := range vs {
			l = append(l, s(v))
		}
		return cty.ListVal(l)
	}
	smap := func(kv ...string) cty.Value {
		m := map[string]cty.Value{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = s(kv[i+1])
		}
		return cty.MapVal(m)
	}
	vol := func(size, class, path string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"size": s(size), "storage_class": s(class), "host_path": s(path)})
	}
	return map[string]cty.Value{
		"namespace":          s("gpu-data"),
		"create_namespace":   cty.False,
		"release_name":       s("fg"),
		"chart":              s("/charts/fedgate"),
		"chart_repository":   s("oci://registry.example.com/charts"),
		"chart_version":      s("0.1.0"),
		"replicas":           cty.NumberIntVal(5),
		"region":             s("k8s-gpu"),
		"s3_region":          s("eu-west-1"),
		"policy":             s(k8sPolicy),
		"server_config":      cty.ObjectVal(map[string]cty.Value{"cache-size": s("1500GiB"), "write-back-copies": cty.NumberIntVal(2)}),
		"shutdown_timeout":   s("90s"),
		"image":              cty.ObjectVal(map[string]cty.Value{"repository": s("registry.example.com/fedgate"), "tag": s("v0.1.0"), "pull_policy": s("Always")}),
		"image_pull_secrets": strs("regcred"),
		"storage": cty.ObjectVal(map[string]cty.Value{
			"mode":    s("volumeClaimTemplates"),
			"data":    vol("50Gi", "gp3", "/var/lib/fg/data"),
			"cache":   vol("2Ti", "local-nvme", "/mnt/nvme/fg/cache"),
			"staging": vol("300Gi", "local-nvme", "/mnt/nvme/fg/staging"),
		}),
		"service": cty.ObjectVal(map[string]cty.Value{
			"type":                        s("LoadBalancer"),
			"annotations":                 smap("service.beta.kubernetes.io/aws-load-balancer-internal", "true"),
			"load_balancer_source_ranges": strs("10.10.0.0/16"),
			"external_traffic_policy":     s("Local"),
		}),
		"s3_port":        cty.NumberIntVal(9443),
		"cluster_domain": s("k8s.example"),
		"tls": cty.ObjectVal(map[string]cty.Value{
			"existing_secret": s("fg-s3-tls"),
			"ca_key":          s("ca.crt"),
		}),
		"peer_tls": cty.ObjectVal(map[string]cty.Value{
			"cert_manager_issuer": cty.ObjectVal(map[string]cty.Value{"name": s("fg-peers"), "kind": s("Issuer")}),
		}),
		"root_credentials": cty.ObjectVal(map[string]cty.Value{
			"access_key": s("ROOTACCESSKEY1234567"), "secret_key": s("root/secret+key=0123456789abcdefghijklm"),
		}),
		"store_credentials": smap("SHARED_AK", "AKIASHARED0123456789", "SHARED_SK", oddSecret),
		"resources": cty.ObjectVal(map[string]cty.Value{
			"requests": smap("cpu", "4", "memory", "8Gi"), "limits": smap("memory", "32Gi"),
		}),
		"node_selector": smap("node.kubernetes.io/instance-type", "i4i.4xlarge"),
		"tolerations": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
			"key": s("dedicated"), "operator": s("Equal"), "value": s("fedgate"), "effect": s("NoSchedule"),
		})}),
		"anti_affinity": cty.ObjectVal(map[string]cty.Value{"hostname": s("required"), "zone": s("required")}),
		"local_socket":  cty.True,
		"monitoring": cty.ObjectVal(map[string]cty.Value{
			"service_monitor": cty.False, "prometheus_rule": cty.False, "grafana_dashboard": cty.False,
			"labels": smap("release", "kube-prometheus"),
		}),
		"mount": cty.ObjectVal(map[string]cty.Value{
			"enabled":         cty.True,
			"node_selector":   smap("gpu", "h100"),
			"host_path":       s("/mnt/datasets"),
			"bucket":          s("datasets/imagenet"),
			"read_only":       cty.False,
			"endpoint":        s("https://fg.gpu-data.svc.k8s.example:9443"),
			"existing_secret": s("fg-mount"),
			"extra_flags":     smap("stat-ttl", "30s"),
		}),
		"extra_values": strs("podAnnotations: {team: ml}\n"),
		"timeout":      cty.NumberIntVal(1200),
	}
}

// helmRelease is what region-k8s gives its helm_release.
type helmRelease struct {
	args      map[string]cty.Value
	values    map[string]any    // the module's values document
	sensitive map[string]string // set_sensitive: name => value as given to Helm (escaped)
}

func evalRelease(t *testing.T, inputs map[string]cty.Value) *helmRelease {
	t.Helper()
	m, err := deploycheck.LoadModule(k8sModuleDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Evaluate(inputs)
	if err != nil {
		t.Fatal(err)
	}
	return releaseOf(t, res)
}

func releaseOf(t *testing.T, res *deploycheck.Result) *helmRelease {
	t.Helper()
	args, err := res.ResourceArgs("helm_release.region")
	if err != nil {
		t.Fatal(err)
	}
	r := &helmRelease{args: args, sensitive: map[string]string{}}
	vals := args["values"]
	if !vals.IsWhollyKnown() || vals.LengthInt() == 0 {
		t.Fatalf("values = %#v", vals)
	}
	if err := yaml.Unmarshal([]byte(vals.Index(cty.NumberIntVal(0)).AsString()), &r.values); err != nil {
		t.Fatalf("values[0]: %v", err)
	}
	for it := args["set_sensitive"].ElementIterator(); it.Next(); {
		_, o := it.Element()
		if typ := o.GetAttr("type"); !typ.RawEquals(cty.StringVal("string")) {
			t.Errorf("set_sensitive %s: type %#v, want \"string\" (a secret of digits must stay a string)", o.GetAttr("name").AsString(), typ)
		}
		r.sensitive[o.GetAttr("name").AsString()] = o.GetAttr("value").AsString()
	}
	return r
}

// lookupPath follows a dotted path (keys without dots) in decoded YAML.
func lookupPath(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// freeForm are the chart's values whose keys are the user's (flags,
// labels, environment variable names, resource names): below them any key
// is the chart's.
var freeForm = []string{"serverConfig", "storeCredentials.env", "service.annotations", "nodeSelector",
	"mount.nodeSelector", "mount.extraFlags", "metrics.serviceMonitor.labels", "metrics.prometheusRule.labels",
	"resources.requests", "resources.limits", "podAnnotations", "podLabels"}

// checkChartHas reports every value path of got that the chart's
// values.yaml does not have (a list or a free-form map ends a path), every
// map the chart has as a scalar or the other way round, and every null (a
// null in Helm values deletes the chart's default).
func checkChartHas(t *testing.T, chart map[string]any, got map[string]any, prefix string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(got)) {
		path := strings.TrimPrefix(prefix+"."+k, ".")
		v := got[k]
		if v == nil {
			t.Errorf("value %s is null (it would delete the chart's default)", path)
			continue
		}
		want, ok := lookupPath(chart, path)
		if !ok {
			parent := strings.TrimSuffix(strings.TrimSuffix(path, k), ".")
			if !slices.Contains(freeForm, parent) {
				t.Errorf("value %s: the chart's values.yaml has no such key", path)
			}
			continue
		}
		sub, isMap := v.(map[string]any)
		_, chartMap := want.(map[string]any)
		switch {
		case slices.Contains(freeForm, path):
			if !isMap || !chartMap {
				t.Errorf("value %s: free-form map expected on both sides, module gives %T, chart has %T", path, v, want)
			}
		case isMap && chartMap:
			checkChartHas(t, chart, sub, path)
		case isMap != chartMap && want != nil:
			t.Errorf("value %s: module gives %T, the chart's values.yaml has %T", path, v, want)
		}
	}
}

func chartValues(t *testing.T) map[string]any {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(deploycheck.ChartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatalf("deploy/helm/fedgate/values.yaml: %v", err)
	}
	return v
}

// unescapeSet undoes the module's escaping the way Helm's --set parser
// reads a value (a backslash takes the next character as it is), and
// reports whether the parser would read it whole: no unescaped comma (the
// next key) and no leading { (a list).
func unescapeSet(v string) (string, bool) {
	var b strings.Builder
	whole := !strings.HasPrefix(v, "{")
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case c == ',':
			whole = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), whole
}

// TestRegionK8sValues evaluates region-k8s with every input set and checks
// what its helm_release gets: each input at its chart value (by name, with
// its value), secrets only in set_sensitive and escaped for Helm's --set
// parser, no nulls, and every path the module sets present in the chart's
// values.yaml (deploy/helm/fedgate). With only the required input, only the
// values that have no default in the chart are set. Then each input alone
// must change what Helm gets: none is declared and dropped.
func TestRegionK8sValues(t *testing.T) {
	in := k8sFullInputs()
	r := evalRelease(t, in)

	for attr, want := range map[string]cty.Value{
		"name": cty.StringVal("fg"), "namespace": cty.StringVal("gpu-data"), "create_namespace": cty.False,
		"chart": cty.StringVal("/charts/fedgate"), "repository": cty.StringVal("oci://registry.example.com/charts"),
		"version": cty.StringVal("0.1.0"), "timeout": cty.NumberIntVal(1200), "wait": cty.True,
	} {
		if got := r.args[attr]; !got.RawEquals(want) {
			t.Errorf("helm_release.%s = %#v, want %#v", attr, got, want)
		}
	}
	if got := r.args["values"]; got.LengthInt() != 2 || !got.Index(cty.NumberIntVal(1)).RawEquals(cty.StringVal("podAnnotations: {team: ml}\n")) {
		t.Errorf("values = %#v, want the module's document and then extra_values", got)
	}

	want := map[string]any{
		"replicas": uint64(5), "fullnameOverride": "fg", "clusterDomain": "k8s.example", "ports.s3": uint64(9443),
		"region": "k8s-gpu", "s3Region": "eu-west-1", "shutdownTimeout": "90s", "policy.content": k8sPolicy,
		"serverConfig.cache-size": "1500GiB", "serverConfig.write-back-copies": uint64(2),
		"image.repository": "registry.example.com/fedgate", "image.tag": "v0.1.0", "image.pullPolicy": "Always",
		"persistence.mode": "volumeClaimTemplates", "persistence.data.size": "50Gi", "persistence.data.storageClass": "gp3",
		"persistence.data.hostPath": "/var/lib/fg/data", "persistence.cache.size": "2Ti",
		"persistence.cache.storageClass": "local-nvme", "persistence.staging.size": "300Gi",
		"persistence.staging.hostPath": "/mnt/nvme/fg/staging",
		"service.type":                 "LoadBalancer", "service.externalTrafficPolicy": "Local",
		"tls.enabled": true, "tls.existingSecret": "fg-s3-tls", "tls.caKey": "ca.crt",
		"peerTLS.enabled": true, "peerTLS.certManager.enabled": true, "peerTLS.certManager.issuerRef.name": "fg-peers",
		"peerTLS.certManager.issuerRef.kind": "Issuer",
		"resources.requests.cpu":             "4", "resources.limits.memory": "32Gi",
		"nodeSelector":                          map[string]any{"node.kubernetes.io/instance-type": "i4i.4xlarge"},
		"antiAffinity.zone":                     "required",
		"localSocket.enabled":                   true,
		"metrics.serviceMonitor.enabled":        false,
		"metrics.prometheusRule.enabled":        false,
		"metrics.serviceMonitor.labels":         map[string]any{"release": "kube-prometheus"},
		"grafanaDashboard.enabled":              false,
		"mount.enabled":                         true,
		"mount.nodeSelector":                    map[string]any{"gpu": "h100"},
		"mount.hostPath":                        "/mnt/datasets",
		"mount.bucket":                          "datasets/imagenet",
		"mount.readOnly":                        false,
		"mount.endpoint":                        "https://fg.gpu-data.svc.k8s.example:9443",
		"mount.existingSecret":                  "fg-mount",
		"mount.extraFlags":                      map[string]any{"stat-ttl": "30s"},
		"service.loadBalancerSourceRanges":      []any{"10.10.0.0/16"},
		"imagePullSecrets":                      []any{map[string]any{"name": "regcred"}},
		"tolerations":                           []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "fedgate", "effect": "NoSchedule"}},
		"service.annotations":                   map[string]any{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
		"antiAffinity.hostname":                 "required",
		"persistence.cache.hostPath":            "/mnt/nvme/fg/cache",
		"persistence.staging.storageClass":      "local-nvme",
		"metrics.prometheusRule.labels.release": "kube-prometheus",
		"resources.requests.memory":             "8Gi",
	}
	for _, path := range slices.Sorted(maps.Keys(want)) {
		got, ok := lookupPath(r.values, path)
		if !ok {
			t.Errorf("values: %s is not set", path)
			continue
		}
		if !reflect.DeepEqual(got, want[path]) {
			t.Errorf("values: %s = %#v, want %#v", path, got, want[path])
		}
	}
	for _, path := range []string{"rootCredentials", "storeCredentials"} {
		if v, ok := lookupPath(r.values, path); ok {
			t.Errorf("values: %s = %v: secrets belong in set_sensitive", path, v)
		}
	}
	wantSecrets := map[string]string{
		"rootCredentials.accessKey": "ROOTACCESSKEY1234567", "rootCredentials.secretKey": "root/secret+key=0123456789abcdefghijklm",
		"storeCredentials.env.SHARED_AK": "AKIASHARED0123456789", "storeCredentials.env.SHARED_SK": oddSecret,
	}
	if got := slices.Sorted(maps.Keys(r.sensitive)); !slices.Equal(got, slices.Sorted(maps.Keys(wantSecrets))) {
		t.Errorf("set_sensitive names %v, want %v", got, slices.Sorted(maps.Keys(wantSecrets)))
	}
	for name, w := range wantSecrets {
		got, whole := unescapeSet(r.sensitive[name])
		if got != w || !whole {
			t.Errorf("set_sensitive %s = %q: Helm reads %q (whole: %v), want %q", name, r.sensitive[name], got, whole, w)
		}
	}

	chart := chartValues(t)
	checkChartHas(t, chart, r.values, "")
	for name := range r.sensitive {
		path := strings.TrimSuffix(name, ".SHARED_AK")
		path = strings.TrimSuffix(path, ".SHARED_SK")
		if _, ok := lookupPath(chart, path); !ok {
			t.Errorf("set_sensitive %s: the chart's values.yaml has no %s", name, path)
		}
	}
	extra := map[string]any{}
	if err := yaml.Unmarshal([]byte(r.args["values"].Index(cty.NumberIntVal(1)).AsString()), &extra); err != nil {
		t.Fatal(err)
	}
	checkChartHas(t, chart, extra, "")

	// Existing Secrets instead of values, and cert-manager for the S3 port.
	alt := maps.Clone(in)
	delete(alt, "root_credentials")
	delete(alt, "store_credentials")
	alt["root_credentials_secret"] = cty.StringVal("fg-root")
	alt["store_credentials_secret"] = cty.StringVal("fg-stores")
	alt["tls"] = cty.ObjectVal(map[string]cty.Value{
		"cert_manager_issuer": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("letsencrypt")}),
		"dns_names":           cty.ListVal([]cty.Value{cty.StringVal("s3.gpu.example.com")}),
	})
	ra := evalRelease(t, alt)
	if len(ra.sensitive) != 0 {
		t.Errorf("with existing Secrets set_sensitive is %v", ra.sensitive)
	}
	for path, w := range map[string]any{
		"rootCredentials.existingSecret": "fg-root", "storeCredentials.existingSecret": "fg-stores",
		"tls.enabled": true, "tls.certManager.enabled": true, "tls.certManager.issuerRef.name": "letsencrypt",
		"tls.certManager.issuerRef.kind": "ClusterIssuer", "tls.certManager.dnsNames": []any{"s3.gpu.example.com"},
	} {
		if got, _ := lookupPath(ra.values, path); !reflect.DeepEqual(got, w) {
			t.Errorf("with existing Secrets and cert-manager: %s = %#v, want %#v", path, got, w)
		}
	}
	if _, ok := lookupPath(ra.values, "tls.existingSecret"); ok {
		t.Error("with cert-manager tls.existingSecret is set")
	}
	checkChartHas(t, chart, ra.values, "")

	// Only the policy: the chart's defaults for everything else.
	minimal := map[string]cty.Value{"policy": cty.StringVal(k8sPolicy)}
	rm := evalRelease(t, minimal)
	wantKeys := []string{"clusterDomain", "fullnameOverride", "grafanaDashboard", "localSocket", "metrics", "mount", "peerTLS", "policy", "ports", "replicas", "service", "tls"}
	if got := slices.Sorted(maps.Keys(rm.values)); !slices.Equal(got, wantKeys) {
		t.Errorf("with only policy the values set %v, want %v", got, wantKeys)
	}
	if !rm.args["chart"].IsKnown() || !strings.HasSuffix(filepath.ToSlash(rm.args["chart"].AsString()), "/modules/region-k8s/../../../deploy/helm/fedgate") {
		t.Errorf("default chart = %#v, want the repository's deploy/helm/fedgate", rm.args["chart"])
	} else if fi, err := os.Stat(filepath.Join(rm.args["chart"].AsString(), "Chart.yaml")); err != nil || fi.IsDir() {
		t.Errorf("default chart %s has no Chart.yaml: %v", rm.args["chart"].AsString(), err)
	}
	checkChartHas(t, chart, rm.values, "")

	// Each input alone changes what Helm gets (values, set_sensitive or
	// the release's own arguments).
	base := releaseFingerprint(t, rm)
	for _, name := range slices.Sorted(maps.Keys(in)) {
		if name == "policy" {
			continue
		}
		one := maps.Clone(minimal)
		one[name] = in[name]
		if name == "chart_repository" {
			one["chart_version"] = in["chart_version"] // a repository needs a version
		}
		if releaseFingerprint(t, evalRelease(t, one)) == base {
			t.Errorf("input %s alone changes nothing the helm_release gets", name)
		}
	}
	for _, name := range []string{"root_credentials_secret", "store_credentials_secret"} {
		one := maps.Clone(minimal)
		one[name] = alt[name]
		if releaseFingerprint(t, evalRelease(t, one)) == base {
			t.Errorf("input %s alone changes nothing the helm_release gets", name)
		}
	}
	m, err := deploycheck.LoadModule(k8sModuleDir)
	if err != nil {
		t.Fatal(err)
	}
	for name := range m.Variables {
		if _, ok := in[name]; !ok && name != "root_credentials_secret" && name != "store_credentials_secret" {
			t.Errorf("variable %s is not covered by this test's inputs", name)
		}
	}
}

func releaseFingerprint(t *testing.T, r *helmRelease) string {
	t.Helper()
	names := slices.Sorted(maps.Keys(r.args))
	var b strings.Builder
	for _, n := range names {
		js, err := ctyjson.Marshal(r.args[n], r.args[n].Type())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s\n", n, js)
	}
	return b.String()
}

// TestRegionK8sRejectsBadInputs checks that the validation blocks (and the
// output preconditions, for inputs that exclude each other) refuse bad
// inputs before anything is installed: an even or too large replica count
// first of all.
func TestRegionK8sRejectsBadInputs(t *testing.T) {
	m, err := deploycheck.LoadModule(k8sModuleDir)
	if err != nil {
		t.Fatal(err)
	}
	s := cty.StringVal
	obj := func(kv ...any) cty.Value {
		o := map[string]cty.Value{}
		for i := 0; i < len(kv); i += 2 {
			o[kv[i].(string)] = kv[i+1].(cty.Value)
		}
		return cty.ObjectVal(o)
	}
	cases := []struct {
		name  string
		set   map[string]cty.Value
		error string
	}{
		{"2 replicas", map[string]cty.Value{"replicas": cty.NumberIntVal(2)}, "var.replicas"},
		{"4 replicas", map[string]cty.Value{"replicas": cty.NumberIntVal(4)}, "replicas is odd"},
		{"7 replicas", map[string]cty.Value{"replicas": cty.NumberIntVal(7)}, "replicas is 1, 3 or 5"},
		{"0 replicas", map[string]cty.Value{"replicas": cty.NumberIntVal(0)}, "var.replicas"},
		{"namespace", map[string]cty.Value{"namespace": s("GPU_Data")}, "var.namespace"},
		{"release name", map[string]cty.Value{"release_name": s(strings.Repeat("a", 48))}, "var.release_name"},
		{"policy", map[string]cty.Value{"policy": s("not: [a policy")}, "var.policy"},
		{"server_config key the chart sets", map[string]cty.Value{"server_config": obj("listen", s(":9000"))}, "var.server_config"},
		{"server_config not a map", map[string]cty.Value{"server_config": s("cache-size: 1TiB")}, "var.server_config"},
		{"storage size", map[string]cty.Value{"storage": obj("cache", obj("size", s("1 TB")))}, "var.storage"},
		{"storage mode", map[string]cty.Value{"storage": obj("mode", s("emptyDir"))}, "var.storage"},
		{"host path with ..", map[string]cty.Value{"storage": obj("data", obj("host_path", s("/var/../etc")))}, "var.storage"},
		{"service type", map[string]cty.Value{"service": obj("type", s("NodePort"))}, "var.service"},
		{"source range", map[string]cty.Value{"service": obj("load_balancer_source_ranges", cty.ListVal([]cty.Value{s("10.0.0.1")}))}, "var.service"},
		{"tls both", map[string]cty.Value{"tls": obj("existing_secret", s("a"), "cert_manager_issuer", obj("name", s("b")))}, "var.tls"},
		{"tls neither", map[string]cty.Value{"tls": obj("dns_names", cty.ListVal([]cty.Value{s("x.example")}))}, "var.tls"},
		{"peer_tls both", map[string]cty.Value{"peer_tls": obj("existing_secret", s("a"), "cert_manager_issuer", obj("name", s("b")))}, "var.peer_tls"},
		{"root keys", map[string]cty.Value{"root_credentials": obj("access_key", s("short"), "secret_key", s("short"))}, "var.root_credentials"},
		{"store env name", map[string]cty.Value{"store_credentials": cty.MapVal(map[string]cty.Value{"FEDGATE_SECRET_KEY": s("x")})}, "var.store_credentials"},
		{"image pull policy", map[string]cty.Value{"image": obj("pull_policy", s("Sometimes"))}, "var.image"},
		{"anti-affinity", map[string]cty.Value{"anti_affinity": obj("zone", s("maybe"))}, "var.anti_affinity"},
		{"mount without credentials", map[string]cty.Value{"mount": obj("enabled", cty.True)}, "var.mount"},
		{"shutdown timeout", map[string]cty.Value{"shutdown_timeout": s("1m30s")}, "var.shutdown_timeout"},
		{"server_config shutdown-timeout", map[string]cty.Value{"server_config": obj("shutdown-timeout", s("60s"))}, "var.server_config"},
		{"mount endpoint", map[string]cty.Value{"mount": obj("endpoint", s("fg:9000"))}, "var.mount"},
		{"extra_values", map[string]cty.Value{"extra_values": cty.ListVal([]cty.Value{s("- a list")})}, "var.extra_values"},
		{"chart version", map[string]cty.Value{"chart_version": s("v0.1.0")}, "var.chart_version"},
		{"root keys twice", map[string]cty.Value{"root_credentials": k8sFullInputs()["root_credentials"], "root_credentials_secret": s("fg-root")}, "root_credentials or root_credentials_secret, not both"},
		{"store keys twice", map[string]cty.Value{"store_credentials": k8sFullInputs()["store_credentials"], "store_credentials_secret": s("fg-stores")}, "store_credentials or store_credentials_secret, not both"},
		{"repository without version", map[string]cty.Value{"chart_repository": s("https://charts.example.com")}, "chart_repository needs chart_version"},
	}
	for _, c := range cases {
		in := map[string]cty.Value{"policy": cty.StringVal(k8sPolicy)}
		maps.Copy(in, c.set)
		if _, err := m.Evaluate(in); err == nil || !strings.Contains(err.Error(), c.error) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.error)
		}
	}
	for _, n := range []int64{1, 3, 5} {
		if _, err := m.Evaluate(map[string]cty.Value{"policy": cty.StringVal(k8sPolicy), "replicas": cty.NumberIntVal(n)}); err != nil {
			t.Errorf("replicas %d: %v", n, err)
		}
	}
}

// followK8sExample evaluates examples/region-k8s with its
// terraform.tfvars.example (and set) and then region-k8s with what it
// gives it.
func followK8sExample(t *testing.T, set map[string]cty.Value) (map[string]cty.Value, *deploycheck.Result, *helmRelease) {
	t.Helper()
	vars, err := deploycheck.ReadTFVars(filepath.Join(k8sExampleDir, "terraform.tfvars.example"))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(vars, set)
	root, err := deploycheck.LoadModule(k8sExampleDir)
	if err != nil {
		t.Fatal(err)
	}
	rootRes, err := root.Evaluate(vars)
	if err != nil {
		t.Fatal(err)
	}
	args, ok := rootRes.Calls["region"]
	if !ok {
		t.Fatal("examples/region-k8s has no module \"region\"")
	}
	dir, err := root.CallDir("region")
	if err != nil {
		t.Fatal(err)
	}
	if !sameDir(dir, k8sModuleDir) {
		t.Fatalf("module \"region\" is %s, want %s", dir, k8sModuleDir)
	}
	m, err := deploycheck.LoadModule(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Evaluate(args)
	if err != nil {
		t.Fatalf("region-k8s with the example's arguments: %v", err)
	}
	return vars, rootRes, releaseOf(t, res)
}

func sameDir(a, b string) bool {
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// TestRegionK8sExample follows examples/region-k8s with its
// terraform.tfvars.example into region-k8s: the policy it renders passes
// `fedgate policy validate`, every environment variable the policy's
// stores name is given by store_credentials (as a secret), the storage
// classes and sizes reach the chart's persistence values, and every value
// path is one of the chart's.
func TestRegionK8sExample(t *testing.T) {
	vars, root, r := followK8sExample(t, nil)
	policy := root.Locals["policy"].AsString()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(fedgateBin, "policy", "validate", path).CombinedOutput(); err != nil {
		t.Fatalf("fedgate policy validate: %v\n%s\npolicy:\n%s", err, out, policy)
	}
	if got, _ := lookupPath(r.values, "policy.content"); got != policy {
		t.Errorf("policy.content = %v, want the example's policy", got)
	}
	var p struct {
		Stores []struct {
			Credentials map[string]string `yaml:"credentials"`
		} `yaml:"stores"`
	}
	if err := yaml.Unmarshal([]byte(policy), &p); err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Stores {
		for k, env := range st.Credentials {
			if strings.HasSuffix(k, "_env") {
				if _, ok := r.sensitive["storeCredentials.env."+env]; !ok {
					t.Errorf("the policy names %s, which store_credentials does not give", env)
				}
			}
		}
	}
	if got, _ := unescapeSet(r.sensitive["storeCredentials.env.DATASETS_SK"]); got != vars["store_secret_key"].AsString() {
		t.Errorf("DATASETS_SK reaches Helm as %q, want %q", got, vars["store_secret_key"].AsString())
	}
	for p, w := range map[string]any{
		"replicas": uint64(3), "region": "k8s-gpu", "persistence.cache.storageClass": "local-nvme",
		"persistence.staging.storageClass": "local-nvme", "persistence.cache.size": "1Ti",
		"persistence.staging.size": "200Gi", "persistence.data.storageClass": "", "serverConfig.staging-size": "180GiB",
		"image.repository": "registry.example.com/fedgate/fedgate", "mount.enabled": false, "localSocket.enabled": true,
	} {
		if got, _ := lookupPath(r.values, p); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", p, got, w)
		}
	}
	if _, ok := lookupPath(r.values, "image.tag"); ok {
		t.Error("image.tag is set: without image_tag the chart's appVersion must apply")
	}
	checkChartHas(t, chartValues(t), r.values, "")

	// The second apply: the mount, with its user's Secret.
	_, _, r = followK8sExample(t, map[string]cty.Value{"mount_credentials_secret": cty.StringVal("fedgate-mount")})
	for p, w := range map[string]any{"mount.enabled": true, "mount.existingSecret": "fedgate-mount", "mount.bucket": "datasets"} {
		if got, _ := lookupPath(r.values, p); !reflect.DeepEqual(got, w) {
			t.Errorf("with mount_credentials_secret: %s = %#v, want %#v", p, got, w)
		}
	}
}

// copyTree copies the files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasPrefix(d.Name(), ".terraform") || strings.HasSuffix(d.Name(), ".tfstate") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRegionK8sTofu runs OpenTofu with the real hashicorp/helm provider
// (3.2.0, built from its source by scripts/deploytools.sh; no registry is
// reached: `tofu init -plugin-dir`): `tofu validate` on region-k8s and its
// example; `tofu plan` of the example with its terraform.tfvars.example,
// which loads the chart and checks every argument against the provider's
// schema (no cluster is contacted at plan time); the plan refused for 4
// replicas; and the chart rendered by the provider's helm_template (Helm's
// client-only install, as `helm template`) with exactly the arguments the
// module gives helm_release for the example's second apply (with the
// mount), whose Secret must hold the
// example's store key byte for byte (commas, braces and all).
func TestRegionK8sTofu(t *testing.T) {
	tofu := deploycheck.Tool(t, "tofu")
	plugins := deploycheck.PluginDir(t)
	work := t.TempDir()
	for _, d := range []string{"modules/region-k8s", "examples/region-k8s"} {
		copyTree(t, filepath.Join(tfDir, d), filepath.Join(work, "terraform", d))
	}
	initDir := func(dir string) {
		t.Helper()
		if out, err := runTool(t, dir, tofu, "init", "-backend=false", "-input=false", "-no-color", "-plugin-dir="+plugins); err != nil {
			t.Fatalf("tofu init -plugin-dir in %s: %v\n%s", dir, err, out)
		}
	}
	for _, d := range []string{"modules/region-k8s", "examples/region-k8s"} {
		dir := filepath.Join(work, "terraform", d)
		initDir(dir)
		if out, err := runTool(t, dir, tofu, "validate", "-no-color"); err != nil {
			t.Errorf("tofu validate %s: %v\n%s", d, err, out)
		}
	}

	chart := deploycheck.ChartDir(t)
	copyTree(t, chart, filepath.Join(work, "deploy", "helm", "fedgate"))
	ex := filepath.Join(work, "terraform", "examples", "region-k8s")
	kube := "-var=kubeconfig=" + filepath.Join(work, "no-kubeconfig")
	out, err := runTool(t, ex, tofu, "plan", "-input=false", "-no-color", "-var-file=terraform.tfvars.example", kube)
	if err != nil {
		t.Fatalf("tofu plan examples/region-k8s: %v\n%s", err, out)
	}
	if !strings.Contains(out, "module.region.helm_release.region will be created") || !strings.Contains(out, "Plan: 1 to add") {
		t.Errorf("tofu plan does not create the release:\n%s", out)
	}
	out, err = runTool(t, ex, tofu, "plan", "-input=false", "-no-color", "-var-file=terraform.tfvars.example", kube, "-var=replicas=4")
	if err == nil || !strings.Contains(out, "replicas is odd") {
		t.Errorf("tofu plan with 4 replicas: %v, want the validation's refusal:\n%s", err, out)
	}

	// Render the chart with the module's arguments for the example (its
	// second apply, with the mount).
	chartCopy := filepath.Join(work, "deploy", "helm", "fedgate")
	vars, _, r := followK8sExample(t, map[string]cty.Value{"mount_credentials_secret": cty.StringVal("fedgate-mount")})
	manifest := renderChart(t, tofu, plugins, filepath.Join(work, "template"), chartCopy, r)
	var kinds []string
	secretFound := false
	for _, doc := range strings.Split(manifest, "\n---") {
		var o struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
			Spec     struct {
				Replicas             *int `yaml:"replicas"`
				VolumeClaimTemplates []struct {
					Metadata struct{ Name string } `yaml:"metadata"`
					Spec     struct {
						StorageClassName *string `yaml:"storageClassName"`
					} `yaml:"spec"`
				} `yaml:"volumeClaimTemplates"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("manifest document: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue
		}
		kinds = append(kinds, o.Kind+"/"+o.Metadata.Name)
		switch o.Kind {
		case "Secret":
			if v, ok := o.Data["DATASETS_SK"]; ok {
				secretFound = true
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil || string(b) != vars["store_secret_key"].AsString() {
					t.Errorf("Secret %s: DATASETS_SK = %q (%v), want %q", o.Metadata.Name, b, err, vars["store_secret_key"].AsString())
				}
			}
		case "StatefulSet":
			if o.Spec.Replicas == nil || *o.Spec.Replicas != 3 {
				t.Errorf("StatefulSet %s: replicas %v, want 3", o.Metadata.Name, o.Spec.Replicas)
			}
			classes := map[string]string{}
			for _, v := range o.Spec.VolumeClaimTemplates {
				if v.Spec.StorageClassName != nil {
					classes[v.Metadata.Name] = *v.Spec.StorageClassName
				}
			}
			var nvme []string
			for name, c := range classes {
				if c == "local-nvme" {
					nvme = append(nvme, name)
				}
			}
			sort.Strings(nvme)
			if len(nvme) != 2 {
				t.Errorf("StatefulSet %s: volume claims on local-nvme %v, want the cache and the staging volume (all: %v)", o.Metadata.Name, nvme, classes)
			}
		}
	}
	sort.Strings(kinds)
	if !secretFound {
		t.Errorf("no Secret holds DATASETS_SK; rendered %v", kinds)
	}
	for _, want := range []string{"StatefulSet/fedgate", "Service/fedgate", "Service/fedgate-nodes", "DaemonSet/"} {
		if !slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(k, want) }) {
			t.Errorf("the rendered chart has no %s; it has %v", want, kinds)
		}
	}

	// Every input set: the chart accepts every value the module gives it
	// (its own checks: shutdownTimeout, serverConfig, antiAffinity, ...).
	in := k8sFullInputs()
	in["chart"] = cty.StringVal(chartCopy)
	delete(in, "chart_repository")
	delete(in, "chart_version")
	full := renderChart(t, tofu, plugins, filepath.Join(work, "template-full"), chartCopy, evalRelease(t, in))
	for _, want := range []string{"kind: StatefulSet", "kind: DaemonSet", "replicas: 5", "type: LoadBalancer", "fg-s3-tls"} {
		if !strings.Contains(full, want) {
			t.Errorf("the chart rendered with every input has no %q", want)
		}
	}
}

// renderChart renders chart with the provider's helm_template and the
// name, namespace, values and set_sensitive the module gives helm_release
// (Helm's client-only render, as `helm template`), in dir.
func renderChart(t *testing.T, tofu, plugins, dir, chart string, r *helmRelease) string {
	t.Helper()
	args := map[string]cty.Value{
		"name": r.args["name"], "namespace": r.args["namespace"], "values": r.args["values"],
		"set_sensitive": r.args["set_sensitive"], "chart": cty.StringVal(chart),
	}
	obj := cty.ObjectVal(args)
	js, err := ctyjson.Marshal(obj, obj.Type())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mainTF := `terraform {
  required_providers {
    helm = {
      source  = "hashicorp/helm"
      version = "` + deploycheck.HelmProviderVersion + `"
    }
  }
}

variable "release" {
  type      = any
  sensitive = true
}

data "helm_template" "region" {
  name          = var.release.name
  namespace     = var.release.namespace
  chart         = var.release.chart
  values        = var.release.values
  set_sensitive = var.release.set_sensitive
}

output "manifest" {
  value     = data.helm_template.region.manifest
  sensitive = true
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o644); err != nil {
		t.Fatal(err)
	}
	vj, _ := json.Marshal(map[string]json.RawMessage{"release": js})
	if err := os.WriteFile(filepath.Join(dir, "release.tfvars.json"), vj, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runTool(t, dir, tofu, "init", "-backend=false", "-input=false", "-no-color", "-plugin-dir="+plugins); err != nil {
		t.Fatalf("tofu init -plugin-dir in %s: %v\n%s", dir, err, out)
	}
	if out, err := runTool(t, dir, tofu, "apply", "-auto-approve", "-input=false", "-no-color", "-var-file=release.tfvars.json"); err != nil {
		t.Fatalf("tofu apply (helm_template of the module's release): %v\n%s", err, out)
	}
	manifest, err := runTool(t, dir, tofu, "output", "-raw", "-no-color", "manifest")
	if err != nil {
		t.Fatalf("tofu output manifest: %v\n%s", err, manifest)
	}
	return manifest
}
