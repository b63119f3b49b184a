package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// docRegion returns docs/operations.md's region.yaml example and the
// command lines of its three-nodes-on-one-host example, each as its words.
func docRegion(t *testing.T) (yaml string, commands [][]string) {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	mustOK(t, err)
	doc := string(b)
	m := regexp.MustCompile("(?s)```yaml\n(# region.yaml[^\n]*\n.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no ```yaml block starting with # region.yaml")
	}
	_, rest, ok := strings.Cut(doc, "A region of three nodes on one host")
	_, rest, ok2 := strings.Cut(rest, "```\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/operations.md has no command block after \"A region of three nodes on one host\"")
	}
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "&"))
		if strings.HasPrefix(line, "fedgate server ") {
			commands = append(commands, strings.Fields(line)[2:])
		}
	}
	if len(commands) != 3 {
		t.Fatalf("found %d fedgate server commands in the one-host example, want 3:\n%s", len(commands), block)
	}
	return m[1], commands
}

// freeRaftPort returns a loopback port that is free, and whose next port
// (the default internal API) is free too, right now.
func freeRaftPort(t *testing.T, taken map[int]bool) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		mustOK(t, err)
		p := ln.Addr().(*net.TCPAddr).Port
		next, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		ln.Close()
		if err != nil || taken[p] || taken[p+1] {
			continue
		}
		next.Close()
		taken[p], taken[p+1] = true, true
		return p
	}
	t.Fatal("no free pair of loopback ports")
	return 0
}

// The region.yaml of docs/operations.md is accepted by the real server:
// the doc's three commands, run with it (its shared path pointed at a
// temporary directory, the doc's ports at free ones), form a region that
// stores objects on the shared store.
func TestOperationsDocRegion(t *testing.T) {
	yaml, commands := docRegion(t)
	shared := t.TempDir()
	if !strings.Contains(yaml, "path: /mnt/fedgate-shared") {
		t.Fatalf("region.yaml example lost its shared path:\n%s", yaml)
	}
	policy := filepath.Join(t.TempDir(), "region.yaml")
	mustOK(t, os.WriteFile(policy, []byte(strings.Replace(yaml, "/mnt/fedgate-shared", shared, 1)), 0o644))

	// Every doc address becomes a free one; Raft ports keep a free
	// port after them for the internal API's default.
	addr := map[string]string{}
	taken := map[int]bool{}
	mapAddr := func(a string) string {
		if addr[a] == "" {
			if strings.HasPrefix(a, "127.0.0.1:70") {
				addr[a] = "127.0.0.1:" + strconv.Itoa(freeRaftPort(t, taken))
			} else {
				addr[a] = freeAddrs(t, 1)[0]
			}
		}
		return addr[a]
	}
	var nodes []*server
	for _, words := range commands {
		var args []string
		dataDir := t.TempDir()
		for i := 0; i < len(words); i++ {
			switch w := words[i]; {
			case w == "--data-dir" && i+1 < len(words):
				i++ // each node gets its own temporary data dir
			case w == "region.yaml":
				args = append(args, policy)
			case strings.HasPrefix(w, "127.0.0.1:"):
				var mapped []string
				for _, a := range strings.Split(w, ",") {
					mapped = append(mapped, mapAddr(a))
				}
				args = append(args, strings.Join(mapped, ","))
			default:
				args = append(args, w)
			}
		}
		p := testserver.Spawn(t, binary, dataDir, args...)
		nodes = append(nodes, &server{Process: p, t: t})
	}
	for _, n := range nodes {
		n.WaitReady(t)
	}
	wait.For(t, 30*time.Second, "3 healthy members and a leader", func() bool {
		st, err := clusterStatus(nodes[0])
		return err == nil && settled(st, 3)
	})
	_, err := nodes[1].root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("docs")})
	mustOK(t, err)
	put(t, nodes[1].root(), "docs", "k", []byte("from the doc's region"))
	if got, _ := getBytes(t, nodes[2].root(), "docs", "k"); string(got) != "from the doc's region" {
		t.Fatalf("read through another node: %q", got)
	}
	var files int
	mustOK(t, filepath.WalkDir(shared, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	}))
	if files == 0 {
		t.Fatal("nothing was written to the region.yaml's shared store")
	}
}
