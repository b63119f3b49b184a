package regionstate

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// catalog is one version of the FSM's in-memory state. Its tables are
// never written after the catalog is published: the tables a write touches
// are persistent maps (pmap, spmap), so a batch's write copies O(log n) of
// a table's nodes, never the whole table, and readers need no lock: the
// read-hot tables cost one atomic load and a lookup. Multipart sessions,
// journal entries, egress rows and object versions, which change with
// every object write, live in separately locked tables that a catalog
// points to.
type catalog struct {
	buckets spmap[Bucket] // name -> bucket, in name order
	// byOwner lists each owner's buckets in name order (the values are
	// in buckets), so a user's ListBuckets page does not scan every bucket.
	byOwner pmap[spmap[struct{}]]
	users   pmap[User]
	byKey   pmap[User]        // access key -> user
	grants  pmap[spmap[Perm]] // user -> bucket -> perm, buckets in name order
	// grantees is grants by bucket (bucket -> user -> perm), so deleting
	// a bucket finds its grants without visiting every user.
	grantees pmap[pmap[Perm]]
	policy   *Policy // nil: none applied yet
	settings pmap[string]
	uploads  *uploadTable
	journal  *journalTable
	pins     pmap[Pin]        // bucket NUL prefix -> pin
	jobs     pmap[PreloadJob] // id -> job
	egress   *egressTable
	// bconf maps bucket -> kind -> value. An inner map is never changed
	// once published: a write replaces the bucket's map by a copy (a
	// handful of kinds at most).
	bconf    pmap[map[string]string]
	versions *versionTable
}

func newCatalog() *catalog {
	return &catalog{
		buckets:  newSPMap[Bucket](),
		byOwner:  newPMap[spmap[struct{}]](),
		users:    newPMap[User](),
		byKey:    newPMap[User](),
		grants:   newPMap[spmap[Perm]](),
		grantees: newPMap[pmap[Perm]](),
		settings: newPMap[string](),
		uploads:  newUploadTable(),
		journal:  &journalTable{m: map[string]map[string]*JournalEntry{}},
		pins:     newPMap[Pin](),
		jobs:     newPMap[PreloadJob](),
		egress:   &egressTable{m: map[string]EgressRow{}},
		bconf:    newPMap[map[string]string](),
		versions: newVersionTable(),
	}
}

// addBucket and removeBucket keep buckets and byOwner together.
func (c *catalog) addBucket(bk Bucket) {
	c.buckets = c.buckets.set(bk.Name, bk)
	owned, ok := c.byOwner.get(bk.Owner)
	if !ok {
		owned = newSPMap[struct{}]()
	}
	c.byOwner = c.byOwner.set(bk.Owner, owned.set(bk.Name, struct{}{}))
}

func (c *catalog) removeBucket(bk Bucket) {
	c.buckets = c.buckets.del(bk.Name)
	owned, _ := c.byOwner.get(bk.Owner)
	if owned.m == nil {
		return
	}
	if owned = owned.del(bk.Name); owned.len() == 0 {
		c.byOwner = c.byOwner.del(bk.Owner)
	} else {
		c.byOwner = c.byOwner.set(bk.Owner, owned)
	}
}

// setGrant sets user's perm on bucket ("" removes the grant) in grants
// and grantees.
func (c *catalog) setGrant(user, bucket string, p Perm) {
	byUser, ok := c.grants.get(user)
	if !ok {
		byUser = newSPMap[Perm]()
	}
	byBucket, ok := c.grantees.get(bucket)
	if !ok {
		byBucket = newPMap[Perm]()
	}
	if p == "" {
		byUser, byBucket = byUser.del(bucket), byBucket.del(user)
	} else {
		byUser, byBucket = byUser.set(bucket, p), byBucket.set(user, p)
	}
	if byUser.len() == 0 {
		c.grants = c.grants.del(user)
	} else {
		c.grants = c.grants.set(user, byUser)
	}
	if byBucket.len() == 0 {
		c.grantees = c.grantees.del(bucket)
	} else {
		c.grantees = c.grantees.set(bucket, byBucket)
	}
}

// grant is user's perm on bucket ("" for none).
func (c *catalog) grant(user, bucket string) Perm {
	p, _ := c.grants.get(user)
	if p.m == nil {
		return ""
	}
	v, _ := p.get(bucket)
	return v
}

// bucketConf is one configuration of a bucket.
func (c *catalog) bucketConf(bucket, kind string) (string, bool) {
	kinds, _ := c.bconf.get(bucket)
	v, ok := kinds[kind]
	return v, ok
}

// uploadTable holds the multipart sessions. Only the FSM goroutine writes
// it, under mu. idx orders the sessions as ListMultipartUploads lists them
// (bucket, key, creation, id), so a page costs O(log n + page), not a sort
// of every session.
type uploadTable struct {
	mu  sync.RWMutex
	m   map[string]*uploadRec
	idx *btree.BTreeG[*uploadRec]
}

func newUploadTable() *uploadTable {
	return &uploadTable{m: map[string]*uploadRec{}, idx: btree.NewG(32, uploadLess)}
}

// uploadLess is the ListMultipartUploads order.
func uploadLess(a, b *uploadRec) bool {
	return cmp.Or(strings.Compare(a.up.Bucket, b.up.Bucket), strings.Compare(a.up.Key, b.up.Key),
		a.up.Created.Compare(b.up.Created), strings.Compare(a.up.ID, b.up.ID)) < 0
}

// add inserts r; the caller holds mu.
func (t *uploadTable) add(r *uploadRec) {
	t.m[r.up.ID] = r
	t.idx.ReplaceOrInsert(r)
}

// remove drops r; the caller holds mu.
func (t *uploadTable) remove(r *uploadRec) {
	delete(t.m, r.up.ID)
	t.idx.Delete(r)
}

// uploadRec is one session: up has nil Parts; parts is mutated in place
// (under uploadTable.mu) so PutPart costs O(1), not O(parts). parts is nil
// until the first part. The fields idx orders by (Bucket, Key, Created, ID)
// never change while the record is in the table.
type uploadRec struct {
	up    MultipartUpload
	parts map[int]Part
}

// State is a read view of the FSM. It is safe for concurrent use, and no
// method does disk I/O or talks to Raft. Values returned are copies.
type State struct {
	cur     atomic.Pointer[catalog]
	applied atomic.Uint64
	mu      sync.Mutex
	changed chan struct{} // closed when applied moves; nil when nobody waits
}

func (s *State) load() *catalog { return s.cur.Load() }

// setApplied publishes a new applied index and wakes appliedChanged's
// waiters.
func (s *State) setApplied(i uint64) {
	s.applied.Store(i)
	s.mu.Lock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// appliedChanged returns a channel closed at the next setApplied. Take it
// before reading AppliedIndex, so no change is missed.
func (s *State) appliedChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// AppliedIndex is the Raft index of the last log entry this node applied.
func (s *State) AppliedIndex() uint64 { return s.applied.Load() }

// Bucket returns the bucket named name, if it was created in this region.
func (s *State) Bucket(name string) (Bucket, bool) {
	b, ok := s.load().buckets.get(name)
	return b, ok
}

// Buckets returns all buckets sorted by name. It costs O(n); a page of a
// listing is VisibleBuckets.
func (s *State) Buckets() []Bucket {
	c := s.load()
	out := make([]Bucket, 0, c.buckets.len())
	for _, b := range c.buckets.all() {
		out = append(out, b)
	}
	return out
}

// OwnedBuckets returns, in name order, at most max of the buckets user
// owns (O(log n + max)).
func (s *State) OwnedBuckets(user string, max int) []string {
	owned, _ := s.load().byOwner.get(user)
	if owned.m == nil {
		return nil
	}
	var out []string
	for name := range owned.all() {
		if len(out) == max {
			break
		}
		out = append(out, name)
	}
	return out
}

// VisibleBuckets yields, in name order, the buckets user may read (see
// CanRead; root: the caller knows the user is root, whether or not the
// region's users say so) whose name starts with prefix and comes after
// after ("": from the first). It reads one version of the state. A root
// user's page costs O(log n + page); another user's O(log n + page) over
// the buckets they own and the grants they hold (a grant on a bucket that
// no longer exists is skipped: they are removed with the bucket, so only
// grants made on names never created are stepped over), never a scan of
// every bucket.
func (s *State) VisibleBuckets(user string, root bool, prefix, after string) iter.Seq[Bucket] {
	c := s.load()
	start := prefix
	if after != "" && after+"\x00" > start {
		start = after + "\x00" // names hold no NUL: the first name after after
	}
	if u, ok := c.users.get(user); ok && u.Root {
		root = true
	}
	return func(yield func(Bucket) bool) {
		if root {
			for name, b := range c.buckets.from(start) {
				if !strings.HasPrefix(name, prefix) || !yield(b) {
					return
				}
			}
			return
		}
		owned, _ := c.byOwner.get(user)
		granted, _ := c.grants.get(user)
		for name := range mergeNames(owned.from(start), granted.from(start)) {
			if !strings.HasPrefix(name, prefix) {
				return
			}
			b, ok := c.buckets.get(name)
			if !ok || (b.Owner != user && c.grant(user, name).level() < PermRead.level()) {
				continue
			}
			if !yield(b) {
				return
			}
		}
	}
}

// mergeNames yields the keys of two sequences sorted by key, in order,
// each once.
func mergeNames[A, B any](a iter.Seq2[string, A], b iter.Seq2[string, B]) iter.Seq[string] {
	return func(yield func(string) bool) {
		nextB, stop := iter.Pull2(b)
		defer stop()
		bk, _, bok := nextB()
		for ak := range a {
			for bok && bk < ak {
				if !yield(bk) {
					return
				}
				bk, _, bok = nextB()
			}
			if bok && bk == ak {
				bk, _, bok = nextB()
			}
			if !yield(ak) {
				return
			}
		}
		for ; bok; bk, _, bok = nextB() {
			if !yield(bk) {
				return
			}
		}
	}
}

// User returns the user named name.
func (s *State) User(name string) (User, bool) {
	u, ok := s.load().users.get(name)
	return u, ok
}

// UserByAccessKey returns the user that owns access key ak.
func (s *State) UserByAccessKey(ak string) (User, bool) {
	u, ok := s.load().byKey.get(ak)
	return u, ok
}

// Users returns all users sorted by name.
func (s *State) Users() []User {
	return sortedValues(s.load().users.all(), func(a, b User) int { return strings.Compare(a.Name, b.Name) })
}

// Grants returns user's grants as bucket -> perm (a fresh map, nil if none).
func (s *State) Grants(user string) map[string]Perm {
	g, ok := s.load().grants.get(user)
	if !ok {
		return nil
	}
	out := make(map[string]Perm, g.len())
	for b, p := range g.all() {
		out[b] = p
	}
	return out
}

// CanRead reports whether user may read bucket: root users, the bucket's
// owner and users granted read or write may.
func (s *State) CanRead(user, bucket string) bool { return s.can(user, bucket, PermRead) }

// CanWrite reports whether user may write bucket: root users, the bucket's
// owner and users granted write may.
func (s *State) CanWrite(user, bucket string) bool { return s.can(user, bucket, PermWrite) }

func (s *State) can(user, bucket string, need Perm) bool {
	c := s.load()
	u, ok := c.users.get(user)
	if !ok {
		return false
	}
	if u.Root {
		return true
	}
	if b, ok := c.buckets.get(bucket); ok && b.Owner == user {
		return true
	}
	return c.grant(user, bucket).level() >= need.level()
}

// Upload returns the multipart session id with its parts.
func (s *State) Upload(id string) (MultipartUpload, bool) {
	t := s.load().uploads
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.m[id]
	if !ok {
		return MultipartUpload{}, false
	}
	u := r.up.clone()
	u.Parts = make(map[int]Part, len(r.parts))
	for n, p := range r.parts {
		u.Parts[n] = p.clone()
	}
	return u, true
}

// Uploads returns the sessions of bucket whose key starts with prefix,
// sorted by key, then creation time, then id (ListMultipartUploads order).
// An empty bucket lists every bucket's sessions, sorted by bucket first.
// Parts is nil in the results; use Upload for a session's parts.
func (s *State) Uploads(bucket, prefix string) []MultipartUpload {
	if bucket == "" {
		t := s.load().uploads
		t.mu.RLock()
		defer t.mu.RUnlock()
		out := make([]MultipartUpload, 0, t.idx.Len())
		t.idx.Ascend(func(r *uploadRec) bool {
			if strings.HasPrefix(r.up.Key, prefix) {
				out = append(out, r.up.clone())
			}
			return true
		})
		return out
	}
	return s.UploadsAfter(bucket, prefix, "", "", -1)
}

// UploadsAfter returns at most max (all if max < 0) sessions of bucket
// whose key starts with prefix, in ListMultipartUploads order, that come
// after the marker (key, id): with key "" from the first; with id "" after
// every session of key; with id a session of key, after that session; with
// an id that is not a session of key, from key's first session. Its cost
// is O(log n + what it returns).
func (s *State) UploadsAfter(bucket, prefix, key, id string, max int) []MultipartUpload {
	t := s.load().uploads
	t.mu.RLock()
	defer t.mu.RUnlock()
	pivot := &uploadRec{up: MultipartUpload{Bucket: bucket, Key: prefix}}
	skipKey, skipThrough := "", (*uploadRec)(nil)
	if key != "" && key >= prefix {
		pivot = &uploadRec{up: MultipartUpload{Bucket: bucket, Key: key}}
		if id == "" {
			skipKey = key
		} else if r, ok := t.m[id]; ok && r.up.Bucket == bucket && r.up.Key == key {
			pivot, skipThrough = r, r
		}
	}
	var out []MultipartUpload
	t.idx.AscendGreaterOrEqual(pivot, func(r *uploadRec) bool {
		switch {
		case r.up.Bucket != bucket || !strings.HasPrefix(r.up.Key, prefix):
			return false // sorted: nothing later matches
		case r == skipThrough || (skipKey != "" && r.up.Key == skipKey):
			return true
		case max >= 0 && len(out) >= max:
			return false
		}
		out = append(out, r.up.clone())
		return true
	})
	return out
}

// Policy returns the active policy file, if one was applied.
func (s *State) Policy() (Policy, bool) {
	p := s.load().policy
	if p == nil {
		return Policy{}, false
	}
	return Policy{YAML: slices.Clone(p.YAML), Version: p.Version}, true
}

// Setting returns the value of a region setting.
func (s *State) Setting(key string) (string, bool) {
	return s.load().settings.get(key)
}

// BucketConfig returns one S3 configuration of a bucket (kind is one of
// the BucketConf* names).
func (s *State) BucketConfig(bucket, kind string) (string, bool) {
	return s.load().bucketConf(bucket, kind)
}

// BucketConfigs returns every configuration of every bucket (fresh maps).
func (s *State) BucketConfigs() map[string]map[string]string {
	out := map[string]map[string]string{}
	for b, kinds := range s.load().bconf.all() {
		out[b] = maps.Clone(kinds)
	}
	return out
}

// RegionID is the region's identity ("" before SetRegionID).
func (s *State) RegionID() string {
	id, _ := s.Setting(RegionIDSetting)
	return id
}

// Settings returns all region settings (a fresh map).
func (s *State) Settings() map[string]string { return maps.Collect(s.load().settings.all()) }

func sortedValues[V any](all iter.Seq2[string, V], cmp func(a, b V) int) []V {
	var out []V
	for _, v := range all {
		out = append(out, v)
	}
	slices.SortFunc(out, cmp)
	return out
}
