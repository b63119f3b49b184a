package check

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every value of values.yaml is in docs/kubernetes.md's values table: each
// top-level name, and each nested value's own name, in backticks in the
// "## Values" section.
func TestValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Values\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if !ok {
		t.Fatal("docs/kubernetes.md has no ## Values section")
	}
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			paths = append(paths, p)
			// Maps of user entries (labels, selectors, flags) are values themselves.
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !slices.Contains([]string{"resources", "nodeSelector", "labels", "extraFlags", "serverConfig", "securityContext", "issuerRef"}, k) {
				walk(p+".", sub)
			}
		}
	}
	walk("", vals)
	if len(paths) < 60 {
		t.Fatalf("only %d values found", len(paths))
	}
	for _, p := range paths {
		top, _, nested := strings.Cut(p, ".")
		last := p[strings.LastIndex(p, ".")+1:]
		if !strings.Contains(section, "`"+top) || nested && !strings.Contains(section, last) {
			t.Errorf("value %s is not in docs/kubernetes.md's values table", p)
		}
	}
}
