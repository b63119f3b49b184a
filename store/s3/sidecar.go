package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/store"
)

// Sidecars. A Put larger than one part goes to its key as one multipart
// upload, created with the object's metadata; its S3-facing ETag (the MD5
// of the whole body) and the checksums that arrive after the body
// (PutOptions.LateChecksums) are known only when the body ends, after S3
// has fixed the metadata. They are kept in a small sidecar object,
//
//	MetaPrefix + hex(sha256(key)) + "/" + <the object's S3 ETag>
//
// written before the upload is completed, so whoever sees the object can
// find its sidecar. The object carries x-amz-meta-fedgate-sidecar: 1 from
// its creation, so only such objects cost the extra GET on Stat. The name
// holds the S3 ETag (content-derived), so a sidecar never describes other
// bytes: an object replaced by someone else, or copied with its metadata
// to another key, has no matching sidecar and shows its S3 ETag. Other S3
// clients read the object and its metadata as usual; only the MD5 ETag and
// late checksums are fedgate's.
const MetaPrefix = ".fedgate-meta/"

// metaSidecar marks an object whose ETag and late checksums are in its
// sidecar.
const metaSidecar = reservedPrefix + "sidecar"

// sidecarDoc is a sidecar's body.
type sidecarDoc struct {
	ETag      string            `json:"etag"`
	Checksums map[string]string `json:"checksums,omitempty"`
}

func sidecarKey(key, serverETag string) string {
	sum := sha256.Sum256([]byte(key))
	return MetaPrefix + hex.EncodeToString(sum[:]) + "/" + serverETag
}

// reservedKey reports whether key is fedgate's own (staging, sidecars):
// refused as a key, never listed.
func reservedKey(key string) bool {
	return strings.HasPrefix(key, StagingPrefix) || strings.HasPrefix(key, MetaPrefix)
}

// hasSidecar reports whether an object's metadata says it has a sidecar
// (and no ETag of its own in x-amz-meta-fedgate-etag).
func hasSidecar(meta map[string]string) bool {
	var side, own bool
	for k := range meta {
		switch strings.ToLower(k) {
		case metaSidecar:
			side = true
		case metaETag:
			own = true
		}
	}
	return side && !own
}

// writeSidecar stores doc for key's object whose S3 ETag is serverETag.
func (s *Store) writeSidecar(ctx context.Context, key, serverETag string, doc sidecarDoc) error {
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	sum := md5.Sum(body)
	sk := sidecarKey(key, serverETag)
	_, err = s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &s.bucket, Key: &sk, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"),
		ContentMD5: aws.String(b64(sum[:])),
	})
	if err != nil {
		return mapErr("put", key, err)
	}
	return nil
}

// deleteSidecar removes a sidecar no object needs any more, best effort,
// with its own deadline (the caller's ctx may be what ended).
func (s *Store) deleteSidecar(key, serverETag string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sk := sidecarKey(key, serverETag)
	_, _ = s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &sk})
}

// resolveSidecar completes info, decoded from an object's headers, with
// its sidecar when the object has one: the S3-facing ETag and the late
// checksums. A missing sidecar leaves the S3 ETag (what any S3 client
// sees); failing to read one is the caller's error.
func (s *Store) resolveSidecar(ctx context.Context, key string, meta map[string]string, info *store.ObjectInfo) error {
	if !hasSidecar(meta) {
		return nil
	}
	sk := sidecarKey(key, string(info.Validator))
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &sk})
	if err != nil {
		if errors.Is(mapErr("stat", key, err), store.ErrNotFound) {
			return nil
		}
		return mapErr("stat", key, err)
	}
	defer out.Body.Close()
	var doc sidecarDoc
	if err := json.NewDecoder(io.LimitReader(out.Body, 64<<10)).Decode(&doc); err != nil {
		return store.Retried(fmt.Errorf("s3: stat %q: undecodable sidecar %s: %w", key, sk, err))
	}
	if doc.ETag != "" {
		info.ETag = doc.ETag
	}
	if len(doc.Checksums) > 0 {
		if info.Checksums == nil {
			info.Checksums = map[string]string{}
		}
		maps.Copy(info.Checksums, doc.Checksums)
	}
	return nil
}
