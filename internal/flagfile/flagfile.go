// Package flagfile sets a command's flags from a YAML file whose keys are
// the long flag names (`listen: 127.0.0.1:9000`, `join: [a, b]`). The flag
// set is the only list of keys: a flag added to the command is a key of the
// file without further work. A flag given on the command line wins over
// the file. Errors name file:line:column, the key and what was expected,
// in the style of the policy file's errors (package policies).
package flagfile

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	suggestpkg "github.com/fedgate/fedgate/internal/suggest"

	"github.com/fedgate/fedgate/policies"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/spf13/pflag"
)

// Error is one problem in a flag file: the policy file's error type, its
// Path the flag's name ("" for the document). Errors format as
// "file:line:column: key: msg".
type Error = policies.Error

// ErrorList is every problem of one file, in file order. Load returns a
// non-empty ErrorList or nil.
type ErrorList = policies.ErrorList

// Options adjust Load.
type Options struct {
	// Exclude names flags that cannot be set from the file (the flag that
	// names the file itself, "help").
	Exclude []string
}

// Result says what Load did.
type Result struct {
	Set        []string // keys whose value the file set, in file order
	Overridden []string // keys of the file that the command line overrode
}

// Load reads the YAML file at path and sets every flag of fs it names
// that the command line did not set (fs.Changed). Call it after fs was
// parsed. Nothing is set unless the whole file is valid.
func Load(path string, fs *pflag.FlagSet, o Options) (Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	return Parse(path, data, fs, o)
}

// Parse is Load on data already read; name is used in errors.
func Parse(name string, data []byte, fs *pflag.FlagSet, o Options) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil { // odd input must not take the process down
			res, err = Result{}, ErrorList{{File: name, Msg: fmt.Sprintf("cannot parse YAML: internal parser failure: %v", r)}}
		}
	}()
	d := &decoder{file: name, fs: fs, exclude: o.Exclude}
	file, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		return Result{}, ErrorList{d.syntaxError(perr)}
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, ok := doc.Body.(*ast.DirectiveNode); ok {
			continue
		}
		if body != nil {
			d.errorf(doc.Body, "", "a server config file holds one YAML document; this is a second one")
			break
		}
		body = doc.Body
	}
	var sets []setting
	if body != nil {
		sets = d.document(body)
	}
	if len(d.errs) > 0 {
		return Result{}, d.errs
	}
	for _, s := range sets {
		if fs.Changed(s.name) {
			res.Overridden = append(res.Overridden, s.name)
			continue
		}
		if err := s.apply(fs); err != nil { // checked in document; a flag's own Set may still refuse
			d.errs = append(d.errs, &Error{File: name, Line: s.line, Column: s.col, Path: s.name, Msg: err.Error()})
			continue
		}
		res.Set = append(res.Set, s.name)
	}
	if len(d.errs) > 0 {
		return res, d.errs
	}
	return res, nil
}

// setting is one checked key of the file, applied once all are checked.
type setting struct {
	name      string
	line, col int
	list      []string // a slice flag's new value
	isList    bool
	value     string
}

func (s setting) apply(fs *pflag.FlagSet) error {
	f := fs.Lookup(s.name)
	if s.isList {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			if err := sv.Replace(s.list); err != nil {
				return err
			}
			f.Changed = true
			return nil
		}
		return fs.Set(s.name, strings.Join(s.list, ","))
	}
	return fs.Set(s.name, s.value)
}

type decoder struct {
	file    string
	fs      *pflag.FlagSet
	exclude []string
	errs    ErrorList
}

func (d *decoder) errorf(n ast.Node, key, format string, args ...any) {
	line, col := position(n)
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Column: col, Path: key, Msg: fmt.Sprintf(format, args...)})
}

func position(n ast.Node) (int, int) {
	if n == nil {
		return 0, 0
	}
	switch m := n.(type) {
	case *ast.MappingValueNode:
		if m.Key != nil {
			n = m.Key
		}
	case *ast.MappingNode:
		if !m.IsFlowStyle && len(m.Values) > 0 && m.Values[0] != nil && m.Values[0].Key != nil {
			n = m.Values[0].Key
		}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil || tk.Position.Line < 1 || tk.Position.Column < 1 {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

func (d *decoder) syntaxError(err error) *Error { return policies.SyntaxError(d.file, err) }

// unwrap looks through anchors and tags; aliases are refused (a server
// config has no use for them, and they would hide where a value is from).
func (d *decoder) unwrap(n ast.Node, key string) (ast.Node, bool) {
	for range 16 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			d.errorf(v, key, "aliases are not supported in a server config file; write the value")
			return nil, false
		default:
			return n, true
		}
	}
	return n, true
}

// document checks the top-level mapping and returns what to set.
func (d *decoder) document(body ast.Node) []setting {
	body, ok := d.unwrap(body, "")
	if !ok {
		return nil
	}
	var values []*ast.MappingValueNode
	switch m := body.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	case *ast.NullNode, nil:
		return nil
	default:
		d.errorf(body, "", "want a mapping of flag names to values (listen: 127.0.0.1:9000), got %s", describe(body))
		return nil
	}
	names := d.names()
	seen := map[string]*ast.MappingValueNode{}
	var out []setting
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			d.errorf(mv, "", "merge keys (<<) are not supported in a server config file")
			continue
		}
		key := mv.Key.GetToken().Value
		if prev, dup := seen[key]; dup {
			line, _ := position(prev)
			d.errorf(mv, key, "duplicate key (first at line %d)", line)
			continue
		}
		seen[key] = mv
		if slices.Contains(d.exclude, key) {
			d.errorf(mv, key, "cannot be set in this file (give it on the command line)")
			continue
		}
		f := d.fs.Lookup(key)
		if f == nil {
			msg := fmt.Sprintf("unknown key %q: keys are the long flag names of the command", key)
			if strings.HasPrefix(key, "-") {
				msg = fmt.Sprintf("unknown key %q: write the flag name without dashes (%s)", key, strings.TrimLeft(key, "-"))
			} else if s := suggest(key, names); s != "" {
				msg = fmt.Sprintf("unknown key %q (did you mean %q?)", key, s)
			}
			d.errorf(mv, key, "%s", msg)
			continue
		}
		if s, ok := d.value(f, mv); ok {
			out = append(out, s)
		}
	}
	return out
}

// names is every key the file may use.
func (d *decoder) names() []string {
	var names []string
	d.fs.VisitAll(func(f *pflag.Flag) {
		if !slices.Contains(d.exclude, f.Name) {
			names = append(names, f.Name)
		}
	})
	return names
}

// value checks one key's value against its flag's type.
func (d *decoder) value(f *pflag.Flag, mv *ast.MappingValueNode) (setting, bool) {
	key := f.Name
	line, col := position(mv.Value)
	if line == 0 {
		line, col = position(mv)
	}
	s := setting{name: key, line: line, col: col}
	v, ok := d.unwrap(mv.Value, key)
	if !ok {
		return s, false
	}
	at := mv.Value
	if _, null := v.(*ast.NullNode); null || v == nil {
		at = mv
		d.errorf(at, key, "no value; want %s (remove the key to keep the default)", want(f))
		return s, false
	}
	bad := func() (setting, bool) {
		d.errorf(at, key, "want %s, got %s", want(f), describe(v))
		return s, false
	}
	typ := f.Value.Type()
	switch {
	case isList(f):
		switch l := v.(type) {
		case *ast.SequenceNode:
			s.isList, s.list = true, []string{}
			for _, item := range l.Values {
				iv, ok := d.unwrap(item, key)
				if !ok {
					return s, false
				}
				text, ok := scalar(iv, true)
				if !ok {
					d.errorf(item, key, "want %s, got a list holding %s", want(f), describe(iv))
					return s, false
				}
				s.list = append(s.list, text)
			}
		case *ast.StringNode:
			s.isList = true
			for _, p := range strings.Split(l.Value, ",") {
				if p = strings.TrimSpace(p); p != "" {
					s.list = append(s.list, p)
				}
			}
		default:
			return bad()
		}
		return s, true
	case typ == "bool":
		b, ok := v.(*ast.BoolNode)
		if !ok {
			return bad()
		}
		s.value = strconv.FormatBool(b.Value)
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint"):
		n, ok := v.(*ast.IntegerNode)
		if !ok {
			return bad()
		}
		s.value = n.GetToken().Value
	case strings.HasPrefix(typ, "float"):
		switch v.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			s.value = v.GetToken().Value
		default:
			return bad()
		}
	case typ == "duration":
		str, ok := v.(*ast.StringNode)
		if !ok {
			return bad()
		}
		if _, err := time.ParseDuration(str.Value); err != nil {
			d.errorf(at, key, "want %s, got %q", want(f), str.Value)
			return s, false
		}
		s.value = str.Value
	default: // string and any other single-value flag: its Set checks it
		text, ok := scalar(v, false)
		if !ok {
			return bad()
		}
		s.value = text
	}
	// Check the value now with a throwaway copy of the flag, so a bad value
	// is reported with the others and nothing is set.
	if err := checkSet(f, s.value); err != nil {
		d.errorf(at, key, "%q: %v (want %s)", s.value, err, want(f))
		return s, false
	}
	return s, true
}

// checkSet parses text with a fresh flag set holding a flag of f's type,
// for the types pflag knows; other types are checked when applied.
func checkSet(f *pflag.Flag, text string) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	switch f.Value.Type() {
	case "int":
		fs.Int("v", 0, "")
	case "int64":
		fs.Int64("v", 0, "")
	case "uint":
		fs.Uint("v", 0, "")
	case "uint64":
		fs.Uint64("v", 0, "")
	case "float64":
		fs.Float64("v", 0, "")
	default:
		return nil
	}
	err := fs.Set("v", text)
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

func isList(f *pflag.Flag) bool {
	_, ok := f.Value.(pflag.SliceValue)
	return ok || strings.HasSuffix(f.Value.Type(), "Slice") || strings.HasSuffix(f.Value.Type(), "Array")
}

// scalar returns the text of a string or number (and, when anyScalar, a
// bool) node as written.
func scalar(n ast.Node, anyScalar bool) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.IntegerNode, *ast.FloatNode:
		return v.GetToken().Value, true
	case *ast.BoolNode:
		if anyScalar {
			return v.GetToken().Value, true
		}
	}
	return "", false
}

// want says what a flag's value must be.
func want(f *pflag.Flag) string {
	typ := f.Value.Type()
	switch {
	case isList(f):
		return "a list of strings ([a, b]) or one comma-separated string"
	case typ == "bool":
		return "true or false"
	case strings.HasPrefix(typ, "uint"):
		return "a whole number ≥ 0"
	case strings.HasPrefix(typ, "int"):
		return "a whole number"
	case strings.HasPrefix(typ, "float"):
		return "a number"
	case typ == "duration":
		return "a duration like 30s, 5m or 1h30m"
	}
	return "a string"
}

// describe names a YAML node's kind for an error message.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case *ast.StringNode:
		return fmt.Sprintf("the string %q", v.Value)
	case *ast.IntegerNode, *ast.FloatNode:
		return "the number " + v.GetToken().Value
	case *ast.BoolNode:
		return "the boolean " + v.GetToken().Value + " (quote it for a string)"
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.NullNode:
		return "nothing"
	}
	return "a " + strings.ToLower(n.Type().String())
}

func suggest(s string, candidates []string) string { return suggestpkg.Closest(s, candidates) }
