package archcheck

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
)

// maxCyclomatic is the most a function of non-test code may have
// (docs/architecture.md, "Functions over cyclomatic complexity 30").
const maxCyclomatic = 30

// cycloAllowed names the functions allowed above maxCyclomatic ("pkg
// func", as gocyclo prints them), each with its reason in
// docs/architecture.md.
var cycloAllowed = map[string]bool{}

// TestCyclomatic: no function of non-test code over maxCyclomatic unless
// cycloAllowed names it, and docs/architecture.md names every one it does.
func TestCyclomatic(t *testing.T) {
	r := root(t)
	stats := gocyclo.Analyze([]string{r}, regexp.MustCompile(`(_test\.go|/testdata/.*)$`)).SortAndFilter(-1, maxCyclomatic)
	doc := read(t, "docs/architecture.md")
	for _, s := range stats {
		name := s.PkgName + " " + s.FuncName
		rel, _ := filepath.Rel(r, s.Pos.Filename)
		if !cycloAllowed[name] {
			t.Errorf("%s:%d: %s has cyclomatic complexity %d (at most %d: split it, or name it with a reason in docs/architecture.md and in cycloAllowed)",
				rel, s.Pos.Line, name, s.Complexity, maxCyclomatic)
		}
	}
	for name := range cycloAllowed {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("cycloAllowed names %s, which docs/architecture.md's table does not", name)
		}
	}
}
