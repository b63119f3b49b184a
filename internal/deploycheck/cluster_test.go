package deploycheck_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// TestRenderedRegionForms starts the AWS region of the example for real, on
// this machine: three processes, each running its node's rendered
// ExecStart with its rendered environment file, policy, TLS files and
// directories in place (loopback addresses and local directories instead of
// the cloud's, as TestRenderedNodes). The one other change is the policy:
// the example's stores are S3 and GCS buckets, out of reach offline (and its
// erasure placement needs a build that serves it), so the region is given a
// one-store policy (a directory all three nodes share, like a NAS) for the
// same region name. The nodes must form
// one region with mutual TLS between them, every node must be ready, and
// `fedgate cluster status` must show three healthy members and an empty
// drain backlog, the check docs/deploy.md tells operators to make before
// destroying a region.
func TestRenderedRegionForms(t *testing.T) {
	formRenderedRegion(t, followExample(t, "aws").NodeConfig)
}

// TestRenderedRegionFormsS3TLS is TestRenderedRegionForms with TLS on the
// S3 ports as node-config renders it for a region module given s3_ca
// (TestRegionModulesS3TLS checks that wiring): the nodes find each other
// over https, trusting the rendered --ca-file, and serve only https.
func TestRenderedRegionFormsS3TLS(t *testing.T) {
	in := maps.Clone(followExample(t, "aws").NodeConfig)
	in["s3_ca_pem"] = cty.UnknownVal(cty.String) // made at apply time; localInputs issues test certificates
	formRenderedRegion(t, in)
}

// formRenderedRegion renders the example's AWS region from the
// node-config inputs in and starts it on this machine.
func formRenderedRegion(t *testing.T, in map[string]cty.Value) {
	region := exampleRegions["aws"]
	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	shared := t.TempDir()
	policy := fmt.Sprintf(`regions:
  - name: %s
    location: aws:us-east-1
stores:
  - name: shared
    kind: posix
    location: aws:us-east-1
    path: %s
defaults: {store: shared}
`, region, shared)

	var nodes []*rendered
	for _, h := range r.hosts {
		n := render(t, r.localInputs(t, in, h, policy), h)
		n.install(t)
		nodes = append(nodes, n)
	}
	if r.tls == nil {
		t.Fatal("the example's region runs without peer TLS")
	}

	var exited []chan struct{}
	for _, n := range nodes {
		words := execStart(t, n.unit)
		env := parseEnvFile(t, n.file(t, "/etc/fedgate/fedgate.env").Content)
		cmd := exec.Command(words[0], words[1:]...)
		cmd.Env = serviceEnv(env)
		logf, err := os.Create(filepath.Join(n.host.root, "fedgate.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
		exited = append(exited, done)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	logs := func() string {
		var b strings.Builder
		for _, n := range nodes {
			l, _ := os.ReadFile(filepath.Join(n.host.root, "fedgate.log"))
			fmt.Fprintf(&b, "--- %s:\n%s\n", n.host.id, tail(string(l), 3000))
		}
		return b.String()
	}

	scheme, client := "http://", &http.Client{Timeout: 2 * time.Second}
	var caFile string // the rendered S3 CA, for the CLI
	if r.s3tls != nil {
		scheme = "https://"
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(r.s3tls.caPEM))
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		caFile = nodes[0].file(t, "tls/s3-ca.pem").Path
	}
	deadline := time.Now().Add(90 * time.Second)
	for i, n := range nodes {
		url := scheme + n.host.ip + ":" + strconv.Itoa(r.ports["s3"]) + "/_fedgate/readyz"
		err := wait.Until(context.Background(), time.Until(deadline), func() bool {
			select {
			case <-exited[i]:
				t.Fatalf("%s exited:\n%s", n.host.id, logs())
			default:
			}
			resp, err := client.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if err != nil {
			t.Fatalf("%s not ready at %s after 90s:\n%s", n.host.id, url, logs())
		}
	}

	endpoint := scheme + nodes[0].host.ip + ":" + strconv.Itoa(r.ports["s3"])
	status := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if caFile != "" {
			args = append(args, "--ca-file", caFile)
		}
		cmd := exec.CommandContext(ctx, fedgateBin, append([]string{"cluster", "status", "--endpoint", endpoint}, args...)...)
		cmd.Env = append(os.Environ(), "FEDGATE_ACCESS_KEY="+testserver.RootAccessKey, "FEDGATE_SECRET_KEY="+testserver.RootSecretKey)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fedgate cluster status %v: %v\n%s\n%s", args, err, stderr.String(), logs())
		}
		return out
	}
	var st struct {
		Leader  string `json:"leader"`
		Members []struct {
			ID      string `json:"id"`
			Address string `json:"address"`
			HTTP    string `json:"http_address"`
			Healthy bool   `json:"healthy"`
			Voter   bool   `json:"voter"`
		} `json:"members"`
		DrainBacklog struct {
			Objects int `json:"objects"`
		} `json:"drain_backlog"`
	}
	// Members report healthy once each has heard from a leader.
	wait.For(t, 30*time.Second, "three healthy members", func() bool {
		if err := json.Unmarshal(status("--json"), &st); err != nil {
			t.Fatal(err)
		}
		healthy := 0
		for _, m := range st.Members {
			if m.Healthy && m.Voter {
				healthy++
			}
		}
		return st.Leader != "" && healthy == 3
	})
	if len(st.Members) != 3 {
		t.Fatalf("%d members, want 3: %+v", len(st.Members), st)
	}
	for i, m := range st.Members {
		want := r.hosts[i]
		if m.ID != want.id || m.Address != want.ip+":"+strconv.Itoa(r.ports["raft"]) {
			t.Errorf("member %d = %s at %s, want %s at %s:%d", i, m.ID, m.Address, want.id, want.ip, r.ports["raft"])
		}
		if wantHTTP := scheme + want.ip + ":" + strconv.Itoa(r.ports["s3"]); m.HTTP != wantHTTP {
			t.Errorf("member %s's S3 address is %q, want %s", m.ID, m.HTTP, wantHTTP)
		}
	}
	if st.DrainBacklog.Objects != 0 {
		t.Errorf("drain_backlog.objects = %d on a new region", st.DrainBacklog.Objects)
	}
	// The text form docs/deploy.md shows before a region is destroyed.
	const drained = "Drain backlog: 0 objects, 0 B, oldest 0s"
	if text := string(status()); !strings.Contains(text, drained+"\n") {
		t.Errorf("fedgate cluster status does not print %q:\n%s", drained, text)
	}
	doc, err := os.ReadFile(filepath.Join(deploycheck.RepoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "# "+drained+"\n") || !strings.Contains(string(doc), "jq .drain_backlog.objects") {
		t.Errorf("docs/deploy.md does not show the drained region's status line %q and the --json check", drained)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
