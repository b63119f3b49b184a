package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/nodetest"
)

// TestClockSkewIsReported: a node whose clock runs 7 s ahead is reported by
// every other node: `cluster status` marks it unhealthy with the offset and
// what to do, and fedgate_cluster_clock_offset_seconds shows the offset.
// Nodes within the limit stay healthy.
func TestClockSkewIsReported(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{Config: func(i int, c *node.Config) {
		if i == 2 {
			c.Now = func() time.Time { return time.Now().Add(7 * time.Second) }
		}
	}})
	ctx := testCtx(t, time.Minute)
	st := adminCluster(ctx, t, r.Node(0))
	skewed := r.Node(2).ID()
	for _, m := range st.Members {
		switch {
		case m.ID == skewed && (m.Healthy || m.ClockOffset < 6.5 || m.ClockOffset > 7.5 || !strings.Contains(m.Problem, "ahead of")):
			t.Fatalf("the skewed node: %+v; want unhealthy, offset ~7 s, a problem saying its clock is ahead", m)
		case m.ID != skewed && (!m.Healthy || m.ClockOffset < -1 || m.ClockOffset > 1):
			t.Fatalf("a node with the right time: %+v", m)
		}
	}
	wait.For(t, 10*time.Second, "the clock offset metric", func() bool {
		v, ok := metric(t, r.Node(0).Endpoint(), `fedgate_cluster_clock_offset_seconds{peer="`+skewed+`"}`)
		return ok && v > 6.5 && v < 7.5
	})
	// Seen from the skewed node, the others are behind.
	for _, m := range adminCluster(ctx, t, r.Node(2)).Members {
		if m.ID != skewed && (m.Healthy || !strings.Contains(m.Problem, "behind")) {
			t.Fatalf("seen from the skewed node: %+v", m)
		}
	}
}

func adminCluster(ctx context.Context, t *testing.T, n *node.Node) adminapi.Cluster {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Endpoint()+adminapi.ReservedPrefix+"admin/cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	cr, _ := n.RootCredentials()
	creds := aws.Credentials{AccessKeyID: cr.AccessKey, SecretAccessKey: cr.SecretKey}
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req.Header.Set("X-Amz-Content-Sha256", emptySHA)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, emptySHA, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st adminapi.Cluster
	if resp.StatusCode != 200 {
		t.Fatalf("cluster status: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// metric reads one sample from endpoint's /_fedgate/metrics.
func metric(t *testing.T, endpoint, name string) (float64, bool) {
	resp, err := http.Get(endpoint + adminapi.ReservedPrefix + "metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
