package e2e

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// wantS3 checks an error's S3 code and HTTP status.
func wantS3(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	var re *smithyhttp.ResponseError
	if err == nil || apiCode(err) != code || !errors.As(err, &re) || re.HTTPStatusCode() != status {
		t.Fatalf("%s: %v, want %s (%d)", what, err, code, status)
	}
}

// TestObjectLock drives S3 Object Lock through aws-sdk-go-v2 against the
// real binary: compliance (no one deletes or shortens it, root and bypass
// included), governance (only a bypass by a caller allowed it), legal
// hold, default retention, the error paths of buckets without object lock,
// versioning that cannot be suspended, and all of it across a SIGKILL.
func TestObjectLock(t *testing.T) {
	s := startServer(t)
	c := s.s3Client(rootAK, rootSK, sdkDefaults) // a PUT with lock headers needs the SDK's default checksum
	bk := aws.String("worm")
	hour := time.Now().Add(time.Hour).UTC().Truncate(time.Second)

	// A bucket without object lock answers S3's errors.
	plain := aws.String("plain")
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: plain})))
	put(t, c, "plain", "k", []byte("x"))
	_, err := c.GetObjectLockConfiguration(ctx(t), &s3.GetObjectLockConfigurationInput{Bucket: plain})
	wantS3(t, "GetObjectLockConfiguration without one", err, "ObjectLockConfigurationNotFoundError", 404)
	_, err = c.PutObjectRetention(ctx(t), &s3.PutObjectRetentionInput{Bucket: plain, Key: aws.String("k"),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(hour)}})
	wantS3(t, "PutObjectRetention without object lock", err, "InvalidRequest", 400)
	_, err = c.PutObjectLegalHold(ctx(t), &s3.PutObjectLegalHoldInput{Bucket: plain, Key: aws.String("k"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	wantS3(t, "PutObjectLegalHold without object lock", err, "InvalidRequest", 400)
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: plain, Key: aws.String("k2"), Body: strings.NewReader("x"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(hour)})
	wantS3(t, "PUT with x-amz-object-lock-* without object lock", err, "InvalidRequest", 400)
	enable := &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}
	_, err = c.PutObjectLockConfiguration(ctx(t), &s3.PutObjectLockConfigurationInput{Bucket: plain, ObjectLockConfiguration: enable})
	wantS3(t, "object lock on an unversioned bucket", err, "InvalidBucketState", 409)
	// Enabled later, once versioning is.
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: plain,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
	mustOK(t, must(c.PutObjectLockConfiguration(ctx(t), &s3.PutObjectLockConfigurationInput{Bucket: plain, ObjectLockConfiguration: enable})))

	// Created with object lock: versioning is Enabled and stays so.
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: bk, ObjectLockEnabledForBucket: aws.Bool(true)})))
	gv, err := c.GetBucketVersioning(ctx(t), &s3.GetBucketVersioningInput{Bucket: bk})
	mustOK(t, err)
	if gv.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning of a bucket created with object lock: %q", gv.Status)
	}
	_, err = c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	wantS3(t, "suspending versioning under object lock", err, "InvalidBucketState", 409)

	putLocked := func(key string, in func(*s3.PutObjectInput)) string {
		t.Helper()
		p := &s3.PutObjectInput{Bucket: bk, Key: aws.String(key), Body: strings.NewReader("data of " + key)}
		if in != nil {
			in(p)
		}
		out, err := c.PutObject(ctx(t), p)
		mustOK(t, err)
		return aws.ToString(out.VersionId)
	}
	delVersion := func(cl *s3.Client, key, id string, bypass bool) error {
		in := &s3.DeleteObjectInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id)}
		if bypass {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		_, err := cl.DeleteObject(ctx(t), in)
		return err
	}
	retention := func(cl *s3.Client, key, id string, mode types.ObjectLockRetentionMode, until time.Time, bypass bool) error {
		in := &s3.PutObjectRetentionInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id),
			Retention: &types.ObjectLockRetention{Mode: mode, RetainUntilDate: aws.Time(until)}}
		if bypass {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		_, err := cl.PutObjectRetention(ctx(t), in)
		return err
	}

	// Compliance: root cannot delete, shorten, weaken or remove it.
	cid := putLocked("c.pt", func(p *s3.PutObjectInput) {
		p.ObjectLockMode, p.ObjectLockRetainUntilDate = types.ObjectLockModeCompliance, aws.Time(hour)
	})
	head, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: bk, Key: aws.String("c.pt")})
	mustOK(t, err)
	if head.ObjectLockMode != types.ObjectLockModeCompliance || !aws.ToTime(head.ObjectLockRetainUntilDate).Equal(hour) {
		t.Fatalf("HEAD of a compliance version: mode %q until %v", head.ObjectLockMode, head.ObjectLockRetainUntilDate)
	}
	wantS3(t, "root deleting a compliance version", delVersion(c, "c.pt", cid, false), "AccessDenied", 403)
	wantS3(t, "root deleting a compliance version with bypass", delVersion(c, "c.pt", cid, true), "AccessDenied", 403)
	wantS3(t, "shortening compliance", retention(c, "c.pt", cid, types.ObjectLockRetentionModeCompliance, hour.Add(-time.Minute), true), "AccessDenied", 403)
	wantS3(t, "compliance to governance", retention(c, "c.pt", cid, types.ObjectLockRetentionModeGovernance, hour.Add(time.Hour), true), "AccessDenied", 403)
	del, err := c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: bk, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("c.pt"), VersionId: aws.String(cid)}}}})
	mustOK(t, err)
	if len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects of a compliance version: deleted %d, errors %+v", len(del.Deleted), del.Errors)
	}
	mustOK(t, retention(c, "c.pt", cid, types.ObjectLockRetentionModeCompliance, hour.Add(time.Hour), false)) // extending is fine
	wantS3(t, "a retain-until date in the past", retention(c, "c.pt", cid, types.ObjectLockRetentionModeCompliance, time.Now().Add(-time.Hour), false), "InvalidArgument", 400)
	wantS3(t, "an unknown mode", retention(c, "c.pt", cid, types.ObjectLockRetentionMode("FOREVER"), hour, false), "MalformedXML", 400)
	// A PUT over the key makes a new version; the locked one stays.
	putLocked("c.pt", nil)

	// Governance: a user without s3:BypassGovernanceRetention cannot
	// bypass; root can.
	out, err := s.fedgate("user", "add", "alice")
	mustOK(t, err)
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	if out, err := s.fedgate("user", "grant", "alice", "worm", "write"); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	alice := s.s3Client(m[1], m[2])
	gid := putLocked("g.pt", func(p *s3.PutObjectInput) {
		p.ObjectLockMode, p.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(hour)
	})
	wantS3(t, "alice deleting a governance version with bypass", delVersion(alice, "g.pt", gid, true), "AccessDenied", 403)
	wantS3(t, "root deleting a governance version without bypass", delVersion(c, "g.pt", gid, false), "AccessDenied", 403)
	wantS3(t, "shortening governance without bypass", retention(c, "g.pt", gid, types.ObjectLockRetentionModeGovernance, hour.Add(-time.Minute), false), "AccessDenied", 403)
	mustOK(t, retention(c, "g.pt", gid, types.ObjectLockRetentionModeGovernance, hour.Add(-time.Minute), true))
	mustOK(t, delVersion(c, "g.pt", gid, true))

	// Legal hold: blocks deletion until removed.
	hid := putLocked("h.pt", nil)
	_, err = c.GetObjectLegalHold(ctx(t), &s3.GetObjectLegalHoldInput{Bucket: bk, Key: aws.String("h.pt")})
	wantS3(t, "legal hold of a version without one", err, "NoSuchObjectLockConfiguration", 404)
	_, err = c.GetObjectRetention(ctx(t), &s3.GetObjectRetentionInput{Bucket: bk, Key: aws.String("h.pt")})
	wantS3(t, "retention of a version without one", err, "NoSuchObjectLockConfiguration", 404)
	hold := func(status types.ObjectLockLegalHoldStatus) {
		t.Helper()
		mustOK(t, must(c.PutObjectLegalHold(ctx(t), &s3.PutObjectLegalHoldInput{Bucket: bk, Key: aws.String("h.pt"), VersionId: aws.String(hid),
			LegalHold: &types.ObjectLockLegalHold{Status: status}})))
	}
	hold(types.ObjectLockLegalHoldStatusOn)
	wantS3(t, "deleting a held version with bypass", delVersion(c, "h.pt", hid, true), "AccessDenied", 403)

	// Default retention: applied to each new version.
	_, err = c.PutObjectLockConfiguration(ctx(t), &s3.PutObjectLockConfigurationInput{Bucket: bk, ObjectLockConfiguration: &types.ObjectLockConfiguration{
		ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance}}}})
	wantS3(t, "a default retention without Days or Years", err, "MalformedXML", 400)
	mustOK(t, must(c.PutObjectLockConfiguration(ctx(t), &s3.PutObjectLockConfigurationInput{Bucket: bk, ObjectLockConfiguration: &types.ObjectLockConfiguration{
		ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeCompliance, Days: aws.Int32(1)}}}})))
	did := putLocked("d.pt", nil)
	ret, err := c.GetObjectRetention(ctx(t), &s3.GetObjectRetentionInput{Bucket: bk, Key: aws.String("d.pt"), VersionId: aws.String(did)})
	mustOK(t, err)
	if until := aws.ToTime(ret.Retention.RetainUntilDate); ret.Retention.Mode != types.ObjectLockRetentionModeCompliance || until.Before(time.Now().Add(23*time.Hour)) || until.After(time.Now().Add(25*time.Hour)) {
		t.Fatalf("default retention: %+v", ret.Retention)
	}
	wantS3(t, "deleting a version under default compliance", delVersion(c, "d.pt", did, true), "AccessDenied", 403)

	// All of it survives a crash.
	s.restart(syscall.SIGKILL)
	c = s.s3Client(rootAK, rootSK, sdkDefaults)
	wantS3(t, "after restart: deleting the compliance version", delVersion(c, "c.pt", cid, true), "AccessDenied", 403)
	wantS3(t, "after restart: deleting the held version", delVersion(c, "h.pt", hid, true), "AccessDenied", 403)
	wantS3(t, "after restart: deleting the default-retention version", delVersion(c, "d.pt", did, true), "AccessDenied", 403)
	lh, err := c.GetObjectLegalHold(ctx(t), &s3.GetObjectLegalHoldInput{Bucket: bk, Key: aws.String("h.pt"), VersionId: aws.String(hid)})
	mustOK(t, err)
	if lh.LegalHold.Status != types.ObjectLockLegalHoldStatusOn {
		t.Fatalf("legal hold after restart: %q", lh.LegalHold.Status)
	}
	conf, err := c.GetObjectLockConfiguration(ctx(t), &s3.GetObjectLockConfigurationInput{Bucket: bk})
	mustOK(t, err)
	if r := conf.ObjectLockConfiguration.Rule; conf.ObjectLockConfiguration.ObjectLockEnabled != types.ObjectLockEnabledEnabled || r == nil || aws.ToInt32(r.DefaultRetention.Days) != 1 {
		t.Fatalf("object lock configuration after restart: %+v", conf.ObjectLockConfiguration)
	}
	_, err = c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	wantS3(t, "after restart: suspending versioning", err, "InvalidBucketState", 409)
	ho, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: bk, Key: aws.String("c.pt"), VersionId: aws.String(cid)})
	mustOK(t, err)
	if ho.ObjectLockMode != types.ObjectLockModeCompliance || !aws.ToTime(ho.ObjectLockRetainUntilDate).Equal(hour.Add(time.Hour)) {
		t.Fatalf("HEAD after restart: %q %v", ho.ObjectLockMode, ho.ObjectLockRetainUntilDate)
	}
	// The hold removed, the version goes.
	hold(types.ObjectLockLegalHoldStatusOff)
	mustOK(t, delVersion(c, "h.pt", hid, false))
}
