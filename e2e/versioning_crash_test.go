package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Issue 12: kill -9 of the leader during 100 concurrent versioned PUTs
// loses no acknowledged version and shows none whose PUT was refused;
// every node lists the versions in one order.
func TestVersionedPutsLeaderKilled(t *testing.T) {
	nodes, byID, st := startCluster(t)
	leader := byID[st.Leader]
	var followers []*server
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	noRetry := func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }
	c := followers[0].root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("vckpt")})))
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String("vckpt"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))

	const n = 100
	type outcome struct {
		acked   string // version id
		refused bool   // the region said nothing was written
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			cl := followers[i%2].s3Client(rootAK, rootSK, noRetry)
			started <- struct{}{}
			out, err := cl.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("vckpt"), Key: aws.String("latest.pt"),
				Body: bytes.NewReader([]byte(fmt.Sprintf("request %d", i))), Metadata: map[string]string{"req": strconv.Itoa(i)}})
			var ae smithy.APIError
			switch {
			case err == nil:
				outcomes[i].acked = aws.ToString(out.VersionId)
			case errors.As(err, &ae) && ae.ErrorCode() == "SlowDown" && !strings.Contains(ae.ErrorMessage(), "may or may not"):
				outcomes[i].refused = true
			}
		})
	}
	for range n / 3 {
		<-started
	}
	leader.stop(syscall.SIGKILL)
	wg.Wait()

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
		waitFor(t, 30*time.Second, "the listing on a survivor", func() bool {
			out, err := f.root().ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("vckpt")})
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
			got, out := getBytes(t, f.root(), "vckpt", "latest.pt", func(in *s3.GetObjectInput) { in.VersionId = aws.String(id) })
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
