package gcs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"cloud.google.com/go/storage"

	"github.com/fedgate/fedgate/store"
)

// Put writes body under key (see the package comment for how). size may be
// -1; with size >= 0 exactly size bytes are read, a shorter body fails with
// io.ErrUnexpectedEOF and a longer one fails too. The body is read to
// io.EOF before anything is committed; opts.LateChecksums is called then.
//
// Errors: ErrInvalidKey; ErrPreconditionFailed per opts.IfNoneMatch and
// opts.IfMatch (a Validator that is no GCS generation matches nothing); the
// body's read error or ctx's error (wrapped); ErrAccessDenied,
// ErrThrottled. On any error the object under key is left as it was.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	conds, err := writeConds(opts)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: put %q: %w", key, err)
	}
	br := newBody(ctx, body, size)
	m := opts.Metadata
	if size > int64(s.chunk) {
		return s.putStaged(ctx, key, nil, br, m, opts.LateChecksums, conds)
	}
	head, err := br.readHead(s.chunk)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: put %q: read body: %w", key, err)
	}
	if br.eof {
		if opts.LateChecksums != nil {
			m.Checksums = store.MergeMaps(m.Checksums, opts.LateChecksums())
		}
		return s.putSmall(ctx, key, head, br.sum(), m, conds)
	}
	return s.putStaged(ctx, key, head, br, m, opts.LateChecksums, conds)
}

// putSmall writes a body held in memory in one request, with its MD5 for
// GCS to check and the write's precondition.
func (s *Store) putSmall(ctx context.Context, key string, b, sum []byte, m store.Metadata, conds *storage.Conditions) (store.ObjectInfo, error) {
	wid := store.RandomID()
	h := s.object(key)
	if conds != nil {
		h = h.If(*conds)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := h.NewWriter(wctx)
	w.ObjectAttrs = objectAttrs(key, m, hex.EncodeToString(sum), wid)
	w.MD5 = sum
	w.ChunkSize = roundChunk(len(b) + 1) // one request, retried from this buffer
	w.ForceEmptyContentType = true
	_, err := w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.recoverOwn(ctx, "put", key, wid, err)
	}
	return infoOf(w.Attrs()), nil
}

// putStaged streams head and the rest of br into a temporary object, then
// composes it into key with the final metadata and the precondition.
func (s *Store) putStaged(ctx context.Context, key string, head []byte, br *body, m store.Metadata,
	late func() map[string]string, conds *storage.Conditions) (store.ObjectInfo, error) {
	tmp := tmpPrefix + store.RandomID()
	ta, err := s.upload(ctx, s.streamObject(tmp).If(storage.Conditions{DoesNotExist: true}), head, br, 0)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: put %q: %w", key, err)
	}
	defer s.deleteQuietly(ctx, tmp, ta.Generation)
	if late != nil {
		m.Checksums = store.MergeMaps(m.Checksums, late())
	}
	src := s.object(tmp).Generation(ta.Generation)
	return s.commitCompose(ctx, "put", key, []*storage.ObjectHandle{src}, objectAttrs(key, m, hex.EncodeToString(br.sum()), ""), conds, true)
}

// upload streams head, then the rest of br, into the object of h (a
// resumable upload of chunk bytes per request; 0: the store's chunk size)
// and checks GCS's MD5 of it against br's. A read error of br is returned
// wrapped, and nothing is written.
func (s *Store) upload(ctx context.Context, h *storage.ObjectHandle, head []byte, br *body, chunk int) (*storage.ObjectAttrs, error) {
	name := h.ObjectName()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // on error: aborts the upload, nothing is committed
	w := h.NewWriter(wctx)
	w.ChunkSize = s.chunk
	if chunk > 0 {
		w.ChunkSize = chunk
	}
	w.ForceEmptyContentType = true
	if _, err := w.Write(head); err != nil {
		return nil, mapErr("upload", name, err)
	}
	buf := make([]byte, 256<<10)
	if _, err := io.CopyBuffer(w, br, buf); err != nil {
		if br.err != nil {
			return nil, fmt.Errorf("read body: %w", br.err)
		}
		return nil, mapErr("upload", name, err)
	}
	if err := w.Close(); err != nil {
		return nil, mapErr("upload", name, err)
	}
	a := w.Attrs()
	if len(a.MD5) == md5.Size && string(a.MD5) != string(br.sum()) {
		s.deleteQuietly(ctx, name, a.Generation)
		return nil, fmt.Errorf("upload %q: GCS has MD5 %x, %x was sent", name, a.MD5, br.sum())
	}
	return a, nil
}

// commitCompose composes srcs (at most s.fanIn) into key with attrs and the
// write's precondition, deleting the sources on success when deleteSources. The precondition is checked first with a Stat for
// an early answer, and enforced by GCS on the compose itself.
func (s *Store) commitCompose(ctx context.Context, op, key string, srcs []*storage.ObjectHandle,
	attrs storage.ObjectAttrs, conds *storage.Conditions, deleteSources bool) (store.ObjectInfo, error) {
	if err := s.precheck(ctx, op, key, conds); err != nil {
		return store.ObjectInfo{}, err
	}
	wid := store.RandomID()
	attrs.Metadata[metaWriteID] = wid
	dst := s.object(key)
	if conds != nil {
		dst = dst.If(*conds)
	}
	c := dst.ComposerFrom(srcs...)
	c.ObjectAttrs = attrs
	// The sources are the store's own temporaries: hard-deleted on success,
	// so a bucket's soft-delete retention does not keep (and bill) them.
	c.DeleteSourceObjects = deleteSources
	a, err := c.Run(ctx)
	if err != nil {
		return s.recoverOwn(ctx, op, key, wid, err)
	}
	return infoOf(a), nil
}

// precheck returns ErrPreconditionFailed when key's current state already
// fails conds.
func (s *Store) precheck(ctx context.Context, op, key string, conds *storage.Conditions) error {
	if conds == nil {
		return nil
	}
	a, err := s.object(key).Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		if conds.GenerationMatch != 0 {
			return fmt.Errorf("gcs: %s %q: key does not exist: %w", op, key, store.ErrPreconditionFailed)
		}
	case err != nil:
		return mapErr(op, key, err)
	case conds.DoesNotExist:
		return fmt.Errorf("gcs: %s %q: key exists: %w", op, key, store.ErrPreconditionFailed)
	case a.Generation != conds.GenerationMatch:
		return fmt.Errorf("gcs: %s %q: generation %d, want %d: %w", op, key, a.Generation, conds.GenerationMatch, store.ErrPreconditionFailed)
	}
	return nil
}

// recoverOwn maps the error of a write that carried write id wid. A 412
// (the precondition) or a 404 (a compose's deleted sources) may answer a
// retry of an attempt that did succeed (its reply was lost); then key holds
// this write's object, which is returned.
func (s *Store) recoverOwn(ctx context.Context, op, key, wid string, err error) (store.ObjectInfo, error) {
	if code := httpCode(err); code == 412 || code == 404 || errors.Is(err, storage.ErrObjectNotExist) {
		if a, aerr := s.object(key).Attrs(ctx); aerr == nil && a.Metadata[metaWriteID] == wid {
			return infoOf(a), nil
		}
	}
	return store.ObjectInfo{}, mapErr(op, key, err)
}

// writeConds turns opts' conditions into GCS preconditions. A Validator that
// is no generation can match nothing: ErrPreconditionFailed.
func writeConds(opts store.PutOptions) (*storage.Conditions, error) {
	switch {
	case opts.IfMatch != "" && opts.IfNoneMatch:
		return nil, fmt.Errorf("both IfMatch and IfNoneMatch: %w", store.ErrPreconditionFailed)
	case opts.IfNoneMatch:
		return &storage.Conditions{DoesNotExist: true}, nil
	case opts.IfMatch != "":
		g, ok := parseValidator(opts.IfMatch)
		if !ok {
			return nil, fmt.Errorf("validator %q is no GCS generation: %w", opts.IfMatch, store.ErrPreconditionFailed)
		}
		return &storage.Conditions{GenerationMatch: g}, nil
	}
	return nil, nil
}

// deleteQuietly removes generation gen of a temporary object, even when
// ctx is canceled, and ignores failures: a leftover is harmless and a
// lifecycle rule removes it. Naming the generation deletes it for good: in
// a bucket with versioning a plain delete would keep it as a noncurrent
// version.
func (s *Store) deleteQuietly(ctx context.Context, name string, gen int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = s.object(name).Generation(gen).Delete(ctx)
}

// newID returns 32 random hex digits.
// body reads a Put's body: it computes the MD5, checks ctx before every
// read, enforces size (when >= 0) and keeps the body's own read error.
type body struct {
	ctx  context.Context
	r    io.Reader
	size int64
	n    int64
	h    hash.Hash
	eof  bool
	err  error // the body's error (or ctx's), not io.EOF
}

func newBody(ctx context.Context, r io.Reader, size int64) *body {
	return &body{ctx: ctx, r: r, size: size, h: md5.New()}
}

func (b *body) sum() []byte { return b.h.Sum(nil) }

func (b *body) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if err := b.ctx.Err(); err != nil {
		b.err = err
		return 0, err
	}
	if b.size >= 0 && b.n == b.size {
		// Read on to the body's end: a verifying reader (checksums,
		// signatures) reports a mismatch there, instead of io.EOF.
		if err := store.ExpectEOF(b.r); err != nil {
			b.err = err
			return 0, err
		}
		b.eof = true
		return 0, io.EOF
	}
	if b.size >= 0 && int64(len(p)) > b.size-b.n {
		p = p[:b.size-b.n]
	}
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	switch {
	case err == io.EOF && b.size >= 0 && b.n < b.size:
		b.err = fmt.Errorf("%d of %d bytes: %w", b.n, b.size, io.ErrUnexpectedEOF)
		return n, b.err
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// readHead reads up to limit+1 bytes; b.eof tells whether that was all.
func (b *body) readHead(limit int) ([]byte, error) {
	n := limit + 1
	if b.size >= 0 && b.size < int64(limit) {
		n = int(b.size) + 1
	}
	buf := make([]byte, 0, min(n, 1<<20))
	for len(buf) < limit+1 && !b.eof {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := b.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+k]
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	return buf, nil
}
