package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
)

// sdkDefaults sets what config.LoadDefaultConfig sets and clientFor's
// hand-built aws.Config leaves unset: checksums on every operation that
// supports them (RequestChecksumCalculationWhenSupported), so PutObject
// sends x-amz-checksum-crc32 as an SDK at its defaults does.
func sdkDefaults(o *s3.Options) {
	o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
	o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
}

// lockOf HEADs a version and returns its lock.
func lockOf(t *testing.T, c *s3.Client, bucket, key, id string) (types.ObjectLockMode, time.Time, types.ObjectLockLegalHoldStatus) {
	t.Helper()
	in := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	h, err := c.HeadObject(ctx(t), in)
	mustOK(t, err)
	return h.ObjectLockMode, aws.ToTime(h.ObjectLockRetainUntilDate), h.ObjectLockLegalHoldStatus
}

// TestObjectLockWrites: a new version's lock set by every write that makes
// one, through aws-sdk-go-v2 (and a minio-go presigned POST form) against
// the real binary: CreateMultipartUpload's x-amz-object-lock-* apply to
// the completed version; CopyObject locks the copy by its own headers and
// does not take the source's lock; a POST form's x-amz-object-lock-*
// fields; PutObject with lock headers but no Content-MD5 nor checksum is
// refused as S3 refuses it, and passes with either.
func TestObjectLockWrites(t *testing.T) {
	s := startServer(t)
	c := s.s3Client(rootAK, rootSK, sdkDefaults)
	bk := aws.String("worm")
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: bk, ObjectLockEnabledForBucket: aws.Bool(true)})))
	hour := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	delVersion := func(key, id string) error {
		_, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id)})
		return err
	}

	// Multipart: the lock of CreateMultipartUpload.
	cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: bk, Key: aws.String("mp.pt"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(hour), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	mustOK(t, err)
	part := randBytes(t, 5<<20)
	up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: bk, Key: aws.String("mp.pt"), UploadId: cu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	mustOK(t, err)
	done, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: aws.String("mp.pt"), UploadId: cu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32}}}})
	mustOK(t, err)
	mpID := aws.ToString(done.VersionId)
	if mode, until, hold := lockOf(t, c, "worm", "mp.pt", mpID); mode != types.ObjectLockModeCompliance || !until.Equal(hour) || hold != types.ObjectLockLegalHoldStatusOn {
		t.Fatalf("multipart version's lock: %q %v %q", mode, until, hold)
	}
	wantS3(t, "deleting the locked multipart version", delVersion("mp.pt", mpID), "AccessDenied", 403)
	ret, err := c.GetObjectRetention(ctx(t), &s3.GetObjectRetentionInput{Bucket: bk, Key: aws.String("mp.pt"), VersionId: aws.String(mpID)})
	mustOK(t, err)
	if ret.Retention.Mode != types.ObjectLockRetentionModeCompliance {
		t.Fatalf("GetObjectRetention of the multipart version: %+v", ret.Retention)
	}

	// CopyObject: the source's lock stays with the source.
	cp, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: bk, Key: aws.String("copy-plain.pt"), CopySource: aws.String("worm/mp.pt?versionId=" + mpID)})
	mustOK(t, err)
	if mode, _, hold := lockOf(t, c, "worm", "copy-plain.pt", ""); mode != "" || hold != "" {
		t.Fatalf("a copy without lock headers took a lock: %q %q", mode, hold)
	}
	mustOK(t, delVersion("copy-plain.pt", aws.ToString(cp.VersionId)))
	// ... and the copy's own headers lock the copy (COPY and REPLACE).
	for _, directive := range []types.MetadataDirective{types.MetadataDirectiveCopy, types.MetadataDirectiveReplace} {
		key := "copy-" + strings.ToLower(string(directive)) + ".pt"
		cp, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: bk, Key: aws.String(key), CopySource: aws.String("worm/mp.pt"), MetadataDirective: directive,
			ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(hour.Add(time.Hour)), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
		mustOK(t, err)
		if mode, until, hold := lockOf(t, c, "worm", key, aws.ToString(cp.VersionId)); mode != types.ObjectLockModeGovernance || !until.Equal(hour.Add(time.Hour)) || hold != types.ObjectLockLegalHoldStatusOn {
			t.Fatalf("copy (%s) with lock headers: %q %v %q", directive, mode, until, hold)
		}
		wantS3(t, "deleting a locked copy", delVersion(key, aws.ToString(cp.VersionId)), "AccessDenied", 403)
	}

	// A POST form's x-amz-object-lock-* fields, in its signed policy.
	mc := s.minio(rootAK, rootSK)
	p := minio.NewPostPolicy()
	mustOK(t, p.SetBucket("worm"))
	mustOK(t, p.SetKey("form.pt"))
	mustOK(t, p.SetExpires(time.Now().Add(10*time.Minute)))
	mustOK(t, p.SetUserData("object-lock-mode", "GOVERNANCE"))
	mustOK(t, p.SetUserData("object-lock-retain-until-date", hour.Format(time.RFC3339)))
	mustOK(t, p.SetUserData("object-lock-legal-hold", "ON"))
	u, form, err := mc.PresignedPostPolicy(ctx(t), p)
	mustOK(t, err)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		mustOK(t, mw.WriteField(k, form[k]))
	}
	w, err := mw.CreateFormFile("file", "form.pt")
	mustOK(t, err)
	_, _ = w.Write([]byte("posted"))
	mustOK(t, mw.Close())
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, u.String(), &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, body := sendReq(t, req)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST with lock fields: %d %s", resp.StatusCode, body)
	}
	if mode, until, hold := lockOf(t, c, "worm", "form.pt", ""); mode != types.ObjectLockModeGovernance || !until.Equal(hour) || hold != types.ObjectLockLegalHoldStatusOn {
		t.Fatalf("POST form version's lock: %q %v %q", mode, until, hold)
	}

	// Content-MD5 or a checksum: required with lock headers. A client
	// that sends checksums only where an operation requires them.
	bare := s.s3Client(rootAK, rootSK, func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	lockedPut := func(cl *s3.Client, key string, md5sum bool) error {
		in := &s3.PutObjectInput{Bucket: bk, Key: aws.String(key), Body: strings.NewReader("locked bytes"),
			ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(hour)}
		if md5sum {
			sum := md5.Sum([]byte("locked bytes"))
			in.ContentMD5 = aws.String(base64.StdEncoding.EncodeToString(sum[:]))
		}
		_, err := cl.PutObject(ctx(t), in)
		return err
	}
	err = lockedPut(bare, "nosum.pt", false)
	wantS3(t, "PUT with lock headers and no Content-MD5 or checksum", err, "InvalidRequest", 400)
	var ae smithy.APIError
	if errors.As(err, &ae); ae == nil || ae.ErrorMessage() != "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters" {
		t.Fatalf("message: %v", err)
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: bk, Key: aws.String("nosum.pt")}); err == nil {
		t.Fatal("the refused PUT wrote a version")
	}
	mustOK(t, lockedPut(bare, "md5.pt", true))
	mustOK(t, lockedPut(c, "crc.pt", false)) // the SDK's default checksum
	put(t, bare, "worm", "unlocked.pt", []byte("no lock, no checksum needed"))
	if mode, _, _ := lockOf(t, c, "worm", "md5.pt", ""); mode != types.ObjectLockModeGovernance {
		t.Fatalf("PUT with Content-MD5: mode %q", mode)
	}
	// PutObjectTagging on a versioned bucket writes a new version
	// (docs/versioning.md); it carries the same lock.
	mustOK(t, must(c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: bk, Key: aws.String("md5.pt"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}})))
	if mode, until, _ := lockOf(t, c, "worm", "md5.pt", ""); mode != types.ObjectLockModeGovernance || !until.Equal(hour) {
		t.Fatalf("the version PutObjectTagging wrote: mode %q until %v", mode, until)
	}
	// The lock requests themselves, from the same client: the SDK sends
	// a checksum for them (S3 requires one).
	mustOK(t, must(bare.PutObjectLegalHold(ctx(t), &s3.PutObjectLegalHoldInput{Bucket: bk, Key: aws.String("md5.pt"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})))
}

// TestObjectLockWriteBack: a versioned write-back bucket of the policy
// file takes object lock; a PUT's and a multipart upload's locks hold
// while the version is staged and after the drain wrote it to the store.
func TestObjectLockWriteBack(t *testing.T) {
	r := startRegion(t, 1)
	n := r.nodes[0]
	c := n.s3Client(rootAK, rootSK, sdkDefaults)
	bk := aws.String("ckpt")
	mustOK(t, must(c.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: bk,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})))
	mustOK(t, must(c.PutObjectLockConfiguration(ctx(t), &s3.PutObjectLockConfigurationInput{Bucket: bk,
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}})))
	hour := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: bk, Key: aws.String("put.pt"), Body: bytes.NewReader(randBytes(t, 64<<10)),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(hour)})
	mustOK(t, err)
	putID := aws.ToString(out.VersionId)
	cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: bk, Key: aws.String("mp.pt"), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	mustOK(t, err)
	up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: bk, Key: aws.String("mp.pt"), UploadId: cu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(randBytes(t, 5<<20))})
	mustOK(t, err)
	done, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: aws.String("mp.pt"), UploadId: cu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32}}}})
	mustOK(t, err)
	mpID := aws.ToString(done.VersionId)
	check := func(when string) {
		t.Helper()
		if mode, until, _ := lockOf(t, c, "ckpt", "put.pt", putID); mode != types.ObjectLockModeCompliance || !until.Equal(hour) {
			t.Fatalf("%s: put.pt's lock %q %v", when, mode, until)
		}
		if _, _, hold := lockOf(t, c, "ckpt", "mp.pt", mpID); hold != types.ObjectLockLegalHoldStatusOn {
			t.Fatalf("%s: mp.pt's legal hold %q", when, hold)
		}
		for key, id := range map[string]string{"put.pt": putID, "mp.pt": mpID} {
			_, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: bk, Key: aws.String(key), VersionId: aws.String(id), BypassGovernanceRetention: aws.Bool(true)})
			wantS3(t, when+": deleting locked "+key, err, "AccessDenied", 403)
		}
	}
	check("staged")
	r.drained(n, 60*time.Second)
	check("drained")
}
