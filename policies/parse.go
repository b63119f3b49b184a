package policies

import (
	"errors"
	"fmt"
	"os"
	"strings"

	yaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads and parses the policy file at path; see Parse. An unreadable
// file gives the os error (errors.Is(err, fs.ErrNotExist) works).
func Load(path string, f Features) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return Parse(path, data, f)
}

// Parse reads a policy file and checks it against the schema and against
// f. filename is used in error messages only. On any problem it returns a
// nil Policy and an ErrorList of every problem found, sorted by position.
// An empty file, or one of only comments, is a valid empty policy.
func Parse(filename string, data []byte, f Features) (p *Policy, err error) {
	defer func() {
		// The YAML library must not take the process down on odd input.
		if r := recover(); r != nil {
			p, err = nil, ErrorList{{File: filename, Msg: fmt.Sprintf("cannot parse YAML: internal parser failure: %v", r)}}
		}
	}()
	d := &decoder{
		file:    filename,
		feat:    f,
		anchors: map[string][]*ast.AnchorNode{},
		memo:    map[ast.Node][]entry{},
		busy:    map[ast.Node]bool{},
	}
	file, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		return nil, ErrorList{d.syntaxError(perr)}
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
			d.errorf(posOf(doc.Body), "", "a policy file holds one YAML document; this is a second one")
			break
		}
		body = doc.Body
	}
	pol := &Policy{File: filename, Routing: Routing{Prefer: PreferCheapest}}
	if body != nil {
		d.collectAnchors(body)
		d.document(body, pol)
	}
	if len(d.errs) > 0 {
		return nil, sortErrors(d.errs)
	}
	pol.stores = make(map[string]int, len(pol.Stores))
	for i, s := range pol.Stores {
		pol.stores[s.Name] = i
	}
	pol.buckets = make(map[string]int, len(pol.Buckets))
	for i, b := range pol.Buckets {
		pol.buckets[b.Name] = i
	}
	return pol, nil
}

// syntaxError turns a YAML parser error into an *Error at its token.
func (d *decoder) syntaxError(err error) *Error { return SyntaxError(d.file, err) }

// SyntaxError turns an error of the goccy/go-yaml parser about file into
// an *Error at its token (whole-file when it has none). Other YAML files
// of fedgate (the server config file) report their errors with it too.
func SyntaxError(file string, err error) *Error {
	e := &Error{File: file, Msg: "invalid YAML: " + err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		e.Msg = "invalid YAML: " + ye.GetMessage()
		if strings.Contains(e.Msg, "\t") {
			e.Msg = strings.ReplaceAll(e.Msg, "\t", `\t`) + " (indent with spaces, not tabs)"
		}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 && tk.Position.Column > 0 {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	return e
}

var topKeys = []string{"regions", "peering", "stores", "buckets", "routing", "egress", "defaults"}

// document decodes the top-level mapping, then checks what refers to what.
func (d *decoder) document(body ast.Node, pol *Policy) {
	body, p := d.value(body, pos{1, 1}, "")
	m, ok := d.fields(body, p, "", topKeys)
	if !ok {
		return
	}
	r := &refs{}
	if e, ok := m["regions"]; ok {
		pol.Regions = d.regions(e)
	}
	if e, ok := m["peering"]; ok {
		pol.Peering = d.peering(e)
	}
	if e, ok := m["stores"]; ok {
		pol.Stores = d.stores(e)
	}
	if e, ok := m["buckets"]; ok {
		pol.Buckets = d.buckets(e, r)
	}
	if e, ok := m["routing"]; ok {
		pol.Routing = d.routing(e)
	}
	if e, ok := m["egress"]; ok {
		pol.Egress = d.egress(e, r)
	}
	if e, ok := m["defaults"]; ok {
		pol.Defaults = d.defaults(e, r)
	}
	d.checkRefs(pol, r)
}
