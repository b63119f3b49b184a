package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVCSCommit: without an injected commit, `fedgate version` reports the
// revision Go stamped, +dirty for a modified tree, nothing without one.
func TestVCSCommit(t *testing.T) {
	rev := "5b9f55d307361b4a97ec24ef363203490583ebae"
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, rev},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, rev + "+dirty"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
		{nil, ""},
	} {
		if got := vcsCommit(tc.settings); got != tc.want {
			t.Errorf("vcsCommit(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

// TestVersionCommand: `fedgate version` and `fedgate --version` print the
// same three lines: version, commit (the injected one first) and Go.
func TestVersionCommand(t *testing.T) {
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	version, commit = "v1.2.3-rc.1", "0123abcd+dirty"
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("fedgate %v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 || lines[0] != "fedgate v1.2.3-rc.1" || lines[1] != "commit: 0123abcd+dirty" || !strings.HasPrefix(lines[2], "go: go1.") {
			t.Errorf("fedgate %v printed\n%s", args, out.String())
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("fedgate version and fedgate --version differ:\n%s\n%s", outs[0], outs[1])
	}
}
