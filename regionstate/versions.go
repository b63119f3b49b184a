package regionstate

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
)

// Object versions of versioned buckets (docs/versioning.md). Raft holds
// every version of every key of a versioned bucket: its id, its order
// (the Raft index of the write that made it, the same on every node) and
// where its bytes are in the bucket's store. The bytes are written under a
// key of their own before the version is committed, so a version is never
// visible before its bytes are durable, and a write whose commit failed
// leaves only bytes nothing refers to. A version dropped from the index
// (deleted by id, a null version replaced, a bucket deleted) leaves its
// bytes on the garbage list until a collector removes them from the store
// (CollectVersionGarbage), so a crash between the two loses nothing and
// leaks nothing.

// NullVersionID is the id S3 gives the version written while versioning is
// suspended (and every object of a never-versioned bucket).
const NullVersionID = "null"

// Version errors.
var (
	// ErrNoSuchVersion: DeleteVersion named a version the key does not have.
	ErrNoSuchVersion = errors.New("raft: no such object version")
)

// ObjectVersion is one version of a key: an object or a delete marker.
type ObjectVersion struct {
	Bucket string
	Key    string
	// ID is the version id clients see: "null" or an opaque string chosen
	// by the writer (unique in the bucket).
	ID string
	// Seq is the Raft index of the write that created the version (set by
	// the FSM): a key's versions are ordered by it, newest last.
	Seq          uint64
	DeleteMarker bool `json:",omitempty"`
	// Store and StoreKey are where the version's bytes are (none for a
	// delete marker).
	Store    string `json:",omitempty"`
	StoreKey string `json:",omitempty"`
	Size     int64
	ETag     string `json:",omitempty"`
	// Validator is the store's validator of the version's bytes (reads
	// are conditional on it).
	Validator string `json:",omitempty"`
	// Staged is, for a version of a write-back bucket whose bytes are not
	// in the store yet, the Version of the journal entry holding them in
	// staging (0: the bytes are in the store). FinishDrain of that entry
	// clears it and sets Validator.
	Staged    uint64            `json:",omitempty"`
	Meta      ObjectMeta        `json:",omitempty"`
	Checksums map[string]string `json:",omitempty"`
	Created   time.Time
	// Lock is the version's object lock (objectlock.go): set with the
	// version by PutVersion, changed by SetVersionLock. A locked version
	// is not deleted (DeleteVersion) or replaced (a null PutVersion).
	Lock *VersionLock `json:",omitempty"`
}

func (v ObjectVersion) clone() ObjectVersion {
	v.Lock = v.Lock.clone()
	v.Meta = v.Meta.clone()
	v.Checksums = maps.Clone(v.Checksums)
	return v
}

// VersionGarbage is the bytes of a version that no index entry refers to
// any more: they are to be deleted from Store.
type VersionGarbage struct {
	Store    string
	StoreKey string
	// Seq is the index of the version whose bytes these are; with StoreKey
	// it names the garbage entry.
	Seq uint64
}

func (g VersionGarbage) key() string { return g.Store + "\x00" + g.StoreKey }

// versionedKey is one key's versions, oldest first.
type versionedKey struct {
	key      string
	versions []ObjectVersion
}

func lessKey(a, b *versionedKey) bool { return a.key < b.key }

// versionTable is the index of every versioned bucket. Only the FSM
// goroutine writes it, under mu.
type versionTable struct {
	mu      sync.RWMutex
	buckets map[string]*btree.BTreeG[*versionedKey]
	garbage map[string]VersionGarbage // by VersionGarbage.key
}

func newVersionTable() *versionTable {
	return &versionTable{buckets: map[string]*btree.BTreeG[*versionedKey]{}, garbage: map[string]VersionGarbage{}}
}

func (t *versionTable) tree(bucket string, create bool) *btree.BTreeG[*versionedKey] {
	tr := t.buckets[bucket]
	if tr == nil && create {
		tr = btree.NewG(32, lessKey)
		t.buckets[bucket] = tr
	}
	return tr
}

// add inserts v (loading a record or applying a command) under t.mu.
func (t *versionTable) add(v ObjectVersion) {
	tr := t.tree(v.Bucket, true)
	probe := &versionedKey{key: v.Key}
	vk, ok := tr.Get(probe)
	if !ok {
		vk = probe
		tr.ReplaceOrInsert(vk)
	}
	// Keep Seq order (records load in key order, so usually an append).
	i := len(vk.versions)
	for i > 0 && vk.versions[i-1].Seq > v.Seq {
		i--
	}
	vk.versions = append(vk.versions, ObjectVersion{})
	copy(vk.versions[i+1:], vk.versions[i:])
	vk.versions[i] = v
}

func versionRecordKey(bucket, key string, seq uint64) string {
	return bucket + "\x00" + key + "\x00" + string(u64(seq))
}

// PutVersion adds a version to a key of a versioned bucket. A null
// version replaces the key's null version, if any (its bytes become
// garbage). The FSM sets Seq and stamps a zero Created.
type PutVersion struct {
	Version ObjectVersion
	// Conditional makes the write fail with ErrChanged unless the key's
	// newest version is the one whose Seq is IfLatest (0: the key has no
	// version): a conditional S3 write checked against IfLatest.
	Conditional bool   `json:",omitempty"`
	IfLatest    uint64 `json:",omitempty"`
	// Stage, for a write-back bucket, journals the version's staged bytes
	// in the same step (StageObject): the entry is keyed by the version's
	// StoreKey, drains there, and Version.Staged is set to it.
	Stage *JournalEntry `json:",omitempty"`
	// AdoptStaged, for the null version adopting a write-back object that
	// is not drained yet, is the Version of the key's journal entry: the
	// command fails with ErrChanged unless it is still the key's entry.
	AdoptStaged uint64 `json:",omitempty"`
}

// DeleteVersion removes one version of a key by id; its bytes become
// garbage. ErrNoSuchVersion when the key has no such version.
// A version whose lock protects it fails with ErrObjectLocked (a
// governance retention yields to BypassGovernance, set by a caller allowed
// to bypass it).
type DeleteVersion struct {
	Bucket           string
	Key              string
	ID               string
	BypassGovernance bool `json:",omitempty"`
}

// CollectVersionGarbage forgets garbage entries whose bytes the collector
// has deleted from their stores.
type CollectVersionGarbage struct {
	Garbage []VersionGarbage
}

func (PutVersion) Type() CommandType            { return TypePutVersion }
func (DeleteVersion) Type() CommandType         { return TypeDeleteVersion }
func (CollectVersionGarbage) Type() CommandType { return TypeCollectVersionGarbage }

func (c *PutVersion) apply(b *batch) error {
	v := c.Version.clone()
	if err := validVersion(&v); err != nil {
		return err
	}
	v.Seq = b.index
	v.Created = b.stamp(v.Created)
	if err := c.checkStaged(b, &v); err != nil {
		return err
	}
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, vk, keepBytes, err := c.checkKey(b, t, v)
	if err != nil || (vk != nil && keepBytes && sameNull(vk, v)) {
		return err // a nil error: adopting the same object again, nothing to do
	}
	if c.Stage != nil {
		// The last check: StageObject checks the entry before it changes
		// anything, and nothing above has changed anything yet.
		st := &StageObject{Entry: *c.Stage}
		st.Entry.Object = v.Key
		if err := st.apply(b); err != nil {
			return err
		}
		v.Staged = b.index
	}
	if vk != nil && v.ID == NullVersionID {
		b.dropVersionLocked(t, tr, vk, NullVersionID, keepBytes)
	}
	if g := (VersionGarbage{Store: v.Store, StoreKey: v.StoreKey}); !v.DeleteMarker {
		if _, ok := t.garbage[g.key()]; ok {
			// The key's bytes were written again (an upload begun before
			// versioning, completing at the plain key): they are this
			// version's now, not garbage.
			delete(t.garbage, g.key())
			b.del(tVersionGarbage, g.key())
		}
	}
	t.add(v)
	b.put(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq), mustJSON(v))
	return nil
}

// validVersion checks a new version's names, store key and lock, and
// normalises its lock.
func validVersion(v *ObjectVersion) error {
	switch {
	case validName("bucket name", v.Bucket) != nil:
		return validName("bucket name", v.Bucket)
	case validName("key", v.Key) != nil:
		return validName("key", v.Key)
	case validName("version id", v.ID) != nil:
		return validName("version id", v.ID)
	case !v.DeleteMarker && v.StoreKey == "":
		return invalid("version %q of %q has no store key", v.ID, v.Key)
	case v.DeleteMarker && v.Lock != nil:
		return invalid("delete marker %q of %q cannot be locked", v.ID, v.Key)
	}
	if err := validLock(v.Lock); err != nil {
		return err
	}
	if v.Lock.empty() {
		v.Lock = nil
	} else {
		// A retention that has expired by the entry's time is kept as it
		// is: it protects nothing (the writer checked it was in the future).
		v.Lock.RetainUntil = v.Lock.RetainUntil.UTC().Round(0)
	}
	return nil
}

// checkStaged checks the journal entry the version adopts (AdoptStaged)
// or brings (Stage).
func (c *PutVersion) checkStaged(b *batch, v *ObjectVersion) error {
	if c.AdoptStaged != 0 {
		e, ok := b.cat.journal.get(v.Bucket, v.Key)
		if !ok || e.Tombstone || e.Version != c.AdoptStaged || e.StoreKey != v.StoreKey {
			return ErrChanged // drained (or replaced) since the writer looked
		}
		v.Staged = c.AdoptStaged
	}
	if c.Stage != nil {
		if v.DeleteMarker || c.Stage.Tombstone || c.Stage.StoreKey != v.StoreKey || c.Stage.Bucket != v.Bucket || c.Stage.Key != v.StoreKey {
			return invalid("version %q of %q: its staged entry must be keyed and stored at the version's store key", v.ID, v.Key)
		}
		if _, ok := b.cat.journal.get(v.Bucket, v.StoreKey); ok {
			return invalid("version %q of %q: store key %q is journaled already", v.ID, v.Key, v.StoreKey)
		}
	}
	return nil
}

// checkKey checks v against the key's versions (t locked): the condition
// (Conditional, IfLatest), a taken id, a locked null version. It returns
// the key's tree and versions (nil: none yet) and whether a null version
// rewritten in place keeps its bytes (they are the new ones).
func (c *PutVersion) checkKey(b *batch, t *versionTable, v ObjectVersion) (*btree.BTreeG[*versionedKey], *versionedKey, bool, error) {
	tr := t.tree(v.Bucket, false)
	var vk *versionedKey
	if tr != nil {
		vk, _ = tr.Get(&versionedKey{key: v.Key})
	}
	if c.Conditional {
		var latest uint64
		if vk != nil {
			latest = vk.versions[len(vk.versions)-1].Seq
		}
		if latest != c.IfLatest {
			return nil, nil, false, ErrChanged
		}
	}
	if vk == nil {
		return tr, nil, false, nil
	}
	keepBytes := false
	for _, old := range vk.versions {
		switch {
		case v.ID != NullVersionID && old.ID == v.ID:
			return nil, nil, false, invalid("version %q of %q exists", v.ID, v.Key)
		case v.ID != NullVersionID || old.ID != NullVersionID:
		case old.Lock.Protects(b.now, false):
			return nil, nil, false, ErrObjectLocked // replacing it would delete it
		case old.StoreKey == v.StoreKey && v.StoreKey != "":
			keepBytes = true // rewritten in place: its bytes are the new ones
		}
	}
	return tr, vk, keepBytes, nil
}

// sameNull reports whether vk's null version is v's object again (same
// store key, ETag and size): adopting it changes nothing.
func sameNull(vk *versionedKey, v ObjectVersion) bool {
	for _, old := range vk.versions {
		if v.ID == NullVersionID && old.ID == NullVersionID && old.StoreKey == v.StoreKey && v.StoreKey != "" &&
			old.ETag == v.ETag && old.Size == v.Size {
			return true
		}
	}
	return false
}

func (c *DeleteVersion) apply(b *batch) error {
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, vk, err := t.keyLocked(c.Bucket, c.Key)
	if err != nil {
		return err
	}
	for _, v := range vk.versions {
		if v.ID == c.ID && v.Lock.Protects(b.now, c.BypassGovernance) {
			return ErrObjectLocked
		}
	}
	if !b.dropVersionLocked(t, tr, vk, c.ID, false) {
		return ErrNoSuchVersion
	}
	return nil
}

// keyLocked returns the version tree of bucket and its entry for key, or
// ErrNoSuchVersion; t.mu must be held.
func (t *versionTable) keyLocked(bucket, key string) (*btree.BTreeG[*versionedKey], *versionedKey, error) {
	tr := t.tree(bucket, false)
	if tr == nil {
		return nil, nil, ErrNoSuchVersion
	}
	vk, ok := tr.Get(&versionedKey{key: key})
	if !ok {
		return nil, nil, ErrNoSuchVersion
	}
	return tr, vk, nil
}

func (c *CollectVersionGarbage) apply(b *batch) error {
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range c.Garbage {
		cur, ok := t.garbage[g.key()]
		if !ok || cur.Seq != g.Seq {
			continue // collected already, or the key's bytes were reused
		}
		delete(t.garbage, g.key())
		b.del(tVersionGarbage, g.key())
	}
	return nil
}

// dropVersionLocked removes version id of vk, turning its bytes into
// garbage unless keepBytes; it reports whether vk had it.
func (b *batch) dropVersionLocked(t *versionTable, tr *btree.BTreeG[*versionedKey], vk *versionedKey, id string, keepBytes bool) bool {
	for i, v := range vk.versions {
		if v.ID != id {
			continue
		}
		vk.versions = append(vk.versions[:i:i], vk.versions[i+1:]...)
		if len(vk.versions) == 0 {
			tr.Delete(vk)
		}
		b.del(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq))
		if !keepBytes {
			b.addGarbageLocked(t, v)
		}
		return true
	}
	return false
}

func (b *batch) addGarbageLocked(t *versionTable, v ObjectVersion) {
	if v.DeleteMarker || v.StoreKey == "" {
		return
	}
	b.unstageVersion(v)
	g := VersionGarbage{Store: v.Store, StoreKey: v.StoreKey, Seq: v.Seq}
	t.garbage[g.key()] = g
	b.put(tVersionGarbage, g.key(), mustJSON(g))
}

// unstageVersion turns the journal entry holding the bytes of a dropped
// version that is not drained yet into a tombstone: its staged copies are
// no longer needed, and a drain of it already under way is undone by the
// tombstone's drain (which deletes the store key) once it finishes.
func (b *batch) unstageVersion(v ObjectVersion) {
	if v.Staged == 0 {
		return
	}
	jt := b.cat.journal
	for _, jkey := range []string{v.StoreKey, v.Key} {
		e, ok := jt.get(v.Bucket, jkey)
		if !ok || e.Tombstone || e.Version != v.Staged || e.StoreKey != v.StoreKey {
			continue
		}
		next := JournalEntry{Bucket: e.Bucket, Key: e.Key, Object: e.Object, Version: b.index, Tombstone: true,
			Store: e.Store, StoreKey: e.StoreKey, Created: b.stamp(time.Time{})}
		if e.Claim != nil {
			claim := *e.Claim
			next.Claim = &claim
		}
		jt.set(e.Bucket, e.Key, &next)
		b.put(tJournal, journalKey(e.Bucket, e.Key), mustJSON(next))
		return
	}
}

// drainedVersion records that the journal entry e, holding the bytes of a
// version, reached the store: the version's Staged is cleared and its
// Validator set to the stored object's.
func (b *batch) drainedVersion(e *JournalEntry, validator string) {
	key := e.Object
	if key == "" {
		key = e.Key // a write-back object adopted as a null version
	}
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.tree(e.Bucket, false)
	if tr == nil {
		return
	}
	vk, ok := tr.Get(&versionedKey{key: key})
	if !ok {
		return
	}
	for i, v := range vk.versions {
		if v.Staged != e.Version || v.StoreKey != e.StoreKey || v.DeleteMarker {
			continue
		}
		v = v.clone()
		v.Staged, v.Validator = 0, validator
		vk.versions[i] = v
		b.put(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq), mustJSON(v))
	}
}

// dropBucketVersions removes every version of bucket (DeleteBucket,
// CreateBucket of a name that had some); their bytes become garbage.
func (b *batch) dropBucketVersions(bucket string) {
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.tree(bucket, false)
	if tr == nil {
		return
	}
	tr.Ascend(func(vk *versionedKey) bool {
		for _, v := range vk.versions {
			b.del(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq))
			b.addGarbageLocked(t, v)
		}
		return true
	})
	delete(t.buckets, bucket)
}

// IsVersionGarbage reports whether storeKey of storeName holds the bytes
// of a version the index dropped (not collected yet): an object from
// before versioning whose null version was deleted is gone, although its
// bytes are still in the store for a moment.
func (s *State) IsVersionGarbage(storeName, storeKey string) bool {
	t := s.load().versions
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.garbage[VersionGarbage{Store: storeName, StoreKey: storeKey}.key()]
	return ok
}

// HasVersionGarbage reports whether any version bytes wait for the
// collector.
func (s *State) HasVersionGarbage() bool {
	t := s.load().versions
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.garbage) > 0
}

// Versions returns the versions of bucket/key, newest first.
func (s *State) Versions(bucket, key string) []ObjectVersion {
	t := s.load().versions
	t.mu.RLock()
	defer t.mu.RUnlock()
	tr := t.tree(bucket, false)
	if tr == nil {
		return nil
	}
	vk, ok := tr.Get(&versionedKey{key: key})
	if !ok {
		return nil
	}
	out := make([]ObjectVersion, 0, len(vk.versions))
	for i := len(vk.versions) - 1; i >= 0; i-- {
		out = append(out, vk.versions[i].clone())
	}
	return out
}

// HasVersions reports whether bucket has any version or delete marker.
func (s *State) HasVersions(bucket string) bool {
	t := s.load().versions
	t.mu.RLock()
	defer t.mu.RUnlock()
	tr := t.tree(bucket, false)
	return tr != nil && tr.Len() > 0
}

// ListVersions calls yield for the versions of bucket's keys that start
// with prefix, in S3's order (keys ascending, each key's versions newest
// first), starting after a marker: afterKey "" starts at the beginning;
// otherwise afterSeq 0 skips every version of afterKey, and afterSeq > 0
// lists afterKey's versions older than afterSeq first. It stops when yield
// returns false. The index is read in pages, so yield may take its time
// without holding the FSM up.
func (s *State) ListVersions(bucket, prefix, afterKey string, afterSeq uint64, yield func(ObjectVersion) bool) {
	const page = 256
	start := max(prefix, afterKey)
	for {
		var batch []ObjectVersion
		var lastKey string
		t := s.load().versions
		t.mu.RLock()
		if tr := t.tree(bucket, false); tr != nil {
			tr.AscendGreaterOrEqual(&versionedKey{key: start}, func(vk *versionedKey) bool {
				if !strings.HasPrefix(vk.key, prefix) {
					return false // keys at or after prefix that lack it are past it
				}
				for i := len(vk.versions) - 1; i >= 0; i-- {
					v := vk.versions[i]
					if vk.key == afterKey && (afterSeq == 0 || v.Seq >= afterSeq) {
						continue
					}
					batch = append(batch, v.clone())
				}
				lastKey = vk.key
				return len(batch) < page
			})
		}
		t.mu.RUnlock()
		for _, v := range batch {
			if !yield(v) {
				return
			}
		}
		if len(batch) < page {
			return
		}
		start, afterKey, afterSeq = lastKey, lastKey, 0 // next page: after all of lastKey
	}
}

// PendingVersionGarbage returns the bytes waiting to be deleted.
func (s *State) PendingVersionGarbage() []VersionGarbage {
	t := s.load().versions
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]VersionGarbage, 0, len(t.garbage))
	for _, g := range t.garbage {
		out = append(out, g)
	}
	return out
}
