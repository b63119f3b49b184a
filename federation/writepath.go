package federation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// writePath is how a bucket's objects are written, deleted, listed and
// looked up. The policy's `write:` chooses it per bucket:
//
//   - directPath (write-through, the default): straight in the bucket's
//     store; the store is the truth.
//   - writeBackPath (writeback.go): staged on Copies nodes and journaled
//     through Raft, acknowledged then, and drained to the store later
//     (drain.go); until drained the journal is the truth and reads are
//     served from staging.
//
// A multipart upload keeps the path it was created on (Upload.WriteBack),
// whatever the bucket's later policy: see Bucket.uploadPath.
type writePath interface {
	// lookup returns the key's info when the path itself holds its newest
	// version (known=true; a pending delete is store.ErrNotFound), or
	// known=false when the store has the answer.
	lookup(ctx context.Context, key string) (info store.ObjectInfo, known bool, err error)
	put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error)
	delete(ctx context.Context, key string) error
	list(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error]
	// localFiler is the store's local-file ability when the store's file
	// is always the newest version, else nil.
	localFiler() (store.LocalFiler, string)

	createUpload(ctx context.Context, u User, key string, meta store.Metadata, checksumAlg string) (Upload, error)
	uploadPart(ctx context.Context, up Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error)
	// complete joins parts already checked against the session.
	complete(ctx context.Context, up Upload, parts []store.PartInfo, refs []PartRef, ifNoneMatch bool) (store.ObjectInfo, error)
	abort(ctx context.Context, up Upload) error
}

// pathFor returns the write path of a bucket of the given write mode.
func pathFor(b *Bucket, writeBack bool) writePath {
	if writeBack {
		return writeBackPath{b}
	}
	return directPath{b}
}

// uploadPath is the path an upload was created on.
func (b *Bucket) uploadPath(up Upload) writePath { return pathFor(b, up.WriteBack) }

// directPath writes straight to the bucket's store.
type directPath struct{ b *Bucket }

// writeBarrier is the first step of a write-through write that changes an
// object without a Raft command of its own (put, delete, complete): it
// waits until this node has applied every write acknowledged in the region
// before it, so it never writes on a view the region has moved past (a
// bucket deleted and made again under a new prefix, a policy change), and
// a node cut off from the leader refuses the write with ErrNoLeader (S3:
// 503 SlowDown) instead of acknowledging it alone. Multipart sessions go
// through Raft already (CreateUpload, PutPart).
func (n *Namespace) writeBarrier(ctx context.Context) error {
	return n.readBarrier(ctx)
}

// readBarrier waits until this node has applied every write acknowledged
// in the region before the call (Region.ReadBarrier), with the region's
// errors translated (RegionError): a node that cannot reach a leader, or
// cannot apply the log in time, answers 503 on every route, never 500.
func (n *Namespace) readBarrier(ctx context.Context) error {
	return RegionError(n.region.ReadBarrier(ctx))
}

func (directPath) lookup(context.Context, string) (store.ObjectInfo, bool, error) {
	return store.ObjectInfo{}, false, nil
}

func (p directPath) put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	b := p.b
	if err := b.ns.writeBarrier(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	// After the barrier: a bucket versioned through another node a moment
	// ago is seen as versioned here.
	if b.versioned() {
		return b.putVersioned(ctx, key, body, size, opts)
	}
	defer b.invalidate(key)
	info, err := b.store.Put(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), b.prefix+key, body, size, opts)
	info.Key = key
	info.VersionID = b.storeVersionID(ctx, info.VersionID)
	if err == nil {
		b.ns.countWrite(b.Name, b.store, info.Size)
		err = b.touch(ctx, key)
	}
	return info, err
}

func (p directPath) delete(ctx context.Context, key string) error {
	_, err := p.deleteLatest(ctx, key)
	return err
}

// deleteLatest deletes key, or in a versioned bucket adds a delete marker
// and returns its id.
func (p directPath) deleteLatest(ctx context.Context, key string) (string, error) {
	b := p.b
	if err := b.ns.writeBarrier(ctx); err != nil {
		return "", err
	}
	if b.versioned() {
		return b.deleteVersioned(ctx, key)
	}
	if ver, ok := b.originVersioner(ctx); ok {
		return b.deleteOriginCurrent(ctx, ver, key)
	}
	return "", p.deletePlain(ctx, key)
}

func (p directPath) deletePlain(ctx context.Context, key string) error {
	b := p.b
	defer b.invalidate(key)
	if err := b.store.Delete(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), b.prefix+key); err != nil {
		return err
	}
	return b.touch(ctx, key)
}

func (p directPath) list(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return p.b.listStore(ctx, opts)
}

func (p directPath) localFiler() (store.LocalFiler, string) {
	lf, ok := p.b.store.(store.LocalFiler)
	if !ok {
		return nil, ""
	}
	return lf, p.b.prefix
}

func (p directPath) createUpload(ctx context.Context, u User, key string, meta store.Metadata, checksumAlg string) (Upload, error) {
	b, n := p.b, p.b.ns
	mp, err := b.multiparter()
	if err != nil {
		return Upload{}, err
	}
	up := Upload{ID: newUploadID(), Bucket: b.Name, Key: key, Store: b.store.Name(),
		Initiator: u.Name, Created: n.now().UTC(), Meta: toRaftMeta(meta, checksumAlg)}
	if b.versioned() {
		// The upload assembles the new version under its own key.
		up.VersionID = newVersionID()
		up.StoreKey = versionStoreKey(b.Name, up.VersionID)
	}
	skey := b.uploadStoreKey(up)
	sid, err := mp.CreateMultipart(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), skey, store.PutOptions{Metadata: meta})
	if err != nil {
		return Upload{}, err
	}
	up.StoreUploadID = sid
	if err := n.applyAcked(ctx, regionstate.CreateUpload{Upload: up}); err != nil {
		_ = mp.AbortMultipart(withEgressTag(context.WithoutCancel(ctx), egressTag{bucket: b.Name, key: key}), skey, sid)
		return Upload{}, err
	}
	return up, nil
}

func (p directPath) uploadPart(ctx context.Context, up Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error) {
	b, n := p.b, p.b.ns
	mp, err := b.multiparter()
	if err != nil {
		return store.PartInfo{}, err
	}
	pi, err := mp.UploadPart(withEgressTag(ctx, egressTag{bucket: b.Name, key: up.Key}), b.uploadStoreKey(up), up.StoreUploadID, number, body, size)
	if err != nil {
		return store.PartInfo{}, err
	}
	n.countWrite(b.Name, b.store, pi.Size)
	if checksums != nil {
		pi.Checksums = checksums()
	}
	err = n.applyAcked(ctx, regionstate.PutPart{UploadID: up.ID, Part: regionstate.Part{
		Number: pi.Number, Size: pi.Size, ETag: pi.ETag, Checksums: pi.Checksums, Modified: pi.ModTime}})
	if errors.Is(err, regionstate.ErrNoSuchUpload) || errors.Is(err, regionstate.ErrUploadClaimed) {
		return store.PartInfo{}, fmt.Errorf("%w (%v)", ErrNoSuchUpload, err)
	}
	return pi, err
}

func (p directPath) complete(ctx context.Context, up Upload, parts []store.PartInfo, _ []PartRef, ifNoneMatch bool) (store.ObjectInfo, error) {
	b, n := p.b, p.b.ns
	if err := n.writeBarrier(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	mp, err := b.multiparter()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	release, err := n.claimUpload(ctx, up)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	opts := store.PutOptions{IfNoneMatch: ifNoneMatch, Metadata: fromRaftMeta(up.Meta)}
	var cond *uint64
	if up.StoreKey != "" || b.versioned() {
		// A versioned bucket checks If-None-Match against the key's
		// newest version, and the commit below makes the version current.
		if err := b.adoptPlain(ctx, up.Key); err != nil {
			release()
			return store.ObjectInfo{}, err
		}
		if cond, err = b.checkVersionedConditions(ctx, up.Key, store.PutOptions{IfNoneMatch: ifNoneMatch}); err != nil {
			release()
			return store.ObjectInfo{}, err
		}
		opts.IfNoneMatch = false
	}
	info, err := mp.CompleteMultipart(withEgressTag(ctx, egressTag{bucket: b.Name, key: up.Key}), b.uploadStoreKey(up), up.StoreUploadID, parts, opts)
	b.invalidate(up.Key)
	if err != nil {
		release()
		return store.ObjectInfo{}, err
	}
	info.Key = up.Key
	info.VersionID = b.storeVersionID(ctx, info.VersionID)
	if up.StoreKey != "" || b.versioned() {
		if info, err = b.commitUploadVersion(ctx, up, info, cond); err != nil {
			release()
			return store.ObjectInfo{}, err
		}
	}
	if err := b.touch(ctx, up.Key); err != nil {
		return store.ObjectInfo{}, err
	}
	// The object is committed; forgetting the session may not be cancelled
	// half-way by a client that hangs up.
	if err := n.rs.Apply(context.WithoutCancel(ctx), regionstate.CompleteUpload{UploadID: up.ID}); err != nil && !errors.Is(err, regionstate.ErrNoSuchUpload) {
		n.log.Warn("multipart session not cleared after completion", "upload_id", up.ID, "error", err)
	}
	return info, nil
}

func (p directPath) abort(ctx context.Context, up Upload) error {
	b := p.b
	mp, err := b.multiparter()
	if err != nil {
		return err
	}
	release, err := b.ns.claimUpload(ctx, up)
	if err != nil {
		return err
	}
	if err := mp.AbortMultipart(withEgressTag(ctx, egressTag{bucket: b.Name, key: up.Key}), b.uploadStoreKey(up), up.StoreUploadID); err != nil {
		release()
		return err
	}
	return b.ns.dropUpload(ctx, up)
}

// claimUpload makes this completion or abort of up the only one under way
// (regionstate.ClaimUpload): of a completion and an abort racing, the
// loser gets ErrNoSuchUpload before it touches the store. release gives
// the claim back when the operation fails.
func (n *Namespace) claimUpload(ctx context.Context, up Upload) (release func(), err error) {
	claim := newUploadID()
	err = n.rs.Apply(ctx, regionstate.ClaimUpload{UploadID: up.ID, Claim: claim, At: n.now()})
	switch {
	case errors.Is(err, regionstate.ErrNoSuchUpload):
		return nil, ErrNoSuchUpload
	case errors.Is(err, regionstate.ErrUploadClaimed):
		return nil, fmt.Errorf("%w: another completion or abort of this upload is under way", ErrNoSuchUpload)
	case err != nil:
		return nil, err
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := n.rs.Apply(rctx, regionstate.ClaimUpload{UploadID: up.ID, Claim: claim, At: n.now(), Release: true}); err != nil &&
			!errors.Is(err, regionstate.ErrNoSuchUpload) {
			n.log.Warn("multipart upload claim not released (it expires on its own)", "upload_id", up.ID, "error", err, "ttl", regionstate.ClaimTTL.String())
		}
	}, nil
}

// dropUpload forgets an upload's session.
func (n *Namespace) dropUpload(ctx context.Context, up Upload) error {
	err := n.rs.Apply(ctx, regionstate.AbortUpload{UploadID: up.ID})
	if errors.Is(err, regionstate.ErrNoSuchUpload) {
		return ErrNoSuchUpload
	}
	return err
}

func newUploadID() string {
	var idb [24]byte
	_, _ = rand.Read(idb[:])
	return hex.EncodeToString(idb[:])
}

// listStore lists the store under the bucket's prefix, with keys relative
// to the bucket.
func (b *Bucket) listStore(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	opts.Prefix = b.prefix + opts.Prefix
	if opts.StartAfter != "" {
		opts.StartAfter = b.prefix + opts.StartAfter
	}
	return func(yield func(store.Entry, error) bool) {
		for e, err := range b.store.List(withEgressTag(ctx, egressTag{bucket: b.Name}), opts) {
			if err == nil {
				e.Key = strings.TrimPrefix(e.Key, b.prefix)
				e.Info.Key = e.Key
			} else {
				err = b.remoteError(ctx, err)
			}
			if !yield(e, err) {
				return
			}
		}
	}
}
