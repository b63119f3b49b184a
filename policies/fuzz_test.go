package policies

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, that it returns either
// a policy or errors (never both, never neither), and that every error has a
// position (line and column >= 1) or is a whole-file error (both 0).
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/example.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(""))
	f.Add([]byte("buckets: [{name: a, cache: &c {ttl: 1d, quota: 1.5TiB}}, {name: bbb, cache: *c}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, feat := range []Features{AllFeatures(), SkeletonFeatures(), {}} {
			p, err := Parse("fuzz.yaml", data, feat)
			if (p == nil) == (err == nil) {
				t.Fatalf("Parse returned policy %v and error %v", p, err)
			}
			if err == nil {
				for _, b := range p.Buckets {
					_ = p.Match(b.Name, "k")
				}
				_, _ = p.Region("")
				continue
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				whole := e.Line == 0 && e.Column == 0
				if !whole && (e.Line < 1 || e.Column < 1) {
					t.Fatalf("error without a valid position: %+v", e)
				}
				if e.File != "fuzz.yaml" || e.Msg == "" {
					t.Fatalf("error without file or message: %+v", e)
				}
			}
			_ = err.Error()
		}
	})
}

// TestHostileInputs feeds inputs that could cost exponential time or memory
// (alias bombs through merge keys and lists), deep nesting and huge keys.
func TestHostileInputs(t *testing.T) {
	mergeBomb := "a0: &a0 {name: abc}\n"
	listBomb := "x0: &l0 [{name: abc}]\n"
	for i := 1; i < 25; i++ {
		mergeBomb += fmt.Sprintf("a%d: &a%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
		listBomb += fmt.Sprintf("x%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	for name, tc := range map[string]struct{ src, want string }{
		"merge bomb":  {mergeBomb + "buckets: [*a24, *a24]\n", `duplicate bucket name "abc"`},
		"list bomb":   {listBomb + "stores: *l24\n", "stores[9]: expected a mapping"},
		"deep list":   {strings.Repeat("[", 3000) + strings.Repeat("]", 3000), "got a list"},
		"deep map":    {strings.Repeat("{a: ", 1000) + "1" + strings.Repeat("}", 1000), `unknown key "a"`},
		"huge key":    {strings.Repeat("k", 100000) + ": 1\n", "unknown key"},
		"huge string": {"buckets: [{name: " + strings.Repeat("b", 100000) + "}]\n", "must be 3 to 63 characters"},
	} {
		_, err := Parse("policy.yaml", []byte(tc.src), AllFeatures())
		var list ErrorList
		if !errors.As(err, &list) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %.300v, want an ErrorList with %q", name, err, tc.want)
			continue
		}
		for _, e := range list {
			if len(e.Error()) > 1000 {
				t.Errorf("%s: error message of %d bytes", name, len(e.Error()))
			}
		}
	}
}
