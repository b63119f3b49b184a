package federation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Versioned buckets (docs/versioning.md). A version's bytes are an object
// of their own in the bucket's store, under versionStoreKey; Raft's
// version index (regionstate.ObjectVersion) says which versions a key has,
// in which order, and where their bytes are. The bytes are written first,
// then the version is committed: a version is never visible before it is
// durable, and an acknowledged one is in Raft. Objects written before
// versioning was turned on stay where they are and are each key's "null"
// version until a versioned write adopts them into the index.

// Versioning states of a bucket ("" : never versioned).
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// Versioning errors.
var (
	ErrVersioningAtOrigin     = backend.ErrVersioningAtOrigin
	ErrVersioningNotSupported = backend.ErrVersioningNotSupported
	ErrNoSuchVersion          = backend.ErrNoSuchVersion
	ErrInvalidArgument        = backend.ErrInvalidArgument
)

// DeleteMarkerError is a read of a key whose latest version is a delete
// marker, or of a delete marker by id. It matches store.ErrNotFound.
type DeleteMarkerError = backend.DeleteMarkerError

// versionsPrefix is where the bytes of versions live in a store.
const versionsPrefix = "_fedgate/versions/"

func versionStoreKey(bucket, vid string) string { return versionsPrefix + bucket + "/" + vid }

func newVersionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Versioning returns the bucket's versioning state: "", Enabled or
// Suspended.
// A bucket mounted from an origin reports the origin's own state.
func (b *Bucket) Versioning() string {
	if b.origin {
		return b.nativeVersioning(context.Background())
	}
	return b.indexVersioning()
}

// indexVersioning is the state of fedgate's own versioning of the bucket
// (never set for a bucket mounted from an origin).
func (b *Bucket) indexVersioning() string {
	v, _ := b.ns.rs.State().BucketConfig(b.Name, regionstate.BucketConfVersioning)
	return v
}

// SetVersioning turns versioning on (Enabled) or suspends it.
func (b *Bucket) SetVersioning(ctx context.Context, status string) error {
	switch {
	case status != VersioningEnabled && status != VersioningSuspended:
		return fmt.Errorf("%w: versioning status %q (expected Enabled or Suspended)", ErrInvalidArgument, status)
	case b.origin:
		return ErrVersioningAtOrigin
	}
	return b.ns.rs.Apply(ctx, regionstate.SetBucketConfig{Bucket: b.Name, Kind: regionstate.BucketConfVersioning, Value: status})
}

// versioned reports a bucket whose objects are in the version index.
func (b *Bucket) versioned() bool { return b.indexVersioning() != "" }

// versionInfo is a version as the gateway sees an object.
// A version of a write-back bucket not drained yet is read from staging,
// like a write-back object (its Validator is a staged one).
func versionInfo(v regionstate.ObjectVersion) store.ObjectInfo {
	meta := fromRaftMeta(v.Meta)
	meta.User = lockEntry(meta.User, v.Lock)
	meta.Checksums = v.Checksums
	validator := store.Validator(v.Validator)
	if v.Staged != 0 {
		validator = stagedValidator(v.Staged)
	}
	return store.ObjectInfo{Key: v.Key, Size: v.Size, ModTime: v.Created, ETag: v.ETag,
		Validator: validator, Metadata: meta, VersionID: v.ID, StoreKey: v.StoreKey}
}

// latestVersion returns the key's newest version from the index, after a
// read barrier (a version acknowledged anywhere in the region is seen).
func (b *Bucket) latestVersion(ctx context.Context, key string) (regionstate.ObjectVersion, bool, error) {
	if err := b.ns.readBarrier(ctx); err != nil {
		return regionstate.ObjectVersion{}, false, err
	}
	vs := b.ns.rs.State().Versions(b.Name, key)
	if len(vs) == 0 {
		return regionstate.ObjectVersion{}, false, nil
	}
	return vs[0], true, nil
}

// statVersioned is Stat of a versioned bucket: the newest version in the
// index, else the key's object from before versioning (its null version).
func (b *Bucket) statVersioned(ctx context.Context, key string) (store.ObjectInfo, error) {
	v, ok, err := b.latestVersion(ctx, key)
	switch {
	case err != nil:
		return store.ObjectInfo{}, err
	case ok && v.DeleteMarker:
		return store.ObjectInfo{}, &DeleteMarkerError{Key: key, VersionID: v.ID, Latest: true}
	case ok:
		return versionInfo(v), nil
	}
	info, err := b.statPlain(ctx, key)
	if err == nil {
		info.VersionID = regionstate.NullVersionID
	}
	return info, err
}

// StatVersion returns one version of key by id ("null" included).
func (b *Bucket) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	if ver, ok := b.originVersioner(ctx); ok {
		return b.statOriginVersion(ctx, ver, key, id)
	}
	if !b.versioned() && !b.ns.rs.State().HasVersions(b.Name) {
		// Every object of an unversioned bucket is its null version (and a
		// write-back one may not be in the store yet: Stat knows).
		if id != regionstate.NullVersionID {
			return store.ObjectInfo{}, fmt.Errorf("%w: %s version %s", ErrNoSuchVersion, key, id)
		}
		info, err := b.Stat(ctx, key)
		if err == nil {
			info.VersionID = regionstate.NullVersionID
		}
		return info, err
	}
	if err := b.ns.readBarrier(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	vs := b.ns.rs.State().Versions(b.Name, key)
	for i, v := range vs {
		if v.ID != id {
			continue
		}
		if v.DeleteMarker {
			return store.ObjectInfo{}, &DeleteMarkerError{Key: key, VersionID: v.ID, Latest: i == 0}
		}
		return versionInfo(v), nil
	}
	if id == regionstate.NullVersionID && !hasNull(vs) {
		// An object from before versioning that no write adopted yet.
		info, err := b.statPlain(ctx, key)
		if err == nil {
			info.VersionID = regionstate.NullVersionID
			return info, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.ObjectInfo{}, err
		}
	}
	return store.ObjectInfo{}, fmt.Errorf("%w: %s version %s", ErrNoSuchVersion, key, id)
}

func hasNull(vs []regionstate.ObjectVersion) bool {
	for _, v := range vs {
		if v.ID == regionstate.NullVersionID {
			return true
		}
	}
	return false
}

// putVersioned writes a new version of key: its bytes under a key of their
// own, then the version in the index. Under Suspended the version is the
// key's null version (replacing the previous null version).
// The caller has passed the write barrier.
func (b *Bucket) putVersioned(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := b.adoptPlain(ctx, key); err != nil {
		return store.ObjectInfo{}, err
	}
	cond, err := b.checkVersionedConditions(ctx, key, opts)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	vid := newVersionID()
	id := vid
	if b.indexVersioning() == VersioningSuspended {
		id = regionstate.NullVersionID
	}
	skey := versionStoreKey(b.Name, vid)
	tag := egressTag{bucket: b.Name, key: key}
	// The version's lock goes to its record in the region state, not to
	// the store's copy of its metadata.
	smeta := opts.Metadata
	rmeta, lock := takeLock(toRaftMeta(smeta, ""))
	smeta.User = rmeta.User
	info, err := b.store.Put(withEgressTag(ctx, tag), skey, body, size, store.PutOptions{Metadata: smeta, LateChecksums: opts.LateChecksums})
	if err != nil {
		return store.ObjectInfo{}, err
	}
	b.ns.countWrite(b.Name, b.store, info.Size)
	rmeta, _ = takeLock(toRaftMeta(info.Metadata, ""))
	v := regionstate.ObjectVersion{Bucket: b.Name, Key: key, ID: id, Store: b.store.Name(), StoreKey: skey,
		Size: info.Size, ETag: info.ETag, Validator: string(info.Validator), Meta: rmeta, Checksums: info.Checksums, Lock: lock}
	cmd := regionstate.PutVersion{Version: v}
	if cond != nil {
		cmd.Conditional, cmd.IfLatest = true, *cond
	}
	if err := b.ns.rs.Apply(ctx, cmd); err != nil {
		if !errors.Is(err, ErrOutcomeUnknown) {
			_ = b.store.Delete(context.WithoutCancel(ctx), skey) // nothing refers to these bytes
		}
		if errors.Is(err, regionstate.ErrChanged) {
			return store.ObjectInfo{}, store.ErrPreconditionFailed
		}
		return store.ObjectInfo{}, err
	}
	info.Key, info.VersionID, info.StoreKey = key, id, skey
	info.Metadata.User = lockEntry(info.Metadata.User, lock)
	return info, nil
}

// checkVersionedConditions checks If-None-Match / If-Match against the
// key's newest version. For a conditional write it returns the Seq it saw
// (0: none), which the commit requires to be still the newest.
func (b *Bucket) checkVersionedConditions(ctx context.Context, key string, opts store.PutOptions) (*uint64, error) {
	if !opts.IfNoneMatch && opts.IfMatch == "" {
		return nil, nil
	}
	v, ok, err := b.latestVersion(ctx, key)
	if err != nil {
		return nil, err
	}
	seen := v.Seq
	exists := ok && !v.DeleteMarker
	if opts.IfNoneMatch && exists || opts.IfMatch != "" && (!exists || !sameVersion(v, opts.IfMatch)) {
		return nil, store.ErrPreconditionFailed
	}
	return &seen, nil
}

// sameVersion reports whether validator, taken from a Stat of the key,
// names version v: its validator now, or the one it had while its bytes
// were staged (a write-back version staged by its own PutVersion, whose
// journal entry is its Seq). A drain finishing between the Stat and the
// write changes the validator, not the version: without this, a
// conditional write raced every drain with a spurious 412.
func sameVersion(v regionstate.ObjectVersion, validator store.Validator) bool {
	return versionInfo(v).Validator == validator || validator == stagedValidator(v.Seq)
}

// adoptPlain makes the key's object from before versioning its null
// version in the index, before the key's first versioned write (so that it
// stays listed and readable as a noncurrent version). Adopting twice is
// harmless.
func (b *Bucket) adoptPlain(ctx context.Context, key string) error {
	if len(b.ns.rs.State().Versions(b.Name, key)) > 0 {
		return nil
	}
	plain, err := b.statPlain(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	null := regionstate.ObjectVersion{Bucket: b.Name, Key: key, ID: regionstate.NullVersionID, Store: b.store.Name(),
		StoreKey: b.prefix + key, Size: plain.Size, ETag: plain.ETag, Validator: string(plain.Validator), Meta: toRaftMeta(plain.Metadata, ""),
		Checksums: plain.Checksums, Created: plain.ModTime}
	cmd := regionstate.PutVersion{Version: null}
	if v, ok := strings.CutPrefix(string(plain.Validator), stagedPrefix); ok {
		// A write-back object not drained yet: its bytes are in staging
		// until its journal entry drains (which then records the store's
		// validator in the version).
		seq, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("federation: staged validator %q: %w", plain.Validator, err)
		}
		cmd.Version.Validator, cmd.AdoptStaged = "", seq
	}
	err = b.ns.rs.Apply(ctx, cmd)
	if errors.Is(err, regionstate.ErrChanged) {
		return b.adoptPlain(ctx, key) // drained meanwhile: adopt it from the store
	}
	return err
}

// statPlain stats the key's object from before versioning (in a
// write-back bucket, a write not drained yet included).
// An object whose null version was deleted is gone, even while its
// bytes wait for the version collector.
func (b *Bucket) statPlain(ctx context.Context, key string) (store.ObjectInfo, error) {
	if info, known, err := b.path.lookup(ctx, key); err != nil || known {
		info.Key = key
		return info, err
	}
	if b.plainCollected(key) {
		return store.ObjectInfo{}, fmt.Errorf("%w: %s (its null version was deleted)", store.ErrNotFound, key)
	}
	info, err := b.store.Stat(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), b.prefix+key)
	info.Key = key
	return info, err
}

// plainCollected reports whether the key's object from before versioning
// was deleted as the key's null version (its bytes are the collector's).
func (b *Bucket) plainCollected(key string) bool {
	return b.ns.rs.State().IsVersionGarbage(b.store.Name(), b.prefix+key)
}

// deletePlain deletes the key's object from before versioning through
// the bucket's write path (a journaled delete in a write-back bucket).
func (b *Bucket) deletePlain(ctx context.Context, key string) error {
	if dp, ok := b.path.(directPath); ok {
		return dp.deletePlain(ctx, key)
	}
	return b.path.delete(ctx, key)
}

// deleteVersioned is DeleteObject without a version id: a new delete
// marker (under Suspended, the null delete marker replacing the null
// version). It returns the marker's id.
// The caller has passed the write barrier.
func (b *Bucket) deleteVersioned(ctx context.Context, key string) (string, error) {
	id := newVersionID()
	if b.indexVersioning() == VersioningSuspended {
		id = regionstate.NullVersionID
	}
	if err := b.adoptPlain(ctx, key); err != nil {
		return "", err
	}
	v := regionstate.ObjectVersion{Bucket: b.Name, Key: key, ID: id, DeleteMarker: true}
	if err := b.ns.rs.Apply(ctx, regionstate.PutVersion{Version: v}); err != nil {
		return "", err
	}
	return id, nil
}

// DeleteVersion removes one version of key for good (a delete marker
// too); its bytes are removed from the store by the garbage collector.
// It reports whether the version was a delete marker.
func (b *Bucket) DeleteVersion(ctx context.Context, key, id string) (marker bool, err error) {
	if ver, ok := b.originVersioner(ctx); ok {
		return b.deleteOriginVersion(ctx, ver, key, id)
	}
	if err := b.ns.writeBarrier(ctx); err != nil {
		return false, err
	}
	if !b.versioned() && !b.ns.rs.State().HasVersions(b.Name) {
		if id != regionstate.NullVersionID {
			return false, nil // S3: deleting a version that does not exist succeeds
		}
		return false, b.path.delete(ctx, key) // the object itself, through its write path
	}
	vs := b.ns.rs.State().Versions(b.Name, key)
	for _, v := range vs {
		if v.ID == id {
			marker = v.DeleteMarker
			err := b.ns.rs.Apply(ctx, regionstate.DeleteVersion{Bucket: b.Name, Key: key, ID: id, BypassGovernance: backend.BypassGovernance(ctx)})
			if errors.Is(err, regionstate.ErrNoSuchVersion) {
				return marker, nil // deleted meanwhile: S3 deletes are idempotent
			}
			return marker, err
		}
	}
	if id == regionstate.NullVersionID && !hasNull(vs) {
		// The pre-versioning object of a key no versioned write adopted.
		return false, b.deletePlain(ctx, key)
	}
	return false, nil // S3: deleting a version that does not exist succeeds
}

// listVersioned is List of a versioned bucket: each key's newest version
// (a delete marker hides the key) merged with the objects from before
// versioning, in key order, with delimiter folding. A common prefix is
// listed only when some key under it is visible: a prefix whose keys are
// all behind delete markers is not.
func (b *Bucket) listVersioned(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if err := b.ns.readBarrier(ctx); err != nil {
			yield(store.Entry{}, err)
			return
		}
		// The index's newest version per key, unfolded, in key order.
		index := func(yield func(regionstate.ObjectVersion) bool) {
			last := ""
			b.ns.rs.State().ListVersions(b.Name, opts.Prefix, opts.StartAfter, 0, func(v regionstate.ObjectVersion) bool {
				if v.Key == last {
					return true // an older version of a key already seen
				}
				last = v.Key
				return yield(v)
			})
		}
		next, stop := iter.Pull(index)
		defer stop()
		pending, havePending := next()
		lastPrefix := ""
		// emit yields an object, or the common prefix it folds into (once).
		emit := func(e store.Entry) bool {
			if p, ok := foldPrefix(e.Key, opts); ok {
				if p == lastPrefix || p <= opts.StartAfter {
					return true
				}
				lastPrefix = p
				return yield(store.Entry{Key: p, IsPrefix: true}, nil)
			}
			return yield(e, nil)
		}
		emitIndex := func(v regionstate.ObjectVersion) bool {
			if v.DeleteMarker {
				return true
			}
			return emit(store.Entry{Key: v.Key, Info: versionInfo(v)})
		}
		for e, err := range b.path.list(ctx, opts) {
			if err != nil {
				yield(e, err)
				return
			}
			if strings.HasPrefix(e.Key, versionsPrefix) {
				continue
			}
			for havePending && pending.Key < e.Key {
				if !emitIndex(pending) {
					return
				}
				pending, havePending = next()
			}
			if e.IsPrefix {
				// The store's objects under the prefix: visible unless each
				// is behind a delete marker (or its null version was
				// deleted); the index's keys under it are taken here too.
				visible := false
				var hidden map[string]bool
				for havePending && strings.HasPrefix(pending.Key, e.Key) {
					if !pending.DeleteMarker {
						visible = true
					} else {
						if hidden == nil {
							hidden = map[string]bool{}
						}
						hidden[pending.Key] = true
					}
					pending, havePending = next()
				}
				if !visible {
					var err error
					if visible, err = b.plainVisibleUnder(ctx, e.Key, hidden); err != nil {
						yield(store.Entry{}, err)
						return
					}
				}
				if visible && e.Key != lastPrefix {
					lastPrefix = e.Key
					if !yield(e, nil) {
						return
					}
				}
				continue
			}
			if havePending && pending.Key == e.Key {
				// The key is in the index: its newest version wins.
				if !emitIndex(pending) {
					return
				}
				pending, havePending = next()
				continue
			}
			if b.plainCollected(e.Key) {
				continue
			}
			e.Info.VersionID = regionstate.NullVersionID
			if !emit(e) {
				return
			}
		}
		for havePending {
			if !emitIndex(pending) {
				return
			}
			pending, havePending = next()
		}
	}
}

// plainVisibleUnder reports whether the store holds, under prefix, an
// object from before versioning that is still its key's current object:
// not hidden (its key's newest version in the index is a delete marker)
// and not deleted as a null version. It stops at the first one.
func (b *Bucket) plainVisibleUnder(ctx context.Context, prefix string, hidden map[string]bool) (bool, error) {
	if len(hidden) == 0 && !b.ns.rs.State().HasVersionGarbage() {
		return true, nil // the store listed the prefix: some object is under it
	}
	for e, err := range b.path.list(ctx, store.ListOptions{Prefix: prefix}) {
		if err != nil {
			return false, err
		}
		if !strings.HasPrefix(e.Key, versionsPrefix) && !hidden[e.Key] && !b.plainCollected(e.Key) {
			return true, nil
		}
	}
	return false, nil
}

// foldPrefix returns the common prefix key folds into under opts.
func foldPrefix(key string, opts store.ListOptions) (string, bool) {
	if opts.Delimiter == "" {
		return "", false
	}
	rest := key[len(opts.Prefix):]
	i := strings.Index(rest, opts.Delimiter)
	if i < 0 {
		return "", false
	}
	return opts.Prefix + rest[:i+len(opts.Delimiter)], true
}

// versionedFiler opens the local file of a versioned bucket's newest
// version (or of its object from before versioning), so GETs of a
// versioned bucket on a posix store are still sent with sendfile. Keys
// passed to OpenLocal are bucket keys (the bucket's prefix is "").
type versionedFiler struct {
	b  *Bucket
	lf store.LocalFiler
}

func (f versionedFiler) OpenLocal(ctx context.Context, key string) (*os.File, int64, store.ObjectInfo, error) {
	info, err := f.b.statVersioned(ctx, key)
	if err != nil {
		return nil, 0, info, err
	}
	skey := info.StoreKey
	if skey == "" {
		skey = f.b.prefix + key
	}
	file, off, linfo, err := f.lf.OpenLocal(ctx, skey)
	if err != nil {
		return nil, 0, info, err
	}
	if linfo.ETag != info.ETag || linfo.Size != info.Size {
		file.Close()
		return nil, 0, info, fmt.Errorf("%w: %s changed while it was opened", store.ErrPreconditionFailed, key)
	}
	return file, off, info, nil
}

// versionGCInterval is how often each node removes the bytes of versions
// the index dropped.
const versionGCInterval = 30 * time.Second

// RunVersionCollector deletes from their stores the bytes of versions the
// index no longer refers to (deleted by id, a replaced null version, a
// deleted bucket), then forgets them in Raft, until ctx ends. Every node
// runs it; deleting twice is harmless, and a crash before the Raft commit
// only means the next round deletes again.
func (n *Namespace) RunVersionCollector(ctx context.Context) {
	t := time.NewTicker(versionGCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.CollectVersionGarbage(ctx)
	}
}

// CollectVersionGarbage runs one round of RunVersionCollector and returns
// how many version bytes it removed.
func (n *Namespace) CollectVersionGarbage(ctx context.Context) int {
	stores := n.v().stores
	var done []regionstate.VersionGarbage
	for _, g := range n.rs.State().PendingVersionGarbage() {
		st, ok := stores[g.Store]
		if !ok {
			continue // a store this node does not have (yet): another node collects it
		}
		if err := st.Delete(ctx, g.StoreKey); err != nil {
			n.log.Warn("version bytes not deleted yet", "store", g.Store, "key", g.StoreKey, "error", err)
			continue
		}
		done = append(done, g)
		if len(done) == 500 {
			break
		}
	}
	if len(done) == 0 {
		return 0
	}
	if err := n.rs.Apply(ctx, regionstate.CollectVersionGarbage{Garbage: done}); err != nil {
		n.log.Warn("collected version bytes not recorded yet", "count", len(done), "error", err)
		return 0
	}
	return len(done)
}

// VersionEntry is one row of a version listing: a version (an object or a
// delete marker) or a common prefix.
type VersionEntry = backend.VersionEntry

// VersionListOptions selects a version listing (ListObjectVersions).
type VersionListOptions = backend.VersionListOptions

// ListVersions lists the bucket's versions in S3's order: keys ascending,
// each key's versions newest first, common prefixes folded by Delimiter,
// starting after (KeyMarker, VersionIDMarker). In an unversioned bucket
// every object is its key's one, null, version.
func (b *Bucket) ListVersions(ctx context.Context, opts VersionListOptions) iter.Seq2[VersionEntry, error] {
	if ver, ok := b.originVersioner(ctx); ok {
		return b.listOriginVersions(ctx, ver, opts)
	}
	// Starting after KeyMarker also passes a version marker's key in an
	// unversioned bucket: its one version was listed already.
	lo := store.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter, StartAfter: opts.KeyMarker}
	plain := b.plainVersions(ctx, lo)
	if !b.versioned() {
		return plain
	}
	return func(yield func(VersionEntry, error) bool) {
		if err := b.ns.readBarrier(ctx); err != nil {
			yield(VersionEntry{}, err)
			return
		}
		mergeVersions(plain, b.indexVersions(b.ns.rs.State(), opts, lo), opts, yield)
	}
}

// plainVersions lists the objects at their plain places as null versions,
// each its key's latest (the version store's own keys and collected
// objects left out).
func (b *Bucket) plainVersions(ctx context.Context, lo store.ListOptions) iter.Seq2[VersionEntry, error] {
	return func(yield func(VersionEntry, error) bool) {
		for e, err := range b.path.list(ctx, lo) {
			if err != nil {
				yield(VersionEntry{}, err)
				return
			}
			if strings.HasPrefix(e.Key, versionsPrefix) || !e.IsPrefix && b.plainCollected(e.Key) {
				continue
			}
			if e.IsPrefix {
				if !yield(VersionEntry{Key: e.Key, IsPrefix: true}, nil) {
					return
				}
				continue
			}
			e.Info.VersionID = regionstate.NullVersionID
			if !yield(VersionEntry{Key: e.Key, Info: e.Info, IsLatest: true}, nil) {
				return
			}
		}
	}
}

// indexVersions lists the version index's rows after the markers, each
// key's versions newest first, common prefixes folded as lo says.
func (b *Bucket) indexVersions(st *regionstate.State, opts VersionListOptions, lo store.ListOptions) iter.Seq[VersionEntry] {
	afterKey, afterSeq := opts.KeyMarker, uint64(0)
	if opts.KeyMarker != "" && opts.VersionIDMarker != "" {
		for _, v := range st.Versions(b.Name, opts.KeyMarker) {
			if v.ID == opts.VersionIDMarker {
				afterSeq = v.Seq
			}
		}
	}
	return func(yield func(VersionEntry) bool) {
		lastKey, lastPrefix := "", ""
		if afterSeq != 0 {
			lastKey = afterKey // resuming inside a key: its newest version was listed already
		}
		st.ListVersions(b.Name, opts.Prefix, afterKey, afterSeq, func(v regionstate.ObjectVersion) bool {
			if p, ok := foldPrefix(v.Key, lo); ok {
				if p == lastPrefix || p <= opts.KeyMarker {
					return true
				}
				lastPrefix = p
				return yield(VersionEntry{Key: p, IsPrefix: true})
			}
			latest := v.Key != lastKey
			lastKey = v.Key
			e := VersionEntry{Key: v.Key, IsLatest: latest, DeleteMarker: v.DeleteMarker}
			if v.DeleteMarker {
				e.Info = store.ObjectInfo{Key: v.Key, ModTime: v.Created, VersionID: v.ID}
			} else {
				e.Info = versionInfo(v)
			}
			return yield(e)
		})
	}
}

// mergeVersions yields the plain listing and the index's rows in key order;
// a key in the index (or a prefix both fold into) has all its versions from
// there.
func mergeVersions(plain iter.Seq2[VersionEntry, error], index iter.Seq[VersionEntry], opts VersionListOptions, yield func(VersionEntry, error) bool) {
	next, stop := iter.Pull(index)
	defer stop()
	pending, ok := next()
	// flush yields the index's rows while more(pending) holds.
	flush := func(more func(VersionEntry) bool) bool {
		for ok && more(pending) {
			if !yield(pending, nil) {
				return false
			}
			pending, ok = next()
		}
		return true
	}
	for e, err := range plain {
		if err != nil {
			yield(e, err)
			return
		}
		if !flush(func(p VersionEntry) bool { return p.Key < e.Key }) {
			return
		}
		if ok && pending.Key == e.Key {
			if !flush(func(p VersionEntry) bool { return p.Key == e.Key }) {
				return
			}
			continue
		}
		if e.Key == opts.KeyMarker && opts.VersionIDMarker != "" {
			continue // its one null version was the marker
		}
		if !yield(e, nil) {
			return
		}
	}
	flush(func(VersionEntry) bool { return true })
}

// uploadStoreKey is the store key a multipart upload assembles into.
func (b *Bucket) uploadStoreKey(up Upload) string {
	if up.StoreKey != "" {
		return up.StoreKey
	}
	return b.prefix + up.Key
}

// commitUploadVersion makes a completed upload of a versioned bucket its
// key's newest version. An upload started before versioning was turned on
// assembled at the key's plain place: that object becomes the key's null
// version. Under Suspended the version is the null version.
func (b *Bucket) commitUploadVersion(ctx context.Context, up Upload, info store.ObjectInfo, cond *uint64) (store.ObjectInfo, error) {
	id, skey := up.VersionID, up.StoreKey
	if skey == "" || b.indexVersioning() == VersioningSuspended {
		id = regionstate.NullVersionID
	}
	if skey == "" {
		skey = b.prefix + up.Key
	}
	meta := info.Metadata
	if meta.ContentType == "" && meta.User == nil {
		meta = fromRaftMeta(up.Meta)
	}
	rmeta, lock := takeLock(toRaftMeta(meta, up.Meta.ChecksumAlgorithm))
	if _, upLock := takeLock(up.Meta); lock == nil {
		lock = upLock // the lock the upload was created with
	}
	v := regionstate.ObjectVersion{Bucket: b.Name, Key: up.Key, ID: id, Store: b.store.Name(), StoreKey: skey,
		Size: info.Size, ETag: info.ETag, Validator: string(info.Validator), Meta: rmeta, Checksums: info.Checksums, Lock: lock}
	cmd := regionstate.PutVersion{Version: v}
	if cond != nil {
		cmd.Conditional, cmd.IfLatest = true, *cond
	}
	if err := b.ns.rs.Apply(ctx, cmd); err != nil {
		if errors.Is(err, regionstate.ErrChanged) {
			return store.ObjectInfo{}, store.ErrPreconditionFailed
		}
		return store.ObjectInfo{}, err
	}
	info.VersionID, info.StoreKey = id, skey
	return info, nil
}
