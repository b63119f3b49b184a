package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestObjectLockBypassByBucketPolicy: s3:BypassGovernanceRetention granted
// by a bucket policy to a user who does not own the bucket lets that user
// delete a governance version and shorten its retention with
// x-amz-bypass-governance-retention; another user with the same write
// grant but not that permission is refused, header or not.
func TestObjectLockBypassByBucketPolicy(t *testing.T) {
	s := startServer(t)
	c := s.s3Client(rootAK, rootSK, sdkDefaults)
	bk := aws.String("worm")
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: bk, ObjectLockEnabledForBucket: aws.Bool(true)})))
	users := map[string]*s3.Client{}
	for _, name := range []string{"alice", "bob"} {
		out, err := s.fedgate("user", "add", name)
		mustOK(t, err)
		m := keyRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("user add printed no keys:\n%s", out)
		}
		if out, err := s.fedgate("user", "grant", name, "worm", "write"); err != nil {
			t.Fatalf("grant: %v %s", err, out)
		}
		users[name] = s.s3Client(m[1], m[2], sdkDefaults)
	}
	// Both may change retentions and delete versions (a write grant does
	// not include s3:DeleteObjectVersion); only alice may bypass governance.
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"AliceBypasses","Effect":"Allow",
	 "Principal":{"AWS":"arn:aws:iam::000000000000:user/alice"},"Action":"s3:BypassGovernanceRetention","Resource":"arn:aws:s3:::worm/*"},
	 {"Sid":"Retention","Effect":"Allow","Principal":{"AWS":["arn:aws:iam::000000000000:user/alice","arn:aws:iam::000000000000:user/bob"]},
	  "Action":["s3:PutObjectRetention","s3:GetObjectRetention","s3:DeleteObjectVersion"],"Resource":"arn:aws:s3:::worm/*"}]}`
	mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: bk, Policy: aws.String(policy)})))

	hour := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	governed := func(key string) string {
		t.Helper()
		out, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: bk, Key: aws.String(key), Body: strings.NewReader(key),
			ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(hour)})
		mustOK(t, err)
		return aws.ToString(out.VersionId)
	}
	del := func(cl *s3.Client, key, id string, bypass bool) error {
		in := &s3.DeleteObjectInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id)}
		if bypass {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		_, err := cl.DeleteObject(ctx(t), in)
		return err
	}
	shorten := func(cl *s3.Client, key, id string) error {
		_, err := cl.PutObjectRetention(ctx(t), &s3.PutObjectRetentionInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id),
			BypassGovernanceRetention: aws.Bool(true),
			Retention:                 &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(hour.Add(-time.Minute))}})
		return err
	}

	a, b := governed("a.pt"), governed("b.pt")
	bob := users["bob"]
	// Refused by the lock, not by the policy: bob may delete versions.
	locked := func(what string, err error) {
		t.Helper()
		wantS3(t, what, err, "AccessDenied", 403)
		if !strings.Contains(err.Error(), "object lock") {
			t.Fatalf("%s: refused, but not by the object lock: %v", what, err)
		}
	}
	alice := users["alice"]
	locked("bob deleting a governance version with bypass", del(bob, "a.pt", a, true))
	locked("bob shortening governance with bypass", shorten(bob, "a.pt", a))
	free, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: bk, Key: aws.String("free.pt"), Body: strings.NewReader("free")})
	mustOK(t, err)
	mustOK(t, del(bob, "free.pt", aws.ToString(free.VersionId), false))
	locked("alice deleting a governance version without the header", del(alice, "a.pt", a, false))
	mustOK(t, shorten(alice, "b.pt", b))
	mustOK(t, del(alice, "a.pt", a, true))
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: bk, Key: aws.String("a.pt"), VersionId: aws.String(a)}); err == nil {
		t.Fatal("the version alice deleted with bypass is still there")
	}
	// DeleteObjects honours the same grant.
	d, err := alice.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: bk, BypassGovernanceRetention: aws.Bool(true),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("b.pt"), VersionId: aws.String(b)}}}})
	mustOK(t, err)
	if len(d.Errors) != 0 || len(d.Deleted) != 1 {
		t.Fatalf("alice's DeleteObjects with bypass: deleted %d, errors %+v", len(d.Deleted), d.Errors)
	}
}
