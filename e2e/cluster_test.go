package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// freeAddrs returns n loopback addresses with ports free right now.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// clusterStatus runs `fedgate cluster status --json` against s.
func clusterStatus(s *server) (adminapi.Cluster, error) {
	var st adminapi.Cluster
	out, err := s.fedgate("cluster", "status", "--json")
	if err != nil {
		return st, fmt.Errorf("%v: %s", err, out)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// settled reports whether st shows want members, all healthy, and a leader.
func settled(st adminapi.Cluster, want int) bool {
	if st.Leader == "" || len(st.Members) != want {
		return false
	}
	for _, m := range st.Members {
		if !m.Healthy || !m.Voter {
			return false
		}
	}
	return true
}

// startCluster starts three real processes that form a region with
// --bootstrap-expect and --join over a shared NAS default store, and
// waits for 3 healthy members and a leader.
func startCluster(t *testing.T) ([]*server, map[string]*server, adminapi.Cluster) {
	t.Helper()
	nas := t.TempDir()
	policy := writePolicy(t, nas)
	addrs := freeAddrs(t, 9)
	httpAddrs, raftAddrs, internalAddrs := addrs[:3], addrs[3:6], addrs[6:]
	nodes := make([]*server, 3)
	byID := map[string]*server{}
	for i := range 3 {
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, httpAddrs[j])
			}
		}
		id := fmt.Sprintf("n%d", i+1)
		p := testserver.Spawn(t, binary, t.TempDir(), "--node-id", id, "--listen", httpAddrs[i],
			"--raft-addr", raftAddrs[i], "--internal-addr", internalAddrs[i], "--bootstrap-expect", "3", "--join", strings.Join(join, ","),
			"--config", policy)
		nodes[i] = &server{Process: p, t: t}
		byID[id] = nodes[i]
	}
	for _, n := range nodes {
		n.WaitReady(t)
	}
	var st adminapi.Cluster
	wait.For(t, 20*time.Second, "3 healthy members and a leader", func() bool {
		var err error
		st, err = clusterStatus(nodes[0])
		return err == nil && settled(st, 3)
	})
	return nodes, byID, st
}

// TestCluster: three real processes form a region with --bootstrap-expect
// and --join over a shared NAS default store; writes through followers are
// forwarded; data and users are shared; the region survives SIGKILL of the
// leader, and the killed node rejoins with its data dir.
func TestCluster(t *testing.T) {
	nodes, byID, st := startCluster(t)
	leader := byID[st.Leader]
	var follower *server
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}

	// A write through a follower is forwarded to the leader; the follower
	// that acknowledged it sees it at once.
	_, err := follower.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("shared")})
	mustOK(t, err)
	_, err = follower.root().HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("shared")})
	mustOK(t, err)
	for _, n := range nodes {
		wait.For(t, 5*time.Second, "the bucket on every node", func() bool {
			_, err := n.root().HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("shared")})
			return err == nil
		})
	}

	// Bytes written through node 1 are read through node 3.
	data := bytes.Repeat([]byte("fedgate cluster "), 4096)
	put(t, nodes[0].root(), "shared", "a/b", data)
	if got, _ := getBytes(t, nodes[2].root(), "shared", "a/b"); !bytes.Equal(got, data) {
		t.Fatalf("GET through node 3: %d bytes, want %d", len(got), len(data))
	}

	// A user added through node 2 authenticates on node 3.
	out, err := nodes[1].fedgate("user", "add", "carol", "--access-key", "CAROLACCESSKEY000001", "--secret-key", "carol-secret-key-0001")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	wait.For(t, 5*time.Second, "carol on node 3", func() bool {
		_, err := nodes[2].s3Client("CAROLACCESSKEY000001", "carol-secret-key-0001").ListBuckets(ctx(t), &s3.ListBucketsInput{})
		return err == nil
	})

	// SIGKILL the leader: the survivors elect another and take writes.
	oldLeader := st.Leader
	leader.stop(syscall.SIGKILL)
	var survivor *server
	for _, n := range nodes {
		if n != leader {
			survivor = n
			break
		}
	}
	wait.For(t, 20*time.Second, "a new leader", func() bool {
		s, err := clusterStatus(survivor)
		return err == nil && s.Leader != "" && s.Leader != oldLeader
	})
	_, err = survivor.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("after-failover")})
	mustOK(t, err)

	// The killed node restarts on its data dir (the same flags: they are
	// ignored now that it has Raft state) and rejoins.
	leader.start()
	wait.For(t, 20*time.Second, "the restarted node healthy", func() bool {
		s, err := clusterStatus(survivor)
		return err == nil && settled(s, 3)
	})
	wait.For(t, 5*time.Second, "the failover bucket on the restarted node", func() bool {
		_, err := leader.root().HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String("after-failover")})
		return err == nil
	})
	if got, _ := getBytes(t, leader.root(), "shared", "a/b"); !bytes.Equal(got, data) {
		t.Fatalf("GET through the restarted node: %d bytes, want %d", len(got), len(data))
	}
}

// TestClusterRefusals: cluster mode needs root credentials from flags and a
// shared default store.
func TestClusterRefusals(t *testing.T) {
	addrs := freeAddrs(t, 2)
	out, err := runFedgate(t, "server", "--data-dir", t.TempDir(), "--listen", addrs[0], "--raft-addr", addrs[1], "--bootstrap")
	if err == nil || !strings.Contains(out, "root credentials") {
		t.Fatalf("no credentials: err %v, output %s", err, out)
	}
	out, err = runFedgate(t, "server", "--data-dir", t.TempDir(), "--listen", addrs[0], "--raft-addr", addrs[1], "--bootstrap",
		"--access-key", rootAK, "--secret-key", rootSK)
	if err == nil || !strings.Contains(out, "shared default store") {
		t.Fatalf("embedded store: err %v, output %s", err, out)
	}
}

// runFedgate runs the binary to completion without root credentials in its
// environment.
func runFedgate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FEDGATE_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	return string(out), err
}
