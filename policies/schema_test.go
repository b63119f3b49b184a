package policies

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"
)

// TestSchemaMatchesParser keeps policy.schema.json (editor completion) in
// step with the keys and enums the parser accepts.
func TestSchemaMatchesParser(t *testing.T) {
	data, err := os.ReadFile("policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]json.RawMessage `json:"$defs"`
		Enum       []string                   `json:"enum"`
	}
	parse := func(raw json.RawMessage) node {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	root := parse(data)
	keys := func(what string, n node, want []string) {
		t.Helper()
		got := slices.Sorted(maps.Keys(n.Properties))
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("schema %s keys = %v, parser accepts %v", what, got, w)
		}
	}
	enum := func(what string, raw json.RawMessage, want []string) {
		t.Helper()
		if got := parse(raw).Enum; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("schema %s enum = %v, parser accepts %v", what, got, want)
		}
	}
	def := func(name string) node { return parse(root.Defs[name]) }
	keys("top-level", root, topKeys)
	keys("region", def("region"), regionKeys)
	keys("store", def("store"), storeKeys)
	keys("credentials", def("credentials"), allCredentialKeys)
	keys("bucket", def("bucket"), bucketKeys)
	keys("placement", def("placement"), placementKeys)
	keys("placement.erasure", parse(def("placement").Properties["erasure"]), []string{"data", "parity", "stores"})
	keys("cache", def("cache"), cacheKeys)
	lc := def("lifecycleRule")
	keys("lifecycle rule", lc, lifecycleRuleKeys)
	keys("lifecycle filter", parse(lc.Properties["filter"]), lifecycleFilterKeys)
	keys("lifecycle expiration", parse(lc.Properties["expiration"]), lifecycleExpKeys)
	keys("lifecycle noncurrent_version_expiration", parse(lc.Properties["noncurrent_version_expiration"]), lifecycleNCKeys)
	keys("lifecycle abort_incomplete_multipart_upload", parse(lc.Properties["abort_incomplete_multipart_upload"]), lifecycleAbortKeys)
	enum("lifecycle status", lc.Properties["status"], lifecycleStatuses)
	keys("routing", parse(root.Properties["routing"]), []string{"prefer"})
	keys("egress", parse(root.Properties["egress"]), []string{"prices", "budgets"})
	keys("budget", def("budget"), budgetKeys)
	keys("defaults", parse(root.Properties["defaults"]), []string{"store", "public_access_block"})
	keys("defaults.public_access_block", parse(parse(root.Properties["defaults"]).Properties["public_access_block"]), publicAccessBlockKeys)
	var kinds []string
	for _, k := range StoreKinds {
		kinds = append(kinds, string(k))
	}
	enum("store.kind", def("store").Properties["kind"], kinds)
	enum("cache.prefetch", def("cache").Properties["prefetch"], prefetchModes)
	enum("cache.priority", def("cache").Properties["priority"], priorityNames())
	enum("budget.action", def("budget").Properties["action"], budgetActions)
	enum("bucket.write", def("bucket").Properties["write"], []string{string(WriteThrough), string(WriteBack)})
	enum("routing.prefer", parse(root.Properties["routing"]).Properties["prefer"], []string{string(PreferCheapest), string(PreferNearest)})
}
