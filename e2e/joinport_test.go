package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// TestJoinAtRaftPort: a node told to --join another node's Raft port (a
// common slip: both are host:port) used to retry every 5 s for ever with
// "EOF". It is refused within seconds, saying the address is a Raft port
// and that --join takes a node's S3 --listen address; with
// --bootstrap-expect (waiting for peers) too.
func TestJoinAtRaftPort(t *testing.T) {
	policy := writePolicy(t, t.TempDir())
	addrs := freeAddrs(t, 7)
	first := testserver.Spawn(t, binary, t.TempDir(), "--node-id", "n1", "--listen", addrs[0], "--raft-addr", addrs[1],
		"--internal-addr", addrs[2], "--bootstrap", "--config", policy)
	first.WaitReady(t)
	for i, mode := range [][]string{{"--join", addrs[1]}, {"--join", addrs[1], "--bootstrap-expect", "2"}} {
		args := append([]string{"--node-id", "n2", "--listen", addrs[3], "--raft-addr", addrs[4+i], "--internal-addr", addrs[6], "--config", policy}, mode...)
		start := time.Now()
		second := testserver.Spawn(t, binary, t.TempDir(), args...)
		wait.For(t, time.Minute, "the node joining a Raft port to exit", second.Exited)
		log := second.Log()
		if second.ExitCode() == 0 || !strings.Contains(log, addrs[1]+" is a Raft port") ||
			!strings.Contains(log, "--join takes the S3 --listen address of a node") {
			t.Fatalf("%v: exit %d, log:\n%s", mode, second.ExitCode(), log)
		}
		t.Logf("%v: refused after %v", mode, time.Since(start).Round(100*time.Millisecond))
	}
}
