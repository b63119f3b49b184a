package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/internal/wait"
)

// Issue 12: kill -9 of the leader during 100 concurrent versioned PUTs
// loses no acknowledged version and shows none whose PUT was refused;
// every node lists the versions in one order. Both write paths: a
// write-through bucket (S3-created on the NAS) and a write-back one.
func TestVersionedPutsLeaderKilled(t *testing.T) {
	t.Run("write-through", func(t *testing.T) {
		nodes, byID, st := startCluster(t)
		c := nodes[0].root()
		mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("vckpt")})))
		versionedPutsLeaderKilled(t, nodes, byID[st.Leader], "vckpt")
	})
	t.Run("write-back", func(t *testing.T) {
		r := startRegion(t, 3)
		versionedPutsLeaderKilled(t, r.nodes, r.leader(), "ckpt")
	})
}

func versionedPutsLeaderKilled(t *testing.T, nodes []*server, leader *server, bucket string) {
	var followers []*server
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	noRetry := func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }
	c := followers[0].root()
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))

	// 100 concurrent writers, each PUTting 3 times in a row; the leader is
	// killed once 100 PUTs have been acknowledged, so about 100 are in
	// flight when it dies.
	const writers, each = 100, 3
	const n = writers * each
	type outcome struct {
		acked   string // version id
		refused bool   // the region said nothing was written
		// spans: the PUT was sent before the kill and answered after it.
		spans bool
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	var done atomic.Int64
	killed := make(chan struct{})
	isKilled := func() bool {
		select {
		case <-killed:
			return true
		default:
			return false
		}
	}
	for w := range writers {
		wg.Go(func() {
			cl := followers[w%2].s3Client(rootAK, rootSK, noRetry)
			for j := range each {
				i := w*each + j
				before := isKilled()
				out, err := cl.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("latest.pt"),
					Body: bytes.NewReader([]byte(fmt.Sprintf("request %d", i))), Metadata: map[string]string{"req": strconv.Itoa(i)}})
				outcomes[i].spans = !before && isKilled()
				var ae smithy.APIError
				switch {
				case err == nil:
					outcomes[i].acked = aws.ToString(out.VersionId)
				case errors.As(err, &ae) && ae.ErrorCode() == "SlowDown" && !strings.Contains(ae.ErrorMessage(), "may or may not"):
					outcomes[i].refused = true
				}
				done.Add(1)
			}
		})
	}
	wait.For(t, 60*time.Second, "100 PUTs answered", func() bool { return done.Load() >= writers })
	leader.stop(syscall.SIGKILL)
	close(killed)
	wg.Wait()
	spanning := 0
	for _, o := range outcomes {
		if o.spans {
			spanning++
		}
	}
	if spanning == 0 {
		t.Fatal("no PUT was in flight when the leader was killed: the test did not test the kill")
	}
	t.Logf("%d PUTs were in flight when the leader was killed", spanning)

	var acked []string
	for _, o := range outcomes {
		if o.acked != "" {
			acked = append(acked, o.acked)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no PUT was acknowledged")
	}
	var first []string
	for i, f := range followers {
		var listed []string
		wait.For(t, 30*time.Second, "the listing on a survivor", func() bool {
			out, err := f.root().ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
			if err != nil {
				return false
			}
			listed = listed[:0]
			for _, v := range out.Versions {
				listed = append(listed, aws.ToString(v.VersionId))
			}
			return true
		})
		for _, id := range acked {
			if !slices.Contains(listed, id) {
				t.Errorf("node %d: acknowledged version %s is missing", i, id)
			}
		}
		for _, id := range listed {
			got, out := getBytes(t, f.root(), bucket, "latest.pt", func(in *s3.GetObjectInput) { in.VersionId = aws.String(id) })
			req, _ := strconv.Atoi(out.Metadata["req"])
			if string(got) != fmt.Sprintf("request %d", req) {
				t.Errorf("node %d: version %s holds %q, metadata says request %d", i, id, got, req)
			}
			if outcomes[req].refused {
				t.Errorf("node %d: version %s is from request %d, whose PUT was refused", i, id, req)
			}
		}
		if i == 0 {
			first = listed
		} else if !slices.Equal(first, listed) {
			t.Errorf("the survivors list different orders:\n%v\n%v", first, listed)
		}
		t.Logf("node %d: %d versions listed, %d acknowledged", i, len(listed), len(acked))
	}
}
