package policies

import (
	"os"
	"regexp"
	"testing"
)

// TestDocsExamplesParse keeps every YAML example in docs/policies.md a
// valid policy of the whole schema.
func TestDocsExamplesParse(t *testing.T) {
	doc, err := os.ReadFile("../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 5 {
		t.Fatalf("found %d YAML examples in docs/policies.md", len(blocks))
	}
	for i, b := range blocks {
		if _, err := Parse("docs/policies.md example", b[1], AllFeatures()); err != nil {
			t.Errorf("example %d:\n%s\n%v", i+1, b[1], err)
		}
	}
}
