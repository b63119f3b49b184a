package deploycheck

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

var (
	funcsOnce sync.Once
	funcs     map[string]function.Function
)

// Functions returns the Terraform functions the evaluator knows: the ones
// Terraform itself takes from go-cty's stdlib, hcl's try and can,
// go-cty-yaml's yamldecode, templatefile rendered with hcl's template
// engine, and a few small ones Terraform defines itself (startswith,
// alltrue, tostring, ...), written here to the same specification.
// Sensitivity is not tracked: sensitive and nonsensitive return their
// argument.
func Functions() map[string]function.Function {
	funcsOnce.Do(func() {
		f := map[string]function.Function{
			"abs":             stdlib.AbsoluteFunc,
			"ceil":            stdlib.CeilFunc,
			"chomp":           stdlib.ChompFunc,
			"chunklist":       stdlib.ChunklistFunc,
			"coalesce":        coalesceFunc,
			"coalescelist":    stdlib.CoalesceListFunc,
			"compact":         stdlib.CompactFunc,
			"concat":          stdlib.ConcatFunc,
			"contains":        stdlib.ContainsFunc,
			"distinct":        stdlib.DistinctFunc,
			"element":         stdlib.ElementFunc,
			"flatten":         stdlib.FlattenFunc,
			"floor":           stdlib.FloorFunc,
			"format":          stdlib.FormatFunc,
			"formatlist":      stdlib.FormatListFunc,
			"indent":          stdlib.IndentFunc,
			"join":            stdlib.JoinFunc,
			"jsondecode":      stdlib.JSONDecodeFunc,
			"jsonencode":      stdlib.JSONEncodeFunc,
			"keys":            stdlib.KeysFunc,
			"lookup":          stdlib.LookupFunc,
			"lower":           stdlib.LowerFunc,
			"max":             stdlib.MaxFunc,
			"merge":           stdlib.MergeFunc,
			"min":             stdlib.MinFunc,
			"parseint":        stdlib.ParseIntFunc,
			"range":           stdlib.RangeFunc,
			"regex":           stdlib.RegexFunc,
			"regexall":        stdlib.RegexAllFunc,
			"reverse":         stdlib.ReverseListFunc,
			"setintersection": stdlib.SetIntersectionFunc,
			"setproduct":      stdlib.SetProductFunc,
			"setsubtract":     stdlib.SetSubtractFunc,
			"setunion":        stdlib.SetUnionFunc,
			"slice":           stdlib.SliceFunc,
			"sort":            stdlib.SortFunc,
			"split":           stdlib.SplitFunc,
			"substr":          stdlib.SubstrFunc,
			"title":           stdlib.TitleFunc,
			"trim":            stdlib.TrimFunc,
			"trimprefix":      stdlib.TrimPrefixFunc,
			"trimspace":       stdlib.TrimSpaceFunc,
			"trimsuffix":      stdlib.TrimSuffixFunc,
			"upper":           stdlib.UpperFunc,
			"values":          stdlib.ValuesFunc,
			"zipmap":          stdlib.ZipmapFunc,
			"try":             tryfunc.TryFunc,
			"can":             tryfunc.CanFunc,
			"yamldecode":      ctyyaml.YAMLDecodeFunc,
			"yamlencode":      ctyyaml.YAMLEncodeFunc,
			"length":          lengthFunc,
			"replace":         replaceFunc,
			"startswith":      stringPredicate(strings.HasPrefix),
			"endswith":        stringPredicate(strings.HasSuffix),
			"alltrue":         boolsFunc(true),
			"anytrue":         boolsFunc(false),
			"one":             oneFunc,
			"tostring":        toFunc(cty.String),
			"tonumber":        toFunc(cty.Number),
			"tobool":          toFunc(cty.Bool),
			"tolist":          toFunc(cty.List(cty.DynamicPseudoType)),
			"toset":           toFunc(cty.Set(cty.DynamicPseudoType)),
			"tomap":           toFunc(cty.Map(cty.DynamicPseudoType)),
			"sensitive":       identityFunc,
			"nonsensitive":    identityFunc,
			"base64encode":    base64EncodeFunc,
			"base64decode":    base64DecodeFunc,
			"base64gzip":      base64GzipFunc,
			"cidrhost":        cidrHostFunc,
		}
		// templatefile sees every function but itself, as in Terraform.
		inner := make(map[string]function.Function, len(f))
		for k, v := range f {
			inner[k] = v
		}
		f["templatefile"] = templateFileFunc(inner)
		funcs = f
	})
	return funcs
}

// RenderTemplate renders a template file the way Terraform's templatefile
// does, with hcl's template engine and [Functions] (without templatefile).
func RenderTemplate(path string, vars map[string]cty.Value) (cty.Value, error) {
	return Functions()["templatefile"].Call([]cty.Value{cty.StringVal(path), cty.ObjectVal(vars)})
}

func templateFileFunc(inner map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type: function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			path := args[0].AsString()
			src, err := os.ReadFile(path)
			if err != nil {
				return cty.NilVal, fmt.Errorf("templatefile: %w", err)
			}
			expr, diags := hclsyntax.ParseTemplate(src, path, hcl.Pos{Line: 1, Column: 1, Byte: 0})
			if diags.HasErrors() {
				return cty.NilVal, diagError(diags)
			}
			vars := args[1]
			if !vars.Type().IsObjectType() && !vars.Type().IsMapType() {
				return cty.NilVal, fmt.Errorf("templatefile: vars must be an object or a map")
			}
			names := map[string]cty.Value{}
			if !vars.IsNull() {
				for it := vars.ElementIterator(); it.Next(); {
					k, v := it.Element()
					if !hclsyntax.ValidIdentifier(k.AsString()) {
						return cty.NilVal, fmt.Errorf("templatefile: invalid template variable name %q", k.AsString())
					}
					names[k.AsString()] = v
				}
			}
			for _, t := range expr.Variables() {
				if _, ok := names[t.RootName()]; !ok {
					return cty.NilVal, fmt.Errorf("%s: vars map does not contain key %q", t.SourceRange(), t.RootName())
				}
			}
			val, diags := expr.Value(&hcl.EvalContext{Variables: names, Functions: inner})
			if diags.HasErrors() {
				return cty.NilVal, diagError(diags)
			}
			return val, nil
		},
	})
}

var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true}},
	Type: func(args []cty.Value) (cty.Type, error) {
		return cty.Number, nil
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if v.Type() == cty.String {
			if !v.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			return cty.NumberIntVal(int64(utf8.RuneCountInString(v.AsString()))), nil
		}
		if v.Type().IsObjectType() {
			// Terraform's length counts an object's attributes.
			return cty.NumberIntVal(int64(len(v.Type().AttributeTypes()))), nil
		}
		return stdlib.LengthFunc.Call([]cty.Value{v})
	},
})

// coalesceFunc is Terraform's coalesce, which (unlike cty's) skips empty
// strings as well as nulls: coalesce("", "x") is "x".
var coalesceFunc = function.New(&function.Spec{
	VarParam: &function.Parameter{Name: "vals", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true, AllowNull: true},
	Type: func(args []cty.Value) (cty.Type, error) {
		types := make([]cty.Type, len(args))
		for i, a := range args {
			types[i] = a.Type()
		}
		return stdlib.CoalesceFunc.ReturnType(types)
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		for _, a := range args {
			a, err := convert.Convert(a, retType)
			if err != nil {
				return cty.NilVal, err
			}
			if !a.IsKnown() {
				return cty.UnknownVal(retType), nil
			}
			if a.IsNull() || retType == cty.String && a.RawEquals(cty.StringVal("")) {
				continue
			}
			return a, nil
		}
		return cty.NilVal, fmt.Errorf("no non-null, non-empty-string arguments")
	},
})

// replaceFunc is Terraform's replace: a substring, or a regular expression
// when the substring is written /RE/.
var replaceFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}, {Name: "replace", Type: cty.String},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		str, sub, repl := args[0].AsString(), args[1].AsString(), args[2].AsString()
		if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
			re, err := regexp.Compile(sub[1 : len(sub)-1])
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(re.ReplaceAllString(str, repl)), nil
		}
		return cty.StringVal(strings.ReplaceAll(str, sub, repl)), nil
	},
})

func stringPredicate(pred func(s, affix string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "affix", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(pred(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// boolsFunc is alltrue (all == true) or anytrue (all == false).
func boolsFunc(all bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			result := all
			for it := args[0].ElementIterator(); it.Next(); {
				_, v := it.Element()
				if !v.IsKnown() {
					return cty.UnknownVal(cty.Bool), nil
				}
				isTrue := !v.IsNull() && v.True()
				if all && !isTrue {
					result = false
				}
				if !all && isTrue {
					result = true
				}
			}
			return cty.BoolVal(result), nil
		},
	})
}

var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType() && len(ty.TupleElementTypes()) <= 1:
			if len(ty.TupleElementTypes()) == 0 {
				return cty.DynamicPseudoType, nil
			}
			return ty.TupleElementTypes()[0], nil
		}
		return cty.NilType, fmt.Errorf("one: want a list, set or tuple of at most one element")
	},
	Impl: func(args []cty.Value, ty cty.Type) (cty.Value, error) {
		switch n := args[0].LengthInt(); n {
		case 0:
			return cty.NullVal(ty), nil
		case 1:
			it := args[0].ElementIterator()
			it.Next()
			_, v := it.Element()
			return v, nil
		default:
			return cty.NilVal, fmt.Errorf("one: %d elements, want at most one", n)
		}
	},
})

func toFunc(ty cty.Type) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true, AllowUnknown: true, AllowDynamicType: true}},
		Type: func(args []cty.Value) (cty.Type, error) {
			if args[0].Type() == cty.DynamicPseudoType {
				return ty, nil
			}
			conv := convert.GetConversionUnsafe(args[0].Type(), ty)
			if conv == nil {
				return cty.NilType, fmt.Errorf("cannot convert %s to %s", args[0].Type().FriendlyName(), ty.FriendlyName())
			}
			v, err := conv(cty.UnknownVal(args[0].Type()))
			if err != nil {
				return cty.NilType, err
			}
			return v.Type(), nil
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			return convert.Convert(args[0], retType)
		},
	})
}

var identityFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true, AllowUnknown: true, AllowDynamicType: true}},
	Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl:   func(args []cty.Value, _ cty.Type) (cty.Value, error) { return args[0], nil },
})

var base64EncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.NilVal, fmt.Errorf("base64decode: %w", err)
		}
		if !utf8.Valid(b) {
			return cty.NilVal, fmt.Errorf("base64decode: the result is not UTF-8")
		}
		return cty.StringVal(string(b)), nil
	},
})

var base64GzipFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write([]byte(args[0].AsString())); err != nil {
			return cty.NilVal, err
		}
		if err := w.Close(); err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
	},
})

// cidrHostFunc is Terraform's cidrhost: the address hostnum within prefix
// (negative numbers count back from the end).
var cidrHostFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}, {Name: "hostnum", Type: cty.Number}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := netip.ParsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, fmt.Errorf("cidrhost: %w", err)
		}
		p = p.Masked()
		bits := p.Addr().BitLen()
		host := args[1].AsBigFloat()
		if !host.IsInt() {
			return cty.NilVal, fmt.Errorf("cidrhost: hostnum must be a whole number")
		}
		n, _ := host.Int(nil)
		size := new(big.Int).Lsh(big.NewInt(1), uint(bits-p.Bits()))
		if n.Sign() < 0 {
			n.Add(n, size)
		}
		if n.Sign() < 0 || n.Cmp(size) >= 0 {
			return cty.NilVal, fmt.Errorf("cidrhost: prefix %s has no host number %s", p, host.Text('f', 0))
		}
		base := new(big.Int).SetBytes(p.Addr().AsSlice())
		b := new(big.Int).Add(base, n).FillBytes(make([]byte, bits/8))
		addr, _ := netip.AddrFromSlice(b)
		return cty.StringVal(addr.String()), nil
	},
})
