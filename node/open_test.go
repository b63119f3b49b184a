package node_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/node"
)

// TestFailedLastPhaseClosesEverything: a start that fails in its last
// phase (--debug-listen on a port that is taken), after the listeners,
// the Raft state, the cache, the namespace, its loops and the gateway were
// opened, closes them all again: the S3 listener it was given is closed,
// and a node opens at once on the same data and cache dirs (their locks
// and the Raft state were released). Both a one-node region in memory and
// one over TCP (internal API served while Raft opens) are tried.
func TestFailedLastPhaseClosesEverything(t *testing.T) {
	for name, edit := range map[string]func(*node.Config){
		"in memory": func(*node.Config) {},
		"over TCP":  func(c *node.Config) { c.RaftAddr, c.InternalAddr = "127.0.0.1:0", "127.0.0.1:0" },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t, "n1", func(c *node.Config) {
				edit(c)
				c.Listener, c.DebugListen = ln, taken.Addr().String()
			})
			if n, err := node.Open(ctx, cfg); err == nil {
				n.Close()
				t.Fatal("Open succeeded with --debug-listen on a port that is taken")
			} else if !strings.Contains(err.Error(), "--debug-listen") {
				t.Fatalf("Open: %v; want the --debug-listen error", err)
			}
			_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second)) // an open listener: Accept times out
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the S3 listener given to the failed Open still accepts (Accept: %v)", err)
			}
			again := cfg
			again.Listener, again.Listen, again.DebugListen = nil, "127.0.0.1:0", ""
			n, err := node.Open(ctx, again)
			if err != nil {
				t.Fatalf("Open on the dirs of the failed start: %v", err)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
