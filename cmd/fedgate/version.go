package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time (make build, make release):
//
//	-ldflags "-X main.version=v0.1.0 -X main.commit=<git rev-parse HEAD>"
//
// A build without them (go build, go install) reports version "dev" and the
// commit Go recorded from the checkout (vcs.revision, +dirty when it had
// uncommitted changes).
var (
	version = "dev"
	commit  = ""
)

// buildInfo is what `fedgate version` and `fedgate --version` print.
type buildInfo struct {
	Version  string
	Commit   string // "" when neither injected nor recorded
	Go       string
	Platform string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if b.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			b.Commit = vcsCommit(bi.Settings)
		}
	}
	return b
}

// vcsCommit is the revision Go stamped into the binary, with "+dirty" when
// the tree it was built from had uncommitted changes.
func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

func (b buildInfo) String() string {
	c := b.Commit
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("fedgate %s\ncommit: %s\ngo: %s %s\n", b.Version, c, b.Go, b.Platform)
}
