// Package deploycheck checks the Terraform modules under terraform/ offline:
// no provider is downloaded and no cloud is called.
//
// It reads a module's HCL with hashicorp/hcl/v2 ([LoadModule]) and
// evaluates the part of it that needs no provider ([Module.Evaluate]): the
// variables (types with optional attributes and defaults, validation
// blocks), the locals, the outputs (with their preconditions) and the
// arguments of module calls. Anything that refers to a resource, a data
// source or another module's outputs is unknown, the way it is during
// `terraform plan` before anything exists. Templates are rendered by
// templatefile with hcl's own template engine, the language Terraform uses.
//
// That is enough to follow the two-region example's inputs through
// region-aws and region-gcp into node-config, the provider-less module that
// renders every node's command line, systemd unit, environment file,
// policy file and cloud-init, and to render those with the example's
// values. [Result.ResourceArgs] evaluates a resource's arguments the same
// way: region-k8s's helm_release, whose values are compared with the
// chart's values.yaml (deploy/helm/fedgate). The tests in this package then
// check what was rendered with the real fedgate binary (flag parsing, a
// 3-node region formed from the rendered units, `fedgate policy validate`),
// and, where OpenTofu is installed, compare the evaluation of node-config
// with `tofu apply`, and run region-k8s through `tofu validate`, `tofu plan`
// and the chart's rendering with the real hashicorp/helm provider (built
// from its source by scripts/deploytools.sh: no registry is reached).
//
// The functions it knows are the subset of Terraform's that the modules use
// ([Functions]); an expression that calls another fails loudly.
package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Module is one Terraform module directory: its *.tf files, parsed.
type Module struct {
	Dir       string
	Variables map[string]*Variable
	Locals    map[string]*hcl.Attribute
	Outputs   map[string]*Output
	Calls     map[string]*Call
	// Resources lists "TYPE.NAME" for every resource and "data.TYPE.NAME"
	// for every data source.
	Resources []string
	// ResourceBodies maps each entry of Resources to its block's body
	// ([Result.ResourceArgs] evaluates its arguments).
	ResourceBodies map[string]*hclsyntax.Body
	// Providers maps a required_providers name to its source address.
	Providers map[string]string
	// Files maps each file's base name to its parsed form.
	Files map[string]*hcl.File
}

// Variable is one variable block.
type Variable struct {
	Name        string
	Description string
	HasType     bool
	Type        cty.Type
	Defaults    *typeexpr.Defaults
	HasDefault  bool
	Default     cty.Value
	Sensitive   bool
	Validations []Rule
	Range       hcl.Range
}

// Rule is a validation, precondition or postcondition block.
type Rule struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
}

// Output is one output block.
type Output struct {
	Name          string
	Description   string
	Value         hcl.Expression
	Sensitive     bool
	Preconditions []Rule
	Range         hcl.Range
}

// Call is one module block.
type Call struct {
	Name    string
	Source  string
	Count   hcl.Expression // nil without count
	ForEach hcl.Expression // nil without for_each
	// Args are the module's input variables as the block sets them (meta
	// arguments such as source, count and depends_on are not among them).
	Args  map[string]*hcl.Attribute
	Range hcl.Range
}

var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "terraform"},
	{Type: "provider", LabelNames: []string{"name"}},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "output", LabelNames: []string{"name"}},
	{Type: "module", LabelNames: []string{"name"}},
	{Type: "resource", LabelNames: []string{"type", "name"}},
	{Type: "data", LabelNames: []string{"type", "name"}},
	{Type: "check", LabelNames: []string{"name"}},
	{Type: "moved"},
	{Type: "import"},
	{Type: "removed"},
}}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "description"}, {Name: "type"}, {Name: "default"},
		{Name: "sensitive"}, {Name: "nullable"}, {Name: "ephemeral"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "description"}, {Name: "value", Required: true}, {Name: "sensitive"},
		{Name: "depends_on"}, {Name: "ephemeral"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "precondition"}},
}

var ruleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true}, {Name: "error_message", Required: true},
}}

var terraformSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "required_version"}, {Name: "experiments"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "required_providers"}, {Type: "backend", LabelNames: []string{"type"}}, {Type: "cloud"}},
}

// moduleMeta are the arguments of a module block that are not inputs.
var moduleMeta = map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "providers": true, "depends_on": true}

// LoadModule parses every *.tf file of dir.
func LoadModule(dir string) (*Module, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(abs, "*.tf"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.tf files", dir)
	}
	sort.Strings(names)
	m := &Module{Dir: abs, Variables: map[string]*Variable{}, Locals: map[string]*hcl.Attribute{},
		Outputs: map[string]*Output{}, Calls: map[string]*Call{}, Providers: map[string]string{}, Files: map[string]*hcl.File{},
		ResourceBodies: map[string]*hclsyntax.Body{}}
	var diags hcl.Diagnostics
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, d := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		m.Files[filepath.Base(name)] = f
		diags = append(diags, m.load(f)...)
		diags = append(diags, checkFunctions(f.Body.(*hclsyntax.Body), "")...)
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return m, nil
}

func (m *Module) load(f *hcl.File) hcl.Diagnostics {
	content, diags := f.Body.Content(fileSchema)
	for _, b := range content.Blocks {
		var d hcl.Diagnostics
		switch b.Type {
		case "terraform":
			d = m.loadTerraform(b)
		case "variable":
			d = m.loadVariable(b)
		case "locals":
			var attrs hcl.Attributes
			attrs, d = b.Body.JustAttributes()
			for name, a := range attrs {
				if _, dup := m.Locals[name]; dup {
					d = append(d, errorAt(a.NameRange, "duplicate local %q", name))
				}
				m.Locals[name] = a
			}
		case "output":
			d = m.loadOutput(b)
		case "module":
			d = m.loadCall(b)
		case "resource":
			m.addResource(b.Labels[0]+"."+b.Labels[1], b)
		case "data":
			m.addResource("data."+b.Labels[0]+"."+b.Labels[1], b)
		}
		diags = append(diags, d...)
	}
	return diags
}

func (m *Module) addResource(addr string, b *hcl.Block) {
	m.Resources = append(m.Resources, addr)
	if body, ok := b.Body.(*hclsyntax.Body); ok {
		m.ResourceBodies[addr] = body
	}
}

func (m *Module) loadTerraform(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(terraformSchema)
	for _, rp := range content.Blocks {
		if rp.Type != "required_providers" {
			continue
		}
		attrs, d := rp.Body.JustAttributes()
		diags = append(diags, d...)
		for name, a := range attrs {
			v, d := a.Expr.Value(nil)
			diags = append(diags, d...)
			if d.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("source") {
				diags = append(diags, errorAt(a.Range, "required_providers.%s: want {source = ..., version = ...}", name))
				continue
			}
			m.Providers[name] = v.GetAttr("source").AsString()
		}
	}
	return diags
}

func (m *Module) loadVariable(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	content, diags := b.Body.Content(variableSchema)
	v := &Variable{Name: name, Type: cty.DynamicPseudoType, Range: b.DefRange}
	if a, ok := content.Attributes["description"]; ok {
		v.Description, diags = stringAttr(a, diags)
	}
	if a, ok := content.Attributes["type"]; ok {
		ty, defaults, d := typeexpr.TypeConstraintWithDefaults(a.Expr)
		diags = append(diags, d...)
		v.HasType, v.Type, v.Defaults = true, ty, defaults
	}
	if a, ok := content.Attributes["default"]; ok {
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		v.HasDefault, v.Default = true, val
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		v.Sensitive = !d.HasErrors() && val.Type() == cty.Bool && val.True()
	}
	for _, vb := range content.Blocks {
		r, d := loadRule(vb)
		diags = append(diags, d...)
		v.Validations = append(v.Validations, r)
	}
	if _, dup := m.Variables[name]; dup {
		diags = append(diags, errorAt(b.DefRange, "duplicate variable %q", name))
	}
	m.Variables[name] = v
	return diags
}

func (m *Module) loadOutput(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	content, diags := b.Body.Content(outputSchema)
	o := &Output{Name: name, Range: b.DefRange}
	if a, ok := content.Attributes["description"]; ok {
		o.Description, diags = stringAttr(a, diags)
	}
	if a, ok := content.Attributes["value"]; ok {
		o.Value = a.Expr
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		o.Sensitive = !d.HasErrors() && val.Type() == cty.Bool && val.True()
	}
	for _, pb := range content.Blocks {
		r, d := loadRule(pb)
		diags = append(diags, d...)
		o.Preconditions = append(o.Preconditions, r)
	}
	if _, dup := m.Outputs[name]; dup {
		diags = append(diags, errorAt(b.DefRange, "duplicate output %q", name))
	}
	m.Outputs[name] = o
	return diags
}

func (m *Module) loadCall(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	attrs, diags := b.Body.JustAttributes()
	c := &Call{Name: name, Args: map[string]*hcl.Attribute{}, Range: b.DefRange}
	for an, a := range attrs {
		switch {
		case an == "source":
			c.Source, diags = stringAttr(a, diags)
		case an == "count":
			c.Count = a.Expr
		case an == "for_each":
			c.ForEach = a.Expr
		case moduleMeta[an]:
		default:
			c.Args[an] = a
		}
	}
	if c.Source == "" {
		diags = append(diags, errorAt(b.DefRange, "module %q has no source", name))
	}
	if _, dup := m.Calls[name]; dup {
		diags = append(diags, errorAt(b.DefRange, "duplicate module %q", name))
	}
	m.Calls[name] = c
	return diags
}

func loadRule(b *hcl.Block) (Rule, hcl.Diagnostics) {
	content, diags := b.Body.Content(ruleSchema)
	var r Rule
	if a, ok := content.Attributes["condition"]; ok {
		r.Condition = a.Expr
	}
	if a, ok := content.Attributes["error_message"]; ok {
		r.ErrorMessage = a.Expr
	}
	return r, diags
}

func stringAttr(a *hcl.Attribute, diags hcl.Diagnostics) (string, hcl.Diagnostics) {
	v, d := a.Expr.Value(nil)
	diags = append(diags, d...)
	if d.HasErrors() {
		return "", diags
	}
	if v.Type() != cty.String || v.IsNull() || !v.IsKnown() {
		return "", append(diags, errorAt(a.Range, "%s: want a literal string", a.Name))
	}
	return v.AsString(), diags
}

// CallDir is the directory of a module call with a local source.
func (m *Module) CallDir(name string) (string, error) {
	c, ok := m.Calls[name]
	if !ok {
		return "", fmt.Errorf("%s: no module %q", m.Dir, name)
	}
	if !strings.HasPrefix(c.Source, "./") && !strings.HasPrefix(c.Source, "../") {
		return "", fmt.Errorf("%s: module %q: source %q is not a local path", m.Dir, name, c.Source)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(c.Source)), nil
}

func errorAt(rng hcl.Range, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

// diagError turns diagnostics into one error, each with its position.
func diagError(diags hcl.Diagnostics) error {
	var b strings.Builder
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s: ", d.Subject)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": " + d.Detail)
		}
	}
	return fmt.Errorf("%s", b.String())
}

// checkFunctions reports every call of a function [Functions] does not
// have: inside can() or try() an unknown function would otherwise quietly
// read as false. Type constraints (variable "type") are not calls.
func checkFunctions(body *hclsyntax.Body, blockType string) hcl.Diagnostics {
	known := Functions()
	var diags hcl.Diagnostics
	for name, a := range body.Attributes {
		if blockType == "variable" && name == "type" {
			continue
		}
		_ = hclsyntax.VisitAll(a.Expr, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
				if _, ok := known[call.Name]; !ok {
					diags = append(diags, errorAt(call.NameRange, "function %s is not one deploycheck evaluates (add it to Functions)", call.Name))
				}
			}
			return nil
		})
	}
	for _, b := range body.Blocks {
		diags = append(diags, checkFunctions(b.Body, b.Type)...)
	}
	return diags
}
