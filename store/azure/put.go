package azure

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/fedgate/fedgate/store"
)

// errTooLong: the body held more bytes than its declared size.
var errTooLong = errors.New("body longer than its declared size")

// source reads a body to io.EOF, counting and hashing it, checking the
// declared size and ctx before every read.
type source struct {
	ctx  context.Context
	body io.Reader
	size int64 // declared; -1 when unknown
	n    int64
	md5  hash.Hash
}

func newSource(ctx context.Context, body io.Reader, size int64) *source {
	return &source{ctx: ctx, body: body, size: size, md5: md5.New()}
}

// fill reads into buf until it is full or the body ends (eof). A body
// shorter than its size fails with io.ErrUnexpectedEOF, a longer one with
// errTooLong; read errors and ctx's error are returned as they are.
func (s *source) fill(buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		if err := s.ctx.Err(); err != nil {
			return n, false, err
		}
		m, err := s.body.Read(buf[n:])
		s.md5.Write(buf[n : n+m])
		n += m
		s.n += int64(m)
		if s.size >= 0 && s.n > s.size {
			return n, false, errTooLong
		}
		if err == io.EOF {
			if s.size >= 0 && s.n < s.size {
				return n, false, fmt.Errorf("%d of %d bytes: %w", s.n, s.size, io.ErrUnexpectedEOF)
			}
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

func (s *source) sum() []byte { return s.md5.Sum(nil) }

// putBlockSize is the size of block idx of a Put of size bytes (-1:
// unknown): BlockSize, or larger so that the object fits in 50,000
// blocks. Unknown sizes double the block every 5,000 blocks.
func (s *Store) putBlockSize(size int64, idx int) int64 {
	bs := s.blockSize
	if size >= 0 {
		bs = max(bs, (size+maxBlocks-1)/maxBlocks)
	} else {
		bs <<= min(idx/5000, 20)
	}
	return min(bs, maxBlockSize)
}

// Put streams body into key: up to one block in one Put Blob request,
// more as staged blocks committed with one Put Block List. Nothing is
// committed before body returned io.EOF and LateChecksums was called.
// ErrInvalidKey for a key the store does not hold; ErrPreconditionFailed
// per opts; io.ErrUnexpectedEOF (wrapped) for a short body, an error for a
// long one; a body read error or ctx's error is returned wrapped. Another
// write of the same key that commits while a multi-block Put stages its
// blocks discards them: that Put fails with ErrThrottled (retryable).
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := checkKey("put", key); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("azure: put %q: %w", key, err)
	}
	bb := s.cont.NewBlockBlobClient(key)
	src := newSource(ctx, body, size)
	bs := s.putBlockSize(size, 0)
	if size >= 0 {
		bs = min(bs, size+1) // small objects: a small buffer
	}
	first := make([]byte, bs)
	n, eof, err := src.fill(first)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("azure: put %q: reading body: %w", key, err)
	}
	md := opts.Metadata
	late := func() {
		if opts.LateChecksums != nil {
			md.Checksums = store.MergeMaps(md.Checksums, opts.LateChecksums())
		}
	}
	cond := writeConditions(opts)
	if eof {
		late()
		sum := src.sum()
		etag := hex.EncodeToString(sum)
		meta, headers := encodeMeta(md, etag, nil)
		headers.BlobContentMD5 = sum
		resp, err := bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(first[:n])), &blockblob.UploadOptions{
			Metadata: meta, HTTPHeaders: headers, AccessConditions: cond,
			TransactionalValidation: blob.TransferValidationTypeMD5(sum),
		})
		if err != nil {
			return store.ObjectInfo{}, s.writeErr(ctx, "put", key, err, opts)
		}
		return store.ObjectInfo{Key: key, Size: src.n, ModTime: timeOf(resp.LastModified), ETag: etag,
			Validator: validatorOf(resp.ETag), Metadata: md, VersionID: valueOf(resp.VersionID)}, nil
	}
	nonce := randomID()
	ids, err := s.stageAll(ctx, bb, src, first[:n], false, func(idx int) int64 { return s.putBlockSize(size, idx) },
		func(idx int, final bool) string {
			return blockID{kind: kindPut, id: nonce, index: uint32(idx)}.String()
		})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("azure: put %q: %w", key, err)
	}
	late()
	sum := src.sum()
	etag := hex.EncodeToString(sum)
	meta, headers := encodeMeta(md, etag, nil)
	headers.BlobContentMD5 = sum
	resp, err := bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{
		Metadata: meta, HTTPHeaders: headers, AccessConditions: cond,
	})
	if err != nil {
		return store.ObjectInfo{}, s.writeErr(ctx, "put", key, err, opts)
	}
	return store.ObjectInfo{Key: key, Size: src.n, ModTime: timeOf(resp.LastModified), ETag: etag,
		Validator: validatorOf(resp.ETag), Metadata: md, VersionID: valueOf(resp.VersionID)}, nil
}

func writeConditions(opts store.PutOptions) *blob.AccessConditions {
	if !opts.IfNoneMatch && opts.IfMatch == "" {
		return nil
	}
	c := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{}}
	if opts.IfNoneMatch {
		c.ModifiedAccessConditions.IfNoneMatch = to.Ptr(azcore.ETagAny)
	}
	if opts.IfMatch != "" {
		c.ModifiedAccessConditions.IfMatch = ifMatch(opts.IfMatch).ModifiedAccessConditions.IfMatch
	}
	return c
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// stageAll stages first and the rest of src as blocks named by name, and
// returns their IDs in order. Every block but the last is staged as soon as
// the next one has data, up to Concurrency at once; the last is staged
// after src reached io.EOF and the others succeeded, as name(idx, true), so
// the MD5 of the whole is known to name. With eof, first is the whole body.
// Errors: src's (read, size, ctx), or the first staging error.
func (s *Store) stageAll(ctx context.Context, bb *blockblob.Client, src *source, first []byte, eof bool,
	blockSize func(idx int) int64, name func(idx int, final bool) string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &stager{ctx: ctx, cancel: cancel, s: s, bb: bb, sem: make(chan struct{}, s.concurrency),
		free: make(chan []byte, s.concurrency+1)}
	var ids []string
	cur := first
	for !eof {
		if len(ids)+1 >= maxBlocks {
			cancel()
			st.wait()
			return nil, fmt.Errorf("more than %d blocks", maxBlocks)
		}
		next := st.buffer(blockSize(len(ids) + 1))
		var n int
		var err error
		n, eof, err = src.fill(next)
		if err != nil {
			cancel()
			st.wait()
			return nil, fmt.Errorf("reading body: %w", err)
		}
		if n == 0 && eof {
			break
		}
		id := name(len(ids), false)
		ids = append(ids, id)
		if err := st.stage(id, cur); err != nil {
			return nil, err
		}
		cur = next[:n]
	}
	if err := st.wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := name(len(ids), true)
	ids = append(ids, id)
	if err := st.stage(id, cur); err != nil {
		return nil, err
	}
	return ids, st.wait()
}

// stager runs StageBlock calls, at most cap(sem) at once, recycling their
// buffers; the first failure cancels the others.
type stager struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      *Store
	bb     *blockblob.Client
	sem    chan struct{}
	free   chan []byte
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// buffer returns a buffer of n bytes, recycled when one is free.
func (st *stager) buffer(n int64) []byte {
	select {
	case b := <-st.free:
		if int64(cap(b)) >= n {
			return b[:n]
		}
	default:
	}
	return make([]byte, n)
}

// stage starts staging b as block id; it waits for a free slot. It returns
// the first staging error seen so far (the caller stops then).
func (st *stager) stage(id string, b []byte) error {
	select {
	case st.sem <- struct{}{}:
	case <-st.ctx.Done():
		st.wait()
		if err := st.failure(); err != nil {
			return err
		}
		return st.ctx.Err()
	}
	if err := st.failure(); err != nil {
		<-st.sem
		st.wait()
		return err
	}
	st.wg.Go(func() {
		defer func() { <-st.sem }()
		_, err := st.bb.StageBlock(st.ctx, id, streaming.NopCloser(bytes.NewReader(b)), nil)
		if err != nil {
			st.mu.Lock()
			if st.err == nil {
				st.err = st.s.mapErr("stage block", "", err)
				st.cancel()
			}
			st.mu.Unlock()
			return
		}
		select {
		case st.free <- b[:cap(b)]:
		default:
		}
	})
	return nil
}

func (st *stager) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// wait waits for every started StageBlock and returns the first error.
func (st *stager) wait() error {
	st.wg.Wait()
	return st.failure()
}
