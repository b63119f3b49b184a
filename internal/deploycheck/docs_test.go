package deploycheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

// TestDeployDocSnippets checks the HCL snippets of docs/deploy.md: each
// parses, every var.X one uses is declared by a snippet of the page, every
// module source pins one release tag with ?ref=, and every release binary
// named is that release's artifact (fedgate_vX.Y.Z_linux_ARCH, the names
// scripts/release.sh makes).
func TestDeployDocSnippets(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(deploycheck.RepoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(doc), "```hcl\n")[1:] {
		body, _, ok := strings.Cut(part, "\n```")
		if !ok {
			t.Fatal("an unterminated ```hcl block")
		}
		blocks = append(blocks, body)
	}
	if len(blocks) < 5 {
		t.Fatalf("found %d hcl snippets in docs/deploy.md", len(blocks))
	}
	declared := map[string]bool{}
	used := map[string][]int{}
	for i, src := range blocks {
		f, diags := hclsyntax.ParseConfig([]byte(src), "snippet", hcl.InitialPos)
		if diags.HasErrors() {
			t.Errorf("snippet %d does not parse: %v\n%s", i+1, diags, src)
			continue
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			if b.Type == "variable" && len(b.Labels) == 1 {
				declared[b.Labels[0]] = true
			}
		}
		_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			if e, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && e.Traversal.RootName() == "var" && len(e.Traversal) > 1 {
				if a, ok := e.Traversal[1].(hcl.TraverseAttr); ok {
					used[a.Name] = append(used[a.Name], i+1)
				}
			}
			return nil
		})
	}
	for name, in := range used {
		if !declared[name] {
			t.Errorf("var.%s (snippets %v) is declared by no snippet of docs/deploy.md", name, in)
		}
	}

	refs := regexp.MustCompile(`\?ref=([^"\s]*)"`).FindAllStringSubmatch(strings.Join(blocks, "\n"), -1)
	if len(refs) == 0 {
		t.Fatal("no snippet of docs/deploy.md pins a module source with ?ref=")
	}
	tag := refs[0][1]
	if !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(tag) {
		t.Errorf("?ref=%s is not a release tag vX.Y.Z", tag)
	}
	for _, r := range refs {
		if r[1] != tag {
			t.Errorf("module sources pin both ?ref=%s and ?ref=%s", tag, r[1])
		}
	}
	artifacts := regexp.MustCompile(`fedgate_(v[^_/"\s]*)_linux_([a-z0-9]+)`).FindAllStringSubmatch(string(doc), -1)
	if len(artifacts) == 0 {
		t.Error("docs/deploy.md names no release binary")
	}
	for _, a := range artifacts {
		if (a[1] != tag && a[1] != "vX.Y.Z") || (a[2] != "amd64" && a[2] != "arm64") {
			t.Errorf("release binary %s: want fedgate_%s_linux_amd64 or _arm64 (the ?ref= tag)", a[0], tag)
		}
	}
	if !strings.Contains(string(doc), releaseURL(tag, "amd64")) {
		t.Errorf("docs/deploy.md does not give the release download URL %s", releaseURL(tag, "amd64"))
	}
}
