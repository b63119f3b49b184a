package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/fedgate/fedgate/store"
)

// Versions of a bucket mounted from an existing cloud bucket (policy
// origin:) are the origin's own (docs/versioning.md, "Buckets mounted from
// an origin"): S3 version ids, GCS generations, Azure blob versions. fedgate
// keeps no index of them; listing, HEAD/GET and DELETE by version pass
// through to the origin's store (store.Versioner), and a version's bytes
// are cached under a key of their own, so an old version read twice
// crosses the cloud boundary once. Turning versioning on or off is the
// origin's business (SetVersioning refuses); where the origin keeps no
// versions the bucket reports unversioned and behaves as any unversioned
// bucket (every object is its key's null version).

// originVersioningTTL is how long a node trusts what the origin said of
// its versioning state.
const originVersioningTTL = 30 * time.Second

// originVersionSep joins a store key and a version id into the key of one
// version's bytes (a key holds no NUL: store.ErrInvalidKey). Reads of such
// a key (openResuming, the chunk cache, peers' ServeChunk) read that
// version through store.Versioner.
const originVersionSep = "\x00v\x00"

func originVersionKey(skey, id string) string { return skey + originVersionSep + id }

func splitOriginVersionKey(key string) (skey, id string, ok bool) {
	return strings.Cut(key, originVersionSep)
}

// readRange reads one range of key from st: of one origin version when key
// names one (originVersionKey), else of the object if it still has
// validator v.
func readRange(ctx context.Context, st store.Store, key string, v store.Validator, off, n int64) (io.ReadCloser, error) {
	if skey, id, ok := splitOriginVersionKey(key); ok {
		ver, ok := st.(store.Versioner)
		if !ok {
			return nil, fmt.Errorf("%w: store %s keeps no versions", store.ErrNotSupported, st.Name())
		}
		return ver.ReadVersionRange(ctx, skey, id, off, n)
	}
	return st.ReadRange(ctx, key, off, n, v)
}

// nativeState is what a node last heard of an origin's versioning.
type nativeState struct {
	state string
	at    time.Time
}

// originVersioner returns the origin's versions when the bucket is mounted
// from an origin whose store keeps them and has versioning on (or
// suspended, with versions from before).
func (b *Bucket) originVersioner(ctx context.Context) (store.Versioner, bool) {
	if !b.origin {
		return nil, false
	}
	ver, ok := b.store.(store.Versioner)
	if !ok || b.nativeVersioning(ctx) == "" {
		return nil, false
	}
	return ver, true
}

// nativeVersioning is the origin's versioning state, asked of the store at
// most every originVersioningTTL per node. When the store cannot be asked
// the last answer stands (none yet: unversioned, asked again next time).
func (b *Bucket) nativeVersioning(ctx context.Context) string {
	ver, ok := b.store.(store.Versioner)
	if !b.origin || !ok {
		return ""
	}
	now := b.ns.now()
	last, known := b.ns.native.Load(b.store.Name())
	if known && now.Sub(last.(nativeState).at) < originVersioningTTL {
		return last.(nativeState).state
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	state, err := ver.NativeVersioning(ctx)
	if err != nil {
		b.ns.log.Warn("origin versioning state unknown", "bucket", b.Name, "store", b.store.Name(), "error", err)
		if known {
			return last.(nativeState).state
		}
		return ""
	}
	b.ns.native.Store(b.store.Name(), nativeState{state: state, at: now})
	return state
}

// originInfo turns a version the origin's store describes into the
// bucket's view of it: the bucket's key, and the key of its bytes.
func (b *Bucket) originInfo(info store.ObjectInfo, skey, id string) store.ObjectInfo {
	info.Key = strings.TrimPrefix(skey, b.prefix)
	info.VersionID = id
	info.StoreKey = originVersionKey(skey, id)
	return info
}

// statOriginVersion is StatVersion of an origin with versions.
func (b *Bucket) statOriginVersion(ctx context.Context, ver store.Versioner, key, id string) (store.ObjectInfo, error) {
	skey := b.prefix + key
	var info store.ObjectInfo
	var err error
	for attempt := 1; ; attempt++ {
		info, err = ver.StatVersion(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), skey, id)
		if !retryable(err) || attempt >= readAttempts {
			break
		}
		if werr := readBackoff.Sleep(ctx, attempt); werr != nil {
			return store.ObjectInfo{}, werr
		}
	}
	if dm, ok := store.IsDeleteMarker(err); ok {
		return store.ObjectInfo{}, &DeleteMarkerError{Key: key, VersionID: dm.VersionID, Latest: dm.Latest}
	}
	if errors.Is(err, store.ErrNoSuchVersion) {
		return store.ObjectInfo{}, fmt.Errorf("%w: %s version %s", ErrNoSuchVersion, key, id)
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return b.originInfo(info, skey, id), nil
}

// deleteOriginVersion is DeleteVersion of an origin with versions. It
// reports whether the version was a delete marker (S3 says so in
// x-amz-delete-marker; the store's delete does not, so it is looked up).
func (b *Bucket) deleteOriginVersion(ctx context.Context, ver store.Versioner, key, id string) (bool, error) {
	skey := b.prefix + key
	_, err := ver.StatVersion(ctx, skey, id)
	_, marker := store.IsDeleteMarker(err)
	if err != nil && !marker && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if err := ver.DeleteVersion(ctx, skey, id); err != nil {
		return false, err
	}
	// The key's current object may have been this version.
	b.invalidate(key)
	if b.ns.cache != nil {
		b.ns.cache.Invalidate(b.store.Name(), originVersionKey(skey, id))
	}
	return marker, nil
}

// deleteOriginCurrent is a DELETE without a version id of an origin with
// versions: the origin adds a delete marker (S3) or makes the current
// version noncurrent (GCS, Azure: no marker, id "").
func (b *Bucket) deleteOriginCurrent(ctx context.Context, ver store.Versioner, key string) (string, error) {
	defer b.invalidate(key)
	id, err := ver.DeleteCurrent(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), b.prefix+key)
	if err != nil {
		return "", err
	}
	return id, b.touch(ctx, key)
}

// storeVersionID is the version id the bucket reports for a version id
// its store gave: the origin's own for a bucket mounted from one that keeps
// versions (a GCS store gives every object its generation), none otherwise (a store under a bucket fedgate lays out is not versioned by
// its cloud; if it were, those ids would not be the bucket's).
func (b *Bucket) storeVersionID(ctx context.Context, id string) string {
	if id == "" || !b.origin || b.nativeVersioning(ctx) == "" {
		return ""
	}
	return id
}

// listOriginVersions is ListVersions of an origin with versions: the
// origin's listing under the bucket's prefix, keys relative to it.
func (b *Bucket) listOriginVersions(ctx context.Context, ver store.Versioner, opts VersionListOptions) iter.Seq2[VersionEntry, error] {
	so := store.VersionListOptions{Prefix: b.prefix + opts.Prefix, Delimiter: opts.Delimiter, VersionIDMarker: opts.VersionIDMarker}
	if opts.KeyMarker != "" {
		so.KeyMarker = b.prefix + opts.KeyMarker
	}
	return func(yield func(VersionEntry, error) bool) {
		for e, err := range ver.ListVersions(ctx, so) {
			if err != nil {
				yield(VersionEntry{}, err)
				return
			}
			out := VersionEntry{Key: strings.TrimPrefix(e.Key, b.prefix), IsPrefix: e.IsPrefix, IsLatest: e.IsLatest, DeleteMarker: e.DeleteMarker}
			if !e.IsPrefix {
				out.Info = b.originInfo(e.Info, e.Key, e.Info.VersionID)
			}
			if !yield(out, nil) {
				return
			}
		}
	}
}
