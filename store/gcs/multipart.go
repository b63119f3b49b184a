package gcs

// A multipart upload lives under .fedgate/mpu/<uploadID>/<keyHash>/, where
// uploadID is 32 random hex digits and keyHash the first 32 hex digits of
// the SHA-256 of the key:
//
//	upload        JSON: the key and the metadata given to CreateMultipart
//	p00001 ...    one object per part, named by its number
//	c/<nonce>/    intermediate objects of a compose tree (during completion)
//
// Everything is derived from the upload id and the key, so an upload
// survives a gateway restart and can continue on any node; the key hash in
// the path makes an id used with another key name nothing (ErrNoSuchUpload)
// without reading the upload record.

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"

	"github.com/fedgate/fedgate/store"
)

const (
	maxPartNumber = 10000
	// maxComposeSources is GCS's limit of sources per compose request.
	maxComposeSources = 32
	// parallel bounds the concurrent requests of one completion or cleanup.
	parallel = 16
)

type upload struct {
	Key  string         `json:"key"`
	Meta store.Metadata `json:"meta"`
}

func uploadDir(key, id string) string {
	h := sha256.Sum256([]byte(key))
	return mpuPrefix + id + "/" + hex.EncodeToString(h[:16]) + "/"
}

func partName(dir string, n int) string { return fmt.Sprintf("%sp%05d", dir, n) }

// CreateMultipart starts an upload for key and records opts.Metadata for
// the completed object; opts' conditions are checked at completion only.
// ErrInvalidKey; ErrAccessDenied, ErrThrottled.
func (s *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("gcs: create multipart %q: %w", key, err)
	}
	js, err := json.Marshal(upload{Key: key, Meta: opts.Metadata})
	if err != nil {
		return "", fmt.Errorf("gcs: create multipart %q: %w", key, err)
	}
	id := store.RandomID()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.object(uploadDir(key, id) + "upload").If(storage.Conditions{DoesNotExist: true}).NewWriter(wctx)
	w.ContentType = "application/json"
	w.ChunkSize = roundChunk(len(js) + 1)
	_, err = w.Write(js)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", mapErr("create multipart", key, err)
	}
	return id, nil
}

// checkUpload returns ErrNoSuchUpload (wrapped) unless id is an open
// upload of key.
func (s *Store) checkUpload(ctx context.Context, key, id string) error {
	if !store.ValidRandomID(id) || checkKey(key) != nil {
		return fmt.Errorf("gcs: upload %q of %q: %w", id, key, store.ErrNoSuchUpload)
	}
	_, err := s.object(uploadDir(key, id) + "upload").Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("gcs: upload %s of %q: %w", id, key, store.ErrNoSuchUpload)
	}
	if err != nil {
		return mapErr("upload "+id, key, err)
	}
	return nil
}

// UploadPart stores part number (1..10000) of the upload as an object,
// replacing an earlier one with that number. ErrNoSuchUpload for an
// unknown upload or one of another key; ErrInvalidPart (wrapped) for a
// number out of range; a body read error (io.ErrUnexpectedEOF for a short
// one) is returned wrapped and stores nothing.
func (s *Store) UploadPart(ctx context.Context, key, uploadID string, number int, r io.Reader, size int64) (store.PartInfo, error) {
	if number < 1 || number > maxPartNumber {
		return store.PartInfo{}, fmt.Errorf("gcs: part number %d not in 1..%d: %w", number, maxPartNumber, store.ErrInvalidPart)
	}
	if err := s.checkUpload(ctx, key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	chunk := 0
	if size >= 0 && size < int64(s.chunk) {
		chunk = roundChunk(int(size) + 1)
	}
	name := partName(uploadDir(key, uploadID), number)
	br := newBody(ctx, r, size)
	a, err := s.upload(ctx, s.streamObject(name), nil, br, chunk)
	if err != nil {
		return store.PartInfo{}, fmt.Errorf("gcs: upload part %d of %q: %w", number, key, err)
	}
	// An abort or completion that ran meanwhile did not see this part.
	if err := s.checkUpload(ctx, key, uploadID); err != nil {
		s.deleteQuietly(ctx, name, a.Generation)
		return store.PartInfo{}, err
	}
	return store.PartInfo{Number: number, Size: a.Size, ETag: hex.EncodeToString(br.sum()), ModTime: a.Updated}, nil
}

// CompleteMultipart composes the listed parts, in the order given, into key
// (a tree of composes when there are more than 32), with the metadata given
// to CreateMultipart overridden by the fields opts sets and the ETag
// "<md5 of the parts' MD5s>-N"; then it removes the upload. ErrNoSuchUpload
// for an unknown upload; ErrInvalidPart when parts is empty or a part is
// missing or its ETag differs; ErrPreconditionFailed per opts. After a
// failure the upload stays usable.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	if !store.ValidRandomID(uploadID) || checkKey(key) != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: upload %q of %q: %w", uploadID, key, store.ErrNoSuchUpload)
	}
	conds, err := writeConds(opts)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: complete multipart %q: %w", key, err)
	}
	if len(parts) == 0 || len(parts) > maxPartNumber {
		return store.ObjectInfo{}, fmt.Errorf("gcs: complete multipart %q: %d parts: %w", key, len(parts), store.ErrInvalidPart)
	}
	dir := uploadDir(key, uploadID)
	u, err := s.readUpload(ctx, key, dir)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	srcs := make([]*storage.ObjectHandle, len(parts))
	sums := make([][]byte, len(parts))
	err = forEach(ctx, len(parts), func(ctx context.Context, i int) error {
		p := parts[i]
		if p.Number < 1 || p.Number > maxPartNumber {
			return fmt.Errorf("part %d: %w", p.Number, store.ErrInvalidPart)
		}
		a, err := s.object(partName(dir, p.Number)).Attrs(ctx)
		if errors.Is(err, storage.ErrObjectNotExist) {
			return fmt.Errorf("part %d was not uploaded: %w", p.Number, store.ErrInvalidPart)
		}
		if err != nil {
			return mapErr("complete multipart", key, err)
		}
		if got, want := hex.EncodeToString(a.MD5), strings.ToLower(strings.Trim(p.ETag, `"`)); got != want {
			return fmt.Errorf("part %d has ETag %s, not %s: %w", p.Number, got, want, store.ErrInvalidPart)
		}
		// Pinned: a part re-uploaded meanwhile is not taken.
		srcs[i], sums[i] = s.object(a.Name).Generation(a.Generation), a.MD5
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("gcs: complete multipart %q: %w", key, err)
	}
	h := md5.New()
	for _, sum := range sums {
		h.Write(sum)
	}
	m := u.Meta
	m = m.Override(opts.Metadata)
	if opts.LateChecksums != nil {
		m.Checksums = store.MergeMaps(m.Checksums, opts.LateChecksums())
	}
	attrs := objectAttrs(key, m, fmt.Sprintf("%x-%d", h.Sum(nil), len(parts)), "")
	info, err := s.composeTree(ctx, key, dir+"c/"+store.RandomID()+"/", srcs, attrs, conds)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	s.removeUpload(ctx, dir)
	return info, nil
}

func (s *Store) readUpload(ctx context.Context, key, dir string) (upload, error) {
	var u upload
	r, err := s.object(dir + "upload").NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return u, fmt.Errorf("gcs: upload %s: %w", dir, store.ErrNoSuchUpload)
	}
	if err != nil {
		return u, mapErr("complete multipart", key, err)
	}
	defer r.Close()
	js, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return u, mapErr("complete multipart", key, err)
	}
	if err := json.Unmarshal(js, &u); err != nil || u.Key != key {
		return u, fmt.Errorf("gcs: upload record %s is damaged (%v): %w", dir, err, store.ErrNoSuchUpload)
	}
	return u, nil
}

// composeTree composes srcs into key: while there are more than s.fanIn,
// groups of s.fanIn are composed into intermediate objects under scratch,
// which are deleted (their generations) when it returns.
func (s *Store) composeTree(ctx context.Context, key, scratch string, srcs []*storage.ObjectHandle,
	attrs storage.ObjectAttrs, conds *storage.Conditions) (store.ObjectInfo, error) {
	var (
		mu    sync.Mutex
		temps []objectRef
	)
	defer func() { s.deleteAll(ctx, temps) }()
	for level := 0; len(srcs) > s.fanIn; level++ {
		next := make([]*storage.ObjectHandle, (len(srcs)+s.fanIn-1)/s.fanIn)
		err := forEach(ctx, len(next), func(ctx context.Context, i int) error {
			name := fmt.Sprintf("%s%d-%05d", scratch, level, i)
			group := srcs[i*s.fanIn : min((i+1)*s.fanIn, len(srcs))]
			c := s.object(name).If(storage.Conditions{DoesNotExist: true}).ComposerFrom(group...)
			c.DeleteSourceObjects = level > 0 // intermediates, never the parts
			a, err := c.Run(ctx)
			if err != nil {
				return mapErr("compose", name, err)
			}
			mu.Lock()
			temps = append(temps, objectRef{name, a.Generation})
			mu.Unlock()
			next[i] = s.object(name).Generation(a.Generation)
			return nil
		})
		if err != nil {
			return store.ObjectInfo{}, fmt.Errorf("gcs: complete multipart %q: %w", key, err)
		}
		srcs = next
	}
	// The final sources are the parts (at most fanIn) or intermediates,
	// the store's own either way: the compose deletes them on success.
	return s.commitCompose(ctx, "complete multipart", key, srcs, attrs, conds, true)
}

// AbortMultipart removes the upload and its parts. Idempotent: an unknown
// upload, or one of another key, is not an error. ErrAccessDenied,
// ErrThrottled.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !store.ValidRandomID(uploadID) || checkKey(key) != nil {
		return nil
	}
	dir := uploadDir(key, uploadID)
	err := s.object(dir + "upload").Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return mapErr("abort multipart", key, err)
	}
	s.removeUpload(ctx, dir)
	return nil
}

// removeUpload deletes the upload record first (the upload is then gone
// for every node), then every generation under the upload's folder: its
// parts, parts uploaded again (noncurrent in a bucket with versioning),
// leftover intermediates, the record itself. Failures are ignored: what is
// left is under the reserved prefix, invisible, and a lifecycle rule
// removes it.
func (s *Store) removeUpload(ctx context.Context, dir string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	_ = s.object(dir + "upload").Delete(ctx)
	var refs []objectRef
	it := s.lbkt.Objects(ctx, &storage.Query{Prefix: dir, Versions: true})
	for {
		a, err := it.Next()
		if err != nil { // iterator.Done or a failure
			break
		}
		refs = append(refs, objectRef{a.Name, a.Generation})
	}
	s.deleteAll(ctx, refs)
}

// objectRef names one generation of an object.
type objectRef struct {
	name string
	gen  int64
}

// deleteAll deletes the generations refs name for good, a few at a time,
// even when ctx is canceled, and ignores failures.
func (s *Store) deleteAll(ctx context.Context, refs []objectRef) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	_ = forEach(ctx, len(refs), func(ctx context.Context, i int) error {
		_ = s.object(refs[i].name).Generation(refs[i].gen).Delete(ctx)
		return nil
	})
}

// forEach runs f(0..n-1), at most parallel at once, and returns the first
// error; after one, ctx is canceled and the rest are not started.
func forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	sem := make(chan struct{}, parallel)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			fail(err)
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return first
}
