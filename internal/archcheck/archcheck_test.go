package archcheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/fedgate/fedgate/"

// pkgs returns every package of the module (relative paths) with its
// fedgate imports (relative) and, with deps, all its transitive fedgate
// dependencies instead.
func pkgs(t *testing.T, deps bool) map[string][]string {
	t.Helper()
	field := "Imports"
	if deps {
		field = "Deps"
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .`+field+`}} {{.}}{{end}}`, "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		p := strings.TrimPrefix(f[0], module)
		m[p] = nil
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				m[p] = append(m[p], rel)
			}
		}
	}
	if len(m) < 20 {
		t.Fatalf("go list found only %d packages", len(m))
	}
	return m
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// listed reports whether doc names package p: as `p`, or as a `{a,b}`
// group under its parent, or a parent's `p/...`.
func listed(doc, p string) bool {
	if strings.Contains(doc, "`"+p+"`") || strings.Contains(doc, "`"+p+"/`") {
		return true
	}
	dir, base := filepath.Split(p)
	for _, line := range strings.Split(doc, "\n") {
		if i := strings.Index(line, "`"+dir+"{"); i >= 0 {
			group := line[i+len(dir)+2:]
			if j := strings.Index(group, "}"); j >= 0 {
				for _, g := range strings.Split(group[:j], ",") {
					if strings.TrimSpace(g) == base {
						return true
					}
				}
			}
		}
	}
	return false
}

func TestEveryPackageIsDocumented(t *testing.T) {
	arch := read(t, "docs/architecture.md")
	readme := read(t, "README.md")
	layout, ok := strings.CutPrefix(readme[strings.Index(readme, "## Layout"):], "## Layout")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	if i := strings.Index(layout, "\n## "); i >= 0 {
		layout = layout[:i]
	}
	for p := range pkgs(t, false) {
		if !listed(arch, p) {
			t.Errorf("docs/architecture.md does not list package %s", p)
		}
		if !listed(layout, p) {
			t.Errorf("README.md's Layout does not list package %s", p)
		}
	}
}

func TestImportRules(t *testing.T) {
	deps := pkgs(t, true)
	imports := pkgs(t, false)
	under := func(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	forbid := func(who, what, why string) {
		for p, ds := range deps {
			if !under(p, who) || strings.HasSuffix(p, "test") {
				continue
			}
			for _, d := range ds {
				if under(d, what) {
					t.Errorf("%s depends on %s: %s", p, d, why)
				}
			}
		}
	}
	forbid("gateway", "regionstate", "the gateway must not see region state (it talks to backend)")
	forbid("gateway", "federation", "the gateway talks to backend; the object types and errors it uses live in store, a leaf")
	forbid("backend", "regionstate", "backend is the contract and holds no region state")
	forbid("backend", "cachetier", "backend imports only leaf packages")
	forbid("backend", "federation", "backend imports only leaf packages (store, egress, policies)")
	forbid("store", "federation", "stores know one cloud, and the gateway imports store")
	forbid("egress", "federation", "egress is a leaf (prices, ledger reports) the gateway and the CLI import")
	forbid("adminapi", "gateway", "the admin API's wire types are shared by the gateway, the node and the CLI")
	forbid("adminapi", "federation", "the admin API's wire types import only the contract's leaves")
	forbid("gateway/console", "federation", "the console reads the region through backend.Backend and backend.Admin")
	for p, ds := range deps {
		if under(p, "gateway/console") && slices.Contains(ds, "gateway") {
			t.Errorf("%s depends on gateway: the console is its own package over backend; the gateway mounts it", p)
		}
	}
	for p, ds := range deps {
		if under(p, "node/peerapi") && !strings.HasSuffix(p, "test") && slices.Contains(ds, "gateway") {
			t.Errorf("%s depends on gateway: the internal API takes the reserved prefix and node usage from adminapi (gateway/sigv4 signs, which is allowed)", p)
		}
	}
	forbid("policies", "federation", "policies is a leaf")
	forbid("regionstate", "federation", "raft holds state, not the namespace")
	forbid("regionstate", "gateway", "raft holds state, not the S3 layer")
	for p, ds := range deps {
		if under(p, "regionstate") && !strings.HasSuffix(p, "_test") {
			for _, d := range ds {
				if !under(d, "regionstate") && !under(d, "raft") && d != "internal/backoff" {
					t.Errorf("%s depends on %s: the region state imports no other fedgate package (but internal/backoff and raft/...)", p, d)
				}
			}
		}
	}
	// One Raft stack (issue 39): raft/... is a leaf, the catalog imports
	// nothing else of fedgate, and both groups are built on it.
	for p, ds := range deps {
		if strings.HasSuffix(p, "test") {
			continue
		}
		for _, d := range ds {
			switch {
			case under(p, "raft") && !under(d, "raft"):
				t.Errorf("%s depends on %s: raft/... imports no other fedgate package", p, d)
			case under(p, "catalog") && !under(d, "catalog") && !under(d, "raft"):
				t.Errorf("%s depends on %s: the catalog imports no fedgate package but raft/...", p, d)
			}
		}
	}
	for _, group := range []string{"regionstate", "catalog"} {
		if !slices.ContainsFunc(imports[group], func(d string) bool { return under(d, "raft") }) {
			t.Errorf("%s imports no raft/... package: both Raft groups are built on raft/", group)
		}
	}
	for p, ds := range imports {
		if under(p, "internal/loadgen") {
			for _, d := range ds {
				if d != "policies" {
					t.Errorf("%s depends on %s: the load generator is an S3 client like any other and imports only policies (sizes)", p, d)
				}
			}
		}
	}
	for p, ds := range imports {
		if under(p, "mount") {
			for _, d := range ds {
				if d != "internal/backoff" && d != "clients/localread" {
					t.Errorf("%s depends on %s: the mount is an S3 client like any other and imports no fedgate package but internal/backoff and clients/localread", p, d)
				}
			}
		}
	}
	forbid("federation", "gateway", "the namespace knows nothing of S3 requests")
	forbid("federation", "node", "the namespace does not assemble nodes")
	for _, ds := range [][]string{imports["cmd/fedgate"]} {
		for _, d := range ds {
			if under(d, "store") || d == "cachetier" || d == "cachetier/staging" {
				t.Errorf("cmd/fedgate imports %s: the node package assembles stores, caches and staging", d)
			}
		}
	}
}
