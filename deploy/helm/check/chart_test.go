package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// full is the chart's resource name for ReleaseName.
const full = ReleaseName + "-fedgate"

// renderCase is one rendering the checks run over.
type renderCase struct {
	name    string
	files   []string // under the chart's ci/
	set     map[string]any
	cluster Cluster
}

func (c renderCase) paths() []string {
	var p []string
	for _, f := range c.files {
		p = append(p, filepath.Join(chartDir, "ci", f))
	}
	return p
}

// ciFiles are the values files in the chart's ci/ directory; every one is
// rendered and linted (a new file is picked up by itself).
func ciFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(m) < 6 {
		t.Fatalf("ci values files: %v %v", m, err)
	}
	var names []string
	for _, p := range m {
		names = append(names, filepath.Base(p))
	}
	return names
}

// cases: the defaults at 1, 3 and 5 replicas, with and without the
// Prometheus Operator's and cert-manager's CRDs, and every ci/ file (at 3
// and 5 replicas, with the CRDs served).
func cases(t *testing.T) []renderCase {
	bare := Cluster{KubeVersion: "v1.33.0"}
	crds := Cluster{KubeVersion: "v1.33.0", Monitoring: true, CertManager: true}
	var cs []renderCase
	for _, n := range []int{1, 3, 5} {
		cs = append(cs,
			renderCase{name: fmt.Sprintf("defaults/%d", n), set: map[string]any{"replicas": n}, cluster: bare},
			renderCase{name: fmt.Sprintf("defaults+crds/%d", n), set: map[string]any{"replicas": n}, cluster: crds})
	}
	for _, f := range ciFiles(t) {
		for _, n := range []int{3, 5} {
			cs = append(cs, renderCase{name: fmt.Sprintf("%s/%d", strings.TrimSuffix(f, "-values.yaml"), n), files: []string{f},
				set: map[string]any{"replicas": n}, cluster: crds})
		}
	}
	cs = append(cs, renderCase{name: "certmanager-without-crd/3", files: []string{"certmanager-values.yaml"}, cluster: bare})
	return cs
}

// values is the chart's values.yaml merged with the case's files and set,
// as plain maps (for the expectations).
func (c renderCase) values(t *testing.T) map[string]any {
	t.Helper()
	v := map[string]any{}
	for _, p := range append([]string{filepath.Join(chartDir, "values.yaml")}, c.paths()...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		merge(v, m)
	}
	merge(v, jsonRoundTrip(t, c.set))
	return v
}

func jsonRoundTrip(t *testing.T, m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// lookup is a dotted path of a values map.
func lookup(v map[string]any, path string) any {
	var cur any = v
	for p := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func str(v map[string]any, path string) string {
	if s, ok := lookup(v, path).(string); ok {
		return s
	}
	return ""
}

func boolean(v map[string]any, path string) bool { b, _ := lookup(v, path).(bool); return b }

// TestRender renders every case, decodes every manifest strictly into its
// typed object (an unknown field or kind fails) and checks the region's
// invariants.
func TestRender(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			o := render(t, c.paths(), c.set, c.cluster)
			v := c.values(t)
			checkGateway(t, o, v)
			checkServices(t, o, v)
			checkPDB(t, o, v)
			checkMonitoring(t, o, v, c.cluster)
			checkCertificates(t, o, v, c.cluster)
			checkMount(t, o, v)
		})
	}
}

// cfgStr is a string key of the server config file; a missing one fails
// the test.
func cfgStr(t *testing.T, cfg map[string]any, key string) string {
	t.Helper()
	s, ok := cfg[key].(string)
	if !ok {
		t.Fatalf("the server config file has no string %s: %v", key, cfg)
	}
	return s
}

// serverConfig is the rendered server config file, parsed.
func serverConfig(t *testing.T, o objects) (map[string]any, string) {
	t.Helper()
	cm := get[*corev1.ConfigMap](t, o, "ConfigMap", full+"-server")
	text, ok := cm.Data["server.yaml"]
	if !ok {
		t.Fatal("the server ConfigMap has no server.yaml")
	}
	var m map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &m); err != nil {
		t.Fatalf("server.yaml: %v", err)
	}
	return m, text
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func checkGateway(t *testing.T, o objects, v map[string]any) {
	sts := get[*appsv1.StatefulSet](t, o, "StatefulSet", full)
	n := int(lookup(v, "replicas").(float64))
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != n || n%2 == 0 {
		t.Errorf("replicas %v, want %d (odd)", sts.Spec.Replicas, n)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: with --bootstrap-expect every pod must start at once", sts.Spec.PodManagementPolicy)
	}
	us := sts.Spec.UpdateStrategy
	if us.Type != appsv1.RollingUpdateStatefulSetStrategyType || us.RollingUpdate == nil || us.RollingUpdate.MaxUnavailable == nil ||
		us.RollingUpdate.MaxUnavailable.IntValue() != 1 {
		t.Errorf("updateStrategy %+v: want RollingUpdate, maxUnavailable 1", us)
	}
	podLabels := labels.Set(sts.Spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the StatefulSet's selector does not match its pods: %v", err)
	}
	spec := sts.Spec.Template.Spec
	ctr := container(t, spec, "fedgate")
	cfg, _ := serverConfig(t, o)
	scheme := corev1.URISchemeHTTP
	if cfg["cert-file"] != nil {
		scheme = corev1.URISchemeHTTPS
	}
	s3 := containerPort(t, ctr, "s3")
	if got := portOf(t, cfgStr(t, cfg, "listen")); got != s3 {
		t.Errorf("listen port %d, container port s3 %d", got, s3)
	}
	if got := portOf(t, cfgStr(t, cfg, "internal-addr")); got != containerPort(t, ctr, "internal") {
		t.Errorf("internal-addr port %d is not the container's internal port", got)
	}
	raftAddr, ok := argValue(ctr.Args, "raft-addr")
	if !ok || portOf(t, raftAddr) != containerPort(t, ctr, "raft") {
		t.Errorf("--raft-addr %q is not on the container's raft port", raftAddr)
	}
	if !strings.HasPrefix(raftAddr, "$(POD_NAME)."+sts.Spec.ServiceName+".") {
		t.Errorf("--raft-addr %q is not the pod's name in the headless Service %s", raftAddr, sts.Spec.ServiceName)
	}
	checkForming(t, ctr, n, sts.Spec.ServiceName, s3)
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{ctr.ReadinessProbe, "/_fedgate/readyz"}, {ctr.LivenessProbe, "/_fedgate/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", p.path)
			continue
		}
		g := p.probe.HTTPGet
		port := g.Port.IntVal
		if g.Port.StrVal != "" {
			port = containerPort(t, ctr, g.Port.StrVal)
		}
		if g.Path != p.path || port != s3 || g.Scheme != scheme {
			t.Errorf("probe %s: %s %s port %d, want %s on %d (%s)", p.path, g.Scheme, g.Path, port, p.path, s3, scheme)
		}
	}
	checkTermination(t, spec, ctr, cfg)
	checkAntiAffinity(t, spec, podLabels, v)
	checkVolumes(t, sts, ctr, cfg, v)
	checkImage(t, ctr, v)
	checkSecretRefs(t, o, ctr, v)
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// checkForming: --bootstrap-expect is the replica count and --join names
// every pod's S3 port in the headless Service.
func checkForming(t *testing.T, ctr corev1.Container, n int, headless string, s3 int32) {
	t.Helper()
	be, hasBE := argValue(ctr.Args, "bootstrap-expect")
	join, hasJoin := argValue(ctr.Args, "join")
	if n == 1 {
		if hasBE || hasJoin {
			t.Errorf("one replica with --bootstrap-expect %q --join %q", be, join)
		}
		return
	}
	if be != strconv.Itoa(n) {
		t.Errorf("--bootstrap-expect %q, want %d", be, n)
	}
	addrs := strings.Split(join, ",")
	if len(addrs) != n {
		t.Fatalf("--join %q: want the %d pods", join, n)
	}
	for i, a := range addrs {
		want := fmt.Sprintf("%s-%d.%s.%s.svc.", full, i, headless, Namespace)
		if !strings.HasPrefix(a, want) || portOf(t, a) != s3 {
			t.Errorf("--join address %q: want %s...:%d", a, want, s3)
		}
	}
}

// checkTermination: the grace period covers preStop and the drain
// (--shutdown-timeout).
func checkTermination(t *testing.T, spec corev1.PodSpec, ctr corev1.Container, cfg map[string]any) {
	t.Helper()
	d, err := time.ParseDuration(cfgStr(t, cfg, "shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	var pre int64
	if ctr.Lifecycle == nil || ctr.Lifecycle.PreStop == nil || ctr.Lifecycle.PreStop.Sleep == nil {
		t.Error("no preStop sleep: endpoints would still send requests to a draining pod")
	} else {
		pre = ctr.Lifecycle.PreStop.Sleep.Seconds
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < int64(d.Seconds())+pre+5 {
		t.Errorf("terminationGracePeriodSeconds %v: want at least shutdown-timeout %s + preStop %ds + 5", ptrString(spec.TerminationGracePeriodSeconds), d, pre)
	}
}

func checkAntiAffinity(t *testing.T, spec corev1.PodSpec, pod labels.Set, v map[string]any) {
	t.Helper()
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		t.Fatal("no pod anti-affinity")
	}
	aa := spec.Affinity.PodAntiAffinity
	for key, topo := range map[string]string{"hostname": "kubernetes.io/hostname", "zone": "topology.kubernetes.io/zone"} {
		var terms []corev1.PodAffinityTerm
		switch str(v, "antiAffinity."+key) {
		case "required":
			terms = aa.RequiredDuringSchedulingIgnoredDuringExecution
		case "preferred":
			for _, w := range aa.PreferredDuringSchedulingIgnoredDuringExecution {
				terms = append(terms, w.PodAffinityTerm)
			}
		default:
			continue
		}
		found := false
		for _, term := range terms {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if err == nil && term.TopologyKey == topo && sel.Matches(pod) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s anti-affinity term on %s matching the gateway pods", str(v, "antiAffinity."+key), topo)
		}
	}
}

// checkVolumes: data, cache and staging are three volumes mounted at the
// data dir, the cache dir and its staging/ (where fedgate stages), each a
// claim template or a hostPath.
func checkVolumes(t *testing.T, sts *appsv1.StatefulSet, ctr corev1.Container, cfg map[string]any, v map[string]any) {
	t.Helper()
	want := map[string]string{"data": cfgStr(t, cfg, "data-dir"), "cache": cfgStr(t, cfg, "cache-dir"),
		"staging": filepath.Join(cfgStr(t, cfg, "cache-dir"), "staging")}
	for name, path := range want {
		found := false
		for _, m := range ctr.VolumeMounts {
			if m.Name == name && m.MountPath == path {
				found = true
			}
		}
		if !found {
			t.Errorf("volume %s is not mounted at %s", name, path)
		}
		switch str(v, "persistence.mode") {
		case "volumeClaimTemplates":
			if !claimTemplate(sts, name) {
				t.Errorf("no volumeClaimTemplate %s", name)
			}
		case "hostPath":
			vol := volume(t, sts.Spec.Template.Spec, name)
			if vol.HostPath == nil || vol.HostPath.Path != str(v, "persistence."+name+".hostPath") {
				t.Errorf("volume %s: %+v, want hostPath %s", name, vol.VolumeSource, str(v, "persistence."+name+".hostPath"))
			}
		}
	}
}

// checkImage: the image tag defaults to the chart's appVersion.
func checkImage(t *testing.T, ctr corev1.Container, v map[string]any) {
	t.Helper()
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	tag := str(v, "image.tag")
	if tag == "" {
		tag = ch.Metadata.AppVersion
	}
	if want := str(v, "image.repository") + ":" + tag; ctr.Image != want {
		t.Errorf("image %q, want %q", ctr.Image, want)
	}
}

// checkSecretRefs: the root keys come from the rendered Secret or the one
// named in the values, with the keys the values name.
func checkSecretRefs(t *testing.T, o objects, ctr corev1.Container, v map[string]any) {
	t.Helper()
	wantSecret := str(v, "rootCredentials.existingSecret")
	for _, e := range ctr.Env {
		if e.Name != "FEDGATE_ACCESS_KEY" && e.Name != "FEDGATE_SECRET_KEY" {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		key := str(v, "rootCredentials.accessKeyKey")
		if e.Name == "FEDGATE_SECRET_KEY" {
			key = str(v, "rootCredentials.secretKeyKey")
		}
		if ref == nil || ref.Key != key {
			t.Errorf("%s from %+v, want key %s", e.Name, ref, key)
			continue
		}
		if wantSecret != "" {
			if ref.Name != wantSecret {
				t.Errorf("%s from Secret %s, want %s", e.Name, ref.Name, wantSecret)
			}
			continue
		}
		s := get[*corev1.Secret](t, o, "Secret", ref.Name)
		if len(s.Data[key]) == 0 {
			t.Errorf("Secret %s has no %s", ref.Name, key)
		}
	}
}

func checkServices(t *testing.T, o objects, v map[string]any) {
	t.Helper()
	sts := get[*appsv1.StatefulSet](t, o, "StatefulSet", full)
	pod := labels.Set(sts.Spec.Template.Labels)
	h := get[*corev1.Service](t, o, "Service", sts.Spec.ServiceName)
	if h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q publishNotReadyAddresses %v, want None and true", h.Spec.ClusterIP, h.Spec.PublishNotReadyAddresses)
	}
	ctr := container(t, sts.Spec.Template.Spec, "fedgate")
	for _, name := range []string{"s3", "raft", "internal"} {
		found := false
		for _, p := range h.Spec.Ports {
			if p.Name == name && p.Port == containerPort(t, ctr, name) {
				found = true
			}
		}
		if !found {
			t.Errorf("the headless Service lacks port %s", name)
		}
	}
	s3 := get[*corev1.Service](t, o, "Service", full)
	if !labels.SelectorFromSet(s3.Spec.Selector).Matches(pod) || !labels.SelectorFromSet(h.Spec.Selector).Matches(pod) {
		t.Error("a Service's selector does not match the gateway pods")
	}
	if string(s3.Spec.Type) != str(v, "service.type") {
		t.Errorf("S3 Service type %s, want %s", s3.Spec.Type, str(v, "service.type"))
	}
	if len(s3.Spec.Ports) != 1 || s3.Spec.Ports[0].Port != containerPort(t, ctr, "s3") {
		t.Errorf("S3 Service ports %+v", s3.Spec.Ports)
	}
}

func checkPDB(t *testing.T, o objects, v map[string]any) {
	t.Helper()
	n := int(lookup(v, "replicas").(float64))
	pdb := get[*policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", full)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != (n-1)/2 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB maxUnavailable %v minAvailable %v, want maxUnavailable %d (a majority of %d stays)", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable, (n-1)/2, n)
	}
	if n-(n-1)/2 <= n/2 {
		t.Errorf("%d up of %d is no majority", n-(n-1)/2, n)
	}
	sts := get[*appsv1.StatefulSet](t, o, "StatefulSet", full)
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("the PDB's selector does not match the gateway pods: %v", err)
	}
}

func checkMonitoring(t *testing.T, o objects, v map[string]any, c Cluster) {
	t.Helper()
	if !c.Monitoring {
		if o.count("ServiceMonitor")+o.count("PrometheusRule") != 0 {
			t.Error("ServiceMonitor or PrometheusRule rendered without the monitoring.coreos.com/v1 CRDs")
		}
	} else {
		sm := get[*monitoringv1.ServiceMonitor](t, o, "ServiceMonitor", full)
		h := get[*corev1.Service](t, o, "Service", full+"-nodes")
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(h.Labels)) || sel.Matches(labels.Set(get[*corev1.Service](t, o, "Service", full).Labels)) {
			t.Error("the ServiceMonitor must select the headless Service (every pod once), not the S3 Service")
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/_fedgate/metrics" || sm.Spec.Endpoints[0].Port != "s3" {
			t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
		}
		if h.Labels[sm.Spec.JobLabel] != "fedgate" {
			t.Errorf("the alert rules select job=\"fedgate\"; the ServiceMonitor's job label %q is %q", sm.Spec.JobLabel, h.Labels[sm.Spec.JobLabel])
		}
		checkRuleCopy(t, get[*monitoringv1.PrometheusRule](t, o, "PrometheusRule", full))
	}
	cm := get[*corev1.ConfigMap](t, o, "ConfigMap", full+"-dashboard")
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: the Grafana sidecar looks for grafana_dashboard: \"1\"", cm.Labels)
	}
	orig, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "fedgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cm.Data["fedgate.json"]) != strings.TrimSpace(string(orig)) {
		t.Error("the dashboard ConfigMap is not deploy/grafana/fedgate.json")
	}
}

// checkRuleCopy: the PrometheusRule's groups are deploy/prometheus/fedgate-alerts.yml's.
func checkRuleCopy(t *testing.T, pr *monitoringv1.PrometheusRule) {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "fedgate-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(orig, &want); err != nil {
		t.Fatalf("deploy/prometheus/fedgate-alerts.yml as a PrometheusRule spec: %v", err)
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(pr.Spec)
	if !bytes.Equal(a, b) || len(want.Groups) == 0 {
		t.Errorf("the PrometheusRule is not deploy/prometheus/fedgate-alerts.yml (%d groups there, %d here)", len(want.Groups), len(pr.Spec.Groups))
	}
}

func checkCertificates(t *testing.T, o objects, v map[string]any, c Cluster) {
	t.Helper()
	want := 0
	for _, k := range []string{"tls", "peerTLS"} {
		if boolean(v, k+".enabled") && boolean(v, k+".certManager.enabled") && str(v, k+".existingSecret") == "" && c.CertManager {
			want++
		}
	}
	if got := o.count("Certificate"); got != want {
		t.Errorf("%d Certificates, want %d", got, want)
	}
	if want == 0 {
		return
	}
	sts := get[*appsv1.StatefulSet](t, o, "StatefulSet", full)
	for _, x := range o.all {
		cert, ok := x.Obj.(*Certificate)
		if !ok {
			continue
		}
		vol := ""
		for _, vv := range sts.Spec.Template.Spec.Volumes {
			if vv.Secret != nil && vv.Secret.SecretName == cert.Spec.SecretName {
				vol = vv.Name
			}
		}
		if vol == "" || cert.Spec.IssuerRef.Name == "" {
			t.Errorf("Certificate %s: Secret %s is mounted by no volume, or no issuer", cert.Name, cert.Spec.SecretName)
		}
		if !slices.Contains(cert.Spec.DNSNames, "*."+full+"-nodes."+Namespace+".svc.cluster.local") {
			t.Errorf("Certificate %s lacks the pods' names: %v", cert.Name, cert.Spec.DNSNames)
		}
	}
}

func checkMount(t *testing.T, o objects, v map[string]any) {
	t.Helper()
	if !boolean(v, "mount.enabled") {
		if o.count("DaemonSet") != 0 {
			t.Error("a DaemonSet rendered with mount.enabled false")
		}
		return
	}
	ds := get[*appsv1.DaemonSet](t, o, "DaemonSet", full+"-mount")
	spec := ds.Spec.Template.Spec
	for k, want := range lookup(v, "mount.nodeSelector").(map[string]any) {
		if spec.NodeSelector[k] != want {
			t.Errorf("mount nodeSelector %v, want %s=%v", spec.NodeSelector, k, want)
		}
	}
	ctr := container(t, spec, "mount")
	sc := ctr.SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") {
		t.Error("the mount container lacks CAP_SYS_ADMIN (mount(2) of a FUSE file system)")
	}
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the mount container is not privileged: the API server refuses Bidirectional propagation then")
	}
	mountpoint := ctr.Args[len(ctr.Args)-1]
	var fuse, bidi bool
	for _, m := range ctr.VolumeMounts {
		vol := volume(t, spec, m.Name)
		if m.MountPath == "/dev/fuse" && vol.HostPath != nil && vol.HostPath.Path == "/dev/fuse" &&
			vol.HostPath.Type != nil && *vol.HostPath.Type == corev1.HostPathCharDev {
			fuse = true
		}
		if m.MountPath == mountpoint && m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional &&
			vol.HostPath != nil && vol.HostPath.Path == str(v, "mount.hostPath") {
			bidi = true
		}
	}
	if !fuse {
		t.Error("the mount container has no /dev/fuse from a CharDevice hostPath")
	}
	if !bidi {
		t.Errorf("the mount point %s is not the hostPath %s with Bidirectional propagation", mountpoint, str(v, "mount.hostPath"))
	}
	if boolean(v, "localSocket.enabled") {
		sock, _ := argValue(ctr.Args, "local-socket")
		gw := get[*appsv1.StatefulSet](t, o, "StatefulSet", full).Spec.Template.Spec
		cfg, _ := serverConfig(t, o)
		if sock == "" || sock != cfg["local-socket"] {
			t.Errorf("mount --local-socket %q, gateway local-socket %v", sock, cfg["local-socket"])
		}
		if volume(t, spec, "local-socket").HostPath.Path != volume(t, gw, "local-socket").HostPath.Path {
			t.Error("the gateway and the mount do not share the local socket's host directory")
		}
	}
}

// Even and unsupported replica counts are refused with the reason, and so
// are values that cannot work.
func TestRefusedValues(t *testing.T) {
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	c := Cluster{KubeVersion: "v1.33.0"}
	for _, tc := range []struct {
		set  map[string]any
		want string
	}{
		{map[string]any{"replicas": 2}, "replicas: 2 is even"},
		{map[string]any{"replicas": 4}, "replicas: 4 is even"},
		{map[string]any{"replicas": 0}, "replicas: 0 is even"},
		{map[string]any{"replicas": 7}, "use 1, 3 or 5"},
		{map[string]any{"serverConfig": map[string]any{"listen": "0.0.0.0:1"}}, "serverConfig.listen: the chart sets this key"},
		{map[string]any{"service": map[string]any{"type": "NodePort"}}, "service.type"},
		{map[string]any{"persistence": map[string]any{"mode": "emptyDir"}}, "persistence.mode"},
		{map[string]any{"shutdownTimeout": "1h30m"}, "shutdownTimeout"},
		{map[string]any{"antiAffinity": map[string]any{"zone": "sometimes"}}, "antiAffinity.zone"},
		{map[string]any{"rootCredentials": map[string]any{"accessKey": "AK"}}, "give both accessKey and secretKey"},
		{map[string]any{"mount": map[string]any{"enabled": true}}, "mount.existingSecret"},
		{map[string]any{"mount": map[string]any{"enabled": true, "existingSecret": "s", "privileged": false}}, "mount.privileged"},
	} {
		_, _, err := Render(ch, nil, tc.set, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: got %v, want an error with %q", tc.set, err, tc.want)
		}
	}
}

// A change of the server config or the policy changes the pod template's
// checksums (so the pods roll); an unrelated change does not.
func TestChecksumsRollPods(t *testing.T) {
	c := Cluster{KubeVersion: "v1.33.0"}
	ann := func(set map[string]any) map[string]string {
		sts := get[*appsv1.StatefulSet](t, render(t, nil, set, c), "StatefulSet", full)
		return sts.Spec.Template.Annotations
	}
	base := ann(nil)
	if base["checksum/server-config"] == "" || base["checksum/policy"] == "" {
		t.Fatalf("no checksum annotations: %v", base)
	}
	if got := ann(map[string]any{"service": map[string]any{"annotations": map[string]any{"a": "b"}}}); got["checksum/server-config"] != base["checksum/server-config"] || got["checksum/policy"] != base["checksum/policy"] {
		t.Error("a Service annotation changed the config checksums")
	}
	if got := ann(map[string]any{"serverConfig": map[string]any{"log-level": "debug"}}); got["checksum/server-config"] == base["checksum/server-config"] {
		t.Error("a server config change left checksum/server-config as it was: the pods would not roll")
	}
	if got := ann(map[string]any{"shutdownTimeout": "90s"}); got["checksum/server-config"] == base["checksum/server-config"] {
		t.Error("shutdownTimeout (in the server config) left checksum/server-config as it was")
	}
	if got := ann(map[string]any{"policy": map[string]any{"content": "regions: []\n"}}); got["checksum/policy"] == base["checksum/policy"] {
		t.Error("a policy change left checksum/policy as it was")
	}
}

// The chart's copies of the alert rules and the dashboard are the files in
// deploy/ byte for byte (the chart cannot read outside its directory).
func TestFilesAreCopies(t *testing.T) {
	for copyName, orig := range map[string]string{
		"fedgate-alerts.yml": filepath.Join(repoRoot, "deploy", "prometheus", "fedgate-alerts.yml"),
		"fedgate.json":       filepath.Join(repoRoot, "deploy", "grafana", "fedgate.json"),
	} {
		a, err := os.ReadFile(filepath.Join(chartDir, "files", copyName))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/helm/fedgate/files/%s differs from %s: cp %s deploy/helm/fedgate/files/", copyName, orig, orig)
		}
	}
}

// fedgate itself accepts what the chart renders: the gateway's arguments
// with the server config file and the policy file (fedgate server
// --check), the policy (fedgate policy validate), and the mount's
// arguments (fedgate mount --check). The pod's volumes are laid out under
// a temporary directory: the ConfigMaps' files, and a CA and certificates
// where TLS Secrets are mounted.
func TestFedgateAcceptsRendered(t *testing.T) {
	bin := fedgateBin(t)
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			o := render(t, c.paths(), c.set, c.cluster)
			sts := get[*appsv1.StatefulSet](t, o, "StatefulSet", full)
			root := t.TempDir()
			ctr := container(t, sts.Spec.Template.Spec, "fedgate")
			args := podArgs(t, o, sts.Spec.Template.Spec, ctr, root)
			env := append(os.Environ(), "FEDGATE_ACCESS_KEY=AKCHECK", "FEDGATE_SECRET_KEY=chart-check-secret")
			run(t, bin, env, append([]string{args[0], "--check"}, args[1:]...)...)
			pol := filepath.Join(root, "etc/fedgate/policy/policy.yaml")
			if _, err := os.Stat(pol); err == nil {
				run(t, bin, env, "policy", "validate", pol)
			} else {
				t.Errorf("no policy file at %s (from the policy ConfigMap)", pol)
			}
			if o.count("DaemonSet") == 1 {
				ds := get[*appsv1.DaemonSet](t, o, "DaemonSet", full+"-mount")
				m := container(t, ds.Spec.Template.Spec, "mount")
				run(t, bin, env, append([]string{m.Args[0], "--check"}, m.Args[1:]...)...)
			}
		})
	}
}

// podArgs lays the pod's volumes out under root and returns the
// container's args with $(POD_NAME) set and every mount path moved there.
func podArgs(t *testing.T, o objects, spec corev1.PodSpec, ctr corev1.Container, root string) []string {
	t.Helper()
	var paths []string
	for _, m := range ctr.VolumeMounts {
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m.MountPath)
		vol, ok := findVolume(spec, m.Name)
		switch {
		case !ok: // a volumeClaimTemplate's claim: an empty directory
		case vol.ConfigMap != nil:
			cm := get[*corev1.ConfigMap](t, o, "ConfigMap", vol.ConfigMap.Name)
			for name, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case vol.Secret != nil:
			writePKI(t, dir, "*."+full+"-nodes."+Namespace+".svc.cluster.local", full+"-nodes."+Namespace+".svc.cluster.local")
		}
	}
	// Longest first, so /var/cache/fedgate/staging moves before /var/cache/fedgate.
	slices.SortFunc(paths, func(a, b string) int { return len(b) - len(a) })
	move := func(s string) string {
		for _, p := range paths {
			if strings.Contains(s, p) {
				return strings.ReplaceAll(s, p, filepath.Join(root, p))
			}
		}
		return s
	}
	for _, m := range ctr.VolumeMounts {
		if m.Name != "server-config" {
			continue
		}
		f := filepath.Join(root, m.MountPath, "server.yaml")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for l := range strings.SplitSeq(string(b), "\n") {
			lines = append(lines, move(l))
		}
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var args []string
	for _, a := range ctr.Args {
		args = append(args, move(strings.ReplaceAll(a, "$(POD_NAME)", full+"-0")))
	}
	return args
}

func run(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("fedgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// helm lint --strict passes on the chart with its defaults and with every
// values file in ci/.
func TestHelmLint(t *testing.T) {
	helm := helmBin(t)
	lint := func(args ...string) (string, error) {
		cmd := exec.Command(helm, append([]string{"lint", "--strict", chartDir}, args...)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := lint(); err != nil {
		t.Errorf("helm lint --strict (defaults): %v\n%s", err, out)
	}
	for _, f := range ciFiles(t) {
		if out, err := lint("-f", filepath.Join(chartDir, "ci", f)); err != nil {
			t.Errorf("helm lint --strict -f ci/%s: %v\n%s", f, err, out)
		}
	}
	// helm lint renders in lint mode, where the template's fail is a log
	// line, not an error: the refusal of even counts is TestRefusedValues's
	// (rendered as helm template and helm install do). Lint must still
	// print it.
	if out, _ := lint("--set", "replicas=4"); !strings.Contains(out, "replicas: 4 is even") {
		t.Errorf("helm lint --set replicas=4 did not print the refusal:\n%s", out)
	}
}
