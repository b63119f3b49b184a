package versiontest

import (
	"fmt"
	"strings"
	"testing"
)

// The model's listings are the expectations of every listing check: keys
// ascending, newest first, prefixes rolled up in key order, a null version
// replacing the previous null one.
func TestModelOrder(t *testing.T) {
	m := newModel()
	m.push("b/1", entry{ID: "v1"})
	m.push("a", entry{ID: "v1"})
	m.push("b0", entry{ID: nullID})
	m.push("a", entry{ID: "m1", Marker: true})
	m.push("b-x", entry{ID: "v1"})
	m.push("b0", entry{ID: "v2"})
	m.push("b0", entry{ID: nullID, Marker: true}) // replaces the null version
	m.pushOldest("c", entry{ID: nullID})
	m.push("c", entry{ID: "v1"})
	for _, c := range []struct {
		prefix, delim, want string
	}{
		{"", "", "a@m1(marker)* a@v1 b-x@v1* b/1@v1* b0@null(marker)* b0@v2 c@v1* c@null"},
		{"", "/", "a@m1(marker)* a@v1 b-x@v1* b/(prefix) b0@null(marker)* b0@v2 c@v1* c@null"},
		{"b", "/", "b-x@v1* b/(prefix) b0@null(marker)* b0@v2"},
		{"b/", "/", "b/1@v1*"},
	} {
		if got := fmt.Sprint(m.list(c.prefix, c.delim)); got != "["+c.want+"]" {
			t.Errorf("list(%q, %q) = %s, want [%s]", c.prefix, c.delim, got, c.want)
		}
	}
	if got := strings.Join(m.current("", "/"), " "); got != "b-x b/ c" {
		t.Errorf("current = %s", got)
	}
	m.drop("b/1", "v1")
	if got := strings.Join(m.current("", "/"), " "); got != "b-x c" {
		t.Errorf("current after dropping b/1 = %s", got)
	}
}
