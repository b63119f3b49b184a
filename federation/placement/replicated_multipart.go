package placement

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fedgate/fedgate/store"
)

// Multipart uploads of a Replicated placement are native uploads in every
// store at once: the placement's upload id holds each store's own id, a
// part is teed to every store's UploadPart, and a completion completes the
// primary (the first listed store) first, with the write's conditions, and
// then the others. So part bytes only ever live in the stores' own staging
// areas, and a completion refused by the primary (a precondition, a wrong
// part) leaves the upload usable everywhere.

const replicatedUploadPrefix = "r1."

func (r *Replicated) multiparters() ([]store.Multiparter, error) {
	mps := make([]store.Multiparter, len(r.stores))
	for i, s := range r.stores {
		mp, ok := s.(store.Multiparter)
		if !ok {
			return nil, fmt.Errorf("placement %s: store %s has no multipart uploads: %w", r.name, s.Name(), store.ErrNotSupported)
		}
		mps[i] = mp
	}
	return mps, nil
}

func encodeUploadIDs(ids []string) string {
	b, _ := json.Marshal(ids)
	return replicatedUploadPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeUploadIDs returns the stores' upload ids held by id, or
// ErrNoSuchUpload for an id this placement did not make.
func (r *Replicated) decodeUploadIDs(op, key, id string) ([]string, error) {
	bad := fmt.Errorf("placement %s: %s %s: upload %q: %w", r.name, op, quote(key), id, store.ErrNoSuchUpload)
	if len(id) <= len(replicatedUploadPrefix) || id[:len(replicatedUploadPrefix)] != replicatedUploadPrefix {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(id[len(replicatedUploadPrefix):])
	if err != nil {
		return nil, bad
	}
	var ids []string
	if json.Unmarshal(b, &ids) != nil || len(ids) != len(r.stores) {
		return nil, bad
	}
	for _, s := range ids {
		if s == "" {
			return nil, bad
		}
	}
	return ids, nil
}

// CreateMultipart starts an upload in every store. When one fails, the
// uploads already started are aborted.
func (r *Replicated) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	mps, err := r.multiparters()
	if err != nil {
		return "", err
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("placement %s: create multipart %s: %w", r.name, quote(key), err)
	}
	inner := opts
	inner.IfNoneMatch, inner.IfMatch, inner.LateChecksums = false, "", nil
	inner.Metadata = encodeRepMeta(opts.Metadata, "", "")
	ids := make([]string, len(mps))
	errs := parallel(len(mps), len(mps), func(i int) error {
		id, err := mps[i].CreateMultipart(ctx, key, inner)
		r.observe(i, err)
		if err != nil {
			return r.storeErr(i, err)
		}
		ids[i] = id
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		for i, id := range ids {
			if id != "" {
				_ = mps[i].AbortMultipart(cctx, key, id)
			}
		}
		return "", fmt.Errorf("placement %s: create multipart %s: %w", r.name, quote(key), err)
	}
	return encodeUploadIDs(ids), nil
}

// UploadPart tees the part to every store's upload (read once; see tee).
// It fails, storing nothing new anywhere, when any store fails before the
// part's end.
func (r *Replicated) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	mps, err := r.multiparters()
	if err != nil {
		return store.PartInfo{}, err
	}
	ids, err := r.decodeUploadIDs("upload part", key, uploadID)
	if err != nil {
		return store.PartInfo{}, err
	}
	infos := make([]store.PartInfo, len(mps))
	sinkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sinks := make([]func(io.Reader) error, len(mps))
	for i, mp := range mps {
		sinks[i] = func(rd io.Reader) error {
			p, err := mp.UploadPart(sinkCtx, key, ids[i], number, rd, size)
			infos[i] = p
			r.observe(i, err)
			return err
		}
	}
	sinkErrs, bodyErr := Tee(ctx, body, size, sinks, true, cancel)
	if bodyErr != nil {
		return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: read body: %w", r.name, number, quote(key), bodyErr)
	}
	if err := r.sinkError(sinkErrs); err != nil {
		return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: %w", r.name, number, quote(key), err)
	}
	for i := 1; i < len(infos); i++ {
		if infos[i].ETag != infos[0].ETag || infos[i].Size != infos[0].Size {
			return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: stores disagree: %s says %s (%d bytes), %s says %s (%d bytes)",
				r.name, number, quote(key), r.stores[0].Name(), infos[0].ETag, infos[0].Size, r.stores[i].Name(), infos[i].ETag, infos[i].Size)
		}
	}
	return infos[0], nil
}

// CompleteMultipart completes the primary's upload first, with opts'
// conditions (IfMatch checked against the placement's Validator), then the
// other stores' uploads. When the primary refuses, nothing changed and the
// upload stays usable. When another store fails after the primary
// completed, the object exists in some stores only; the error names the
// store, and Repair (or a later write) settles the key.
func (r *Replicated) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	mps, err := r.multiparters()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	ids, err := r.decodeUploadIDs("complete multipart", key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	version := newVersion(r.opts.now(), "")
	inner := store.PutOptions{IfNoneMatch: opts.IfNoneMatch, Metadata: encodeRepMeta(opts.Metadata, version, "")}
	if opts.IfMatch != "" {
		cur, err := r.stores[0].Stat(ctx, key)
		r.observe(0, err)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", r.name, quote(key), store.ErrPreconditionFailed)
		case err != nil:
			return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", r.name, quote(key), r.storeErr(0, err))
		}
		if got, _ := r.decodeInfo(0, cur); got.Validator != opts.IfMatch {
			return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", r.name, quote(key), store.ErrPreconditionFailed)
		}
		inner.IfMatch = cur.Validator
	}
	info, err := mps[0].CompleteMultipart(ctx, key, ids[0], parts, inner)
	r.observe(0, err)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", r.name, quote(key), r.storeErr(0, err))
	}
	rest := store.PutOptions{Metadata: inner.Metadata}
	errs := parallel(len(mps)-1, len(mps), func(k int) error {
		i := k + 1
		_, err := mps[i].CompleteMultipart(ctx, key, ids[i], parts, rest)
		r.observe(i, err)
		if err != nil {
			return r.storeErr(i, err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: completed in %s but not everywhere: %w",
			r.name, quote(key), r.stores[0].Name(), err)
	}
	_, _ = r.converge(ctx, key, false)
	out, _ := r.decodeInfo(0, info)
	out.Key = key
	out.Validator = store.Validator(repValidatorPrefix + version)
	if out.Metadata.ContentType == "" && len(out.Metadata.User) == 0 {
		// The store left the metadata out of its answer: Stat has it.
		if st, err := r.stores[0].Stat(ctx, key); err == nil {
			st, v := r.decodeInfo(0, st)
			if v == version {
				out.Metadata = st.Metadata
			}
		}
	}
	return out, nil
}

// AbortMultipart aborts the upload in every store. Idempotent: an unknown
// upload is not an error.
func (r *Replicated) AbortMultipart(ctx context.Context, key, uploadID string) error {
	mps, err := r.multiparters()
	if err != nil {
		return err
	}
	ids, err := r.decodeUploadIDs("abort multipart", key, uploadID)
	if err != nil {
		return nil
	}
	errs := parallel(len(mps), len(mps), func(i int) error {
		err := mps[i].AbortMultipart(ctx, key, ids[i])
		r.observe(i, err)
		if err != nil {
			return r.storeErr(i, err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("placement %s: abort multipart %s: %w", r.name, quote(key), err)
	}
	return nil
}
