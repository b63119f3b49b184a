package gateway

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sampleRequest builds a request from rt's predicates alone: its method
// and level, its subresource, the parameters and headers it needs.
func sampleRequest(rt *s3Route) *http.Request {
	q := url.Values{}
	if rt.sub != "" && rt.sub != anySub {
		v := ""
		if rt.sub == "versionId" {
			v = "v1"
		}
		q.Set(rt.sub, v)
	}
	for _, p := range rt.query {
		v := p.value
		if v == "" {
			v = "1"
		}
		q.Set(p.key, v)
	}
	target := [...]string{levelService: "/", levelBucket: "/b", levelObject: "/b/k"}[rt.level]
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	r := httptest.NewRequest(rt.method, target, nil)
	for _, h := range rt.header {
		v := "/b/src"
		if h.value != "" {
			v = h.value + "; boundary=x"
		}
		r.Header.Set(h.name, v)
	}
	return r
}

// TestRouteTable enumerates s3Routes: the request built from each entry's
// predicates is routed to that entry and taken by no other, and no two
// entries could take the same request (a pair whose predicates do not
// exclude each other fails, whether or not a sample shows it).
func TestRouteTable(t *testing.T) {
	s := &Server{}
	for i := range s3Routes {
		rt := &s3Routes[i]
		if rt.op == "" || rt.method == "" || rt.handle == nil {
			t.Errorf("entry %d (%s): needs an operation name, a method and a handler", i, rt.op)
		}
		if rt.sub != "" && rt.sub != anySub && !slices.ContainsFunc(subresourceOrder[rt.level], func(k subKey) bool {
			return k.key == rt.sub && (k.method == "" || k.method == rt.method)
		}) {
			t.Errorf("%s: subresource %q is not one of the %s level's for %s", rt.op, rt.sub, rt.level, rt.method)
		}
		r := sampleRequest(rt)
		bucket, key := s.resolve(r)
		q := r.URL.Query()
		if got := findRoute(r, q, bucket, key); got != rt {
			name := "nothing"
			if got != nil {
				name = got.op
			}
			t.Errorf("%s %s: routed to %s, want entry %d (%s)", r.Method, r.URL, name, i, rt.op)
		}
		if op, _ := s.route(r, q, bucket, key); op != rt.op {
			t.Errorf("%s %s: op %s, want %s", r.Method, r.URL, op, rt.op)
		}
		lv, sub := levelOf(bucket, key), subresourceOf(levelOf(bucket, key), r.Method, q, r.Header)
		for j := range s3Routes {
			if j != i && s3Routes[j].matches(r.Method, lv, sub, q, r.Header) {
				t.Errorf("%s %s (built for %s) is taken by %s too", r.Method, r.URL, rt.op, s3Routes[j].op)
			}
		}
		for j := i + 1; j < len(s3Routes); j++ {
			if why := overlap(rt, &s3Routes[j]); why != "" {
				t.Errorf("%s and %s may take the same request: %s", rt.op, s3Routes[j].op, why)
			}
		}
	}
}

// overlap returns "" when no request can match both a and b (their
// predicates contradict), else why it cannot tell them apart.
func overlap(a, b *s3Route) string {
	if a.method != b.method || a.level != b.level {
		return ""
	}
	if a.sub != b.sub && a.sub != anySub && b.sub != anySub {
		return ""
	}
	if excludes(a, b) || excludes(b, a) {
		return ""
	}
	return "same method, level and subresource, and no parameter or header needed by one is refused by the other"
}

// excludes reports whether something a needs is something b refuses.
func excludes(a, b *s3Route) bool {
	for _, p := range a.query {
		if slices.Contains(b.noQuery, p.key) || b.only != nil && !onlyParams(url.Values{p.key: {""}}, b.only) {
			return true
		}
		for _, bp := range b.query {
			if bp.key == p.key && bp.value != "" && p.value != "" && bp.value != p.value {
				return true
			}
		}
	}
	if a.sub != "" && a.sub != anySub && b.only != nil && !onlyParams(url.Values{a.sub: {""}}, b.only) {
		return true
	}
	for _, h := range a.header {
		if slices.ContainsFunc(b.noHeader, func(n string) bool { return http.CanonicalHeaderKey(n) == http.CanonicalHeaderKey(h.name) }) {
			return true
		}
	}
	return false
}

// TestRouteTableDocumented checks docs/s3-compatibility.md's table of
// operations against s3Routes, both ways: every name a "supported" row
// lists is an operation of the table, and every operation of the table is
// listed. A row's first cell names operations as identifiers separated by
// "," or "/" (text in parentheses or backquotes is a note).
func TestRouteTableDocumented(t *testing.T) {
	f, err := os.Open("../docs/s3-compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ident := regexp.MustCompile(`^[A-Z][a-z]+[A-Za-z0-9]*$`)
	notes := regexp.MustCompile("`[^`]*`|\\([^)]*\\)")
	documented := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Operations"
			continue
		case !in || !strings.HasPrefix(line, "| "):
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[2]) != "supported" {
			continue
		}
		for item := range strings.FieldsFuncSeq(notes.ReplaceAllString(cells[1], ""), func(r rune) bool { return r == ',' || r == '/' }) {
			if name := strings.TrimSpace(item); ident.MatchString(name) {
				documented[name] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(documented) == 0 {
		t.Fatal("no operation found in docs/s3-compatibility.md's Operations table")
	}
	routed := map[string]bool{}
	for _, rt := range s3Routes {
		if routed[rt.op] {
			continue
		}
		routed[rt.op] = true
		if !documented[rt.op] {
			t.Errorf("%s is routed but not listed in docs/s3-compatibility.md", rt.op)
		}
	}
	for name := range documented {
		if !routed[name] {
			t.Errorf("docs/s3-compatibility.md lists %s as supported, and no entry of s3Routes is named so", name)
		}
	}
}
