package archcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sleepAllowed names the test files that may still hold a time.Sleep
// without a "// pacing:" comment, with why. An entry ending in "/" is a
// directory. Each is a wall-clock bound the code under test has no
// injected clock or gauge for yet.
var sleepAllowed = map[string]string{
	"e2e/mount_region_test.go":                "waits out --stat-ttl in a mount and three server processes: the contract under test is a wall-clock bound",
	"e2e/stall_test.go":                       "waits for the server to take in 600 stalled connections: no gauge says how many it holds",
	"federation/objectlock_lifecycle_test.go": "waits out a 2 s retention that the region state checks against its log entries' real time",
	"mount/mount_test.go":                     "waits out failedBlockTTL: mount/read.go reads time.Now, not the caches' injected clock",
}

// TestNoSleepInTests: a test waits on a condition (internal/wait), on a fake
// clock (testing/synctest), or on an injected clock; it sleeps for a fixed
// time only to pace load, and says so with a "// pacing: ..." comment on
// the line of the time.Sleep or the line above. A time.Sleep directly in
// the function a synctest.Test runs is allowed: in the bubble it advances
// the fake clock and costs no time.
func TestNoSleepInTests(t *testing.T) {
	dir := root(t)
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != dir && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d test files under %s", len(files), dir)
	}
	used := map[string]bool{}
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bare := bareSleeps(t, rel, src)
		if len(bare) == 0 {
			continue
		}
		if entry, ok := allowedFor(rel); ok {
			used[entry] = true
			continue
		}
		for _, line := range bare {
			t.Errorf("%s:%d: time.Sleep in a test without a \"// pacing:\" comment: wait on the condition (internal/wait.For), use testing/synctest for timer-driven code, or say why it paces", rel, line)
		}
	}
	for entry := range sleepAllowed {
		if !used[entry] && !strings.HasSuffix(entry, "/") {
			t.Errorf("sleepAllowed names %s, which has no bare time.Sleep any more: remove it from the list", entry)
		}
	}
}

func allowedFor(rel string) (string, bool) {
	if _, ok := sleepAllowed[rel]; ok {
		return rel, true
	}
	for entry := range sleepAllowed {
		if strings.HasSuffix(entry, "/") && strings.HasPrefix(rel, entry) {
			return entry, true
		}
	}
	return "", false
}

// bareSleeps returns the lines of the time.Sleep calls in src that have no
// "pacing:" comment on their line or the line above and are not directly in
// a synctest.Test function.
func bareSleeps(t *testing.T, name string, src []byte) []int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	timeName, synctestName := "", ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(path)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		switch path {
		case "time":
			timeName = local
		case "testing/synctest":
			synctestName = local
		}
	}
	if timeName == "" {
		return nil
	}
	pacing := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, "pacing:") {
				pacing[fset.Position(c.Slash).Line] = true
			}
		}
	}
	isCall := func(n ast.Node, pkg, fn string) (*ast.CallExpr, bool) {
		call, ok := n.(*ast.CallExpr)
		if !ok || pkg == "" {
			return nil, false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != fn {
			return nil, false
		}
		id, ok := sel.X.(*ast.Ident)
		return call, ok && id.Name == pkg
	}
	// The bodies of the functions synctest.Test runs, a literal or a
	// function of the file (not the functions they call, nor closures
	// inside them: those are checked).
	funcs := map[string]*ast.BlockStmt{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
			funcs[fd.Name.Name] = fd.Body
		}
	}
	var bubbles []*ast.BlockStmt
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := isCall(n, synctestName, "Test"); ok && len(call.Args) == 2 {
			switch fn := call.Args[1].(type) {
			case *ast.FuncLit:
				bubbles = append(bubbles, fn.Body)
			case *ast.Ident:
				if body := funcs[fn.Name]; body != nil {
					bubbles = append(bubbles, body)
				}
			}
		}
		return true
	})
	var lines []int
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		if _, ok := isCall(n, timeName, "Sleep"); !ok {
			return true
		}
		line := fset.Position(n.Pos()).Line
		if pacing[line] || pacing[line-1] {
			return true
		}
		// Directly in a bubble: the innermost enclosing function is the
		// one synctest.Test runs.
		for i := len(stack) - 1; i >= 0; i-- {
			var body *ast.BlockStmt
			switch fn := stack[i].(type) {
			case *ast.FuncLit:
				body = fn.Body
			case *ast.FuncDecl:
				body = fn.Body
			default:
				continue
			}
			if slices.Contains(bubbles, body) {
				return true
			}
			break
		}
		lines = append(lines, line)
		return true
	})
	return lines
}
