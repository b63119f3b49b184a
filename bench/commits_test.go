package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	fgraft "github.com/fedgate/fedgate/regionstate"
)

// pprofEnv names a directory: when set, BenchmarkRegionCommits ends with an
// unmeasured 128-client load during which it saves 10-second CPU profiles
// of the leader and of a follower there (nodes get --debug-listen).
const pprofEnv = "FEDGATE_BENCH_PPROF_DIR"

var commitClients = []int{1, 16, 128}

// commitTargets selects BenchmarkRegionCommits' targets: fedgate
// (requests spread over the nodes), fedgate-leader (all to the leader),
// raw (raw hashicorp/raft, trivial FSM, the log store fedgate ships),
// raw-other (the same with the other log store), raw+bbolt (the shipped
// store and an FSM writing each batch to a bbolt file, fsynced, as
// fedgate's FSM did before it stopped syncing), s3-noop (the same S3
// clients against a server in this process that answers at once and
// checks nothing: the most acknowledged S3 writes per second that any
// server could give these clients on this machine).
var commitTargets = flag.String("committargets", "fedgate,fedgate-leader,raw,raw-other,s3-noop",
	"BenchmarkRegionCommits targets (comma-separated): fedgate, fedgate-leader, raw, raw-other, raw+bbolt, s3-noop")

// rawNames: the log stores of raw and raw-other.
var rawNames [2]string

// commitResults[clients][target] = commits/s per round.
var commitResults = map[int]map[string][]float64{}

func recordCommits(clients int, target string, round int, rate float64) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if commitResults[clients] == nil {
		commitResults[clients] = map[string][]float64{}
	}
	r := commitResults[clients][target]
	for len(r) <= round {
		r = append(r, 0)
	}
	r[round] = rate
	commitResults[clients][target] = r
}

// commitLatency[clients] = "n1 (leader) 3.1 ms, n2 ..." of the last round.
var commitLatency = map[int]string{}

func recordLatency(clients int, r *region, ms [3]float64) {
	st, _ := r.status()
	var parts []string
	for i, s := range r.nodes {
		role := "follower"
		if s.id == st.Leader {
			role = "leader"
		}
		parts = append(parts, fmt.Sprintf("%s (%s) %.1f ms", s.id, role, ms[i]))
	}
	resultsMu.Lock()
	commitLatency[clients] = strings.Join(parts, ", ")
	resultsMu.Unlock()
}

// commitWorker is one concurrent client; op runs one commit.
type commitWorker struct {
	id, k   int         // k: requests sent
	node    int         // node of the last request
	created [][2]string // key, upload id
}

// BenchmarkRegionCommits measures Raft commits per second through a
// 3-node fedgate region of real processes and, in the same run, through
// raw hashicorp/raft (3 nodes in this process, same log store and
// settings, TCP loopback), with 1, 16 and 128 concurrent clients.
//
// fedgate's operation is CreateMultipartUpload on the write-back bucket
// "ckpt": exactly one Raft commit (a CreateUpload command) and nothing
// else: a write-back upload's session lives only in Raft state, so no
// store or staging area is touched (a 1-byte UploadPart would add two
// fsynced staging copies and a read barrier; AbortMultipartUpload through a
// follower adds a read barrier, a round trip to the leader, before its
// commit). The uploads are aborted after each measurement, unmeasured.
// Client w's k-th request goes to node (w+k) mod 3, so two thirds of the
// commits arrive at a follower and are forwarded to the leader (over the
// internal HTTP API). "fedgate-leader" sends every request to the leader
// instead, which shows what forwarding costs.
//
// Raw raft applies entries of the same size (an encoded CreateUpload) on
// the leader, with a trivial FSM ("raw") and with an FSM that writes each
// batch to an fsynced bbolt file as fedgate's FSM does ("raw+bbolt").
func BenchmarkRegionCommits(b *testing.B) {
	pprofDir := os.Getenv(pprofEnv)
	r := startRegion(b, regionOptions{debug: pprofDir != ""})
	clients := make([]*s3.Client, len(r.nodes))
	for i := range r.nodes {
		clients[i] = r.s3Client(i)
	}
	shipped := logKind(fgraft.DefaultLogStore)
	other := logKind("boltdb")
	if shipped == other {
		other = "wal"
	}
	want := map[string]bool{}
	for _, t := range strings.Split(*commitTargets, ",") {
		want[strings.TrimSpace(t)] = true
	}
	var raw, rawOther, rawBolt *rawCluster
	if want["raw"] {
		raw = startRawRaft(b, fsmTrivial, shipped)
	}
	if want["raw-other"] {
		rawOther = startRawRaft(b, fsmTrivial, other)
	}
	if want["raw+bbolt"] {
		rawBolt = startRawRaft(b, fsmBolt, shipped)
	}
	rawNames = [2]string{string(shipped), string(other)}

	entry, err := fgraft.Encode(fgraft.CreateUpload{Upload: fgraft.MultipartUpload{
		ID: "6f1c0a3e9b7d42c58e1f0a2b3c4d5e6f708192a3b4c5d6e7", Bucket: "ckpt", Key: "m/w127/4096", Store: "nas",
		Initiator: "root", Created: time.Now().UTC(), WriteBack: true}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()

	leader := r.leader(b)
	leaderIdx := 0
	for i, s := range r.nodes {
		if s.id == leader {
			leaderIdx = i
		}
	}
	roundRobin := func(w *commitWorker) int { return (w.id + w.k) % len(clients) }
	leaderOnly := func(*commitWorker) int { return leaderIdx }
	fedgateOp := func(pick func(*commitWorker) int) func(*commitWorker) error {
		return func(w *commitWorker) error { return fedgateCommit(ctx, r, clients, w, pick) }
	}
	finish := func(ws []*commitWorker) { abortAll(ctx, clients[leaderIdx], ws) } // unmeasured
	rawOp := func(c *rawCluster) func(*commitWorker) error {
		return func(*commitWorker) error {
			l := c.leader()
			if l == nil {
				return fmt.Errorf("raw raft: no leader")
			}
			return l.Apply(entry, 0).Error()
		}
	}
	var noop *s3.Client
	if want["s3-noop"] {
		noop = s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(startNoopS3(b)), UsePathStyle: true,
			Credentials: staticCredentials(), RetryMaxAttempts: 1,
			HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, DisableCompression: true}}})
	}
	noopOp := func(w *commitWorker) error {
		w.k++
		_, err := noop.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String(fmt.Sprintf("m/w%d/%d", w.id, w.k))})
		return err
	}
	targets := []struct {
		name   string
		op     func(*commitWorker) error
		finish func([]*commitWorker)
	}{
		{"fedgate", fedgateOp(roundRobin), finish},
		{"fedgate-leader", fedgateOp(leaderOnly), finish},
		{"raw", rawOp(raw), nil},
		{"raw-other", rawOp(rawOther), nil},
		{"raw+bbolt", rawOp(rawBolt), nil},
		{"s3-noop", noopOp, nil},
	}
	for _, c := range commitClients {
		for round := range *rounds {
			for _, t := range targets {
				if !want[t.name] {
					continue
				}
				b.Run(fmt.Sprintf("c%d/%s/round%d", c, t.name, round), func(b *testing.B) {
					rate := runCommits(b, c, t.op, t.finish)
					b.ReportMetric(rate, "commits/s")
					recordCommits(c, t.name, round, rate)
					if t.name == "fedgate" {
						recordLatency(c, r, meanLatency())
					}
				})
			}
		}
	}
	if pprofDir != "" {
		profileCommits(b, r, pprofDir, fedgateOp(roundRobin), finish)
	}
	summary := commitSummary(len(entry))
	resultsMu.Lock()
	notes = append(notes, summary)
	resultsMu.Unlock()
}

// fedgateCommit is one request of a fedgate worker: CreateMultipartUpload
// through the node pick chooses. The upload is aborted later, unmeasured.
func fedgateCommit(ctx context.Context, r *region, clients []*s3.Client, w *commitWorker, pick func(*commitWorker) int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang fails the run
	defer cancel()
	w.node = pick(w)
	key := fmt.Sprintf("m/w%d/%d", w.id, w.k)
	w.k++
	start := time.Now()
	out, err := clients[w.node].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("CreateMultipartUpload via %s: %w", r.nodes[w.node].id, err)
	}
	if measuring.Load() {
		latency[w.node].sum.Add(int64(time.Since(start)))
		latency[w.node].n.Add(1)
	}
	w.created = append(w.created, [2]string{key, aws.ToString(out.UploadId)})
	return nil
}

// abortAll aborts the workers' uploads through the leader (where the
// lookup needs no read barrier), 16 at a time, so the session table does
// not grow from one measurement to the next.
func abortAll(ctx context.Context, c *s3.Client, ws []*commitWorker) {
	work := make(chan [2]string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for u := range work {
				_, _ = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String(u[0]), UploadId: aws.String(u[1])})
			}
		})
	}
	for _, w := range ws {
		for _, u := range w.created {
			work <- u
		}
		w.created = nil
	}
	close(work)
	wg.Wait()
}

// measuring is true while runCommits counts (one benchmark runs at a time).
var measuring atomic.Bool

// benchTime is -benchtime when it is a duration (2s otherwise).
func benchTime() time.Duration {
	if f := flag.Lookup("test.benchtime"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return d
		}
	}
	return 2 * time.Second
}

// runCommits runs clients concurrent workers calling op in a loop: after a
// warm-up (a fifth of -benchtime, at least 300ms), it counts the
// operations that complete during -benchtime and returns them per second.
// It ignores b.N: the body outlasts -benchtime, so the framework runs it
// once. (Counting b.N operations instead would measure a single round of
// latency whenever b.N is below the number of clients.)
func runCommits(b *testing.B, clients int, op func(*commitWorker) error, finish func([]*commitWorker)) float64 {
	d := benchTime()
	var count atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	ws := make([]*commitWorker, clients)
	for i := range ws {
		ws[i] = &commitWorker{id: i}
	}
	for _, w := range ws {
		wg.Go(func() {
			for !stop.Load() {
				if err := op(w); err != nil {
					failed.Store(&err)
					stop.Store(true)
					return
				}
				if measuring.Load() {
					count.Add(1)
				}
			}
		})
	}
	time.Sleep(max(d/5, 300*time.Millisecond)) // pacing: warm-up before the measured window
	resetLatency()
	measuring.Store(true)
	start := time.Now()
	time.Sleep(d) // pacing: the measured window
	measuring.Store(false)
	n := count.Load()
	el := time.Since(start).Seconds()
	stop.Store(true)
	wg.Wait()
	if finish != nil {
		finish(ws)
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	rate := float64(n) / el
	b.ReportMetric(1e9/rate, "ns/op") // per commit, all clients together
	return rate
}

// Latency of fedgate's requests per node during the measured window.
var latency [3]struct{ sum, n atomic.Int64 }

func resetLatency() {
	for i := range latency {
		latency[i].sum.Store(0)
		latency[i].n.Store(0)
	}
}

// meanLatency is each node's mean request latency in ms.
func meanLatency() [3]float64 {
	var out [3]float64
	for i := range latency {
		if n := latency[i].n.Load(); n > 0 {
			out[i] = float64(latency[i].sum.Load()) / float64(n) / 1e6
		}
	}
	return out
}

// profileCommits runs 128 clients against fedgate for about 12s while it
// saves 10-second CPU profiles of the leader and of one follower.
func profileCommits(b *testing.B, r *region, dir string, op func(*commitWorker) error, finish func([]*commitWorker)) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	leader := r.leader(b)
	var lead, follower *regionNode
	for _, s := range r.nodes {
		if s.id == leader {
			lead = s
		} else if follower == nil {
			follower = s
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ws := make([]*commitWorker, 128)
	var ops atomic.Int64
	for i := range ws {
		ws[i] = &commitWorker{id: i}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := op(ws[i]); err != nil {
					b.Error(err)
					return
				}
				ops.Add(1)
			}
		})
	}
	time.Sleep(time.Second) // pacing: warm-up before the measured window
	var pw sync.WaitGroup
	var errs [2]error
	start := time.Now()
	pw.Go(func() { errs[0] = lead.profileCPU(context.Background(), dir, 10, "leader-"+lead.id+".pprof") })
	pw.Go(func() { errs[1] = follower.profileCPU(context.Background(), dir, 10, "follower-"+follower.id+".pprof") })
	before := ops.Load()
	pw.Wait()
	during := float64(ops.Load()-before) / time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	finish(ws)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	resultsMu.Lock()
	notes = append(notes, fmt.Sprintf("CPU profiles of the leader (%s) and a follower (%s) under 128 clients (%.0f commits/s while profiling) are in %s",
		lead.id, follower.id, during, dir))
	resultsMu.Unlock()
}

func commitSummary(entrySize int) string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var out bytes.Buffer
	fmt.Fprintf(&out, "Raft commits/s, 3 nodes (raw raft entries: %d bytes, an encoded CreateUpload); ratios are medians of the rounds' ratios:\n\n", entrySize)
	fmt.Fprintf(&out, "| clients | fedgate | fedgate, all via the leader | raw raft (%[1]s) | raw raft (%[2]s) | raw (%[1]s) + fsynced bbolt FSM | fedgate/raw %[1]s (each round) | fedgate via leader/raw %[1]s | fedgate/raw %[2]s | no-op S3 server | no-op S3/raw %[1]s (each round) |\n", rawNames[0], rawNames[1])
	fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|---|")
	cs := make([]int, 0, len(commitResults))
	for c := range commitResults {
		cs = append(cs, c)
	}
	sort.Ints(cs)
	ratios := func(a, b []float64) []float64 {
		var r []float64
		for i := range min(len(a), len(b)) {
			r = append(r, a[i]/b[i])
		}
		return r
	}
	for _, c := range cs {
		res := commitResults[c]
		fg, fl, raw, ro, rb, no := res["fedgate"], res["fedgate-leader"], res["raw"], res["raw-other"], res["raw+bbolt"], res["s3-noop"]
		fmt.Fprintf(&out, "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.3f (%s) | %.3f | %.3f | %.0f | %.3f (%s) |\n", c, median(fg), median(fl), median(raw), median(ro), median(rb),
			median(ratios(fg, raw)), spread3(ratios(fg, raw)), median(ratios(fl, raw)), median(ratios(fg, ro)),
			median(no), median(ratios(no, raw)), spread3(ratios(no, raw)))
	}
	fmt.Fprintln(&out, "\nfedgate's mean request latency per node, clients spread over the nodes (last round):")
	for _, c := range cs {
		if l := commitLatency[c]; l != "" {
			fmt.Fprintf(&out, "- %d clients: %s\n", c, l)
		}
	}
	return out.String()
}

func spread3(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}

// startNoopS3 starts an HTTP server in this process that answers every
// request with an InitiateMultipartUploadResult at once, checking nothing
// (no signature, no state, no disk): what the benchmark's S3 clients and
// the loopback network cost, with the least work a server can do.
func startNoopS3(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+
			`<InitiateMultipartUploadResult><Bucket>ckpt</Bucket><Key>k</Key><UploadId>u</UploadId></InitiateMultipartUploadResult>`)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
