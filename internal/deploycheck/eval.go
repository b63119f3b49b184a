package deploycheck

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Result is what [Module.Evaluate] found. Values that depend on resources,
// data sources or other modules' outputs are unknown (cty unknowns).
type Result struct {
	Module  *Module
	Vars    map[string]cty.Value
	Locals  map[string]cty.Value
	Outputs map[string]cty.Value
	// Calls holds, per module call that has instances, the input values its
	// block gives.
	Calls map[string]map[string]cty.Value
}

// Evaluate evaluates the module with the given input variables the way
// Terraform does before anything exists: every variable gets its input or
// default (with the type's optional attribute defaults, converted to its
// type) and must pass its validation blocks; then the locals, the outputs
// and their preconditions, and the arguments of every module call. A
// condition that is unknown is not checked (Terraform checks it later).
func (m *Module) Evaluate(inputs map[string]cty.Value) (*Result, error) {
	r := &Result{Module: m, Vars: map[string]cty.Value{}, Locals: map[string]cty.Value{},
		Outputs: map[string]cty.Value{}, Calls: map[string]map[string]cty.Value{}}
	var errs []error
	for name := range inputs {
		if _, ok := m.Variables[name]; !ok {
			errs = append(errs, fmt.Errorf("%s: no variable %q", m.Dir, name))
		}
	}
	for _, name := range sortedKeys(m.Variables) {
		v := m.Variables[name]
		val, given := inputs[name]
		switch {
		case given:
		case v.HasDefault:
			val = v.Default
		default:
			errs = append(errs, fmt.Errorf("%s: variable %q is required", v.Range, name))
			continue
		}
		if v.Defaults != nil {
			val = v.Defaults.Apply(val)
		}
		conv, err := convert.Convert(val, v.Type)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: variable %q: %v", v.Range, name, err))
			continue
		}
		r.Vars[name] = conv
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, name := range sortedKeys(m.Variables) {
		for _, rule := range m.Variables[name].Validations {
			if err := r.check(rule, "validation of var."+name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := r.evalLocals(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, name := range sortedKeys(m.Outputs) {
		o := m.Outputs[name]
		for _, rule := range o.Preconditions {
			if err := r.check(rule, "precondition of output "+name); err != nil {
				errs = append(errs, err)
			}
		}
		v, diags := o.Value.Value(r.ctx(o.Value))
		if diags.HasErrors() {
			errs = append(errs, diagError(diags))
			continue
		}
		r.Outputs[name] = v
	}
	for _, name := range sortedKeys(m.Calls) {
		args, err := r.callArgs(m.Calls[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if args != nil {
			r.Calls[name] = args
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// resourceMeta are the arguments of a resource block that are not the
// provider's.
var resourceMeta = map[string]bool{"count": true, "for_each": true, "provider": true, "depends_on": true}

// ResourceArgs evaluates the arguments of resource addr ("TYPE.NAME", or
// "data.TYPE.NAME" for a data source) that are attributes, the way the
// provider receives them at plan time: values of other resources are
// unknown. Nested blocks (lifecycle, provider-specific blocks) are left out,
// and so is a resource with count or for_each (its arguments may use
// count.index or each).
func (r *Result) ResourceArgs(addr string) (map[string]cty.Value, error) {
	body, ok := r.Module.ResourceBodies[addr]
	if !ok {
		return nil, fmt.Errorf("%s: no resource %s", r.Module.Dir, addr)
	}
	if _, ok := body.Attributes["count"]; ok {
		return nil, fmt.Errorf("%s: %s has count: its arguments are per instance", r.Module.Dir, addr)
	}
	if _, ok := body.Attributes["for_each"]; ok {
		return nil, fmt.Errorf("%s: %s has for_each: its arguments are per instance", r.Module.Dir, addr)
	}
	args := map[string]cty.Value{}
	var errs []error
	for name, a := range body.Attributes {
		if resourceMeta[name] {
			continue
		}
		v, diags := a.Expr.Value(r.ctx(a.Expr))
		if diags.HasErrors() {
			errs = append(errs, diagError(diags))
			continue
		}
		args[name] = v
	}
	return args, errors.Join(errs...)
}

// callArgs evaluates a module call's inputs; nil when its count is 0 or its
// for_each is empty (Terraform then evaluates none of them).
func (r *Result) callArgs(c *Call) (map[string]cty.Value, error) {
	for _, e := range []hcl.Expression{c.Count, c.ForEach} {
		if e == nil {
			continue
		}
		n, diags := e.Value(r.ctx(e))
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		if !n.IsWhollyKnown() {
			return nil, fmt.Errorf("%s: module %q: count/for_each is unknown before apply (Terraform refuses that)", c.Range, c.Name)
		}
		if n.Type() == cty.Number && n.Equals(cty.Zero).True() || n.CanIterateElements() && n.LengthInt() == 0 {
			return nil, nil
		}
	}
	args := map[string]cty.Value{}
	var errs []error
	for name, a := range c.Args {
		v, diags := a.Expr.Value(r.ctx(a.Expr))
		if diags.HasErrors() {
			errs = append(errs, diagError(diags))
			continue
		}
		args[name] = v
	}
	return args, errors.Join(errs...)
}

func (r *Result) evalLocals() error {
	pending := map[string]*hcl.Attribute{}
	for name, a := range r.Module.Locals {
		pending[name] = a
	}
	for len(pending) > 0 {
		progress := false
		for _, name := range sortedKeys(pending) {
			a := pending[name]
			ready := true
			for _, t := range a.Expr.Variables() {
				if t.RootName() != "local" || len(t) < 2 {
					continue
				}
				dep, ok := t[1].(hcl.TraverseAttr)
				if !ok {
					continue
				}
				if _, waiting := pending[dep.Name]; waiting {
					ready = false
				} else if _, ok := r.Module.Locals[dep.Name]; !ok {
					return fmt.Errorf("%s: no local %q", a.Range, dep.Name)
				}
			}
			if !ready {
				continue
			}
			v, diags := a.Expr.Value(r.ctx(a.Expr))
			if diags.HasErrors() {
				return diagError(diags)
			}
			r.Locals[name] = v
			delete(pending, name)
			progress = true
		}
		if !progress {
			return fmt.Errorf("%s: locals refer to each other in a cycle: %v", r.Module.Dir, sortedKeys(pending))
		}
	}
	return nil
}

// check evaluates a validation or precondition: an error when it is false.
func (r *Result) check(rule Rule, what string) error {
	v, diags := rule.Condition.Value(r.ctx(rule.Condition))
	if diags.HasErrors() {
		return fmt.Errorf("%s: %w", what, diagError(diags))
	}
	if !v.IsKnown() {
		return nil
	}
	if v.IsNull() || v.Type() != cty.Bool {
		return fmt.Errorf("%s: %s: condition is not a bool", rule.Condition.Range(), what)
	}
	if v.True() {
		return nil
	}
	msg := "(no message)"
	if m, diags := rule.ErrorMessage.Value(r.ctx(rule.ErrorMessage)); !diags.HasErrors() && m.IsWhollyKnown() && m.Type() == cty.String {
		msg = m.AsString()
	}
	return fmt.Errorf("%s: %s failed: %s", rule.Condition.Range(), what, msg)
}

// ctx is the evaluation context for expr: var, local, path and terraform,
// and an unknown value for every other name it refers to (resources, data
// sources, module outputs), as before `terraform apply`.
func (r *Result) ctx(expr hcl.Expression) *hcl.EvalContext {
	cwd, _ := os.Getwd()
	vars := map[string]cty.Value{
		"var":   cty.ObjectVal(r.Vars),
		"local": cty.ObjectVal(r.Locals),
		"path": cty.ObjectVal(map[string]cty.Value{
			"module": cty.StringVal(r.Module.Dir),
			"root":   cty.StringVal(r.Module.Dir),
			"cwd":    cty.StringVal(cwd),
		}),
		"terraform": cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal("default")}),
	}
	if len(r.Vars) == 0 {
		vars["var"] = cty.EmptyObjectVal
	}
	if len(r.Locals) == 0 {
		vars["local"] = cty.EmptyObjectVal
	}
	for _, t := range expr.Variables() {
		if _, ok := vars[t.RootName()]; !ok {
			vars[t.RootName()] = cty.DynamicVal
		}
	}
	return &hcl.EvalContext{Variables: vars, Functions: Functions()}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
