package s3

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/store"
)

// maxUnknownPart is the largest part of unknown size UploadPart buffers.
const maxUnknownPart = 64 << 20

// CreateMultipart starts a native S3 multipart upload on key with
// opts.Metadata. ErrInvalidKey for a key no store holds; ErrAccessDenied,
// ErrThrottled as the server says.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := s.checkKey("create multipart", key); err != nil {
		return "", err
	}
	h, err := toHeaders(opts.Metadata, "", nil)
	if err != nil {
		return "", fmt.Errorf("s3: create multipart %q: %w", key, err)
	}
	in := &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key}
	h.createInput(in)
	out, err := s.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", mapErr("create multipart", key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// UploadPart streams one part into the upload. With size >= 0 the body
// goes straight to S3 with its last byte held back until the body has
// returned io.EOF, so a failing body stores nothing; with size -1 it is
// buffered (at most 64 MiB). The part's ETag is the MD5 of its bytes,
// checked against S3's.
//
// Errors: the body's read error (wrapped); io.ErrUnexpectedEOF (wrapped)
// for a short body; ErrNoSuchUpload for an unknown upload or one of
// another key; ErrInvalidKey; ErrAccessDenied, ErrThrottled as the server
// says. A part streamed from a non-seekable body is not retried by the SDK.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	if err := s.checkKey("upload part", key); err != nil {
		return store.PartInfo{}, err
	}
	if number < 1 || number > 10000 {
		return store.PartInfo{}, fmt.Errorf("s3: upload part %q: part number %d: %w", key, number, store.ErrInvalidPart)
	}
	if err := checkUploadID("upload part", key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	num := int32(number)
	in := &awss3.UploadPartInput{Bucket: &s.bucket, Key: &key, UploadId: &uploadID, PartNumber: &num}
	var sum []byte
	var xr *exactReader
	if size < 0 {
		if err := s.mem.acquire(ctx, s.partSize); err != nil {
			return store.PartInfo{}, err
		}
		defer s.mem.release(s.partSize)
		b, err := io.ReadAll(io.LimitReader(body, maxUnknownPart+1))
		if err != nil {
			return store.PartInfo{}, fmt.Errorf("s3: upload part %q: read body: %w", key, err)
		}
		if len(b) > maxUnknownPart {
			return store.PartInfo{}, fmt.Errorf("s3: upload part %q: a part of unknown size over %d bytes: %w", key, maxUnknownPart, store.ErrNotSupported)
		}
		h := md5.Sum(b)
		sum, size = h[:], int64(len(b))
		in.Body = bytes.NewReader(b)
		in.ContentMD5 = aws.String(b64(sum))
	} else if size == 0 {
		if err := probeEOF(body); err != nil {
			return store.PartInfo{}, fmt.Errorf("s3: upload part %q: read body: %w", key, err)
		}
		h := md5.Sum(nil)
		sum = h[:]
	} else {
		xr = newExactReader(body, size)
		in.Body = struct{ io.Reader }{xr} // not seekable: the SDK must not rewind it
	}
	in.ContentLength = aws.Int64(size)
	if err := ctx.Err(); err != nil {
		return store.PartInfo{}, err
	}
	optFns := []func(*awss3.Options){unsigned}
	if xr != nil {
		// A streamed body cannot be rewound for a retry: ask with
		// Expect: 100-continue, so an error answer (NoSuchUpload) comes
		// before the body is sent, not as a broken connection.
		optFns = append(optFns, func(o *awss3.Options) { o.ContinueHeaderThresholdBytes = 1 })
	}
	out, err := s.client.UploadPart(ctx, in, optFns...)
	if xr != nil && xr.err != nil {
		return store.PartInfo{}, fmt.Errorf("s3: upload part %q: read body: %w", key, xr.err)
	}
	if err != nil {
		if code, _ := errParts(err); code == "" && xr != nil {
			// The connection broke under a streamed body, which the SDK
			// cannot resend. Servers that refuse a part after reading some
			// of it (MinIO, for an unknown upload) look like this: ask.
			if _, lerr := s.client.ListParts(ctx, &awss3.ListPartsInput{
				Bucket: &s.bucket, Key: &key, UploadId: &uploadID, MaxParts: aws.Int32(1),
			}); lerr != nil && isCode(lerr, "NoSuchUpload") {
				err = lerr
			}
		}
		return store.PartInfo{}, mapErr("upload part", key, err)
	}
	if xr != nil {
		sum = xr.md5.Sum(nil)
	}
	etag := hex.EncodeToString(sum)
	if got := unquoteETag(aws.ToString(out.ETag)); got != etag {
		return store.PartInfo{}, fmt.Errorf("s3: upload part %q: the server's part ETag %s is not the MD5 %s of the bytes sent (SSE-KMS and SSE-C are not supported)", key, got, etag)
	}
	return store.PartInfo{Number: number, Size: size, ETag: etag, ModTime: time.Now()}, nil
}

// CompleteMultipart joins parts, in order, into key with S3's
// CompleteMultipartUpload, conditional per opts. The object's ETag is
// "<md5 of the parts' MD5s>-N", which is S3's own for such an object. When
// opts sets metadata, the object is then copied onto itself server-side
// with the merged metadata (for a moment it has CreateMultipart's).
//
// Errors: ErrInvalidPart when a part is missing, out of order, has another
// ETag or (not the last) is under 5 MiB; ErrPreconditionFailed per opts;
// ErrNoSuchUpload for an unknown upload or one of another key;
// ErrInvalidKey; ErrAccessDenied, ErrThrottled as the server says. After a
// failure the upload stays usable.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := s.checkKey("complete multipart", key); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := checkUploadID("complete multipart", key, uploadID); err != nil {
		return store.ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: no parts: %w", key, store.ErrInvalidPart)
	}
	etag, completed, err := multipartETag(parts)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: %w", key, err)
	}
	override, err := s.writeHeaders(key, opts, "")
	if err != nil {
		return store.ObjectInfo{}, err
	}
	in := &awss3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, UploadId: &uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	}
	in.IfNoneMatch, in.IfMatch = conditions(opts)
	out, err := s.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		if isCode(err, "EntityTooSmall") {
			return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: %w: %w", key, store.ErrInvalidPart, err)
		}
		return store.ObjectInfo{}, writeErr("complete multipart", key, opts, err)
	}
	validator := unquoteETag(aws.ToString(out.ETag))
	info, err := s.head(ctx, key, store.Validator(validator))
	if err != nil {
		// Overwritten already, or the HEAD failed: what we know.
		info = store.ObjectInfo{Key: key, ModTime: time.Now()}
		for _, p := range parts {
			info.Size += p.Size
		}
	}
	info.ETag, info.Validator, info.VersionID = etag, store.Validator(validator), aws.ToString(out.VersionId)
	if override.empty() {
		return info, nil
	}
	// Metadata set at completion: S3 fixed it at creation, so copy the
	// object onto itself with the merged headers.
	cur, err := s.head(ctx, key, info.Validator)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: set metadata: %w", key, err)
	}
	merged, err := toHeaders(cur.Metadata, etag, nil)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: %w", key, err)
	}
	merged = merged.override(override)
	v, copyVersion, err := s.copyObject(ctx, key, validator, cur.Size, key, merged, store.PutOptions{IfMatch: info.Validator})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: set metadata: %w", key, err)
	}
	// In a versioned bucket the completed object, copied onto itself, is a
	// version of its own that nobody wrote: remove it. (Suspended or off,
	// the copy replaced it: both are "null", or neither has an id.)
	if first := aws.ToString(out.VersionId); first != "" && first != store.NoVersionID && first != copyVersion {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key, VersionId: &first})
		if err != nil {
			return store.ObjectInfo{}, fmt.Errorf("s3: complete multipart %q: remove the version before the metadata copy: %w", key, mapErr("delete version", key, err))
		}
	}
	info.Validator, info.VersionID = store.Validator(v), copyVersion
	return info, nil
}

// AbortMultipart discards the upload. An unknown upload is not an error;
// ErrAccessDenied, ErrThrottled as the server says.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := s.checkKey("abort multipart", key); err != nil {
		return err
	}
	if checkUploadID("abort multipart", key, uploadID) != nil {
		return nil // an id no server makes: no such upload
	}
	_, err := s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &uploadID})
	if err != nil {
		err = mapErr("abort multipart", key, err)
		if errors.Is(err, store.ErrNoSuchUpload) || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// multipartETag checks the parts' ETags (hex MD5s) and returns the
// object's ETag and the parts as S3 wants them.
func multipartETag(parts []store.PartInfo) (string, []types.CompletedPart, error) {
	h := md5.New()
	completed := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		b, err := hex.DecodeString(p.ETag)
		if err != nil || len(b) != md5.Size || p.Number < 1 || p.Number > 10000 {
			return "", nil, fmt.Errorf("part %d, ETag %q: %w", p.Number, p.ETag, store.ErrInvalidPart)
		}
		h.Write(b)
		completed[i] = types.CompletedPart{ETag: aws.String(quoteETag(p.ETag)), PartNumber: aws.Int32(int32(p.Number))}
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts)), completed, nil
}

func sortParts(parts []types.CompletedPart) {
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
}

// copyObject copies src (of size bytes, with server ETag srcETag) onto dst
// server-side with headers h, conditional per opts, and returns dst's new
// server ETag and version id ("" in a bucket without versioning). An unconditional copy of up to 5 GiB is one CopyObject;
// others are multipart copies (UploadPartCopy), whose completion carries
// the conditions: MinIO ignores conditions on CopyObject's destination.
func (s *Store) copyObject(ctx context.Context, src, srcETag string, size int64, dst string, h headers, opts store.PutOptions) (etag, versionID string, err error) {
	source := copySource(s.bucket, src)
	if size <= maxCopySize && !opts.IfNoneMatch && opts.IfMatch == "" {
		in := &awss3.CopyObjectInput{
			Bucket: &s.bucket, Key: &dst, CopySource: &source,
			CopySourceIfMatch: aws.String(quoteETag(srcETag)),
		}
		h.copyInput(in)
		out, err := s.client.CopyObject(ctx, in)
		if err != nil {
			return "", "", mapErr("copy", dst, err)
		}
		if out.CopyObjectResult == nil {
			return "", "", fmt.Errorf("s3: copy %q: no result", dst)
		}
		return unquoteETag(aws.ToString(out.CopyObjectResult.ETag)), aws.ToString(out.VersionId), nil
	}
	in := &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &dst}
	h.createInput(in)
	cu, err := s.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", "", mapErr("copy", dst, err)
	}
	id := aws.ToString(cu.UploadId)
	done := false
	defer func() {
		if !done {
			s.abort(dst, id)
		}
	}()
	// Copy parts of at least 512 MiB, at most 10000 of them.
	partSize := max(int64(512<<20), (size+9999)/10000)
	n := int((size + partSize - 1) / partSize)
	parts := make([]types.CompletedPart, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, s.conc)
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			from := int64(i) * partSize
			to := min(from+partSize, size) - 1
			out, err := s.client.UploadPartCopy(cctx, &awss3.UploadPartCopyInput{
				Bucket: &s.bucket, Key: &dst, UploadId: &id, PartNumber: aws.Int32(int32(i + 1)),
				CopySource: &source, CopySourceIfMatch: aws.String(quoteETag(srcETag)),
				CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", from, to)),
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = mapErr("copy", dst, err)
				}
				cancel()
				return
			}
			if out.CopyPartResult == nil {
				first = cmp.Or(first, fmt.Errorf("s3: copy %q: no part result", dst))
				return
			}
			parts[i] = types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(int32(i + 1))}
		})
	}
	wg.Wait()
	if first != nil {
		return "", "", first
	}
	cin := &awss3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &dst, UploadId: &id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	cin.IfNoneMatch, cin.IfMatch = conditions(opts)
	out, err := s.client.CompleteMultipartUpload(ctx, cin)
	if err != nil {
		return "", "", mapErr("copy", dst, err)
	}
	done = true
	return unquoteETag(aws.ToString(out.ETag)), aws.ToString(out.VersionId), nil
}

// copySource is x-amz-copy-source: bucket/key with every byte of key but
// unreserved ones and "/" percent-encoded.
func copySource(bucket, key string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.WriteString(bucket)
	b.WriteByte('/')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
