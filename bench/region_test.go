package bench

// A three-node region of real `fedgate server` processes on loopback, as
// e2e/writeback_test.go starts one: --bootstrap-expect 3, --join, ports
// picked for --listen, --raft-addr and --internal-addr, one
// policy file over a shared posix "NAS" directory. The region benchmarks
// (commits_test.go, writeback_test.go) use it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

type regionNode struct {
	*testserver.Process
	id    string
	debug string // --debug-listen address ("" when off)
}

type region struct {
	nodes []*regionNode
	nas   string
}

// regionOptions: extra policy YAML (stores and buckets appended to the
// base policy) and extra server flags.
type regionOptions struct {
	stores, buckets string // YAML list items, indented like the base
	args            []string
	debug           bool // give every node a --debug-listen address
}

// regionPolicy declares the shared NAS store, the write-back bucket "ckpt"
// and the write-through bucket "datasets" on it (e2e's writeBackPolicy),
// plus opts' stores and buckets.
func regionPolicy(b *testing.B, nas string, opts regionOptions) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "policy.yaml")
	yaml := `stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: ` + nas + `
` + opts.stores + `buckets:
  - name: ckpt
    placement: {single: nas}
    write: write-back
  - name: datasets
    placement: {single: nas}
` + opts.buckets + `defaults: {store: nas}
`
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

func freeAddrs(b *testing.B, n int) []string {
	b.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// startRegion starts three nodes and waits until all are healthy members
// with a leader. Data dirs (Raft, staging, cache) are temp dirs on the
// same disk as the NAS directory.
func startRegion(b *testing.B, opts regionOptions) *region {
	b.Helper()
	const n = 3
	nas := b.TempDir()
	policy := regionPolicy(b, nas, opts)
	addrs := freeAddrs(b, 4*n)
	httpAddrs, raftAddrs, internalAddrs, debugAddrs := addrs[:n], addrs[n:2*n], addrs[2*n:3*n], addrs[3*n:]
	r := &region{nas: nas}
	for i := range n {
		var join []string
		for j := range n {
			if j != i {
				join = append(join, httpAddrs[j])
			}
		}
		id := fmt.Sprintf("n%d", i+1)
		args := append([]string{"--node-id", id, "--listen", httpAddrs[i], "--raft-addr", raftAddrs[i],
			"--internal-addr", internalAddrs[i], "--bootstrap-expect", fmt.Sprint(n), "--join", strings.Join(join, ","), "--config", policy}, opts.args...)
		node := &regionNode{id: id}
		if opts.debug {
			node.debug = debugAddrs[i]
			args = append(args, "--debug-listen", node.debug)
		}
		node.Process = testserver.Spawn(b, binary, b.TempDir(), args...)
		b.Cleanup(func() { // before the process is killed and its dir removed
			if b.Failed() {
				b.Logf("%s stdout:\n%s\n%s log:\n%s", id, node.Stdout(), id, tail(node.Log(), 4000))
			}
		})
		r.nodes = append(r.nodes, node)
	}
	for _, s := range r.nodes {
		s.WaitReady(b)
	}
	wait.For(b, 60*time.Second, "3 healthy members and a leader", func() bool {
		st, err := r.status()
		if err != nil || st.Leader == "" || len(st.Members) != n {
			return false
		}
		for _, m := range st.Members {
			if !m.Healthy || !m.Voter {
				return false
			}
		}
		return true
	})
	return r
}

// status runs `fedgate cluster status --json` against the first live node.
func (r *region) status() (adminapi.Cluster, error) {
	var st adminapi.Cluster
	var last error
	for _, s := range r.nodes {
		if s.Exited() {
			continue
		}
		cmd := exec.Command(binary, "cluster", "status", "--json")
		cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint,
			"FEDGATE_ACCESS_KEY="+testserver.RootAccessKey, "FEDGATE_SECRET_KEY="+testserver.RootSecretKey)
		out, err := cmd.Output()
		if err != nil {
			last = fmt.Errorf("%v: %s", err, out)
			continue
		}
		return st, json.Unmarshal(out, &st)
	}
	return st, last
}

// leader returns the current leader's id.
func (r *region) leader(b *testing.B) string {
	b.Helper()
	st, err := r.status()
	if err != nil || st.Leader == "" {
		b.Fatalf("no leader: %v", err)
	}
	return st.Leader
}

// waitDrained waits until the write-back backlog is empty.
func (r *region) waitDrained(b *testing.B, timeout time.Duration) {
	b.Helper()
	wait.For(b, timeout, "the write-back backlog to drain", func() bool {
		st, err := r.status()
		return err == nil && st.DrainBacklog.Objects == 0
	})
}

// s3Client is an SDK client for node i that keeps enough idle connections
// for every benchmark client and does not retry (an error fails the run).
func (r *region) s3Client(i int) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(r.nodes[i].Endpoint), UsePathStyle: true,
		Credentials: staticCredentials(), RetryMaxAttempts: 1,
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, DisableCompression: true}}})
}

// profileCPU fetches a CPU profile of seconds from node s into dir.
func (s *regionNode) profileCPU(ctx context.Context, dir string, seconds int, name string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.debug, seconds), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("pprof on %s: %s", s.id, resp.Status)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadFrom(resp.Body)
	return err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
