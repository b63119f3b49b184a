package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// netLab gives each chaos node its own network namespace, so one node can
// be cut off from its peers (a partition) while clients still reach it.
// Nothing leaves the machine: the namespaces are joined by two bridges in a
// hub namespace of their own, with no route out.
//
//	cluster net  SUBNET.1.0/24  Raft, the internal API, joins (node i: .i+1)
//	client net   SUBNET.2.0/24  S3 clients; the test process is .254
//
// A partition takes node i's port on the cluster bridge down: packets are
// dropped, not refused, as on a real network. It needs root (CAP_NET_ADMIN).
type netLab struct {
	t      *testing.T
	tag    string // unique per test process
	subnet string // "10.N"
	hub    string
	nodes  []string // namespace per node
	host   string   // the test's veth in the root namespace
}

// needRoot skips the test without root and the ip tool (or fails it when
// CI is set, so CI cannot pass by skipping).
func needRoot(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ip")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	msg := "the chaos test needs root and iproute2's ip (network namespaces, tmpfs mounts)"
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, so this fails instead of skipping", msg)
	}
	t.Skip(msg)
}

func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	needRoot(t)
	tag := "fgc" + strconv.Itoa(os.Getpid())
	l := &netLab{t: t, tag: tag, hub: tag + "-hub", host: tag}
	sweepNetLabs()
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	for o := 200; o < 250; o++ {
		s := fmt.Sprintf("10.%d", o)
		if !strings.Contains(string(routes), s+".") {
			l.subnet = s
			break
		}
	}
	if l.subnet == "" {
		t.Fatal("netlab: no free 10.200-249 subnet on this machine")
	}
	t.Cleanup(l.close)
	l.must("netns", "add", l.hub)
	l.must("-n", l.hub, "link", "set", "lo", "up")
	for _, br := range []string{"brc", "brx"} {
		l.must("-n", l.hub, "link", "add", br, "type", "bridge")
		l.must("-n", l.hub, "link", "set", br, "up")
	}
	for i := range n {
		ns := fmt.Sprintf("%s-n%d", tag, i)
		l.nodes = append(l.nodes, ns)
		l.must("netns", "add", ns)
		l.must("-n", ns, "link", "set", "lo", "up")
		for _, nw := range []struct {
			dev, port, bridge string
			net               int
		}{{"eth0", fmt.Sprintf("c%d", i), "brc", 1}, {"eth1", fmt.Sprintf("x%d", i), "brx", 2}} {
			l.must("link", "add", nw.dev, "netns", ns, "type", "veth", "peer", "name", nw.port, "netns", l.hub)
			l.must("-n", ns, "addr", "add", fmt.Sprintf("%s.%d.%d/24", l.subnet, nw.net, i+1), "dev", nw.dev)
			l.must("-n", ns, "link", "set", nw.dev, "up")
			l.must("-n", l.hub, "link", "set", nw.port, "master", nw.bridge)
			l.must("-n", l.hub, "link", "set", nw.port, "up")
		}
	}
	l.must("link", "add", l.host, "type", "veth", "peer", "name", "cli", "netns", l.hub)
	l.must("addr", "add", l.subnet+".2.254/24", "dev", l.host)
	l.must("link", "set", l.host, "up")
	l.must("-n", l.hub, "link", "set", "cli", "master", "brx")
	l.must("-n", l.hub, "link", "set", "cli", "up")
	return l
}

func (l *netLab) must(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// clusterIP and clientIP are node i's addresses on the two networks.
func (l *netLab) clusterIP(i int) string { return fmt.Sprintf("%s.1.%d", l.subnet, i+1) }
func (l *netLab) clientIP(i int) string  { return fmt.Sprintf("%s.2.%d", l.subnet, i+1) }

// command runs name with args inside node i's namespace; ip netns exec
// execs it, so the command's pid is the program's and signals reach it.
func (l *netLab) command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.nodes[i], name}, args...)...)
}

// partition cuts node i off the cluster network (clients still reach it);
// heal reconnects it.
func (l *netLab) partition(i int) { l.must("-n", l.hub, "link", "set", fmt.Sprintf("c%d", i), "down") }
func (l *netLab) heal(i int)      { l.must("-n", l.hub, "link", "set", fmt.Sprintf("c%d", i), "up") }

func (l *netLab) close() {
	for _, ns := range append(l.nodes, l.hub) {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("ip", "link", "del", l.host).Run()
}

// sweepNetLabs removes the namespaces of chaos runs whose process is gone
// (a test binary killed before its cleanup ran).
func sweepNetLabs() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		tag, _, ok := strings.Cut(name, "-")
		if !ok || !strings.HasPrefix(tag, "fgc") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(tag, "fgc"))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
		_ = exec.Command("ip", "link", "del", tag).Run()
	}
}
