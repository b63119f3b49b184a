package policies

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Diff describes what changes from old to next, one line per change:
// "+ bucket scratch", "- store old-nas",
// "~ bucket imagenet: cache.ttl: 0s -> 24h0m0s". Named lists (regions,
// stores, buckets) are matched by name, so reordering them is no change.
// A nil policy is the embedded defaults (nothing declared).
func Diff(old, next *Policy) []string {
	if old == nil {
		old = &Policy{}
	}
	if next == nil {
		next = &Policy{}
	}
	var out []string
	named(&out, "region", old.Regions, next.Regions, func(r Region) string { return r.Name })
	named(&out, "store", old.Stores, next.Stores, func(s Store) string { return s.Name })
	named(&out, "bucket", old.Buckets, next.Buckets, func(b Bucket) string { return b.Name })
	for _, part := range []struct {
		name string
		a, b any
	}{{"defaults", old.Defaults, next.Defaults}, {"routing", old.Routing, next.Routing}, {"egress", old.Egress, next.Egress}} {
		var changes []string
		diffValue(&changes, "", reflect.ValueOf(part.a), reflect.ValueOf(part.b))
		for _, c := range changes {
			out = append(out, "~ "+part.name+c)
		}
	}
	return out
}

func named[T any](out *[]string, kind string, old, next []T, name func(T) string) {
	before := map[string]T{}
	for _, v := range old {
		before[name(v)] = v
	}
	seen := map[string]bool{}
	for _, v := range next {
		n := name(v)
		seen[n] = true
		prev, ok := before[n]
		if !ok {
			*out = append(*out, fmt.Sprintf("+ %s %s", kind, n))
			continue
		}
		var changes []string
		diffValue(&changes, "", reflect.ValueOf(prev), reflect.ValueOf(v))
		for _, c := range changes {
			*out = append(*out, fmt.Sprintf("~ %s %s%s", kind, n, c))
		}
	}
	for _, v := range old {
		if n := name(v); !seen[n] {
			*out = append(*out, fmt.Sprintf("- %s %s", kind, n))
		}
	}
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	stringerType = reflect.TypeOf((*fmt.Stringer)(nil)).Elem()
)

// diffValue appends ": path: a -> b" for every leaf that differs.
func diffValue(out *[]string, path string, a, b reflect.Value) {
	if a.Kind() == reflect.Pointer || b.Kind() == reflect.Pointer {
		switch {
		case a.IsNil() && b.IsNil():
			return
		case a.IsNil() || b.IsNil():
			*out = append(*out, fmt.Sprintf(": %s: %s -> %s", fieldPath(path), show(a), show(b)))
			return
		}
		diffValue(out, path, a.Elem(), b.Elem())
		return
	}
	if a.Kind() == reflect.Struct && !a.Type().Implements(stringerType) {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			diffValue(out, path+"."+snake(f.Name), a.Field(i), b.Field(i))
		}
		return
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, fmt.Sprintf(": %s: %s -> %s", fieldPath(path), show(a), show(b)))
	}
}

func fieldPath(p string) string { return strings.TrimPrefix(p, ".") }

// show prints a value the way a policy file would say it.
func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "(none)"
		}
		v = v.Elem()
	}
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	if v.Type().Implements(stringerType) {
		return v.Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		return v.String()
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = show(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && !v.Field(i).IsZero() {
				parts = append(parts, snake(f.Name)+": "+show(v.Field(i)))
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// snake turns a Go field name into the policy key style (PathStyle ->
// path_style, TTL -> ttl).
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && (rs[i-1] < 'A' || rs[i-1] > 'Z' || i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z') {
			b.WriteByte('_')
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
