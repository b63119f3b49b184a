package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRepairIntoAPipe: `fedgate repair` with its output in a pipe (as in a
// script or CI log) prints progress as plain lines, never a \r progress
// bar, and its summary counts the bytes it read to rewrite the lost
// copies (it said "0 bytes read" after reading them).
func TestRepairIntoAPipe(t *testing.T) {
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n"
	for _, n := range []string{"a", "b"} {
		policy += "  - {name: " + n + ", kind: posix, location: onprem:lga1, path: " + dirs[n] + "}\n"
	}
	policy += "buckets:\n  - name: mirror\n    placement:\n      replicate: [a, b]\ndefaults: {store: a}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()
	sizes := map[string]int{"one": 1 << 20, "two": 3<<20 + 7, "dir/three": 12345}
	total := 0
	for k, n := range sizes {
		put(t, c, "mirror", k, randBytes(t, n))
		total += n
	}
	// Lose store b's copies (not the region's marker in a).
	ents, err := os.ReadDir(dirs["b"])
	mustOK(t, err)
	for _, e := range ents {
		mustOK(t, os.RemoveAll(filepath.Join(dirs["b"], e.Name())))
	}
	out, err := s.fedgate("repair", "mirror") // stdout and stderr into one pipe
	if err != nil {
		t.Fatalf("repair: %v\n%q", err, out)
	}
	if strings.Contains(out, "\r") {
		t.Fatalf("repair wrote a \\r progress bar into a pipe:\n%q", out)
	}
	if !regexp.MustCompile(`(?m)^repairing mirror: \d+(/\d+)? objects, .+ read$`).MatchString(out) {
		t.Errorf("no progress line in the output:\n%s", out)
	}
	want := "3 objects: 0 healthy, 3 repaired, 0 failed (0 shards, 0 manifests, 3 copies rewritten; " + strconv.Itoa(total) + " bytes read)"
	if !strings.Contains(out, want) {
		t.Fatalf("summary: want %q in\n%s", want, out)
	}
}
