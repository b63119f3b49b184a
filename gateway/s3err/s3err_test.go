package s3err

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestError(t *testing.T) {
	e := New(CodeSignatureDoesNotMatch, "bad")
	if e.Status != http.StatusForbidden || e.Error() != "SignatureDoesNotMatch: bad" {
		t.Fatalf("%+v %q", e, e.Error())
	}
	if New(CodeBadDigest, "").Status != http.StatusBadRequest || New(CodeNotImplemented, "").Status != http.StatusNotImplemented {
		t.Fatal("status table")
	}
	if got := New(CodeNoSuchKey, "").Message; got != "The specified key does not exist." {
		t.Fatalf("default message %q", got)
	}
	wrapped := fmt.Errorf("ctx: %w", Newf(CodeBadDigest, "n=%d", 3))
	if !errors.Is(wrapped, New(CodeBadDigest, "other message")) || errors.Is(wrapped, e) {
		t.Fatal("Is must match by code only")
	}
	if CodeOf(wrapped) != CodeBadDigest || CodeOf(errors.New("x")) != "" {
		t.Fatal("CodeOf")
	}
	if StatusFor("NoSuchCodeAnywhere") != http.StatusInternalServerError {
		t.Fatal("an unknown code must stand out")
	}
}

// TestEveryCodeHasARow reads this package's source: every Code constant
// has a row in table, with its own name as its value, a status and a
// message; and no row names a code without a constant.
func TestEveryCodeHasARow(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "s3err.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") {
					continue
				}
				code, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				consts[code] = true
				r, ok := table[code]
				switch {
				case !ok:
					t.Errorf("%s (%q) has no row in table", name.Name, code)
				case r.status < 400 || r.status > 599 || r.message == "":
					t.Errorf("%s: row %+v needs an error status and a message", name.Name, r)
				}
			}
		}
	}
	if len(consts) < 40 {
		t.Fatalf("found only %d codes: is the parse right?", len(consts))
	}
	for code := range table {
		if !consts[code] {
			t.Errorf("table row %q has no Code constant", code)
		}
	}
}
