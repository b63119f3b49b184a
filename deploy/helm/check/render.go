package check

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/getter"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// Release is the release name and namespace the checks render with.
const (
	ReleaseName = "fg"
	Namespace   = "gpu"
)

// Cluster is what the rendering cluster serves, as `helm template
// --api-versions --kube-version` would say: the CRDs the chart looks for.
type Cluster struct {
	KubeVersion string // e.g. v1.33.0
	Monitoring  bool   // monitoring.coreos.com/v1 (the Prometheus Operator)
	CertManager bool   // cert-manager.io/v1
}

// Load loads the chart directory.
func Load(dir string) (*chart.Chart, error) { return loader.LoadDir(dir) }

// Render renders the chart as `helm template` does: the values files in
// order, then set (a map merged over them, like --set), for a first
// install of ReleaseName in Namespace on cluster c. It returns the
// manifests, one per YAML document, keyed "template path#index", and
// NOTES.txt's text.
func Render(ch *chart.Chart, valueFiles []string, set map[string]any, c Cluster) (map[string]string, string, error) {
	opts := values.Options{ValueFiles: valueFiles}
	vals, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		return nil, "", err
	}
	vals = util.MergeTables(deepCopy(set), vals)
	caps := common.DefaultCapabilities.Copy()
	if c.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(c.KubeVersion)
		if err != nil {
			return nil, "", err
		}
		caps.KubeVersion = *kv
	}
	api := slices.Clone(caps.APIVersions)
	if c.Monitoring {
		api = append(api, "monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
	}
	if c.CertManager {
		api = append(api, "cert-manager.io/v1", "cert-manager.io/v1/Certificate")
	}
	caps.APIVersions = api
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: ReleaseName, Namespace: Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, "", err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, "", err
	}
	docs := map[string]string{}
	notes := ""
	for _, name := range slices.Sorted(maps.Keys(out)) {
		base := path.Base(name)
		switch {
		case base == "NOTES.txt":
			notes = out[name]
			continue
		case strings.HasPrefix(base, "_"):
			continue
		}
		for k, doc := range releaseutil.SplitManifests(out[name]) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			docs[name+"#"+k] = doc
		}
	}
	if len(docs) == 0 {
		return nil, "", errors.New("the chart rendered no manifest")
	}
	return docs, notes, nil
}

// stripComments drops YAML comment lines (a document of comments only is
// empty).
func stripComments(doc string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}

// deepCopy copies a values map, so that merging does not change the
// caller's.
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}
