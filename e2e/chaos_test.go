package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store/posix"
)

// The chaos test: a 3-node region of real processes, each in its own
// network namespace with its data dir on a small tmpfs, under mixed load
// from real S3 clients while faults rotate: kill -9 of the leader and of a
// follower, SIGSTOP/SIGCONT, a restart with a wiped data dir, a full disk
// and a partition. Afterwards every acknowledged object must read back
// byte-identical through every node and from the store, nothing may appear
// that nobody wrote, no response may have been cut short, and every key's
// history must be linearizable as a register. `make test` runs 90 seconds of
// it, `make soak` 15 minutes. The report (availability per 10 s window, time
// from each fault to the first write, what healthy nodes waited) is logged
// and written to $FEDGATE_CHAOS_REPORT when set.

// chaosElection is the Raft election timeout of the nodes (hashicorp/raft's
// default, which fedgate server uses).
const chaosElection = time.Second

type chaosConfig struct {
	load             time.Duration
	writers, readers int
	gap              time.Duration // quiet time between faults
	hold             time.Duration // how long a freeze, partition or full disk lasts
	down             time.Duration // how long a killed node stays down
	quiet            time.Duration // fault-free time at the end of the load
}

func TestChaos(t *testing.T) {
	cfg := chaosConfig{load: 90 * time.Second, writers: 8, readers: 8, gap: 3 * time.Second,
		hold: 6 * time.Second, down: 2 * time.Second, quiet: 12 * time.Second}
	if os.Getenv("FEDGATE_SOAK") != "" {
		cfg = chaosConfig{load: 15 * time.Minute, writers: 8, readers: 8, gap: 20 * time.Second,
			hold: 20 * time.Second, down: 5 * time.Second, quiet: 30 * time.Second}
	}
	runChaos(t, cfg)
}

// chaosFaults is the rotation, in order.
var chaosFaults = []chaosFault{
	{kind: "stop", leader: true},
	{kind: "kill", leader: true},
	{kind: "partition", leader: false},
	{kind: "wipe", leader: false},
	{kind: "diskfull", leader: false},
	{kind: "stop", leader: false},
	{kind: "partition", leader: true},
	{kind: "kill", leader: false},
	{kind: "diskfull", leader: true},
}

type chaosFault struct {
	kind   string // kill, wipe, stop, partition, diskfull
	leader bool   // of the leader, else of a follower
}

func (f chaosFault) String() string {
	who := "a follower"
	if f.leader {
		who = "the leader"
	}
	return map[string]string{"kill": "kill -9 of ", "wipe": "wiped data dir of ", "stop": "SIGSTOP of ",
		"partition": "partition of ", "diskfull": "full disk on "}[f.kind] + who
}

// faultRun is one injected fault.
type faultRun struct {
	chaosFault
	node       int
	start, end time.Duration // injected; reverted (for a kill: serving again)
	newLeader  time.Duration // when a healthy node knew another leader (leader faults); else start
	err        string
}

type chaosNode struct {
	i        int
	id       string
	dir      string // data dir, a tmpfs mount
	logPath  string
	args     []string
	endpoint string
	cmd      *exec.Cmd
	done     chan struct{}
	up       atomic.Bool // clients send it requests
	mu       sync.Mutex
	kills    []time.Duration // when it was killed
}

type chaosRegion struct {
	t     *testing.T
	lab   *netLab
	nodes []*chaosNode
	nas   string
	t0    time.Time
}

func (r *chaosRegion) now() time.Duration { return time.Since(r.t0) }

func startChaosRegion(t *testing.T) *chaosRegion {
	lab := newNetLab(t, 3)
	r := &chaosRegion{t: t, lab: lab, nas: t.TempDir(), t0: time.Now()}
	policy := writeBackPolicy(t, r.nas)
	logs := os.Getenv("FEDGATE_CHAOS_LOGS") // keep the nodes' logs there
	if logs == "" {
		logs = t.TempDir()
	} else if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=640m", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Fatalf("mount a tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, lab.clusterIP(j)+":9000")
			}
		}
		n := &chaosNode{i: i, id: fmt.Sprintf("n%d", i+1), dir: dir, logPath: filepath.Join(logs, fmt.Sprintf("n%d.log", i+1)),
			endpoint: "http://" + lab.clientIP(i) + ":9000"}
		n.args = []string{"server", "--node-id", n.id, "--listen", "0.0.0.0:9000", "--raft-addr", lab.clusterIP(i) + ":7000",
			"--bootstrap-expect", "3", "--join", strings.Join(join, ","), "--config", policy, "--data-dir", dir,
			"--cache-size", "160MiB", "--staging-size", "256MiB", "--access-key", rootAK, "--secret-key", rootSK, "--log-level", cmp.Or(os.Getenv("FEDGATE_CHAOS_LOG_LEVEL"), "warn")}
		r.nodes = append(r.nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range r.nodes {
			r.kill(n, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, n := range r.nodes {
				b, _ := os.ReadFile(n.logPath)
				if len(b) > 8000 {
					b = b[len(b)-8000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", n.id, b)
			}
		}
	})
	for _, n := range r.nodes {
		r.launch(n)
	}
	for _, n := range r.nodes {
		if err := r.waitReady(n, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		n.up.Store(true)
	}
	if _, err := r.settled(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *chaosRegion) launch(n *chaosNode) {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := r.lab.command(n.i, binary, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
}

// kill signals n's process; SIGKILL also waits for it to end.
func (r *chaosRegion) kill(n *chaosNode, sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		<-done
	}
}

func (r *chaosRegion) exited(n *chaosNode) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

func (r *chaosRegion) waitReady(n *chaosNode, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	exited := false
	err := wait.Until(context.Background(), timeout, func() bool {
		if exited = r.exited(n); exited {
			return true
		}
		resp, err := hc.Get(n.endpoint + "/_fedgate/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	switch {
	case exited:
		return fmt.Errorf("%s exited while starting", n.id)
	case err != nil:
		return fmt.Errorf("%s not ready within %v", n.id, timeout)
	}
	return nil
}

// status is `fedgate cluster status --json` through n, given up after 3 s
// (n may be frozen).
func (r *chaosRegion) status(n *chaosNode) (adminapi.Cluster, error) {
	var st adminapi.Cluster
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, binary, "cluster", "status", "--json")
	cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+n.endpoint, "FEDGATE_ACCESS_KEY="+rootAK, "FEDGATE_SECRET_KEY="+rootSK)
	out, err := cmd.Output()
	if err != nil {
		return st, fmt.Errorf("cluster status via %s: %v", n.id, err)
	}
	return st, json.Unmarshal(out, &st)
}

// logBacklogs logs each node's own answer: its backlog, or why it gave
// none, and the applied and commit index it reports for every member (a
// backlog seen by one node only points at its state, not the region's).
func (r *chaosRegion) logBacklogs(t *testing.T) {
	for _, n := range r.nodes {
		st, err := r.status(n)
		if err != nil {
			t.Logf("%s: %v", n.id, err)
			continue
		}
		var members []string
		for _, m := range st.Members {
			members = append(members, fmt.Sprintf("%s applied %d commit %d %s", m.ID, m.Applied, m.Commit, m.State))
		}
		t.Logf("%s: leader %s, backlog %d objects (%d bytes, oldest %.0fs); %s", n.id, st.Leader,
			st.DrainBacklog.Objects, st.DrainBacklog.Bytes, st.DrainBacklog.OldestSeconds, strings.Join(members, "; "))
	}
}

func (r *chaosRegion) byID(id string) int {
	for i, n := range r.nodes {
		if n.id == id {
			return i
		}
	}
	return -1
}

// settled waits for three healthy voters and a leader, and returns the
// leader's index.
func (r *chaosRegion) settled(timeout time.Duration) (int, error) {
	leader := -1
	err := wait.Until(context.Background(), timeout, func() bool {
		for _, n := range r.nodes {
			if st, err := r.status(n); err == nil && settled(st, 3) {
				leader = r.byID(st.Leader)
				return true
			}
		}
		return false
	})
	if err != nil {
		return -1, fmt.Errorf("the region did not settle (3 healthy voters and a leader) within %v", timeout)
	}
	return leader, nil
}

// leaderNow asks the nodes clients use which node leads.
func (r *chaosRegion) leaderNow() int {
	leader := -1
	_ = wait.Until(context.Background(), 10*time.Second, func() bool {
		for _, n := range r.nodes {
			if !n.up.Load() {
				continue
			}
			if st, err := r.status(n); err == nil && st.Leader != "" {
				leader = r.byID(st.Leader)
				return true
			}
		}
		return false
	}) // -1 when no node names a leader within 10 s
	return leader
}

// inject runs one fault to its end.
func (r *chaosRegion) inject(f chaosFault, cfg chaosConfig, rng *rand.Rand) faultRun {
	run := faultRun{chaosFault: f, node: -1}
	leader := r.leaderNow()
	if leader < 0 {
		run.err = "no leader known before the fault"
		return run
	}
	run.node = leader
	if !f.leader {
		run.node = (leader + 1 + rng.IntN(2)) % 3
	}
	n := r.nodes[run.node]
	run.start = r.now()
	run.newLeader = run.start
	stopWatch := make(chan struct{})
	watched := make(chan time.Duration, 1)
	elects := f.leader && f.kind != "diskfull" // a leader with a full disk may stay leader
	if elects {
		go func() { watched <- r.watchNewLeader(run.node, stopWatch) }()
	}
	fail := func(err error) {
		if err != nil && run.err == "" {
			run.err = err.Error()
		}
	}
	switch f.kind {
	case "kill", "wipe":
		n.up.Store(false)
		n.mu.Lock()
		n.kills = append(n.kills, r.now())
		n.mu.Unlock()
		r.kill(n, syscall.SIGKILL)
		if f.kind == "wipe" {
			entries, _ := os.ReadDir(n.dir)
			for _, e := range entries {
				fail(os.RemoveAll(filepath.Join(n.dir, e.Name())))
			}
		}
		time.Sleep(cfg.down) // pacing: the fault schedule: the node stays down this long
		r.launch(n)
		fail(r.waitReady(n, 90*time.Second))
		n.up.Store(true)
	case "stop":
		r.kill(n, syscall.SIGSTOP)
		time.Sleep(cfg.hold) // pacing: the fault schedule: the fault is held this long
		r.kill(n, syscall.SIGCONT)
	case "partition":
		r.lab.partition(run.node)
		time.Sleep(cfg.hold) // pacing: the fault schedule: the fault is held this long
		r.lab.heal(run.node)
	case "diskfull":
		filler, err := fillDisk(n.dir)
		fail(err)
		time.Sleep(cfg.hold) // pacing: the fault schedule: the fault is held this long
		fail(os.Remove(filler))
	}
	run.end = r.now()
	close(stopWatch)
	if elects {
		if at := <-watched; at > 0 {
			run.newLeader = at
		} else {
			run.newLeader = run.end
		}
	}
	return run
}

// watchNewLeader polls the other nodes' fedgate_raft_leader until one of
// them leads, and returns when; 0 if stop came first.
func (r *chaosRegion) watchNewLeader(old int, stop <-chan struct{}) time.Duration {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	for {
		for i, n := range r.nodes {
			if i == old || !n.up.Load() {
				continue
			}
			resp, err := hc.Get(n.endpoint + "/_fedgate/metrics")
			if err != nil {
				continue
			}
			leads := false
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				leads = leads || sc.Text() == "fedgate_raft_leader 1"
			}
			resp.Body.Close()
			if leads {
				return r.now()
			}
		}
		select {
		case <-stop:
			return 0
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fillDisk writes zeros into dir until its filesystem is full.
func fillDisk(dir string) (string, error) {
	p := filepath.Join(dir, "chaos-filler")
	f, err := os.Create(p)
	if err != nil {
		return p, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p, nil
			}
			return p, err
		}
	}
}

// chaosLoad drives the region and keeps what it saw.
type chaosLoad struct {
	r       *chaosRegion
	hist    history
	nextID  atomic.Uint64
	sent    sync.Map // id -> "bucket/key"
	mu      sync.Mutex
	uniq    map[string]uint64 // acknowledged unique keys -> id
	unsure  map[string]uint64 // unique keys whose PUT had no answer
	samples []sample
	cutoffs []string
	bad     []string // foreign bodies, lost objects, unexpected errors
	refused []refusal
	gauges  []gauge
}

// refusal is a 4xx answer to a request that should have worked; one that
// a fault explains (RequestTimeout from a node frozen while it read the
// body) is expected.
type refusal struct {
	node      int
	call, ret time.Duration
	code, msg string
}

// gauge is one node's write-back state at one time.
type gauge struct {
	at                   time.Duration
	node                 int
	backlog, staged, cap float64
	reclaim              float64 // drained or superseded: new writes may take it
}

type sample struct {
	call, ret time.Duration
	node      int
	write, ok bool
	what      string // e.g. "PUT ckpt 40 KiB"
	failure   string // the S3 error code, or what broke ("" when ok)
}

var chaosBuckets = []string{"ckpt", "datasets"} // write-back, write-through

const chaosRegKeys = 10 // register keys per bucket

func (l *chaosLoad) fail(format string, args ...any) {
	l.mu.Lock()
	l.bad = append(l.bad, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *chaosLoad) sample(s sample) {
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// pick chooses a node clients may use, like a load balancer that drops a
// node whose process is gone (a frozen or cut-off node still gets traffic).
func (l *chaosLoad) pick(rng *rand.Rand) int {
	for {
		if i := rng.IntN(3); l.r.nodes[i].up.Load() {
			return i
		}
	}
}

// nodeFor is the node a client sends its next request to: pin when it is a
// probe (false, after a pause, while pin's process is gone), else pick's.
func (l *chaosLoad) nodeFor(pin int, rng *rand.Rand) (int, bool) {
	switch {
	case pin < 0:
		return l.pick(rng), true
	case !l.r.nodes[pin].up.Load():
		time.Sleep(100 * time.Millisecond) // pacing: a client's pause before it probes its gone node again
		return pin, false
	}
	return pin, true
}

func chaosSize(rng *rand.Rand) int64 {
	switch x := rng.Float64(); {
	case x < 0.70:
		return 1024 + rng.Int64N(63*1024)
	case x < 0.92:
		return 64*1024 + rng.Int64N(960*1024)
	default:
		return 1<<20 + rng.Int64N(11<<20)
	}
}

// writer PUTs (plain and If-None-Match: *), DELETEs and writes unique keys.
// Its client does not retry: each attempt is one operation in the history,
// and one whose answer never came has an unknown outcome.
//
// A probe (pin >= 0) writes small objects through node pin only, so that
// what a healthy node's clients wait during a fault is measured even when
// every other client is stuck on a frozen node.
func (l *chaosLoad) writer(w int, until time.Duration, clients []*s3.Client, pin int) {
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	seq := 0
	for l.r.now() < until {
		node, ok := l.nodeFor(pin, rng)
		if !ok {
			continue
		}
		c := clients[node]
		bucket := chaosBuckets[rng.IntN(2)]
		reg := fmt.Sprintf("reg/%02d", rng.IntN(chaosRegKeys))
		switch x := rng.Float64(); {
		case x < 0.45:
			l.put(w, node, c, bucket, reg, opPut, rng, pin >= 0)
		case x < 0.60:
			l.put(w, node, c, bucket, reg, opCondPut, rng, pin >= 0)
		case x < 0.70:
			l.del(w, node, c, bucket, reg)
		default:
			seq++
			l.put(w, node, c, bucket, fmt.Sprintf("uniq/w%d-%06d", w, seq), opPut, rng, pin >= 0)
		}
	}
}

func (l *chaosLoad) put(client, node int, c *s3.Client, bucket, key string, kind regKind, rng *rand.Rand, small bool) {
	id := l.nextID.Add(1)
	size := chaosSize(rng)
	if small {
		size = 1024 + rng.Int64N(63*1024)
	}
	l.sent.Store(id, bucket+"/"+key)
	body := makeBody(id, size)
	call := l.r.now()
	err := chaosPut(c, bucket, key, body, kind == opCondPut)
	ret := l.r.now()
	op := histOp{Key: bucket + "/" + key, Client: client, Node: node, In: regInput{Kind: kind, ID: id}, Call: call, Ret: ret}
	out, definite := classify(err)
	if out.Failed && kind != opCondPut {
		definite, out.Failed = false, false // 412 on a plain PUT: not ours to model
		l.fail("PUT %s/%s via n%d: 412 without a condition", bucket, key, node+1)
	}
	l.sample(sample{call: call, ret: ret, node: node, write: true, ok: err == nil || out.Failed, what: fmt.Sprintf("PUT %s %d KiB", bucket, size>>10),
		failure: failure(err, out.Failed)})
	uniq := strings.HasPrefix(key, "uniq/")
	switch {
	case err == nil || out.Failed:
		if uniq {
			l.mu.Lock()
			l.uniq[bucket+"/"+key] = id
			l.mu.Unlock()
			return
		}
	case definite:
		l.refuse(err, node, call, ret, "PUT %s/%s via n%d: %v", bucket, key, node+1, err)
		return // not applied: nothing to model
	default:
		op.Out, op.Ret, op.Err = regOutput{Unknown: true}, forever, shortErr(err)
		if uniq {
			l.mu.Lock()
			l.unsure[bucket+"/"+key] = id
			l.mu.Unlock()
			return
		}
	}
	op.Out.Failed = out.Failed
	l.hist.add(op)
}

func (l *chaosLoad) del(client, node int, c *s3.Client, bucket, key string) {
	call := l.r.now()
	cx, cancel := context.WithTimeout(context.Background(), time.Minute)
	_, err := c.DeleteObject(cx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	cancel()
	ret := l.r.now()
	l.sample(sample{call: call, ret: ret, node: node, write: true, ok: err == nil, what: "DELETE " + bucket, failure: failure(err, false)})
	op := histOp{Key: bucket + "/" + key, Client: client, Node: node, In: regInput{Kind: opDelete}, Call: call, Ret: ret}
	if err != nil {
		if _, definite := classify(err); definite {
			l.refuse(err, node, call, ret, "DELETE %s/%s via n%d: %v", bucket, key, node+1, err)
			return
		}
		op.Out, op.Ret, op.Err = regOutput{Unknown: true}, forever, shortErr(err)
	}
	l.hist.add(op)
}

// chaosPut writes body with one PutObject, or as a multipart upload of
// 5 MiB parts when it is larger than 6 MiB.
func chaosPut(c *s3.Client, bucket, key string, body []byte, ifAbsent bool) error {
	cx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var inm *string
	if ifAbsent {
		inm = aws.String("*")
	}
	if len(body) <= 6<<20 {
		_, err := c.PutObject(cx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body), IfNoneMatch: inm})
		return err
	}
	mp, err := c.CreateMultipartUpload(cx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return notSent{err}
	}
	// Like the SDKs' upload managers, abort an upload that failed (its
	// parts would hold staging until a lifecycle rule removed them).
	abort := func() {
		ax, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.AbortMultipartUpload(ax, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mp.UploadId})
	}
	var parts []types.CompletedPart
	for n, off := int32(1), 0; off < len(body); n, off = n+1, off+5<<20 {
		end := min(off+5<<20, len(body))
		p, err := c.UploadPart(cx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mp.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(body[off:end])})
		if err != nil {
			abort()
			return notSent{err}
		}
		parts = append(parts, types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(n)})
	}
	_, err = c.CompleteMultipartUpload(cx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: inm})
	if err != nil {
		abort() // NoSuchUpload if it did complete
	}
	return err
}

// notSent marks a failure before the write could take effect (a multipart
// upload that never reached Complete).
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// classify says what a write's error means: 412 (Failed), or whether it
// certainly did not take effect (definite) or may have (an unknown outcome).
func classify(err error) (out regOutput, definite bool) {
	if err == nil {
		return out, true
	}
	var ns notSent
	var op *net.OpError
	var re *smithyhttp.ResponseError
	switch {
	case errors.As(err, &ns):
		return out, true
	case errors.As(err, &op) && op.Op == "dial":
		return out, true // never sent
	case errors.As(err, &re) && re.HTTPStatusCode() == 412:
		out.Failed = true
		return out, true
	case errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500:
		return out, true
	}
	return out, false
}

// refuse keeps a 4xx answer other than 412 for the end of the run.
func (l *chaosLoad) refuse(err error, node int, call, ret time.Duration, format string, args ...any) {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 400 || re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == 412 {
		return
	}
	l.mu.Lock()
	l.refused = append(l.refused, refusal{node: node, call: call, ret: ret, code: shortErr(err), msg: fmt.Sprintf(format, args...)})
	l.mu.Unlock()
}

// monitor samples every node's write-back gauges each second until stop.
func (l *chaosLoad) monitor(stop <-chan struct{}) {
	hc := &http.Client{Timeout: time.Second}
	for {
		for i, n := range l.r.nodes {
			if !n.up.Load() {
				continue
			}
			resp, err := hc.Get(n.endpoint + "/_fedgate/metrics")
			if err != nil {
				continue
			}
			g := gauge{at: l.r.now(), node: i}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				name, val, _ := strings.Cut(sc.Text(), " ")
				v, _ := strconv.ParseFloat(val, 64)
				switch name {
				case "fedgate_writeback_backlog_bytes":
					g.backlog = v
				case "fedgate_writeback_staging_used_bytes":
					g.staged = v
				case "fedgate_writeback_staging_capacity_bytes":
					g.cap = v
				case "fedgate_writeback_staging_reclaimable_bytes":
					g.reclaim = v
				}
			}
			resp.Body.Close()
			l.mu.Lock()
			l.gauges = append(l.gauges, g)
			l.mu.Unlock()
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// failure names what a client got instead of success: the S3 error code,
// "connection refused" and the like, or a timeout.
func failure(err error, failed412 bool) string {
	var op *net.OpError
	switch {
	case err == nil || failed412:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout"
	case errors.As(err, &op):
		return op.Op + ": " + op.Err.Error()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "transport error"
}

func shortErr(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[len(s)-120:]
	}
	return s
}

// reader GETs register keys and acknowledged unique keys through any node,
// with the SDK's default retries (a retried read is still one read).
// A probe (pin >= 0) reads through node pin only.
func (l *chaosLoad) reader(rd int, until time.Duration, clients []*s3.Client, pin int) {
	rng := rand.New(rand.NewPCG(uint64(rd), 11))
	for l.r.now() < until {
		node, ok := l.nodeFor(pin, rng)
		if !ok {
			continue
		}
		bucket := chaosBuckets[rng.IntN(2)]
		key := fmt.Sprintf("reg/%02d", rng.IntN(chaosRegKeys))
		var want uint64
		if rng.Float64() < 0.2 {
			l.mu.Lock()
			for k, id := range l.uniq { // a random acknowledged one
				bucket, key, _ = strings.Cut(k, "/")
				want = id
				break
			}
			l.mu.Unlock()
		}
		id, ok := l.get(100+rd, node, clients[node], bucket, key, want == 0)
		if ok && want != 0 && id != want {
			l.fail("GET %s/%s via n%d: acknowledged write %d, read %d (0: not found)", bucket, key, node+1, want, id)
		}
	}
}

// get reads bucket/key through node and checks the body; it records the
// read in the history when record is set.
func (l *chaosLoad) get(client, node int, c *s3.Client, bucket, key string, record bool) (uint64, bool) {
	cx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := l.r.now()
	out, err := c.GetObject(cx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var id uint64
	if err == nil {
		var n int64
		id, n, err = readBody(out.Body)
		out.Body.Close()
		if err != nil && n != aws.ToInt64(out.ContentLength) {
			ret := l.r.now()
			if !l.killedDuring(node, call, ret) {
				l.mu.Lock()
				l.cutoffs = append(l.cutoffs, fmt.Sprintf("GET %s/%s via n%d at %.1fs: %d of %d bytes: %v",
					bucket, key, node+1, call.Seconds(), n, aws.ToInt64(out.ContentLength), err))
				l.mu.Unlock()
			}
			l.sample(sample{call: call, ret: ret, node: node, what: "GET " + bucket, failure: "cut off"})
			return 0, false
		}
		if err != nil {
			l.fail("GET %s/%s via n%d: %v", bucket, key, node+1, err)
			return 0, false
		}
		if v, _ := l.sent.Load(id); v != bucket+"/"+key {
			l.fail("GET %s/%s via n%d returned write %d, which was sent to %v", bucket, key, node+1, id, v)
		}
	} else if !isNotFound(err) {
		ret := l.r.now()
		l.sample(sample{call: call, ret: ret, node: node, what: "GET " + bucket, failure: failure(err, false)})
		l.refuse(err, node, call, ret, "GET %s/%s via n%d: %v", bucket, key, node+1, err)
		return 0, false
	}
	ret := l.r.now()
	l.sample(sample{call: call, ret: ret, node: node, ok: true, what: "GET " + bucket})
	if record {
		l.hist.add(histOp{Key: bucket + "/" + key, Client: client, Node: node, In: regInput{Kind: opGet}, Out: regOutput{ID: id}, Call: call, Ret: ret})
	}
	return id, true
}

func (l *chaosLoad) killedDuring(node int, from, to time.Duration) bool {
	n := l.r.nodes[node]
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range n.kills {
		if k >= from && k <= to+time.Second {
			return true
		}
	}
	return false
}

func runChaos(t *testing.T, cfg chaosConfig) {
	r := startChaosRegion(t)
	l := &chaosLoad{r: r, uniq: map[string]uint64{}, unsure: map[string]uint64{}}
	writeClients := make([]*s3.Client, 3)
	readClients := make([]*s3.Client, 3)
	for i, n := range r.nodes {
		writeClients[i] = clientFor(n.endpoint, rootAK, rootSK, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
		readClients[i] = clientFor(n.endpoint, rootAK, rootSK)
	}
	begin := r.now()
	until := begin + cfg.load
	var wg sync.WaitGroup
	for w := range cfg.writers {
		wg.Add(1)
		go func() { defer wg.Done(); l.writer(w, until, writeClients, -1) }()
	}
	for rd := range cfg.readers {
		wg.Add(1)
		go func() { defer wg.Done(); l.reader(rd, until, readClients, -1) }()
	}
	for i := range r.nodes { // a probe writer and reader per node
		wg.Add(2)
		go func() { defer wg.Done(); l.writer(cfg.writers+i, until, writeClients, i) }()
		go func() { defer wg.Done(); l.reader(cfg.readers+i, until, readClients, i) }()
	}
	stopMon := make(chan struct{})
	monDone := make(chan struct{})
	go func() { defer close(monDone); l.monitor(stopMon) }()
	var runs []faultRun
	rng := rand.New(rand.NewPCG(1, 2))
	time.Sleep(cfg.gap) // pacing: the fault schedule: load alone before the first fault
	for i := 0; r.now()+cfg.hold+cfg.gap < until-cfg.quiet; i++ {
		f := chaosFaults[i%len(chaosFaults)]
		run := r.inject(f, cfg, rng)
		t.Logf("%6.1fs  %-28s n%d  for %.1fs%s", run.start.Seconds(), f, run.node+1, (run.end - run.start).Seconds(),
			map[bool]string{true: "  error: " + run.err}[run.err != ""])
		runs = append(runs, run)
		time.Sleep(cfg.gap + time.Duration(rng.Int64N(int64(cfg.gap)))) // pacing: the fault schedule: a random gap between faults
	}
	wg.Wait()
	end := r.now()
	close(stopMon)
	<-monDone

	// Everything is healed; wait for the region and the drain, then check.
	if _, err := r.settled(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := wait.Until(context.Background(), 3*time.Minute, func() bool {
		st, err := r.status(r.nodes[0])
		return err == nil && st.DrainBacklog.Objects == 0
	}); err != nil {
		r.logBacklogs(t)
		t.Fatal("the write-back backlog did not drain in 3m (each node's view above)")
	}
	l.finalChecks(t, readClients)

	report := l.report(runs, begin, end)
	t.Log("\n" + report)
	if p := os.Getenv("FEDGATE_CHAOS_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, run := range runs {
		if run.err != "" {
			t.Errorf("fault %s of n%d at %.1fs: %s", run.chaosFault, run.node+1, run.start.Seconds(), run.err)
		}
	}
	for _, s := range l.bad {
		t.Error(s)
	}
	for _, f := range l.refused {
		if !frozenDuring(runs, f) {
			t.Errorf("refused at %.1fs after %.1fs: %s", f.call.Seconds(), (f.ret - f.call).Seconds(), f.msg)
		}
	}
	for _, s := range l.cutoffs {
		t.Errorf("cut-off response: %s", s)
	}
	// Under faults every refusal says what to do (503 SlowDown, retry);
	// a 500 is a path that does not know what went wrong.
	l.mu.Lock()
	for _, s := range l.samples {
		if s.failure == "InternalError" {
			t.Errorf("500 InternalError: %s via n%d at %.1fs", s.what, s.node+1, s.call.Seconds())
		}
	}
	l.mu.Unlock()
	fails, unknown := checkLinearizable(l.hist.byKey(), time.Minute)
	for _, f := range fails {
		t.Error(f)
	}
	if len(unknown) > 0 {
		t.Logf("linearizability not decided within the time limit for %d keys: %v", len(unknown), unknown)
	}
}

// finalChecks reads every key through every node and from the store: the
// nodes must agree, acknowledged unique keys must be there, listings must
// hold only keys that were written, with their writers' bodies.
func (l *chaosLoad) finalChecks(t *testing.T, clients []*s3.Client) {
	st, err := posix.New("nas", policies.Location{Cloud: "onprem", Region: "lga1"}, l.r.nas)
	mustOK(t, err)
	fromStore := func(key string) (uint64, error) {
		info, err := st.Stat(context.Background(), key)
		if err != nil {
			return 0, nil // absent (or unreadable: compared below)
		}
		rc, err := st.ReadRange(context.Background(), key, 0, info.Size, "")
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		id, _, err := readBody(rc)
		return id, err
	}
	var keys []string
	for _, b := range chaosBuckets {
		for k := range chaosRegKeys {
			keys = append(keys, fmt.Sprintf("%s/reg/%02d", b, k))
		}
	}
	l.mu.Lock()
	for k := range l.uniq {
		keys = append(keys, k)
	}
	for k := range l.unsure {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	sort.Strings(keys)
	// Eight workers, each key's reads in one of them.
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				l.finalCheck(k, clients, fromStore)
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	for _, b := range chaosBuckets {
		var lists [][]string
		for i, c := range clients {
			var names []string
			p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(b)})
			for p.HasMorePages() {
				page, err := p.NextPage(context.Background())
				if err != nil {
					l.fail("LIST %s via n%d: %v", b, i+1, err)
					break
				}
				for _, o := range page.Contents {
					names = append(names, aws.ToString(o.Key))
					if !known[b+"/"+aws.ToString(o.Key)] {
						l.fail("LIST %s via n%d shows %s, which nobody wrote", b, i+1, aws.ToString(o.Key))
					}
				}
			}
			lists = append(lists, names)
		}
		if strings.Join(lists[0], "\n") != strings.Join(lists[1], "\n") || strings.Join(lists[1], "\n") != strings.Join(lists[2], "\n") {
			l.fail("LIST %s differs between nodes: %d / %d / %d keys", b, len(lists[0]), len(lists[1]), len(lists[2]))
		}
	}
}

// finalCheck reads k through every node and from the store.
func (l *chaosLoad) finalCheck(k string, clients []*s3.Client, fromStore func(string) (uint64, error)) {
	bucket, key, _ := strings.Cut(k, "/")
	var seen []uint64
	for i := range l.r.nodes {
		id, ok := l.get(200+i, i, clients[i], bucket, key, strings.HasPrefix(key, "reg/"))
		if !ok {
			l.fail("final GET %s via n%d failed", k, i+1)
		}
		seen = append(seen, id)
	}
	if seen[0] != seen[1] || seen[1] != seen[2] {
		l.fail("%s: the nodes disagree: %v", k, seen)
	}
	sid, err := fromStore(k)
	if err != nil {
		l.fail("%s in the store: %v", k, err)
	} else if sid != seen[0] {
		l.fail("%s: the nodes serve write %d, the store holds %d", k, seen[0], sid)
	}
	l.mu.Lock()
	want, acked := l.uniq[k]
	sent, unsure := l.unsure[k]
	l.mu.Unlock()
	if acked && seen[0] != want {
		l.fail("acknowledged %s (write %d) reads as %d: lost", k, want, seen[0])
	}
	if unsure && seen[0] != 0 && seen[0] != sent {
		l.fail("%s holds write %d, not the one sent (%d)", k, seen[0], sent)
	}
}

// report is the run's availability per 10 s window and what each fault
// cost.
func (l *chaosLoad) report(runs []faultRun, begin, end time.Duration) string {
	l.mu.Lock()
	samples := append([]sample(nil), l.samples...)
	gauges := append([]gauge(nil), l.gauges...)
	l.mu.Unlock()
	var b strings.Builder
	writes, reads, wok, rok := 0, 0, 0, 0
	for _, s := range samples {
		if s.call > end {
			continue
		}
		if s.write {
			writes++
			if s.ok {
				wok++
			}
		} else {
			reads++
			if s.ok {
				rok++
			}
		}
	}
	fmt.Fprintf(&b, "chaos run: %.0f s of load, %d writes (%d acknowledged), %d reads (%d answered), %d unique keys acknowledged\n",
		(end - begin).Seconds(), writes, wok, reads, rok, len(l.uniq))
	fmt.Fprintf(&b, "%d cut-off responses, %d other violations, %d 4xx answers\n\n", len(l.cutoffs), len(l.bad), len(l.refused))
	fmt.Fprintf(&b, "faults (election timeout %v):\n", chaosElection)
	fmt.Fprintf(&b, "  %-7s %-28s %-4s %-7s %-11s %-12s %s\n", "at", "fault", "node", "lasted", "new leader", "first write", "longest wait on a healthy node")
	for _, run := range runs {
		first := "-"
		var firstAt time.Duration = -1
		longest, longestWhat := time.Duration(0), ""
		for _, s := range samples {
			if s.write && s.ok && s.call >= run.start && (firstAt < 0 || s.ret < firstAt) {
				firstAt = s.ret
			}
			if s.node != run.node && s.call >= run.start && s.call <= run.end {
				if w := s.ret - max(s.call, run.newLeader); w > longest {
					longest, longestWhat = w, fmt.Sprintf("(%s via n%d, %s)", s.what, s.node+1, map[bool]string{true: "ok", false: "failed"}[s.ok])
				}
			}
		}
		if firstAt >= 0 {
			first = fmt.Sprintf("+%.2fs", (firstAt - run.start).Seconds())
		}
		nl := "-"
		if run.leader && run.kind != "diskfull" {
			nl = fmt.Sprintf("+%.2fs", (run.newLeader - run.start).Seconds())
		}
		fmt.Fprintf(&b, "  %6.1fs %-28s n%-3d %6.1fs %-11s %-12s %.2fs %s\n", run.start.Seconds(), run.chaosFault, run.node+1,
			(run.end - run.start).Seconds(), nl, first, longest.Seconds(), longestWhat)
		on, off := map[string]int{}, map[string]int{}
		for _, s := range samples {
			if s.failure != "" && s.call >= run.start && s.call <= run.end {
				if s.node == run.node {
					on[s.failure]++
				} else {
					off[s.failure]++
				}
			}
		}
		fmt.Fprintf(&b, "           failures: through n%d %s; through the others %s\n", run.node+1, counts(on), counts(off))
	}
	fmt.Fprintf(&b, "\navailability per 10 s window (answered / sent, by invocation time; max latency on nodes not under a fault;\n")
	fmt.Fprintf(&b, "staging held: staged bytes new writes cannot take, as a share of the capacity, highest in the window):\n")
	fmt.Fprintf(&b, "  %-11s %-17s %-17s %-9s %-12s %-20s %s\n", "window", "writes", "reads", "max lat", "backlog MiB", "staging held n1/2/3", "faults")
	for w := begin.Truncate(10 * time.Second); w < end; w += 10 * time.Second {
		var wn, wo, rn, ro int
		var maxLat time.Duration
		for _, s := range samples {
			if s.call < w || s.call >= w+10*time.Second {
				continue
			}
			if s.write {
				wn++
				if s.ok {
					wo++
				}
			} else {
				rn++
				if s.ok {
					ro++
				}
			}
			healthy := true
			for _, run := range runs {
				if s.node == run.node && s.call <= run.end && s.ret >= run.start {
					healthy = false
				}
			}
			if healthy && s.ret-s.call > maxLat {
				maxLat = s.ret - s.call
			}
		}
		var backlog float64
		staged := [3]float64{}
		for _, g := range gauges {
			if g.at >= w && g.at < w+10*time.Second {
				backlog = max(backlog, g.backlog)
				if g.cap > 0 {
					staged[g.node] = max(staged[g.node], 100*(g.staged-g.reclaim)/g.cap)
				}
			}
		}
		var active []string
		for _, run := range runs {
			if run.start < w+10*time.Second && run.end >= w {
				active = append(active, fmt.Sprintf("%s n%d", run.kind, run.node+1))
			}
		}
		fmt.Fprintf(&b, "  %4.0f-%-4.0fs  %5d/%-5d %5.1f%%  %5d/%-5d %5.1f%%  %6.2fs  %9.1f    %3.0f%%/%3.0f%%/%3.0f%%       %s\n", w.Seconds(), (w + 10*time.Second).Seconds(),
			wo, wn, pct(wo, wn), ro, rn, pct(ro, rn), maxLat.Seconds(), backlog/(1<<20), staged[0], staged[1], staged[2], strings.Join(active, ", "))
	}
	return b.String()
}

// frozenDuring reports whether f is RequestTimeout from a node that was
// stopped while it served the request: its read deadline passed while it
// was frozen, and the client is told to retry (S3 clients do).
func frozenDuring(runs []faultRun, f refusal) bool {
	for _, run := range runs {
		if f.code == "RequestTimeout" && run.kind == "stop" && run.node == f.node && f.call <= run.end && f.ret >= run.start {
			return true
		}
	}
	return false
}

// counts prints a histogram of failures, most frequent first.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}
