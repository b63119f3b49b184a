package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func call(t *testing.T, name string, args ...cty.Value) (cty.Value, error) {
	t.Helper()
	f, ok := Functions()[name]
	if !ok {
		t.Fatalf("no function %s", name)
	}
	return f.Call(args)
}

func TestFunctions(t *testing.T) {
	s, n := cty.StringVal, cty.NumberIntVal
	list := func(vs ...cty.Value) cty.Value { return cty.ListVal(vs) }
	cases := []struct {
		fn   string
		args []cty.Value
		want cty.Value
	}{
		{"cidrhost", []cty.Value{s("10.0.0.0/24"), n(5)}, s("10.0.0.5")},
		{"cidrhost", []cty.Value{s("10.0.0.0/24"), n(-1)}, s("10.0.0.255")},
		{"cidrhost", []cty.Value{s("10.1.2.3/32"), n(0)}, s("10.1.2.3")},
		{"cidrhost", []cty.Value{s("fd00::/64"), n(16)}, s("fd00::10")},
		{"replace", []cty.Value{s("a_b_c"), s("_"), s("-")}, s("a-b-c")},
		{"replace", []cty.Value{s("https://x/y"), s("/^https?:\\/\\//"), s("")}, s("x/y")},
		{"startswith", []cty.Value{s("s3://b/k"), s("s3://")}, cty.True},
		{"startswith", []cty.Value{s("gs://b/k"), s("s3://")}, cty.False},
		{"alltrue", []cty.Value{list(cty.True, cty.True)}, cty.True},
		{"alltrue", []cty.Value{list(cty.True, cty.False)}, cty.False},
		{"alltrue", []cty.Value{cty.ListValEmpty(cty.Bool)}, cty.True},
		{"anytrue", []cty.Value{list(cty.False, cty.True)}, cty.True},
		{"anytrue", []cty.Value{cty.ListValEmpty(cty.Bool)}, cty.False},
		{"tostring", []cty.Value{n(3)}, s("3")},
		{"length", []cty.Value{s("héllo")}, n(5)},
		{"length", []cty.Value{list(s("a"), s("b"))}, n(2)},
		{"length", []cty.Value{cty.ObjectVal(map[string]cty.Value{"a": s("x"), "b": n(1)})}, n(2)},
		{"length", []cty.Value{cty.EmptyObjectVal}, n(0)},
		{"coalesce", []cty.Value{cty.NullVal(cty.String), s(""), s("x")}, s("x")},
		{"coalesce", []cty.Value{s("a"), s("x")}, s("a")},
		{"coalesce", []cty.Value{cty.NullVal(cty.Number), n(0)}, n(0)},
		{"one", []cty.Value{list(s("a"))}, s("a")},
		{"base64encode", []cty.Value{s("fedgate")}, s("ZmVkZ2F0ZQ==")},
		{"base64decode", []cty.Value{s("ZmVkZ2F0ZQ==")}, s("fedgate")},
		{"nonsensitive", []cty.Value{s("x")}, s("x")},
	}
	for _, c := range cases {
		got, err := call(t, c.fn, c.args...)
		if err != nil {
			t.Errorf("%s%v: %v", c.fn, c.args, err)
			continue
		}
		if !got.RawEquals(c.want) {
			t.Errorf("%s%v = %#v, want %#v", c.fn, c.args, got, c.want)
		}
	}
	for _, bad := range [][]cty.Value{{s("10.0.0.0/30"), n(4)}, {s("host/32"), n(0)}} {
		if _, err := call(t, "cidrhost", bad...); err == nil {
			t.Errorf("cidrhost%v: no error", bad)
		}
	}
	if _, err := call(t, "one", list(s("a"), s("b"))); err == nil {
		t.Error("one of two elements: no error")
	}
	if _, err := call(t, "coalesce", s(""), cty.NullVal(cty.String)); err == nil {
		t.Error("coalesce of an empty string and null: no error (Terraform refuses it)")
	}
}

func TestTemplateFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.tftpl")
	src := "%{ for n in nodes ~}\n${n}:${port}\n%{ endfor ~}\n${jsonencode(\"<a>\")}"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := RenderTemplate(p, map[string]cty.Value{
		"nodes": cty.ListVal([]cty.Value{cty.StringVal("n1"), cty.StringVal("n2")}),
		"port":  cty.NumberIntVal(9000),
	})
	if err != nil {
		t.Fatal(err)
	}
	// jsonencode escapes <, > and & as Terraform's does.
	if want := "n1:9000\nn2:9000\n\"\\u003ca\\u003e\""; got.AsString() != want {
		t.Errorf("rendered %q, want %q", got.AsString(), want)
	}
	if _, err := RenderTemplate(p, map[string]cty.Value{"nodes": cty.ListValEmpty(cty.String)}); err == nil || !strings.Contains(err.Error(), `"port"`) {
		t.Errorf("a template variable missing from vars: err = %v", err)
	}
	if err := os.WriteFile(p, []byte(`${templatefile("x", {})}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := RenderTemplate(p, map[string]cty.Value{}); err == nil {
		t.Error("templatefile inside a template: no error (Terraform refuses it)")
	}
}

// writeModule writes a module of one main.tf into a temporary directory.
func writeModule(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestEvaluate(t *testing.T) {
	dir := writeModule(t, `
variable "nodes" {
  description = "nodes"
  type = list(object({
    id   = string
    port = optional(number, 9000)
  }))
  validation {
    condition     = length(var.nodes) >= 2
    error_message = "at least 2 nodes"
  }
}
variable "vpc" {
  type    = string
  default = "vpc-1"
}
locals {
  addrs = [for n in var.nodes : "${n.id}:${n.port}"]
  all   = join(",", local.addrs)
  ip    = aws_network_interface.node.private_ip
}
resource "aws_network_interface" "node" {
  subnet_id = var.vpc
}
output "all" {
  value = local.all
  precondition {
    condition     = !contains(local.addrs, "bad:9000")
    error_message = "bad node"
  }
}
output "ip" {
  value = local.ip
}
module "child" {
  source = "./child"
  count  = length(var.nodes) > 2 ? 1 : 0
  x      = local.all
}
`)
	m, err := LoadModule(dir)
	if err != nil {
		t.Fatal(err)
	}
	node := func(id string) cty.Value { return cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal(id)}) }
	res, err := m.Evaluate(map[string]cty.Value{"nodes": cty.ListVal([]cty.Value{node("a"), node("b")})})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["all"]; !got.RawEquals(cty.StringVal("a:9000,b:9000")) {
		t.Errorf("all = %#v (optional attribute defaults not applied?)", got)
	}
	if got := res.Outputs["ip"]; got.IsKnown() {
		t.Errorf("an output from a resource attribute is known before apply: %#v", got)
	}
	if _, ok := res.Calls["child"]; ok {
		t.Error("a module call with count 0 has arguments")
	}
	res, err = m.Evaluate(map[string]cty.Value{"nodes": cty.ListVal([]cty.Value{node("a"), node("b"), node("c")})})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Calls["child"]["x"]; !got.RawEquals(cty.StringVal("a:9000,b:9000,c:9000")) {
		t.Errorf("child.x = %#v", got)
	}
	for want, nodes := range map[string][]cty.Value{
		"at least 2 nodes": {node("a")},              // a validation
		"bad node":         {node("bad"), node("b")}, // an output precondition
	} {
		if _, err := m.Evaluate(map[string]cty.Value{"nodes": cty.ListVal(nodes)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error %q, got %v", want, err)
		}
	}
	if _, err := m.Evaluate(map[string]cty.Value{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("missing required variable: %v", err)
	}
	if _, err := m.Evaluate(map[string]cty.Value{"nodes": cty.ListValEmpty(cty.DynamicPseudoType), "nope": cty.True}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an input that is no variable: %v", err)
	}
}

// An unknown function inside can() would silently read as false, so
// LoadModule refuses every function it cannot evaluate.
func TestLoadModuleRefusesUnknownFunctions(t *testing.T) {
	dir := writeModule(t, `
variable "x" {
  type        = list(string)
  description = "a list"
  validation {
    condition     = can(frobnicate(var.x))
    error_message = "frobnicated"
  }
}
`)
	if _, err := LoadModule(dir); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("LoadModule: %v, want an error naming frobnicate", err)
	}
}

func TestLocalsCycle(t *testing.T) {
	dir := writeModule(t, "locals {\n  a = local.b\n  b = local.a\n}\n")
	m, err := LoadModule(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Evaluate(nil); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Evaluate: %v, want a cycle error", err)
	}
}

// TestResourceArgs evaluates a resource's attribute arguments: values of
// other resources are unknown, nested blocks and meta arguments are left
// out, and a resource with count is refused (its arguments are per
// instance).
func TestResourceArgs(t *testing.T) {
	dir := writeModule(t, `
variable "name" {
  type = string
}
locals {
  vals = { replicas = 3, name = var.name }
}
resource "null_resource" "a" {
}
resource "helm_release" "r" {
  name       = var.name
  values     = [yamlencode(local.vals)]
  depends_on = [null_resource.a]
  id_of_a    = null_resource.a.id
  lifecycle {
    ignore_changes = [values]
  }
}
resource "helm_release" "n" {
  count = 2
  name  = "x${count.index}"
}
`)
	m, err := LoadModule(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Evaluate(map[string]cty.Value{"name": cty.StringVal("fg")})
	if err != nil {
		t.Fatal(err)
	}
	args, err := res.ResourceArgs("helm_release.r")
	if err != nil {
		t.Fatal(err)
	}
	if got := args["name"]; !got.RawEquals(cty.StringVal("fg")) {
		t.Errorf("name = %#v", got)
	}
	if got := args["values"]; !got.RawEquals(cty.TupleVal([]cty.Value{cty.StringVal("\"name\": \"fg\"\n\"replicas\": 3\n")})) {
		t.Errorf("values = %#v", got)
	}
	if got := args["id_of_a"]; got.IsKnown() {
		t.Errorf("another resource's id is known: %#v", got)
	}
	for _, meta := range []string{"depends_on", "lifecycle"} {
		if _, ok := args[meta]; ok {
			t.Errorf("%s is among the arguments", meta)
		}
	}
	if _, err := res.ResourceArgs("helm_release.n"); err == nil || !strings.Contains(err.Error(), "count") {
		t.Errorf("a resource with count: %v", err)
	}
	if _, err := res.ResourceArgs("helm_release.none"); err == nil {
		t.Error("no error for a resource that does not exist")
	}
}
