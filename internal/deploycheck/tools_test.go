package deploycheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

// runTool runs a tofu or tflint command with the offline environment.
func runTool(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = deploycheck.ToolEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTofuFmt runs `tofu fmt -check -recursive terraform/` (and formats each
// example's terraform.tfvars.example, which tofu fmt does not pick up by
// its name, through stdin).
func TestTofuFmt(t *testing.T) {
	tofu := deploycheck.Tool(t, "tofu")
	if out, err := runTool(t, deploycheck.RepoRoot(), tofu, "fmt", "-check", "-recursive", "-diff", "terraform/"); err != nil {
		t.Fatalf("tofu fmt -check -recursive terraform/: %v\n%s", err, out)
	}
	vars, err := filepath.Glob(filepath.Join(tfDir, "examples", "*", "terraform.tfvars.example"))
	if err != nil || len(vars) < 3 {
		t.Fatalf("examples' terraform.tfvars.example: %v %v", vars, err)
	}
	for _, path := range vars {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(tofu, "fmt", "-")
		cmd.Env = deploycheck.ToolEnv()
		cmd.Stdin = bytes.NewReader(src)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tofu fmt - < %s: %v", path, err)
		}
		if !bytes.Equal(out, src) {
			t.Errorf("%s is not formatted; tofu fmt gives:\n%s", path, out)
		}
	}
}

// TestTflint runs tflint over every module and example with
// terraform/.tflint.hcl: the bundled terraform ruleset, every rule on.
func TestTflint(t *testing.T) {
	tflint := deploycheck.Tool(t, "tflint")
	out, err := runTool(t, tfDir, tflint, "--recursive", "--config", filepath.Join(tfDir, ".tflint.hcl"))
	if err != nil {
		t.Fatalf("tflint --recursive: %v\n%s", err, out)
	}
}

// TestNodeConfigMatchesOpenTofu applies node-config with OpenTofu (it needs
// no provider, so this runs offline) with the inputs the example's AWS
// region gives it, made local as in TestRenderedRegionForms, and checks
// that every output is exactly what this package's evaluator renders: the
// offline checks above test what Terraform itself would render. It also
// checks that both refuse the same invalid inputs.
func TestNodeConfigMatchesOpenTofu(t *testing.T) {
	tofu := deploycheck.Tool(t, "tofu")
	c := followExample(t, "aws")
	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	h := r.hosts[0]
	inputs := r.localInputs(t, c.NodeConfig, h, "")
	inputs["cache_size"] = cty.StringVal("1500GiB") // render the optional flags too
	inputs["extra_args"] = cty.ListVal([]cty.Value{cty.StringVal("--write-back-copies"), cty.StringVal("3")})
	inputs["writable_paths"] = cty.ListVal([]cty.Value{cty.StringVal("/mnt/nas/fedgate")})
	inputs["local_socket"] = cty.StringVal("/run/fedgate/s3.sock")
	inputs["mounts"] = cty.ListVal([]cty.Value{
		mountVal("datasets", "imagenet/train", "/mnt/imagenet", "", "10s", true, true, -1, -1),
		mountVal("ckpt", "checkpoints", "/mnt/ckpt", "https://gw.gpu.internal:9000", "", false, false, 1000, 1000),
	})

	m, err := deploycheck.LoadModule(nodeCfgDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Evaluate(inputs)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	writeRoot(t, dir, m, inputs)
	if out, err := runTool(t, dir, tofu, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
		t.Fatalf("tofu init: %v\n%s", err, out)
	}
	if out, err := runTool(t, dir, tofu, "validate", "-no-color"); err != nil {
		t.Fatalf("tofu validate: %v\n%s", err, out)
	}
	if out, err := runTool(t, dir, tofu, "apply", "-auto-approve", "-input=false", "-no-color", "-var-file=inputs.tfvars.json"); err != nil {
		t.Fatalf("tofu apply: %v\n%s", err, out)
	}
	out, err := runTool(t, dir, tofu, "output", "-json", "-no-color")
	if err != nil {
		t.Fatalf("tofu output: %v\n%s", err, out)
	}
	var got map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("tofu output -json: %v\n%s", err, out)
	}
	for _, name := range sortedOutputs(m) {
		want, err := ctyjson.SimpleJSONValue{Value: res.Outputs[name]}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		g, ok := got[name]
		if !ok {
			t.Errorf("tofu has no output %s", name)
			continue
		}
		var a, b any
		if err := json.Unmarshal(g.Value, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("output %s: OpenTofu renders\n%s\nthe evaluator renders\n%s", name, g.Value, want)
		}
	}

	// Both refuse a region of 2 nodes, a writable path or a mountpoint
	// with a ".." (validations) and a region the policy does not declare
	// (a precondition).
	bad := map[string]func(map[string]cty.Value){
		"two nodes": func(in map[string]cty.Value) {
			in["nodes"] = cty.ListVal(in["nodes"].AsValueSlice()[:2])
		},
		"undeclared region": func(in map[string]cty.Value) { in["region"] = cty.StringVal("elsewhere") },
		"relative writable path": func(in map[string]cty.Value) {
			in["writable_paths"] = cty.ListVal([]cty.Value{cty.StringVal("/mnt/nas/../etc")})
		},
		"mountpoint with ..": func(in map[string]cty.Value) {
			in["mounts"] = cty.ListVal([]cty.Value{mountVal("d", "imagenet", "/mnt/../etc", "", "", true, true, -1, -1)})
		},
	}
	for what, change := range bad {
		in := map[string]cty.Value{}
		for k, v := range inputs {
			in[k] = v
		}
		change(in)
		if _, err := m.Evaluate(in); err == nil {
			t.Errorf("%s: the evaluator accepts it", what)
		}
		writeRoot(t, dir, m, in)
		if out, err := runTool(t, dir, tofu, "plan", "-input=false", "-no-color", "-var-file=inputs.tfvars.json"); err == nil {
			t.Errorf("%s: tofu plan accepts it:\n%s", what, out)
		}
	}
}

func sortedOutputs(m *deploycheck.Module) []string {
	var names []string
	for n := range m.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeRoot writes a root module into dir that calls node-config with
// inputs (from inputs.tfvars.json) and exposes all of its outputs.
func writeRoot(t *testing.T, dir string, m *deploycheck.Module, inputs map[string]cty.Value) {
	t.Helper()
	src, err := filepath.Rel(dir, m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("variable \"inputs\" {\n  type = any\n}\n\nmodule \"c\" {\n")
	fmt.Fprintf(&b, "  source = %q\n", filepath.ToSlash(src))
	var names []string
	for k := range inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "  %s = var.inputs.%s\n", k, k)
	}
	b.WriteString("}\n")
	for _, o := range sortedOutputs(m) {
		fmt.Fprintf(&b, "\noutput %q {\n  value     = module.c.%s\n  sensitive = true\n}\n", o, o)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := cty.ObjectVal(inputs)
	js, err := ctyjson.Marshal(obj, obj.Type())
	if err != nil {
		t.Fatal(err)
	}
	vars, _ := json.Marshal(map[string]json.RawMessage{"inputs": js})
	if err := os.WriteFile(filepath.Join(dir, "inputs.tfvars.json"), vars, 0o600); err != nil {
		t.Fatal(err)
	}
}
