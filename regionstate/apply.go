package regionstate

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
)

// batch applies a run of log entries on the FSM goroutine. It works on a
// copy of the current catalog, whose tables are persistent maps (pmap,
// spmap: O(log n) a write, whatever the table's size; no table is cloned
// whole); collects the disk writes, and is published (one atomic store)
// and persisted (one bbolt transaction) once at the end.
type batch struct {
	cat   catalog
	dirty uint8
	ops   []diskOp
	now   time.Time // when the leader appended the current entry
	index uint64    // the current entry's log index
}

// diskOp is one write to the FSM's bbolt file; val nil deletes key.
type diskOp struct {
	t   table
	key string
	val []byte
}

const (
	dBuckets = 1 << iota
	dUsers
	dGrants
	dSettings
	dPolicy
	dPins
	dJobs
	dBucketConf
)

func newBatch(base *catalog) *batch { return &batch{cat: *base} }

// clearBucketConfig removes every configuration of bucket.
func (b *batch) clearBucketConfig(bucket string) {
	kinds, ok := b.cat.bconf.get(bucket)
	if !ok {
		return
	}
	b.cat.bconf = b.cat.bconf.del(bucket)
	b.dirty |= dBucketConf
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		b.del(tBucketConf, bconfKey(bucket, kind))
	}
}

// clearGrants removes every grant on bucket.
func (b *batch) clearGrants(bucket string) {
	grantees, _ := b.cat.grantees.get(bucket)
	if grantees.m == nil {
		return
	}
	for _, user := range grantees.keys() { // sorted: deterministic op order
		b.setGrant(user, bucket, 0)
	}
}

// setGrant sets user's level on bucket (0 removes the grant).
func (b *batch) setGrant(user, bucket string, level int) {
	key := grantKey(user, bucket)
	b.cat.setGrant(user, bucket, permOf(level))
	b.dirty |= dGrants
	if level == 0 {
		b.del(tGrant, key)
	} else {
		b.put(tGrant, key, []byte(permOf(level)))
	}
}

// setSetting sets a region setting; del removes it.
func (b *batch) setSetting(key, val string, del bool) {
	if del {
		b.cat.settings = b.cat.settings.del(key)
		b.del(tSetting, key)
	} else {
		b.cat.settings = b.cat.settings.set(key, val)
		b.put(tSetting, key, []byte(val))
	}
	b.dirty |= dSettings
}

func (b *batch) put(t table, key string, val []byte) {
	b.ops = append(b.ops, diskOp{t: t, key: key, val: val})
}

func (b *batch) del(t table, key string) { b.ops = append(b.ops, diskOp{t: t, key: key}) }

// stamp fills a zero time with the entry's append time (the same on every
// node, as it is part of the log entry) and normalises it to UTC.
func (b *batch) stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = b.now
	}
	if t.IsZero() {
		return t
	}
	return t.UTC().Round(0)
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic("raft: marshal record: " + err.Error()) // our record types always marshal
	}
	return data
}

func validName(kind, s string) error {
	switch {
	case s == "":
		return invalid("empty %s", kind)
	case len(s) > 1024:
		return invalid("%s longer than 1024 bytes", kind)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s contains NUL", kind)
	}
	return nil
}

func (c *CreateBucket) apply(b *batch) error {
	bk := c.Bucket
	if err := validName("bucket name", bk.Name); err != nil {
		return err
	}
	if old, ok := b.cat.buckets.get(bk.Name); ok {
		return &BucketExistsError{Bucket: bk.Name, Owner: old.Owner}
	}
	bk.Created = b.stamp(bk.Created)
	b.cat.addBucket(bk)
	b.dirty |= dBuckets
	b.put(tBucket, bk.Name, mustJSON(bk))
	// A configuration or versions left by an earlier bucket of this name
	// (set while it was being deleted) must not apply to the new one, nor
	// grants: one made on a policy-file bucket since removed from the
	// file, or one applied after the bucket it was made for was deleted,
	// would otherwise let its grantee read a bucket its new owner never
	// shared. A new bucket is its owner's alone.
	b.clearGrants(bk.Name)
	b.clearBucketConfig(bk.Name)
	b.dropBucketVersions(bk.Name)
	return nil
}

func (c *DeleteBucket) apply(b *batch) error {
	old, ok := b.cat.buckets.get(c.Name)
	if !ok {
		return ErrNoSuchBucket
	}
	b.cat.removeBucket(old)
	b.dirty |= dBuckets
	b.del(tBucket, c.Name)
	b.clearGrants(c.Name)
	b.clearBucketConfig(c.Name)
	b.dropBucketVersions(c.Name)
	return nil
}

func (c *SetBucketConfig) apply(b *batch) error {
	if err := validName("bucket name", c.Bucket); err != nil {
		return err
	}
	if !slices.Contains(BucketConfigKinds, c.Kind) {
		return invalid("unknown bucket configuration %q", c.Kind)
	}
	if len(c.Value) > MaxBucketConfig {
		return invalid("bucket configuration %s of %d bytes (at most %d)", c.Kind, len(c.Value), MaxBucketConfig)
	}
	cur, _ := b.cat.bconf.get(c.Bucket)
	_, had := cur[c.Kind]
	if c.Delete && !had {
		return nil
	}
	// Object lock needs versioning Enabled, and keeps it so: it is never
	// removed, and versioning cannot be suspended while it is set.
	_, locked := cur[BucketConfObjectLock]
	switch {
	case c.Kind == BucketConfObjectLock && c.Delete:
		return ErrBucketState
	case c.Kind == BucketConfObjectLock && cur[BucketConfVersioning] != "Enabled":
		return ErrBucketState
	case c.Kind == BucketConfVersioning && locked && (c.Delete || c.Value != "Enabled"):
		return ErrBucketState
	}
	b.dirty |= dBucketConf
	inner := maps.Clone(cur) // this bucket's kinds only: the published map stays as it is
	if c.Delete {
		delete(inner, c.Kind)
		b.del(tBucketConf, bconfKey(c.Bucket, c.Kind))
	} else {
		if inner == nil {
			inner = map[string]string{}
		}
		inner[c.Kind] = c.Value
		b.put(tBucketConf, bconfKey(c.Bucket, c.Kind), []byte(c.Value))
	}
	if len(inner) == 0 {
		b.cat.bconf = b.cat.bconf.del(c.Bucket)
	} else {
		b.cat.bconf = b.cat.bconf.set(c.Bucket, inner)
	}
	return nil
}

func (c *PutUser) apply(b *batch) error {
	u := c.User
	if err := validName("user name", u.Name); err != nil {
		return err
	}
	if u.AccessKey == "" {
		return invalid("user %q has no access key", u.Name)
	}
	old, exists := b.cat.users.get(u.Name)
	if exists && !c.Replace {
		return ErrUserExists
	}
	if other, ok := b.cat.byKey.get(u.AccessKey); ok && other.Name != u.Name {
		return ErrAccessKeyInUse
	}
	if exists && u.Created.IsZero() {
		u.Created = old.Created
	}
	u.Created = b.stamp(u.Created)
	if exists {
		b.cat.byKey = b.cat.byKey.del(old.AccessKey)
	}
	b.cat.users = b.cat.users.set(u.Name, u)
	b.cat.byKey = b.cat.byKey.set(u.AccessKey, u)
	b.dirty |= dUsers
	b.put(tUser, u.Name, mustJSON(u))
	return nil
}

func (c *DeleteUser) apply(b *batch) error {
	old, ok := b.cat.users.get(c.Name)
	if !ok {
		return ErrNoSuchUser
	}
	if old.Root && !c.Force {
		return ErrRootUser
	}
	b.cat.users = b.cat.users.del(c.Name)
	b.cat.byKey = b.cat.byKey.del(old.AccessKey)
	b.dirty |= dUsers
	b.del(tUser, c.Name)
	if g, ok := b.cat.grants.get(c.Name); ok {
		var buckets []string
		for bucket := range g.all() { // in name order
			buckets = append(buckets, bucket)
		}
		for _, bucket := range buckets {
			b.setGrant(c.Name, bucket, 0)
		}
	}
	return nil
}

func (c *Grant) apply(b *batch) error {
	if !b.cat.users.has(c.User) {
		return ErrNoSuchUser
	}
	if err := validName("bucket name", c.Bucket); err != nil {
		return err
	}
	if c.Perm.level() == 0 {
		return invalid("unknown permission %q", c.Perm)
	}
	if c.Prefix != "" {
		if bk, ok := b.cat.buckets.get(c.Bucket); !ok || bk.Prefix != c.Prefix {
			return ErrNoSuchBucket
		}
	}
	b.setGrant(c.User, c.Bucket, c.Perm.level())
	return nil
}

func (c *Revoke) apply(b *batch) error {
	if !b.cat.users.has(c.User) {
		return ErrNoSuchUser
	}
	if err := validName("bucket name", c.Bucket); err != nil {
		return err
	}
	if c.Perm != "" && c.Perm.level() == 0 {
		return invalid("unknown permission %q", c.Perm)
	}
	cur := b.cat.grant(c.User, c.Bucket).level()
	if next := max(0, min(cur, c.Perm.level()-1)); next != cur {
		b.setGrant(c.User, c.Bucket, next)
	}
	return nil
}

func validPart(n int) error {
	if n < 1 || n > 10000 {
		return invalid("part number %d outside 1..10000", n)
	}
	return nil
}

func (c *CreateUpload) apply(b *batch) error {
	u := c.Upload
	if err := validName("upload id", u.ID); err != nil {
		return err
	}
	if err := validName("bucket name", u.Bucket); err != nil {
		return err
	}
	t := b.cat.uploads // only this goroutine writes t, so reads need no lock
	if _, ok := t.m[u.ID]; ok {
		return ErrUploadExists
	}
	for n := range u.Parts {
		if err := validPart(n); err != nil {
			return err
		}
	}
	rec := &uploadRec{}
	if len(u.Parts) > 0 {
		rec.parts = make(map[int]Part, len(u.Parts))
	}
	for _, n := range slices.Sorted(maps.Keys(u.Parts)) {
		p := u.Parts[n]
		p.Number, p.Modified = n, b.stamp(p.Modified)
		rec.parts[n] = p
		b.put(tPart, partKey(u.ID, n), mustJSON(p))
	}
	u.Parts = nil
	u.Created = b.stamp(u.Created)
	rec.up = u
	t.mu.Lock()
	t.add(rec)
	t.mu.Unlock()
	b.put(tUpload, u.ID, mustJSON(u))
	return nil
}

func (c *PutPart) apply(b *batch) error {
	t := b.cat.uploads
	rec, ok := t.m[c.UploadID]
	if !ok {
		return ErrNoSuchUpload
	}
	if rec.up.Claim != "" {
		return ErrUploadClaimed
	}
	p := c.Part
	if err := validPart(p.Number); err != nil {
		return err
	}
	p.Modified = b.stamp(p.Modified)
	t.mu.Lock()
	if rec.parts == nil {
		rec.parts = map[int]Part{}
	}
	rec.parts[p.Number] = p
	t.mu.Unlock()
	b.put(tPart, partKey(c.UploadID, p.Number), mustJSON(p))
	return nil
}

func (b *batch) endUpload(id string) error {
	t := b.cat.uploads
	rec, ok := t.m[id]
	if !ok {
		return ErrNoSuchUpload
	}
	t.mu.Lock()
	t.remove(rec)
	t.mu.Unlock()
	b.del(tUpload, id)
	for _, n := range slices.Sorted(maps.Keys(rec.parts)) {
		b.del(tPart, partKey(id, n))
	}
	return nil
}

func (c *CompleteUpload) apply(b *batch) error {
	if _, ok := b.cat.uploads.m[c.UploadID]; !ok {
		return ErrNoSuchUpload
	}
	switch {
	case c.Version != nil:
		if c.Stage == nil {
			return invalid("a versioned completion needs its staged entry")
		}
		pv := &PutVersion{Version: *c.Version, Stage: c.Stage, Conditional: c.Conditional, IfLatest: c.IfLatest}
		if err := pv.apply(b); err != nil {
			return err
		}
	case c.Stage != nil:
		st := &StageObject{Entry: *c.Stage, IfUnchangedSince: c.IfUnchangedSince}
		if err := st.apply(b); err != nil {
			return err
		}
		c.Superseded = st.Superseded
	}
	return b.endUpload(c.UploadID)
}

func (c *AbortUpload) apply(b *batch) error { return b.endUpload(c.UploadID) }

func (c *ClaimUpload) apply(b *batch) error {
	t := b.cat.uploads
	rec, ok := t.m[c.UploadID]
	if !ok {
		return ErrNoSuchUpload
	}
	if c.Claim == "" {
		return invalid("an upload claim needs an id")
	}
	up := rec.up
	switch {
	case c.Release:
		if up.Claim != c.Claim {
			return nil // not ours (any more): nothing to release
		}
		up.Claim, up.ClaimedAt = "", time.Time{}
	case up.Claim == c.Claim:
		return nil
	case up.Claim != "" && c.At.Sub(up.ClaimedAt) < ClaimTTL:
		return ErrUploadClaimed
	default:
		up.Claim, up.ClaimedAt = c.Claim, b.stamp(c.At)
	}
	t.mu.Lock()
	rec.up = up
	t.mu.Unlock()
	b.put(tUpload, up.ID, mustJSON(up))
	return nil
}

func (c *SetPolicy) apply(b *batch) error {
	if cur := b.cat.policy; cur != nil && c.Version <= cur.Version {
		return ErrStalePolicy
	}
	p := &Policy{YAML: c.YAML, Version: c.Version}
	b.cat.policy = p
	b.dirty |= dPolicy
	b.put(tPolicy, policyKey, mustJSON(p))
	return nil
}

func (c *SetRegionID) apply(b *batch) error {
	if err := validName("region id", c.ID); err != nil {
		return err
	}
	if cur, ok := b.cat.settings.get(RegionIDSetting); ok {
		if cur == c.ID {
			return nil
		}
		return ErrRegionIDSet
	}
	b.setSetting(RegionIDSetting, c.ID, false)
	return nil
}

func (c *SetSetting) apply(b *batch) error {
	if err := validName("setting key", c.Key); err != nil {
		return err
	}
	if c.Key == RegionIDSetting {
		return invalid("the region id is set once, with SetRegionID")
	}
	if c.Delete && !b.cat.settings.has(c.Key) {
		return nil
	}
	b.setSetting(c.Key, c.Value, c.Delete)
	return nil
}
