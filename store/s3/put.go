package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/store"
)

// unsigned sends a body without hashing it for the signature (its
// integrity is Content-MD5's or the ETag check's job), so a streamed body
// can be sent over plain HTTP too.
var unsigned = awss3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)

// Put streams body into key. A body of at most PartSize bytes is buffered
// and sent in one PutObject; a larger one is one multipart upload to key,
// with a sidecar for its MD5 ETag (see the package comment and sidecar.go). The body is
// always read to io.EOF before the object is committed.
//
// Errors: the body's read error (wrapped), io.ErrUnexpectedEOF (wrapped)
// for a body shorter than size, an error for a longer one, ctx's error;
// ErrPreconditionFailed per opts.IfNoneMatch / opts.IfMatch (a missing key
// matches no IfMatch); ErrInvalidKey for a key no store holds or the server
// refuses; ErrAccessDenied, ErrThrottled as the server says. On any error
// the object under key is unchanged.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := s.checkKey("put", key); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	if _, err := toHeaders(opts.Metadata, "", nil); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: put %q: %w", key, err)
	}
	small := size >= 0 && size <= s.partSize
	want, cost := size, size
	if !small {
		want, cost = -1, s.partSize
		if size > 0 {
			want = s.partSize
		}
	}
	if err := s.mem.acquire(ctx, cost); err != nil {
		return store.ObjectInfo{}, err
	}
	defer s.mem.release(cost)
	buf := s.bufs.get(int(max(cost, 0)))
	defer s.bufs.put(buf)

	n, eof, err := readPart(body, buf[:max(cost, 0)], want, small)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: put %q: read body: %w", key, err)
	}
	if eof {
		return s.putSmall(ctx, key, buf[:n], opts)
	}
	up := &largePut{s: s, key: key, size: size, opts: opts}
	return up.run(ctx, body, buf[:n])
}

// putSmall writes data, read to its end, in one conditional PutObject.
func (s *Store) putSmall(ctx context.Context, key string, data []byte, opts store.PutOptions) (store.ObjectInfo, error) {
	sum := md5.Sum(data)
	etag := hex.EncodeToString(sum[:])
	h, err := s.writeHeaders(key, opts, etag)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	in := &awss3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	h.putInput(in)
	in.IfNoneMatch, in.IfMatch = conditions(opts)
	out, err := s.client.PutObject(ctx, in, unsigned)
	if err != nil {
		return store.ObjectInfo{}, writeErr("put", key, opts, err)
	}
	return store.ObjectInfo{
		Key: key, Size: int64(len(data)), ModTime: time.Now(), ETag: etag,
		Validator: store.Validator(unquoteETag(aws.ToString(out.ETag))), VersionID: aws.ToString(out.VersionId),
	}, nil
}

// writeHeaders calls opts.LateChecksums (the body has ended) and encodes
// the object's headers.
func (s *Store) writeHeaders(key string, opts store.PutOptions, etag string) (headers, error) {
	var late map[string]string
	if opts.LateChecksums != nil {
		late = opts.LateChecksums()
	}
	h, err := toHeaders(opts.Metadata, etag, late)
	if err != nil {
		return headers{}, fmt.Errorf("s3: put %q: %w", key, err)
	}
	return h, nil
}

// conditions turns opts into If-None-Match and If-Match values.
func conditions(opts store.PutOptions) (ifNoneMatch, ifMatch *string) {
	if opts.IfNoneMatch {
		ifNoneMatch = aws.String("*")
	}
	if opts.IfMatch != "" {
		ifMatch = aws.String(quoteETag(string(opts.IfMatch)))
	}
	return ifNoneMatch, ifMatch
}

// writeErr maps the error of a conditional write: an IfMatch write to a
// missing key failed its precondition.
func writeErr(op, key string, opts store.PutOptions, err error) error {
	err = mapErr(op, key, err)
	if opts.IfMatch != "" && errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", store.ErrPreconditionFailed, err)
	}
	return err
}

// largePut uploads a body larger than one part as one multipart upload
// straight to its key, parts in parallel, created with the object's
// metadata; its MD5 ETag and late checksums go to a sidecar written before
// the upload is completed with the write's conditions (see sidecar.go).
type largePut struct {
	s    *Store
	key  string
	size int64 // -1 when unknown
	opts store.PutOptions

	uploadID string

	mu    sync.Mutex
	parts []types.CompletedPart
	md5s  map[int32][md5.Size]byte // each part's MD5, by part number
	err   error                    // the first part upload error
}

func (u *largePut) run(ctx context.Context, body io.Reader, first []byte) (info store.ObjectInfo, err error) {
	s := u.s
	// One HEAD before the upload: it fails early when a condition already
	// fails, and tells whose sidecar the new object replaces.
	prev, prevMeta, herr := s.headRaw(ctx, u.key, u.opts.IfMatch)
	switch {
	case herr == nil && u.opts.IfNoneMatch:
		return store.ObjectInfo{}, fmt.Errorf("s3: put %q: %w", u.key, store.ErrPreconditionFailed)
	case herr != nil && u.opts.IfMatch != "":
		return store.ObjectInfo{}, writeErr("put", u.key, u.opts, herr)
	case herr != nil && ctx.Err() != nil:
		return store.ObjectInfo{}, ctx.Err()
	}
	replaced := ""
	if herr == nil && hasSidecar(prevMeta) {
		replaced = string(prev.Validator)
	}
	h, err := toHeaders(u.opts.Metadata, "", nil)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("s3: put %q: %w", u.key, err)
	}
	h.meta[metaSidecar] = "1"
	cin := &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &u.key}
	h.createInput(cin)
	cu, err := s.client.CreateMultipartUpload(ctx, cin)
	if err != nil {
		return store.ObjectInfo{}, mapErr("put", u.key, err)
	}
	u.uploadID = aws.ToString(cu.UploadId)
	u.md5s = map[int32][md5.Size]byte{}
	committed := false
	defer func() {
		if !committed {
			s.abort(u.key, u.uploadID)
		}
	}()

	whole := md5.New()
	total, err := u.uploadParts(ctx, body, first, whole)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	doc := sidecarDoc{ETag: hex.EncodeToString(whole.Sum(nil))}
	if u.opts.LateChecksums != nil {
		doc.Checksums = u.opts.LateChecksums()
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	sortParts(u.parts) // all part uploads have returned
	sums := make([]store.PartInfo, len(u.parts))
	for i, p := range u.parts {
		n := aws.ToInt32(p.PartNumber)
		sum := u.md5s[n]
		sums[i] = store.PartInfo{Number: int(n), ETag: hex.EncodeToString(sum[:])}
	}
	expected, _, err := multipartETag(sums) // S3's ETag of these parts
	if err != nil {
		return store.ObjectInfo{}, err
	}
	// The sidecar first: the object is never visible without it. A failure
	// after this leaves a sidecar no object names (harmless, tiny).
	if err := s.writeSidecar(ctx, u.key, expected, doc); err != nil {
		return store.ObjectInfo{}, err
	}
	done := &awss3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &u.key, UploadId: &u.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts},
	}
	done.IfNoneMatch, done.IfMatch = conditions(u.opts)
	out, err := s.client.CompleteMultipartUpload(ctx, done)
	if err != nil {
		return store.ObjectInfo{}, writeErr("put", u.key, u.opts, err)
	}
	committed = true
	validator := unquoteETag(aws.ToString(out.ETag))
	if validator != expected {
		// A server whose multipart ETags are not MD5s of part MD5s: the
		// sidecar goes under the ETag it gave. Until it is there, a reader
		// sees the S3 ETag.
		if err := s.writeSidecar(ctx, u.key, validator, doc); err != nil {
			return store.ObjectInfo{}, err
		}
		s.deleteSidecar(u.key, expected)
	}
	vid := aws.ToString(out.VersionId)
	if replaced != "" && replaced != validator && vid == "" {
		// An unversioned bucket: the replaced object is gone, and so is
		// the need for its sidecar. (Versioned buckets keep every
		// version's, as each version is still readable.)
		s.deleteSidecar(u.key, replaced)
	}
	return store.ObjectInfo{Key: u.key, Size: total, ModTime: time.Now(), ETag: doc.ETag,
		Validator: store.Validator(validator), VersionID: vid}, nil
}

// uploadParts sends first and the rest of body as parts, up to s.conc at
// once, hashing the bytes into whole, and returns the body's size. It reads
// body to io.EOF; on error the in-flight parts are canceled.
//
// whole is written on a goroutine of its own, part after part in order,
// while the next part is read and the parts upload: hashing the body does
// not hold up reading it. A part's buffer is reused once it is both
// uploaded and hashed.
func (u *largePut) uploadParts(ctx context.Context, body io.Reader, first []byte, whole io.Writer) (int64, error) {
	s := u.s
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	free := make(chan []byte, s.conc+1)
	// Buffers taken from the budget besides first (Put's): up to conc, so
	// that the next part is read while conc parts upload.
	held := 0
	type hashItem struct {
		data []byte
		done chan struct{}
	}
	hashQ := make(chan hashItem, s.conc+1)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for it := range hashQ {
			whole.Write(it.data)
			close(it.done)
		}
	}()
	hashClosed := false
	closeHash := func() {
		if !hashClosed {
			hashClosed = true
			close(hashQ)
			<-hashed
		}
	}
	defer func() {
		closeHash()
		cancel()
		wg.Wait()
		close(free)
		for b := range free {
			if &b[:1][0] != &first[:1][0] {
				s.bufs.put(b)
			}
		}
		for range held {
			s.mem.release(s.partSize)
		}
	}()

	buf, n, eof, total := first, len(first), false, int64(0)
	for num := int32(1); ; num++ {
		total += int64(n)
		data := buf[:n]
		it := hashItem{data: data, done: make(chan struct{})}
		hashQ <- it
		wg.Go(func() {
			if err := u.uploadPart(ctx, num, data); err != nil {
				u.fail(err)
				cancel()
			}
			<-it.done
			free <- data[:cap(data)]
		})
		if eof {
			break
		}
		// The next buffer: a returned one, a new one if the budget has room,
		// else wait for a part to finish.
		buf = nil
		select {
		case buf = <-free:
		default:
			if held < s.conc && s.mem.tryAcquire(s.partSize) {
				held++
				buf = s.bufs.get(int(s.partSize))
			} else {
				select {
				case buf = <-free:
				case <-ctx.Done():
				}
			}
		}
		if buf == nil || u.failed() != nil {
			break
		}
		want, last := int64(-1), false
		if u.size >= 0 {
			want = min(s.partSize, u.size-total)
			last = total+want == u.size
		}
		var err error
		n, eof, err = readPart(body, buf[:s.partSize], want, last)
		if err != nil {
			free <- buf
			return 0, fmt.Errorf("s3: put %q: read body: %w", u.key, err)
		}
		if n == 0 && eof { // an unknown size that ended on a part boundary
			free <- buf
			break
		}
	}
	wg.Wait()
	if err := u.failed(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return total, nil
}

func (u *largePut) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
	}
}

func (u *largePut) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

func (u *largePut) uploadPart(ctx context.Context, num int32, data []byte) error {
	s := u.s
	sum := md5.Sum(data)
	out, err := s.client.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &s.bucket, Key: &u.key, UploadId: &u.uploadID, PartNumber: &num,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}, unsigned)
	if err != nil {
		return mapErr("put", u.key, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
	u.md5s[num] = sum
	return nil
}

// abort discards an upload, after a failure: with its own short deadline,
// as the caller's ctx may be what failed.
func (s *Store) abort(key, uploadID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &uploadID})
}
