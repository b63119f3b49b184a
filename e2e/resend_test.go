package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// A multipart upload whose part 1 is sent again after the others (a retry
// that finished last) completes with the last bytes sent for each part, on
// every store kind (issue 11 saw InvalidPartOrder for it).
func TestMultipartPartResentLast(t *testing.T) {
	kinds := map[string]func(*testing.T) originKind{"s3": s3Origin, "gcs": gcsOrigin, "azure": azureOrigin, "posix": nil}
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			storeYAML := "    kind: posix\n    location: onprem:lab\n    path: " + t.TempDir() + "\n"
			if kind != nil {
				var env map[string]string
				storeYAML, env = kind(t).store(t)
				for k, v := range env {
					t.Setenv(k, v)
				}
			}
			policy := "regions:\n  - name: e2e\n    location: onprem:lab\nstores:\n  - name: target\n" + storeYAML +
				"buckets:\n  - name: ups\n    placement: {single: target}\n"
			pf := filepath.Join(t.TempDir(), "policy.yaml")
			mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
			s := startServer(t, "--config", pf)
			c := s.root()
			bk, key := aws.String("ups"), aws.String("resent.bin")
			cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: bk, Key: key})
			mustOK(t, err)
			parts := [][]byte{randBytes(t, 5<<20), randBytes(t, 5<<20), randBytes(t, 1000)}
			etags := make([]string, 3)
			send := func(i int, data []byte) {
				out, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: bk, Key: key, UploadId: cu.UploadId,
					PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(data)})
				mustOK(t, err)
				etags[i] = aws.ToString(out.ETag)
			}
			for i, p := range parts {
				send(i, p)
			}
			firstETag := etags[0]
			parts[0] = randBytes(t, 5<<20) // the retry of part 1, finishing last
			send(0, parts[0])
			// The bytes replaced are gone: completing with their ETag is
			// InvalidPart, and changes nothing.
			stale := []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(firstETag)},
				{PartNumber: aws.Int32(2), ETag: aws.String(etags[1])}, {PartNumber: aws.Int32(3), ETag: aws.String(etags[2])}}
			_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: key, UploadId: cu.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: stale}})
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidPart" {
				t.Fatalf("completing with the replaced part's ETag: %v, want InvalidPart", err)
			}
			// A client that completes with what ListParts says (as some
			// retry paths do) sends the parts in ListParts' order.
			lp, err := c.ListParts(ctx(t), &s3.ListPartsInput{Bucket: bk, Key: key, UploadId: cu.UploadId})
			mustOK(t, err)
			var done []types.CompletedPart
			for i, p := range lp.Parts {
				if aws.ToInt32(p.PartNumber) != int32(i+1) || aws.ToString(p.ETag) != etags[i] {
					t.Fatalf("ListParts[%d] = part %d %s, want part %d %s", i, aws.ToInt32(p.PartNumber), aws.ToString(p.ETag), i+1, etags[i])
				}
				done = append(done, types.CompletedPart{PartNumber: p.PartNumber, ETag: p.ETag})
			}
			_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: bk, Key: key, UploadId: cu.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
			mustOK(t, err)
			got, _ := getBytes(t, c, "ups", "resent.bin")
			if !bytes.Equal(got, bytes.Join(parts, nil)) {
				t.Fatal("the object is not the last bytes sent for each part")
			}
		})
	}
}
