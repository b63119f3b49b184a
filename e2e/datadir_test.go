package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runServerExpectFailure runs `fedgate server` on dataDir with args and
// returns what it printed; it fails the test unless the server exits
// non-zero within 20 s (a refusal, not a wait).
func runServerExpectFailure(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--access-key", rootAK, "--secret-key", rootSK}, args...)
	start := time.Now()
	out, err := exec.CommandContext(c, binary, all...).CombinedOutput()
	if c.Err() != nil {
		t.Fatalf("fedgate server %s did not exit within 20 s (it should refuse at once):\n%s", strings.Join(args, " "), out)
	}
	if err == nil {
		t.Fatalf("fedgate server %s exited 0; want a refusal:\n%s", strings.Join(args, " "), out)
	}
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
	return string(out)
}

// TestDataDirInUse: a second server on a data dir a running one holds is
// refused at once, naming the running server's PID and what to do (not
// "open the chunk cache: cachetier: open index: timeout" after seconds).
func TestDataDirInUse(t *testing.T) {
	s := startServer(t)
	out := runServerExpectFailure(t, s.DataDir)
	want := "data dir " + s.DataDir + " is in use by process " + strconv.Itoa(s.Pid())
	if !strings.Contains(out, want) || !strings.Contains(out, "give this one its own --data-dir") {
		t.Fatalf("refusal does not say %q and what to do:\n%s", want, out)
	}
	// The running server is untouched; once it stops, the dir is free.
	getReady(t, s)
	s.stop(syscall.SIGKILL) // the kernel drops the lock with the process
	s.start()
}

// TestNodeIDMismatch: a data dir records the node id of its first start;
// a start with another --node-id (a changed flag, or another node's data
// dir) is refused at once naming both ids and what to do, instead of
// waiting for a leader (or answering "not the leader") for ever.
func TestNodeIDMismatch(t *testing.T) {
	s := startServer(t, "--node-id", "n1")
	s.stop(syscall.SIGTERM)
	out := runServerExpectFailure(t, s.DataDir, "--node-id", "n2")
	for _, want := range []string{`belongs to node "n1"`, "started with --node-id n2", "start it with --node-id n1", "give node n2 a fresh --data-dir"} {
		if !strings.Contains(out, want) {
			t.Fatalf("refusal lacks %q:\n%s", want, out)
		}
	}
	s.start() // with n1 again: it serves

	// A data dir from before the record (no node-identity.json): its Raft
	// state names n1, and n2 is refused the same way.
	s.stop(syscall.SIGTERM)
	mustOK(t, os.Remove(filepath.Join(s.DataDir, "node-identity.json")))
	out = runServerExpectFailure(t, s.DataDir, "--node-id", "n2")
	for _, want := range []string{"holds the Raft state of a region whose members are n1", "started with --node-id n2", "--node-id n1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("refusal on a data dir without a record lacks %q:\n%s", want, out)
		}
	}
	s.start()
}

// getReady checks that s answers readyz 200.
func getReady(t *testing.T, s *server) {
	t.Helper()
	resp, err := http.Get(s.Endpoint + "/_fedgate/readyz")
	if err != nil {
		t.Fatalf("readyz after the refusal: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz after the refusal: %s", resp.Status)
	}
}
