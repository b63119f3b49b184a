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

// catalog is one version of the FSM's in-memory state. Its maps are never
// written after the catalog is published (copy-on-write, see batch), so
// readers need no lock: the read-hot tables cost one atomic load and a map
// lookup. Multipart sessions, which change with every part, live in a
// separately locked table that a catalog points to.
type catalog struct {
	buckets  pmap[Bucket]
	users    pmap[User]
	byKey    pmap[User]                 // access key -> user
	grants   map[string]map[string]Perm // user -> bucket -> perm
	policy   *Policy                    // nil: none applied yet
	settings map[string]string
	uploads  *uploadTable
	journal  *journalTable
	pins     map[string]Pin        // bucket NUL prefix -> pin
	jobs     map[string]PreloadJob // id -> job
	egress   *egressTable
	bconf    map[string]map[string]string // bucket -> kind -> value
	versions *versionTable
}

func newCatalog() *catalog {
	return &catalog{
		buckets:  newPMap[Bucket](),
		users:    newPMap[User](),
		byKey:    newPMap[User](),
		grants:   map[string]map[string]Perm{},
		settings: map[string]string{},
		uploads:  newUploadTable(),
		journal:  &journalTable{m: map[string]map[string]*JournalEntry{}},
		pins:     map[string]Pin{},
		jobs:     map[string]PreloadJob{},
		egress:   &egressTable{m: map[string]EgressRow{}},
		bconf:    map[string]map[string]string{},
		versions: newVersionTable(),
	}
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

// Buckets returns all buckets sorted by name.
func (s *State) Buckets() []Bucket {
	return sortedValues(s.load().buckets.all(), func(a, b Bucket) int { return strings.Compare(a.Name, b.Name) })
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
	return maps.Clone(s.load().grants[user])
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
	return c.grants[user][bucket].level() >= need.level()
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
	v, ok := s.load().settings[key]
	return v, ok
}

// BucketConfig returns one S3 configuration of a bucket (kind is one of
// the BucketConf* names).
func (s *State) BucketConfig(bucket, kind string) (string, bool) {
	v, ok := s.load().bconf[bucket][kind]
	return v, ok
}

// BucketConfigs returns every configuration of every bucket (fresh maps).
func (s *State) BucketConfigs() map[string]map[string]string {
	out := map[string]map[string]string{}
	for b, kinds := range s.load().bconf {
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
func (s *State) Settings() map[string]string { return maps.Clone(s.load().settings) }

func sortedValues[V any](all iter.Seq2[string, V], cmp func(a, b V) int) []V {
	var out []V
	for _, v := range all {
		out = append(out, v)
	}
	slices.SortFunc(out, cmp)
	return out
}
