package node_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/node/nodetest"
)

// A bucket policy set through one node of a region is enforced by every
// node (it lives in Raft), survives a restart, and its removal reaches
// every node too.
func TestBucketPolicyOnEveryNode(t *testing.T) {
	r := nodetest.MakeRegion(t, 3, nodetest.Options{})
	ctx := testCtx(t, 2*time.Minute)
	r.WaitForLeader()
	via := r.Followers()[0]
	c := r.Client(via)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("datasets")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("public/x"), Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	anonGet := func(i int) int {
		t.Helper()
		resp, err := http.Get(r.Node(i).Endpoint() + "/datasets/public/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	all := func(want int, when string) {
		t.Helper()
		r.WaitForReplication()
		for i := range r.Len() {
			if got := anonGet(i); got != want {
				t.Errorf("%s: anonymous GET on node %d = %d, want %d", when, i, got, want)
			}
		}
	}
	all(403, "before the policy")
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/public/*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	all(200, "after PutBucketPolicy through a follower")
	r.Stop(via)
	r.Restart(via)
	r.WaitForLeader()
	all(200, "after a restart")
	if _, err := r.Client(r.Leader()).DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("datasets")}); err != nil {
		t.Fatal(err)
	}
	all(403, "after DeleteBucketPolicy")
}
