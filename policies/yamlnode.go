package policies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// pos is a 1-based line and column; the zero pos means "no position".
type pos struct{ line, col int }

// entry is one key of a mapping, with its value resolved through anchors,
// aliases and tags.
type entry struct {
	key  string
	kpos pos
	val  ast.Node // nil for an empty value
	vpos pos
}

// decoder walks the YAML tree into a Policy, collecting errors.
type decoder struct {
	file    string
	feat    Features
	errs    ErrorList
	anchors map[string][]*ast.AnchorNode // by name, in document order
	memo    map[ast.Node][]entry         // flattened mappings (merge keys applied)
	busy    map[ast.Node]bool            // mappings being flattened (cycle check)
}

func (d *decoder) errorf(p pos, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: p.line, Column: p.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// unsupported reports a well-formed feature that this build cannot do.
func (d *decoder) unsupported(p pos, path, what string, supported []string) {
	msg := what + " is not supported yet"
	if len(supported) > 0 {
		msg += " (this build supports: " + strings.Join(supported, ", ") + ")"
	}
	d.errorf(p, path, "%s", msg)
}

// posOf returns where a node starts: a block mapping at its first key, a
// flow mapping or a list at its bracket or dash, a scalar at its token.
func posOf(n ast.Node) pos {
	switch m := n.(type) {
	case nil:
		return pos{}
	case *ast.MappingNode:
		if m == nil {
			return pos{}
		}
		if !m.IsFlowStyle && len(m.Values) > 0 && m.Values[0] != nil && m.Values[0].Key != nil {
			return tokenPos(m.Values[0].Key)
		}
	case *ast.MappingValueNode:
		if m == nil || m.Key == nil {
			return pos{}
		}
		return tokenPos(m.Key)
	}
	return tokenPos(n)
}

func tokenPos(n ast.Node) pos {
	tk := n.GetToken()
	if tk == nil || tk.Position == nil || tk.Position.Line < 1 || tk.Position.Column < 1 {
		return pos{}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

// orPos returns p, or fallback when p is unknown.
func orPos(p, fallback pos) pos {
	if p.line < 1 {
		return fallback
	}
	return p
}

// collectAnchors records every anchor so aliases can be resolved.
func (d *decoder) collectAnchors(body ast.Node) {
	for _, n := range ast.Filter(ast.AnchorType, body) {
		a, ok := n.(*ast.AnchorNode)
		if !ok || a.Name == nil {
			continue
		}
		name := a.Name.GetToken().Value
		d.anchors[name] = append(d.anchors[name], a)
	}
}

func offsetOf(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Offset
	}
	return 0
}

// resolve looks through anchors, tags and aliases to the node that holds
// the value. An unknown alias is reported at p and resolves to nil.
func (d *decoder) resolve(n ast.Node, p pos, path string) ast.Node {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil {
				return nil
			}
			name := v.Value.GetToken().Value
			var target *ast.AnchorNode
			for _, a := range d.anchors[name] { // the last anchor before the alias wins
				if offsetOf(a) < offsetOf(v) {
					target = a
				}
			}
			if target == nil {
				d.errorf(orPos(tokenPos(v), p), path, "unknown alias *%s (no anchor &%s before it)", name, name)
				return nil
			}
			n = target.Value
		case *ast.NullNode:
			return nil
		default:
			return n
		}
	}
	d.errorf(p, path, "anchors and aliases nest too deeply")
	return nil
}

// value resolves n and returns it with the position to report it at: the
// alias itself when the value came through one.
func (d *decoder) value(n ast.Node, fallback pos, path string) (ast.Node, pos) {
	p := orPos(posOf(n), fallback)
	r := d.resolve(n, p, path)
	if _, alias := n.(*ast.AliasNode); !alias && r != nil {
		p = orPos(posOf(r), p)
	}
	return r, p
}

// describe names a value for "got ..." in messages.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil:
		return "an empty value"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "the string " + quote(scalarText(v))
	case *ast.BoolNode:
		return "the boolean " + scalarText(v)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "the number " + scalarText(v)
	}
	return "a " + n.Type().String() + " node"
}

// quote quotes s for a message, cut short if long.
func quote(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "..."
	}
	return fmt.Sprintf("%q", s)
}

// scalarText is the text of a scalar node ("" for anything else).
func scalarText(n ast.Node) string {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value
	case *ast.LiteralNode:
		if v.Value != nil {
			return v.Value.Value
		}
		return ""
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value
		}
	}
	return ""
}

func isScalar(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return true
	}
	return false
}

// mappingValues returns the key/value pairs of a mapping node.
func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

// entries flattens a mapping: its own keys, then keys brought in by merge
// keys (<<) that it does not set itself. Results are memoized, so each
// mapping is flattened once however often it is referenced.
func (d *decoder) entries(n ast.Node, path string) []entry {
	if es, ok := d.memo[n]; ok {
		return es
	}
	values, _ := mappingValues(n)
	if d.busy[n] {
		d.errorf(posOf(n), path, "merge key (<<) includes the mapping that contains it")
		return nil
	}
	d.busy[n] = true
	defer delete(d.busy, n)

	var own, merged []entry
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		kpos := tokenPos(mv.Key)
		if mv.Key.IsMergeKey() {
			merged = append(merged, d.mergeEntries(mv.Value, kpos, path)...)
			continue
		}
		key := d.resolve(mv.Key, kpos, path)
		if !isScalar(key) {
			d.errorf(kpos, path, "a key must be a plain string, got %s", describe(key))
			continue
		}
		e := entry{key: scalarText(key), kpos: kpos}
		e.val, e.vpos = d.value(mv.Value, kpos, join(path, short(e.key)))
		own = append(own, e)
	}
	have := make(map[string]bool, len(own))
	for _, e := range own {
		have[e.key] = true
	}
	for _, e := range merged {
		if !have[e.key] {
			have[e.key] = true
			own = append(own, e)
		}
	}
	d.memo[n] = own
	return own
}

func (d *decoder) mergeEntries(v ast.Node, kpos pos, path string) []entry {
	src, p := d.value(v, kpos, path)
	var sources []ast.Node
	if seq, ok := src.(*ast.SequenceNode); ok {
		for _, item := range seq.Values {
			r, _ := d.value(item, p, path)
			sources = append(sources, r)
		}
	} else {
		sources = []ast.Node{src}
	}
	var out []entry
	have := map[string]bool{}
	for _, s := range sources {
		if _, ok := mappingValues(s); !ok {
			d.errorf(p, path, "merge key (<<) needs a mapping or a list of mappings, got %s", describe(s))
			continue
		}
		for _, e := range d.entries(s, path) { // an earlier source wins
			if !have[e.key] {
				have[e.key] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// fields reads a mapping whose keys must be among allowed. An empty value
// reads as an empty mapping. ok is false when n is not a mapping (reported).
func (d *decoder) fields(n ast.Node, p pos, path string, allowed []string) (map[string]entry, bool) {
	if n == nil {
		return map[string]entry{}, true
	}
	if _, ok := mappingValues(n); !ok {
		d.errorf(p, path, "expected a mapping with keys %s, got %s", strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	out := map[string]entry{}
	for _, e := range d.entries(n, path) {
		if !slices.Contains(allowed, e.key) {
			d.unknownKey(e, path, allowed)
			continue
		}
		out[e.key] = e
	}
	return out, true
}

// secretKeys are keys people may try for inline secrets.
var secretKeys = map[string]string{
	"access_key": "access_key_env", "secret_key": "secret_key_env", "session_token": "session_token_env",
	"account_key": "account_key_env", "sas_token": "sas_token_env", "password": "a *_env key",
}

// fileForm is ", or a file holding it with X_file" for an env key that
// has a file form.
func fileForm(envKey string) string {
	f := strings.TrimSuffix(envKey, "_env") + "_file"
	if !slices.Contains(allCredentialKeys, f) {
		return ""
	}
	return ", or a file holding it with " + f
}

func (d *decoder) unknownKey(e entry, path string, allowed []string) {
	p := join(path, short(e.key))
	if env, ok := secretKeys[e.key]; ok && strings.HasSuffix(path, "credentials") {
		d.errorf(e.kpos, p, "secrets are never written in the policy file; name an environment variable with %s%s", env, fileForm(env))
		return
	}
	d.errorf(e.kpos, p, "unknown key %s %s", quote(e.key), expected(e.key, allowed))
}

// short cuts a key from the file down to a length fit for a message.
func short(key string) string {
	if r := []rune(key); len(r) > 40 {
		return string(r[:40]) + "..."
	}
	return key
}

// join appends a key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index appends a list index to a path.
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// list reads a list; an empty value reads as an empty list.
func (d *decoder) list(n ast.Node, p pos, path, what string) ([]ast.Node, bool) {
	switch v := n.(type) {
	case nil:
		return nil, true
	case *ast.SequenceNode:
		return v.Values, true
	}
	d.errorf(p, path, "expected a list of %s, got %s", what, describe(n))
	return nil, false
}

// str reads a scalar as a string. Numbers and booleans read as their text,
// so `bucket: 2024` is the name "2024".
func (d *decoder) str(e entry, path, what string) (string, bool) {
	if !isScalar(e.val) {
		d.errorf(e.vpos, path, "expected %s, got %s", what, describe(e.val))
		return "", false
	}
	return scalarText(e.val), true
}

func (d *decoder) boolean(e entry, path string) (bool, bool) {
	b, ok := e.val.(*ast.BoolNode)
	if !ok {
		d.errorf(e.vpos, path, "expected true or false, got %s", describe(e.val))
		return false, false
	}
	return b.Value, true
}

func (d *decoder) integer(e entry, path string) (int64, bool) {
	if n, ok := e.val.(*ast.IntegerNode); ok {
		switch v := n.Value.(type) {
		case int64:
			return v, true
		case uint64:
			if v <= 1<<62 {
				return int64(v), true
			}
		}
		d.errorf(e.vpos, path, "number %s is out of range", scalarText(e.val))
		return 0, false
	}
	d.errorf(e.vpos, path, "expected a whole number, got %s", describe(e.val))
	return 0, false
}

// enum reads a string that must be one of choices.
func (d *decoder) enum(e entry, path, what string, choices []string) (string, bool) {
	s, ok := d.str(e, path, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, s) {
		msg := "unknown " + what + " " + quote(s) + " " + oneOf(choices)
		if sug := suggest(s, choices); sug != "" {
			msg = strings.TrimSuffix(msg, ")") + fmt.Sprintf("; did you mean %q?)", sug)
		}
		d.errorf(e.vpos, path, "%s", msg)
		return "", false
	}
	return s, true
}
