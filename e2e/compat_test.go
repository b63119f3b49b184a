package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// What common tools do at their defaults, and S3 answers (issue 11): each
// of these failed against fedgate before.
func TestToolDefaultsCompat(t *testing.T) {
	s := startServer(t)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("tools")})))

	// Creating a bucket you own again: 200 in us-east-1 (scripts "mb" on
	// every run).
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("tools")})))

	// s3cmd signs with region "US" (its default bucket_location).
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, s.Endpoint+"/", nil)
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	mustOK(t, v4.NewSigner().SignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, "UNSIGNED-PAYLOAD", "s3", "US", time.Now()))
	resp, err := http.DefaultClient.Do(req)
	mustOK(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("<Name>tools</Name>")) {
		t.Errorf("ListBuckets signed for region US: %d %s", resp.StatusCode, b)
	}

	// A PUT with Transfer-Encoding: chunked and no Content-Length.
	data := randBytes(t, 3<<20+7)
	req, _ = http.NewRequestWithContext(ctx(t), http.MethodPut, s.Endpoint+"/tools/chunked.bin", io.MultiReader(bytes.NewReader(data)))
	req.ContentLength = -1 // unknown: net/http sends it chunked
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	mustOK(t, v4.NewSigner().SignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()))
	resp, err = http.DefaultClient.Do(req)
	mustOK(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chunked PUT without Content-Length: %d %s", resp.StatusCode, b)
	}
	if got, _ := getBytes(t, c, "tools", "chunked.bin"); !bytes.Equal(got, data) {
		t.Fatalf("chunked PUT read back %d bytes, want %d", len(got), len(data))
	}

	// A multipart upload whose part 1 is sent again after the others.
	cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("tools"), Key: aws.String("resent")})
	mustOK(t, err)
	parts := [][]byte{randBytes(t, 5<<20), randBytes(t, 5<<20), randBytes(t, 1000)}
	etags := make([]*string, len(parts))
	upload := func(i int, body []byte) {
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String("tools"), Key: aws.String("resent"), UploadId: cu.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(body)})
		mustOK(t, err)
		etags[i] = up.ETag
	}
	for i, p := range parts {
		upload(i, p)
	}
	parts[0] = randBytes(t, 5<<20)
	upload(0, parts[0])
	var done []types.CompletedPart
	for i := range parts {
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: etags[i]})
	}
	_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("tools"), Key: aws.String("resent"),
		UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	mustOK(t, err)
	if got, _ := getBytes(t, c, "tools", "resent"); !bytes.Equal(got, bytes.Join(parts, nil)) {
		t.Fatal("the completed object is not the parts as last sent")
	}

	// DeleteBucket with an unfinished upload: the bucket and its uploads go.
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("leftover")})))
	_, err = c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("leftover"), Key: aws.String("never-finished")})
	mustOK(t, err)
	mustOK(t, must(c.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("leftover")})))
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("leftover")})))
	lu, err := c.ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{Bucket: aws.String("leftover")})
	mustOK(t, err)
	if len(lu.Uploads) != 0 {
		t.Errorf("the new bucket lists the deleted bucket's upload: %+v", lu.Uploads)
	}
}

// must drops an SDK output, keeping the error.
func must[T any](_ T, err error) error { return err }

// A completion and an abort of one upload racing: exactly one wins, and
// the loser answers 404 NoSuchUpload (before, both could succeed with the
// object created, or the completion answered 400 InvalidPart). 100 tries.
func TestCompleteAbortRace(t *testing.T) {
	s := startServer(t)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("race")})))
	wins := map[string]int{}
	for i := range 100 {
		key := fmt.Sprintf("k%03d", i)
		cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("race"), Key: aws.String(key)})
		mustOK(t, err)
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String("race"), Key: aws.String(key), UploadId: cu.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("part one"))})
		mustOK(t, err)
		var completeErr, abortErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			_, completeErr = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("race"), Key: aws.String(key),
				UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}})
		})
		wg.Go(func() {
			_, abortErr = c.AbortMultipartUpload(ctx(t), &s3.AbortMultipartUploadInput{Bucket: aws.String("race"), Key: aws.String(key), UploadId: cu.UploadId})
		})
		wg.Wait()
		_, headErr := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("race"), Key: aws.String(key)})
		switch {
		case completeErr == nil && abortErr == nil:
			t.Fatalf("try %d: both the completion and the abort succeeded", i)
		case completeErr == nil:
			wins["complete"]++
			if apiCode(abortErr) != "NoSuchUpload" || headErr != nil {
				t.Fatalf("try %d: completion won; abort answered %v (want NoSuchUpload), the object: %v", i, abortErr, headErr)
			}
		case abortErr == nil:
			wins["abort"]++
			if apiCode(completeErr) != "NoSuchUpload" || headErr == nil {
				t.Fatalf("try %d: abort won; completion answered %v (want NoSuchUpload), object exists: %v", i, completeErr, headErr == nil)
			}
		default:
			t.Fatalf("try %d: neither won: complete %v, abort %v", i, completeErr, abortErr)
		}
	}
	t.Logf("winners over 100 races: %v", wins)
}

// A full store device: a write answers 507 InsufficientStorage naming the
// full device (was 500 "Please try again", which clients retry into a
// full disk), leaves nothing behind, reads go on, and once space is freed
// writes work again.
func TestFullDeviceAnswers507(t *testing.T) {
	needRoot(t)
	dev := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", dev).CombinedOutput(); err != nil {
		t.Fatalf("mount a 12 MiB tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dev).Run() })
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"  - {name: small, kind: posix, location: onprem:lga1, path: " + dev + "}\n" +
		"buckets:\n  - {name: full, placement: {single: small}}\ndefaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()
	first := randBytes(t, 8<<20)
	put(t, c, "full", "first", first)
	_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("full"), Key: aws.String("second"), Body: bytes.NewReader(randBytes(t, 8<<20))},
		func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 507 || apiCode(err) != "InsufficientStorage" || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("PUT into a full device: %v; want 507 InsufficientStorage naming the full device", err)
	}
	if got, _ := getBytes(t, c, "full", "first"); !bytes.Equal(got, first) {
		t.Fatal("the object written before the device filled does not read back")
	}
	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("full")})
	mustOK(t, err)
	if len(lo.Contents) != 1 {
		t.Fatalf("after the refused PUT the bucket lists %d objects, want 1", len(lo.Contents))
	}
	mustOK(t, must(c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("full"), Key: aws.String("first")})))
	put(t, c, "full", "second", randBytes(t, 8<<20))
}
