package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/nodetest"
	"github.com/fedgate/fedgate/node/peerapi"
)

// behindWrites is how many Raft writes (bucket creations) the region takes
// while the stopped follower is down.
const behindWrites = 200

// A follower restarted after missing many writes answers readyz 503 until
// it has caught up: at its first 200 (polled as a kubelet would, but
// tightly) it has applied at least what the leader had applied when the
// restart began, and a read on it of the last write succeeds. This is what
// a rolling update of the Helm chart's StatefulSet relies on
// (docs/kubernetes.md, "Upgrades"). "log": it catches up from the leader's
// log; "snapshot": the leader compacted its log meanwhile, so it must
// install the leader's snapshot.
func TestRestartedNodeReadyOnlyWhenCaughtUp(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		name := map[bool]string{false: "log", true: "snapshot"}[snapshot]
		t.Run(name, func(t *testing.T) { testReadyWhenCaughtUp(t, snapshot) })
	}
}

func testReadyWhenCaughtUp(t *testing.T, snapshot bool) {
	dataDirs := map[int]string{}
	r := nodetest.MakeRegion(t, 3, nodetest.Options{Config: func(i int, c *node.Config) {
		dataDirs[i] = c.DataDir
		if snapshot {
			c.RaftTrailingLogs = 8 // a snapshot leaves almost no log behind
		}
	}})
	ctx := testCtx(t, 3*time.Minute)
	leader := r.Leader()
	down := r.Followers()[0]
	r.WaitForReplication()
	addr := r.Node(down).Endpoint()
	stoppedAt := r.Node(down).Raft().State().AppliedIndex()
	r.Stop(down)

	lc := r.Client(leader)
	for i := range behindWrites {
		if _, err := lc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(fmt.Sprintf("behind-%03d", i))}); err != nil {
			t.Fatalf("create bucket %d while node %d is down: %v", i, down, err)
		}
	}
	last := fmt.Sprintf("behind-%03d", behindWrites-1)
	if snapshot {
		if err := r.Node(leader).Raft().Snapshot(ctx); err != nil {
			t.Fatalf("snapshot on the leader: %v", err)
		}
	}
	want := r.Node(leader).Raft().State().AppliedIndex()
	if want < stoppedAt+behindWrites {
		t.Fatalf("the leader applied %d, want at least %d", want, stoppedAt+behindWrites)
	}

	first := make(chan readyProbe, 1)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	noRetry := r.Client(down, func(o *s3.Options) { o.RetryMaxAttempts = 1 }) // a 503 is an answer here
	go func() { first <- pollUntilReady(pollCtx, addr, noRetry, last) }()
	r.Restart(down)
	var got readyProbe
	select {
	case got = <-first:
	case <-time.After(nodetest.Timeout):
		t.Fatalf("node %d restarted but readyz did not answer 200 within %s", down, nodetest.Timeout)
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	t.Logf("stopped at %d, leader at %d when the restart began; %d readyz 503s, then 200 at applied %d (commit %d)",
		stoppedAt, want, got.notReady, got.info.Applied, got.info.Commit)
	if got.notReady == 0 {
		t.Errorf("readyz answered 200 on the first poll of the restarting node: the poll did not see it start")
	}
	if got.info.Applied < want {
		t.Errorf("at its first readyz 200 node %d had applied %d, want at least %d (the leader's applied index when the restart began)",
			down, got.info.Applied, want)
	}
	if got.headErr != nil {
		t.Errorf("HEAD of the last bucket written while it was down (%s), on node %d right after its first readyz 200: %v", last, down, got.headErr)
	}
	if snapshot {
		checkInstalledSnapshot(t, dataDirs[down], stoppedAt)
	}
}

// readyProbe is what pollUntilReady saw.
type readyProbe struct {
	notReady int          // readyz answers before the first 200 (503s and refused connections)
	info     peerapi.Info // the node's info, asked right after the first 200
	headErr  error        // HEAD of the last bucket on the node right after the first 200
	err      error        // the poll itself failed
}

// pollUntilReady GETs base/_fedgate/readyz until it answers 200, then at
// once reads the last bucket through c and asks the node's info (its
// applied index) on its S3 port.
func pollUntilReady(ctx context.Context, base string, c *s3.Client, last string) readyProbe {
	hc := &http.Client{Timeout: 2 * time.Second}
	var p readyProbe
	for {
		code, err := readyz(ctx, hc, base)
		if ctx.Err() != nil {
			p.err = fmt.Errorf("readyz poll of %s: %w", base, ctx.Err())
			return p
		}
		if err == nil && code == http.StatusOK {
			break
		}
		if err == nil && code != http.StatusServiceUnavailable {
			p.err = fmt.Errorf("readyz of %s answered %d, want 503 or 200", base, code)
			return p
		}
		p.notReady++
		// A refused connection returns at once: 1 ms keeps the poll far
		// tighter than a kubelet's without spinning a core.
		time.Sleep(time.Millisecond) // pacing: the readyz poll's interval
	}
	_, p.headErr = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(last)})
	pc := peerapi.NewClient(peerapi.ClientConfig{AccessKey: nodetest.AccessKey, SecretKey: nodetest.SecretKey, SigningRegion: "us-east-1"})
	defer pc.CloseIdle()
	var err error
	if p.info, err = pc.Info(ctx, base); err != nil {
		p.err = fmt.Errorf("info of %s after its readyz 200: %w", base, err)
	}
	return p
}

func readyz(ctx context.Context, hc *http.Client, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_fedgate/readyz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// checkInstalledSnapshot checks that the node whose data directory is dir
// holds a Raft snapshot past stoppedAt, the index it had applied when it
// stopped: it caught up by installing the leader's snapshot.
func checkInstalledSnapshot(t *testing.T, dir string, stoppedAt uint64) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "raft", "snapshots"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		// hashicorp/raft names a snapshot TERM-INDEX-MILLIS.
		if f := strings.Split(e.Name(), "-"); len(f) == 3 {
			if idx, err := strconv.ParseUint(f[1], 10, 64); err == nil && idx > stoppedAt {
				return
			}
		}
	}
	t.Errorf("the restarted node holds no snapshot past index %d (it stopped there), so it did not install the leader's: %v", stoppedAt, names)
}
