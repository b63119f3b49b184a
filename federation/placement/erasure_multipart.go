package placement

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fedgate/fedgate/store"
)

// Multipart uploads of an Erasure placement: each part is encoded like a
// Put body into a shard set of its own (segments of at most the segment
// size), and a small part record on the primary (the first listed store)
// names its set and segments. CompleteMultipart only writes the object's
// manifest, listing the parts' segments in order: a metadata operation,
// never a re-encode. The upload's records live on the primary only (an
// erasure write needs every store anyway); the part bytes live in the
// shards like every object's.

type uploadRecord struct {
	KeyHash string         `json:"key_hash"`
	Meta    store.Metadata `json:"meta"`
	Created time.Time      `json:"created"`
}

type partRecord struct {
	Number   int       `json:"n"`
	Size     int64     `json:"size"`
	ETag     string    `json:"etag"`
	ModTime  time.Time `json:"mtime"`
	Set      string    `json:"set"`
	Segments []segment `json:"segments"`
	// Format is the shard layout the part was encoded in (manifestFormat;
	// absent, so 0, in records of builds before the striped layout), and
	// Block its checksum block: a part completes only into a manifest of
	// the same layout, as the shard sizes alone cannot tell them apart.
	Format int   `json:"format,omitempty"`
	Block  int64 `json:"block,omitempty"`
}

func uploadDir(kh, id string) string { return reservedPrefix + kh + "/u-" + id + "/" }
func uploadKey(kh, id string) string { return uploadDir(kh, id) + "upload" }
func partKey(kh, id string, n int) string {
	return fmt.Sprintf("%sp-%05d", uploadDir(kh, id), n)
}

const recordType = "application/vnd.fedgate.erasure-upload+json"

func (e *Erasure) noSuchUpload(op, key, id string) error {
	return fmt.Errorf("placement %s: %s %s: upload %q: %w", e.name, op, quote(key), id, store.ErrNoSuchUpload)
}

// loadUpload reads the upload's record; ErrNoSuchUpload when there is none.
func (e *Erasure) loadUpload(ctx context.Context, op, key, id string) (uploadRecord, error) {
	var up uploadRecord
	if !validID(id) {
		return up, e.noSuchUpload(op, key, id)
	}
	kh := keyHash(key)
	err := e.readJSON(ctx, 0, uploadKey(kh, id), &up)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return up, e.noSuchUpload(op, key, id)
	case err != nil:
		return up, fmt.Errorf("placement %s: %s %s: %w", e.name, op, quote(key), err)
	case up.KeyHash != kh:
		return up, e.noSuchUpload(op, key, id)
	}
	return up, nil
}

func (e *Erasure) readJSON(ctx context.Context, i int, key string, v any) error {
	rc, err := e.stores[i].ReadRange(ctx, key, 0, -1, "")
	e.observe(i, err)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestSize))
	if err != nil {
		return e.storeErr(i, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return nil
}

func (e *Erasure) putJSON(ctx context.Context, key string, v any, opts store.PutOptions) error {
	b, _ := json.Marshal(v)
	opts.ContentType = recordType
	_, err := e.stores[0].Put(ctx, key, bytes.NewReader(b), int64(len(b)), opts)
	e.observe(0, err)
	return err
}

// CreateMultipart starts an upload: it writes the upload's record (its
// metadata) on the primary.
func (e *Erasure) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := e.checkKey("create multipart", key); err != nil {
		return "", err
	}
	id := newVersion(e.opts.now(), "")
	up := uploadRecord{KeyHash: keyHash(key), Meta: opts.Metadata, Created: e.opts.now().UTC()}
	if err := e.putJSON(ctx, uploadKey(up.KeyHash, id), up, store.PutOptions{IfNoneMatch: true}); err != nil {
		return "", fmt.Errorf("placement %s: create multipart %s: %w", e.name, quote(key), e.storeErr(0, err))
	}
	return id, nil
}

// UploadPart encodes the part into a shard set of its own and records it;
// a part uploaded again replaces the earlier one (whose shards are
// removed). A body that fails stores nothing.
func (e *Erasure) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	if number < 1 || number > 10000 {
		return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: part numbers are 1 to 10000: %w", e.name, number, quote(key), store.ErrInvalidPart)
	}
	if _, err := e.loadUpload(ctx, "upload part", key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	kh := keyHash(key)
	set := newVersion(e.opts.now(), "")
	enc, err := e.encodeStream(ctx, kh, set, e.rotation(kh, number), body, size, false)
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err != nil {
		e.removeSegments(cctx, kh, nil, enc.tried)
		return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: %w", e.name, number, quote(key), err)
	}
	rec := partRecord{Number: number, Size: enc.size, ETag: hex.EncodeToString(enc.md5), ModTime: e.opts.now().UTC(), Set: set, Segments: enc.segs,
		Format: manifestFormat, Block: e.opts.blockSize}
	old, err := e.replacePart(ctx, kh, uploadID, rec)
	if err != nil {
		e.removeSegments(cctx, kh, nil, enc.tried)
		return store.PartInfo{}, fmt.Errorf("placement %s: upload part %d of %s: %w", e.name, number, quote(key), err)
	}
	if old != nil {
		e.removeSegments(cctx, kh, nil, old.Segments)
	}
	// The upload may have been completed or aborted meanwhile: then this
	// part belongs to nothing.
	if _, err := e.loadUpload(ctx, "upload part", key, uploadID); errors.Is(err, store.ErrNoSuchUpload) {
		_ = e.stores[0].Delete(cctx, partKey(kh, uploadID, number))
		e.removeSegments(cctx, kh, nil, enc.tried)
		return store.PartInfo{}, err
	}
	return store.PartInfo{Number: number, Size: rec.Size, ETag: rec.ETag, ModTime: rec.ModTime}, nil
}

// replacePart writes the part's record, replacing (compare-and-swap) the
// record of an earlier upload of that number, which it returns.
func (e *Erasure) replacePart(ctx context.Context, kh, id string, rec partRecord) (*partRecord, error) {
	key := partKey(kh, id, rec.Number)
	for range maxCAS {
		cur, err := e.stores[0].Stat(ctx, key)
		e.observe(0, err)
		opts := store.PutOptions{IfNoneMatch: true}
		var old *partRecord
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, e.storeErr(0, err)
		default:
			opts = store.PutOptions{IfMatch: cur.Validator}
			var o partRecord
			if err := e.readJSON(ctx, 0, key, &o); err == nil {
				old = &o
			}
		}
		err = e.putJSON(ctx, key, rec, opts)
		switch {
		case err == nil:
			if old != nil && old.Set == rec.Set {
				old = nil
			}
			return old, nil
		case !errors.Is(err, store.ErrPreconditionFailed):
			return nil, e.storeErr(0, err)
		}
	}
	return nil, fmt.Errorf("part record %s kept changing", key)
}

// CompleteMultipart writes the object's manifest from the parts' records
// (a metadata operation, see install). ErrInvalidPart when a part is
// missing or its ETag differs; ErrPreconditionFailed per opts. On success
// the upload's records and the shards of parts left out are removed; after
// a failure the upload stays usable.
func (e *Erasure) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	up, err := e.loadUpload(ctx, "complete multipart", key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: no parts: %w", e.name, quote(key), store.ErrInvalidPart)
	}
	kh := keyHash(key)
	recs := make([]partRecord, len(parts))
	errs := parallel(len(parts), 16, func(x int) error {
		p := parts[x]
		if p.Number < 1 || p.Number > 10000 {
			return fmt.Errorf("part %d: %w", p.Number, store.ErrInvalidPart)
		}
		err := e.readJSON(ctx, 0, partKey(kh, uploadID, p.Number), &recs[x])
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("part %d was not uploaded: %w", p.Number, store.ErrInvalidPart)
		case err != nil:
			return e.storeErr(0, err)
		case strings.Trim(p.ETag, `"`) != recs[x].ETag:
			return fmt.Errorf("part %d has ETag %s, not %s: %w", p.Number, recs[x].ETag, p.ETag, store.ErrInvalidPart)
		case recs[x].Format != manifestFormat || recs[x].Block != e.opts.blockSize:
			return fmt.Errorf("part %d was encoded in shard format %d with %d-byte blocks, not format %d with %d-byte blocks (a gateway of another version or a changed placement took it); upload it again: %w",
				p.Number, recs[x].Format, recs[x].Block, manifestFormat, e.opts.blockSize, store.ErrInvalidPart)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", e.name, quote(key), err)
	}
	h := md5.New()
	enc := encoded{}
	for _, r := range recs {
		b, _ := hex.DecodeString(r.ETag)
		h.Write(b)
		enc.size += r.Size
		enc.segs = append(enc.segs, r.Segments...)
	}
	etag := fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(parts))
	m := e.newManifest(key, enc, etag, up.Meta.Override(opts.Metadata))
	if err := m.check(); err != nil {
		// A part encoded with another layout (data, parity or block size)
		// than the placement's now.
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: a part does not fit the layout %d+%d in %d-byte blocks, upload it again: %w (%v)",
			e.name, quote(key), e.k, e.m, e.opts.blockSize, store.ErrInvalidPart, err)
	}
	res, err := e.install(ctx, key, m, opts)
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err != nil {
		if res.installed == 0 {
			// Nothing changed: the upload stays usable.
			return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: %w", e.name, quote(key), err)
		}
		return store.ObjectInfo{}, fmt.Errorf("placement %s: complete multipart %s: manifest written to %d of %d stores (a later write, Delete or Repair settles the key): %w",
			e.name, quote(key), res.installed, len(e.stores), err)
	}
	used := m.sets()
	if res.superseded {
		used = nil
		e.removeSegments(cctx, kh, nil, enc.segs)
	} else {
		e.removeVersions(cctx, key, res.replaced, used)
	}
	e.dropUpload(cctx, kh, uploadID, used)
	return m.info(key), nil
}

// dropUpload removes the upload's records and the shards of its parts
// whose sets are not in keep.
func (e *Erasure) dropUpload(ctx context.Context, kh, id string, keep map[string]bool) error {
	var errs []error
	var recs []string
	for ent, err := range e.stores[0].List(ctx, store.ListOptions{Prefix: uploadDir(kh, id)}) {
		if err != nil {
			errs = append(errs, e.storeErr(0, err))
			break
		}
		if !ent.IsPrefix {
			recs = append(recs, ent.Key)
		}
	}
	for _, k := range recs {
		if !strings.HasPrefix(k[len(uploadDir(kh, id)):], "p-") {
			continue
		}
		var p partRecord
		if err := e.readJSON(ctx, 0, k, &p); err == nil && !keep[p.Set] {
			e.removeSegments(ctx, kh, nil, p.Segments)
		}
		if err := e.stores[0].Delete(ctx, k); err != nil {
			errs = append(errs, e.storeErr(0, err))
		}
	}
	// The upload record goes last, so a failed cleanup can be retried.
	if err := e.stores[0].Delete(ctx, uploadKey(kh, id)); err != nil {
		errs = append(errs, e.storeErr(0, err))
	}
	return errors.Join(errs...)
}

// AbortMultipart removes the upload's parts (their shards) and records.
// Idempotent: an unknown upload is not an error.
func (e *Erasure) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if !validID(uploadID) || e.checkKey("abort multipart", key) != nil {
		return nil
	}
	if err := e.dropUpload(ctx, keyHash(key), uploadID, nil); err != nil {
		return fmt.Errorf("placement %s: abort multipart %s: %w", e.name, quote(key), err)
	}
	return nil
}
