package federation

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Versions of write-back buckets (docs/versioning.md). A version's bytes
// are staged on Copies nodes like any write-back write, and one Raft
// command (PutVersion with Stage) both adds the version to the index and
// journals its bytes under the version's own store key. The drainer
// uploads them there like any journal entry, and its FinishDrain records
// the store's validator in the version; until then the version is read
// from staging. Versions therefore keep their ids and their order (the
// Raft index of that command) from the moment they are acknowledged.

// stageVersion is PUT of a versioned write-back bucket. The caller has
// passed the write barrier.
func (b *Bucket) stageVersion(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	n := b.ns
	if err := b.adoptPlain(ctx, key); err != nil {
		return store.ObjectInfo{}, err
	}
	cond, err := b.checkVersionedConditions(ctx, key, opts)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	seg, etag, err := n.stage(ctx, body, size)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	meta := opts.Metadata
	if opts.LateChecksums != nil {
		meta.Checksums = store.MergeMaps(meta.Checksums, opts.LateChecksums())
	}
	e := regionstate.JournalEntry{Bucket: b.Name, Size: size, ETag: etag, Meta: toRaftMeta(meta, ""), Checksums: meta.Checksums,
		Segments: []regionstate.Segment{seg}, Created: n.now().UTC()}
	info, err := b.commitStagedVersion(ctx, key, e, cond, "")
	if err != nil {
		n.unstage(seg, err)
	}
	return info, err
}

// completeStagedVersion is the completion of a multipart upload of a
// versioned write-back bucket: e journals the staged parts; the upload's
// session ends in the same command that adds the version.
func (b *Bucket) completeStagedVersion(ctx context.Context, up Upload, e regionstate.JournalEntry, ifNoneMatch bool) (store.ObjectInfo, error) {
	if err := b.adoptPlain(ctx, up.Key); err != nil {
		return store.ObjectInfo{}, err
	}
	cond, err := b.checkVersionedConditions(ctx, up.Key, store.PutOptions{IfNoneMatch: ifNoneMatch})
	if err != nil {
		return store.ObjectInfo{}, err
	}
	info, err := b.commitStagedVersion(ctx, up.Key, e, cond, up.ID)
	if errors.Is(err, regionstate.ErrNoSuchUpload) {
		return store.ObjectInfo{}, ErrNoSuchUpload
	}
	return info, err
}

// commitStagedVersion commits a new version of key whose bytes e stages
// (Bucket, Size, ETag, Meta, Checksums, Segments and Created set), if the
// key's newest version is still cond's (nil: unconditional); with an
// upload id (else ""), it also ends that upload.
func (b *Bucket) commitStagedVersion(ctx context.Context, key string, e regionstate.JournalEntry, cond *uint64, uploadID string) (store.ObjectInfo, error) {
	n := b.ns
	vid := newVersionID()
	id := vid
	if b.indexVersioning() == VersioningSuspended {
		id = regionstate.NullVersionID
	}
	skey := versionStoreKey(b.Name, vid)
	e.Key, e.Object, e.Store, e.StoreKey = skey, key, b.store.Name(), skey
	v := regionstate.ObjectVersion{Bucket: b.Name, Key: key, ID: id, Store: b.store.Name(), StoreKey: skey,
		Size: e.Size, ETag: e.ETag, Meta: e.Meta, Checksums: e.Checksums, Created: e.Created}
	v.Meta, v.Lock = takeLock(e.Meta)
	var cmd regionstate.Command = regionstate.PutVersion{Version: v, Stage: &e}
	if cond != nil {
		pv := cmd.(regionstate.PutVersion)
		pv.Conditional, pv.IfLatest = true, *cond
		cmd = pv
	}
	if uploadID != "" {
		cu := regionstate.CompleteUpload{UploadID: uploadID, Stage: &e, Version: &v}
		if cond != nil {
			cu.Conditional, cu.IfLatest = true, *cond
		}
		cmd = cu
	}
	idx, err := n.rs.ApplyIndex(ctx, cmd)
	if errors.Is(err, regionstate.ErrChanged) {
		return store.ObjectInfo{}, store.ErrPreconditionFailed
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	n.wakeDrainer()
	v.Seq, v.Staged = idx, idx
	return versionInfo(v), nil
}

// journalKeyOf is the journal key under which a staged object version's
// bytes are: a version's own store key, else the object's key.
func (b *Bucket) journalKeyOf(info store.ObjectInfo) string {
	if strings.HasPrefix(info.StoreKey, versionsPrefix+b.Name+"/") {
		return info.StoreKey
	}
	return info.Key
}
