package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// A second node started without --join on the same policy file (so on the
// same shared default store) used to form a second region there silently,
// and `s3 mb` succeeded on both. Now it refuses to start, saying the store
// belongs to another region; restarted with --join (its data dir holds a
// region of its own, so --join is ignored) it refuses again and says to
// empty its data dir. The first region is untouched.
func TestSecondRegionOnASharedStoreIsRefused(t *testing.T) {
	policy := writePolicy(t, t.TempDir())
	addrs := freeAddrs(t, 6)
	first := &server{Process: testserver.Spawn(t, binary, t.TempDir(), "--node-id", "n1", "--listen", addrs[0], "--raft-addr", addrs[1],
		"--internal-addr", addrs[4], "--bootstrap", "--config", policy), t: t}
	first.WaitReady(t)
	_, err := first.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("scratch")})
	mustOK(t, err)

	dir := t.TempDir()
	second := testserver.Spawn(t, binary, dir, "--node-id", "n2", "--listen", addrs[2], "--raft-addr", addrs[3], "--internal-addr", addrs[5],
		"--bootstrap", "--config", policy)
	wait.For(t, time.Minute, "the second region's node to exit", second.Exited)
	if code, log := second.ExitCode(), second.Log(); code == 0 || !strings.Contains(log, "refusing to start") ||
		!strings.Contains(log, "belongs to another region") || !strings.Contains(log, "--join") {
		t.Fatalf("a second region on the shared store: exit %d, log:\n%s", code, log)
	}

	again := testserver.Spawn(t, binary, dir, "--node-id", "n2", "--listen", addrs[2], "--raft-addr", addrs[3], "--internal-addr", addrs[5],
		"--join", addrs[0], "--config", policy)
	wait.For(t, time.Minute, "the node restarted with --join to exit", again.Exited)
	if code, log := again.ExitCode(), again.Log(); code == 0 || !strings.Contains(log, "empty its --data-dir") {
		t.Fatalf("restarted with --join on its own region's data dir: exit %d, log:\n%s", code, log)
	}

	st, err := clusterStatus(first)
	mustOK(t, err)
	if len(st.Members) != 1 || st.Members[0].ID != "n1" || !st.Members[0].Healthy {
		t.Fatalf("the first region after the refusals: %+v", st.Members)
	}
	_, err = first.root().HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("scratch")})
	mustOK(t, err)
}

// `fedgate cluster add` of a node that formed its own region used to add
// it as a voter, after which it answered from its own state. Now the add
// is refused with what to do, and the region keeps its one member.
func TestClusterAddRefusesANodeOfAnotherRegion(t *testing.T) {
	addrs := freeAddrs(t, 6)
	// Each has its own shared store: two regions that never met.
	n1 := &server{Process: testserver.Spawn(t, binary, t.TempDir(), "--node-id", "n1", "--listen", addrs[0], "--raft-addr", addrs[1],
		"--internal-addr", addrs[4], "--bootstrap", "--config", writePolicy(t, t.TempDir())), t: t}
	n5 := &server{Process: testserver.Spawn(t, binary, t.TempDir(), "--node-id", "n5", "--listen", addrs[2], "--raft-addr", addrs[3],
		"--internal-addr", addrs[5], "--bootstrap", "--config", writePolicy(t, t.TempDir())), t: t}
	n1.WaitReady(t)
	n5.WaitReady(t)

	out, err := n1.fedgate("cluster", "add", addrs[2])
	if err == nil || !strings.Contains(out, "belongs to another region") || !strings.Contains(out, "--data-dir") {
		t.Fatalf("cluster add of a node of another region: %v\n%s", err, out)
	}
	st, err := clusterStatus(n1)
	mustOK(t, err)
	if len(st.Members) != 1 {
		t.Fatalf("the region after the refused add: %+v", st.Members)
	}
}
