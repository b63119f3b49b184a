package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node"
)

const (
	rootAK = "ROOTACCESSKEY1234567"
	rootSK = "root-secret-key-0123456789abcdefghijklm"
)

// testConfig is a node on 127.0.0.1:0 ports with its own directories and
// small cache and staging sizes; edit adjusts it.
func testConfig(t *testing.T, id string, edit func(*node.Config)) node.Config {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.NodeID = id
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.AccessKey, cfg.SecretKey = rootAK, rootSK
	cfg.CacheSize, cfg.StagingSize = 256<<20, 64<<20
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.RaftElectionTimeout = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// running is an open node whose Run goroutine the test controls.
type running struct {
	*node.Node
	cancel context.CancelFunc
	done   chan error
}

// start runs n until stop (or the end of the test).
func start(t *testing.T, n *node.Node) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Node: n, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- n.Run(ctx) }()
	t.Cleanup(func() {
		r.cancel()
		n.Close()
	})
	return r
}

// stop ends Run and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
		return nil
	}
}

func s3Client(endpoint string, opts ...func(*s3.Options)) *s3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(rootAK, rootSK, "")}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	}}, opts...)...)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func putGet(t *testing.T, ctx context.Context, put, get *s3.Client, bucket, key, body string) {
	t.Helper()
	if _, err := put.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
	readBack(t, ctx, get, bucket, key, body)
}

func readBack(t *testing.T, ctx context.Context, c *s3.Client, bucket, key, want string) {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(got) != want {
		t.Fatalf("GetObject %s/%s = %q, %v; want %q", bucket, key, got, err, want)
	}
}

func TestOneNodeRegion(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	cfg := testConfig(t, "n1", nil)
	n, err := node.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, n)
	if !strings.HasPrefix(n.Endpoint(), "http://127.0.0.1:") || strings.HasSuffix(n.Endpoint(), ":0") {
		t.Fatalf("Endpoint() = %q, want the bound 127.0.0.1 port", n.Endpoint())
	}
	if n.InternalAddr() != nil {
		t.Errorf("a one-node region without a Raft address has an internal API at %s", n.InternalAddr())
	}
	if n.RegionName() != "local" || n.ID() != "n1" || !n.Raft().IsLeader() {
		t.Errorf("region %q, id %q, leader %v; want local, n1, true", n.RegionName(), n.ID(), n.Raft().IsLeader())
	}
	if _, generated := n.RootCredentials(); generated {
		t.Error("root credentials were generated although the config gave them")
	}

	c := s3Client(n.Endpoint())
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bucket-1")}); err != nil {
		t.Fatal(err)
	}
	putGet(t, ctx, c, c, "bucket-1", "dir/hello.txt", "hello, region")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Closed means closed: the port no longer answers, and the data dir
	// opens again (the Raft files are unlocked) with the bucket in it.
	if conn, err := net.DialTimeout("tcp", n.Addr().String(), time.Second); err == nil {
		conn.Close()
		t.Errorf("the S3 port %s still accepts connections after Close", n.Addr())
	}
	cfg2 := cfg
	cfg2.Listen = "127.0.0.1:0"
	n2, err := node.Open(ctx, cfg2)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	start(t, n2)
	readBack(t, ctx, s3Client(n2.Endpoint()), "bucket-1", "dir/hello.txt", "hello, region")
}

func TestGeneratedRootCredentials(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cfg := testConfig(t, "n1", func(c *node.Config) { c.AccessKey, c.SecretKey = "", "" })
	n, err := node.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	creds, generated := n.RootCredentials()
	if !generated || creds.AccessKey == "" || creds.SecretKey == "" {
		t.Fatalf("RootCredentials = %+v, %v; want a generated pair", creds, generated)
	}
	data, err := os.ReadFile(node.CredentialsFile(cfg.DataDir))
	if err != nil || !strings.Contains(string(data), creds.SecretKey) {
		t.Fatalf("the credentials file holds %q, %v; want the generated pair", data, err)
	}
}

func TestConfigIsValidated(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	for name, c := range map[string]struct {
		edit func(*node.Config)
		want string
	}{
		"one key":             {func(c *node.Config) { c.SecretKey = "" }, "give both --access-key and --secret-key"},
		"join without raft":   {func(c *node.Config) { c.Join = []string{"127.0.0.1:1"} }, "need --raft-addr"},
		"cluster no creds":    {func(c *node.Config) { c.RaftAddr, c.AccessKey, c.SecretKey = "127.0.0.1:0", "", "" }, "needs the root credentials"},
		"expect without join": {func(c *node.Config) { c.RaftAddr, c.BootstrapExpect = "127.0.0.1:0", 3 }, "--bootstrap-expect needs --join"},
		"copies":              {func(c *node.Config) { c.WriteBackCopies = 0 }, "--write-back-copies 0"},
		"half peer TLS": {func(c *node.Config) { c.RaftAddr, c.PeerCertFile = "127.0.0.1:0", "cert.pem" },
			"peer TLS needs all three"},
		"internal on raft": {func(c *node.Config) { c.RaftAddr, c.InternalAddr = "127.0.0.1:7100", "127.0.0.1:7100" },
			"--internal-addr 127.0.0.1:7100 is also --raft-addr"},
		"default internal on a join peer": {func(c *node.Config) { c.RaftAddr, c.Join = "127.0.0.1:7100", []string{"http://127.0.0.1:7101"} },
			"--internal-addr 127.0.0.1:7101 (default: --raft-addr's port + 1) is the --join address http://127.0.0.1:7101"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, "n1", c.edit)
			n, err := node.Open(ctx, cfg)
			if err == nil {
				n.Close()
				t.Fatal("Open accepted the config")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v; want an error containing %q", err, c.want)
			}
			if entries, _ := os.ReadDir(cfg.DataDir); len(entries) != 0 {
				t.Errorf("a refused config touched the data dir: %v", entries)
			}
		})
	}
}

// writePolicy writes a one-region policy whose default store is a shared
// directory (the "NAS" of an in-process region).
func writePolicy(t *testing.T) string {
	t.Helper()
	nas := t.TempDir()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	yaml := `regions:
  - name: lga-gpu
    location: onprem:lga1
stores:
  - name: nas
    kind: posix
    location: onprem:lga1
    path: ` + nas + `
defaults: {store: nas}
`
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestThreeNodeRegion(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	policy := writePolicy(t)
	// The S3 listeners are bound first, so each node's Join can name the
	// others' ports; Raft and the internal API pick their own.
	lns := make([]net.Listener, 3)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	type opened struct {
		i   int
		n   *node.Node
		err error
	}
	results := make(chan opened, 3)
	for i := range 3 {
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, lns[j].Addr().String())
			}
		}
		cfg := testConfig(t, fmt.Sprintf("n%d", i+1), func(c *node.Config) {
			c.Listener = lns[i]
			c.RaftAddr, c.InternalAddr = "127.0.0.1:0", "127.0.0.1:0"
			c.BootstrapExpect, c.Join = 3, join
			c.PolicyFile = policy
		})
		go func() {
			n, err := node.Open(ctx, cfg)
			results <- opened{i, n, err}
		}()
	}
	nodes := make([]*running, 3)
	var errs []error
	for range 3 {
		o := <-results
		if o.err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", o.i+1, o.err))
			continue
		}
		nodes[o.i] = start(t, o.n)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.InternalAddr() == nil || strings.HasSuffix(n.InternalAddr().String(), ":0") {
			t.Fatalf("node %s: internal API at %v, want a bound port", n.ID(), n.InternalAddr())
		}
	}

	var leader *running
	wait.For(t, 30*time.Second, "one leader known to every node, and 3 members", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.Raft().IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			id, _ := n.Raft().Leader()
			m, err := n.Raft().Members()
			if id != leader.ID() || err != nil || len(m) != 3 {
				return false
			}
		}
		return true
	})
	var follower *running
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}

	// Writes through a follower are forwarded to the leader, and the
	// follower that acknowledged them reads them at once.
	fc := s3Client(follower.Endpoint())
	if _, err := fc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("shared")}); err != nil {
		t.Fatalf("CreateBucket through follower %s: %v", follower.ID(), err)
	}
	putGet(t, ctx, fc, fc, "shared", "ckpt/step-1", "weights after step 1")
	if _, ok := leader.Raft().State().Bucket("shared"); !ok {
		t.Fatalf("the leader %s does not hold the bucket created through follower %s", leader.ID(), follower.ID())
	}
	// Every node sees the bucket and the object.
	for _, n := range nodes {
		readBack(t, ctx, s3Client(n.Endpoint()), "shared", "ckpt/step-1", "weights after step 1")
	}
	want := follower.Raft().State().AppliedIndex()
	wait.For(t, 10*time.Second, "every node applied the follower's writes", func() bool {
		for _, n := range nodes {
			if n.Raft().State().AppliedIndex() < want {
				return false
			}
		}
		return true
	})

	for _, n := range nodes {
		if err := n.stop(t); err != nil {
			t.Errorf("node %s: Run: %v", n.ID(), err)
		}
	}
}

// freePorts returns n consecutive ports free on 127.0.0.1 just now.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := p+n < 65535
		for i := 1; ok && i < n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// Nodes on one host with consecutive Raft ports collide with the default
// --internal-addr (Raft port + 1), in either start order; the error names
// both flags. Raft ports 2 apart work.
func TestConsecutiveRaftPortsOnOneHost(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	p := freePorts(t, 4)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", p+i) }
	open := func(id string, raftPort int) (*node.Node, error) {
		return node.Open(ctx, testConfig(t, id, func(c *node.Config) { c.RaftAddr = addr(raftPort) }))
	}

	n1, err := open("n1", 0) // Raft P, internal API P+1
	if err != nil {
		t.Fatal(err)
	}
	_, err = open("n2", 1)
	want := "--raft-addr " + addr(1) + " is already in use — by another node's internal API? --internal-addr defaults to --raft-addr's port + 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second node on Raft port P+1: %v\nwant %q", err, want)
	}
	n3, err := open("n3", 2) // 2 apart: Raft P+2, internal API P+3
	if err != nil {
		t.Fatalf("a node with its Raft port 2 above another's: %v", err)
	}
	n3.Close()
	n1.Close()

	// The other order: the node on P+1 first, then the one on P.
	n2, err := open("n2", 1) // Raft P+1, internal API P+2
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	_, err = open("n1", 0)
	want = "--internal-addr " + addr(1) + " (default: --raft-addr's port + 1) is already in use — by another node's --raft-addr? Give each node its own --internal-addr"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("first node after the second: %v\nwant %q", err, want)
	}
}
