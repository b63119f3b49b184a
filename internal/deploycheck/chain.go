package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// The module that renders every node's files; the region modules call it
// as module "config".
const (
	NodeConfigModule = "modules/node-config"
	nodeConfigCall   = "config"
)

// ReadTFVars reads a .tfvars file (literal values only).
func ReadTFVars(path string) (map[string]cty.Value, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	vals := map[string]cty.Value{}
	for name, a := range attrs {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		vals[name] = v
	}
	return vals, nil
}

// Chain is a root module evaluated with its inputs, one of its region
// module calls evaluated with the arguments the root gives it, and the
// inputs that region module gives node-config.
type Chain struct {
	Root       *Result
	Region     *Result
	NodeConfig map[string]cty.Value
}

// FollowRegion evaluates rootDir with inputs, then the module it calls
// `call` (a region-* module) with the arguments the root gives it, and
// returns that module's arguments to node-config. Values that only exist
// after apply (addresses, generated keys) are unknown.
func FollowRegion(rootDir string, inputs map[string]cty.Value, call string) (*Chain, error) {
	root, err := LoadModule(rootDir)
	if err != nil {
		return nil, err
	}
	rootRes, err := root.Evaluate(inputs)
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", rootDir, err)
	}
	args, ok := rootRes.Calls[call]
	if !ok {
		return nil, fmt.Errorf("%s: no module %q with instances", rootDir, call)
	}
	dir, err := root.CallDir(call)
	if err != nil {
		return nil, err
	}
	region, err := LoadModule(dir)
	if err != nil {
		return nil, err
	}
	regionRes, err := region.Evaluate(args)
	if err != nil {
		return nil, fmt.Errorf("evaluating module %q (%s) with the arguments %s gives it: %w", call, dir, filepath.Base(rootDir), err)
	}
	cfgDir, err := region.CallDir(nodeConfigCall)
	if err != nil {
		return nil, err
	}
	if want := filepath.Join(TerraformDir(), NodeConfigModule); !sameDir(cfgDir, want) {
		return nil, fmt.Errorf("%s: module %q is %s, want %s", dir, nodeConfigCall, cfgDir, want)
	}
	cfg, ok := regionRes.Calls[nodeConfigCall]
	if !ok {
		return nil, fmt.Errorf("%s: module %q has no instances", dir, nodeConfigCall)
	}
	return &Chain{Root: rootRes, Region: regionRes, NodeConfig: cfg}, nil
}

func sameDir(a, b string) bool {
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}
