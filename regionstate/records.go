package regionstate

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// table tags a kind of record. The same (tag, key, value) records make up
// the FSM's bbolt file (one bbolt bucket per tag) and its snapshots, so a
// record has one encoding everywhere. Tags are only appended; a tag with
// tagIgnorable set may be skipped by a node that does not know it.
type table byte

const (
	tEnd     table = 0  // end of a snapshot stream
	tMeta    table = 1  // key "applied": last applied Raft index, 8 bytes big-endian
	tBucket  table = 2  // key name, JSON Bucket
	tUser    table = 3  // key name, JSON User
	tGrant   table = 4  // key user NUL bucket, value the Perm
	tUpload  table = 5  // key id, JSON MultipartUpload without Parts
	tPart    table = 6  // key id NUL uint32 big-endian number, JSON Part
	tPolicy  table = 7  // key "current", JSON Policy
	tSetting table = 8  // key, raw value
	tJournal table = 9  // key bucket NUL key, JSON JournalEntry
	tPin     table = 10 // key bucket NUL prefix, JSON Pin
	tJob     table = 11 // key id, JSON PreloadJob
	tEgress  table = 12 // key hour NUL src NUL dst NUL bucket NUL store NUL direction, JSON EgressRow
	// tBucketConf holds a bucket's S3 configurations (policy, ACL, public
	// access block, tagging, CORS): key bucket NUL kind, raw value. Not
	// ignorable: a node that skipped them would not enforce a bucket's
	// policy.
	tBucketConf table = 13
	// tVersion holds the versions of versioned buckets: key bucket NUL key
	// NUL uint64 big-endian Seq, JSON ObjectVersion.
	tVersion table = 14
	// tVersionGarbage holds version bytes to delete: key store NUL store
	// key, JSON VersionGarbage.
	tVersionGarbage table = 15

	tLast = tVersionGarbage // the highest tag in use

	tagIgnorable table = 0x80
)

// tableNames are the bbolt bucket names. Tables load in tag order, so an
// upload comes before its parts.
var tableNames = map[table][]byte{
	tMeta:    []byte("meta"),
	tBucket:  []byte("buckets"),
	tUser:    []byte("users"),
	tGrant:   []byte("grants"),
	tUpload:  []byte("uploads"),
	tPart:    []byte("parts"),
	tPolicy:  []byte("policy"),
	tSetting: []byte("settings"),
	tJournal: []byte("journal"),
	tPin:     []byte("pins"),
	tJob:     []byte("jobs"),
	tEgress:  []byte("egress"),

	tBucketConf:     []byte("bucketconf"),
	tVersion:        []byte("versions"),
	tVersionGarbage: []byte("versiongarbage"),
}

var (
	appliedKey = "applied"
	policyKey  = "current"
)

func grantKey(user, bucket string) string { return user + "\x00" + bucket }

func bconfKey(bucket, kind string) string { return bucket + "\x00" + kind }

func partKey(id string, n int) string {
	return id + "\x00" + string(binary.BigEndian.AppendUint32(nil, uint32(n)))
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// load adds one record to c. It reports false for an unknown tag that may
// be ignored, and fails for another unknown tag or a malformed record.
func (c *catalog) load(t table, key, val []byte) (bool, error) {
	l, ok := loaders[t]
	if !ok {
		if t&tagIgnorable != 0 {
			return false, nil
		}
		return false, fmt.Errorf("raft: unknown record tag %d", t)
	}
	if err := l(c, key, val); err != nil {
		var bad *badRecord
		if errors.As(err, &bad) {
			return false, bad.err
		}
		return false, fmt.Errorf("raft: decode record (tag %d, key %q): %w", t, key, err)
	}
	return true, nil
}

// badRecord is a loader's error returned as it is (not as a decoding
// error of the record).
type badRecord struct{ err error }

func (e *badRecord) Error() string { return e.err.Error() }

// loaders add a record of each table to a catalog.
var loaders = map[table]func(c *catalog, key, val []byte) error{
	tBucket: loadJSON(func(c *catalog, b Bucket) { c.addBucket(b) }),
	tUser: loadJSON(func(c *catalog, u User) {
		c.users = c.users.set(u.Name, u)
		c.byKey = c.byKey.set(u.AccessKey, u)
	}),
	tGrant: func(c *catalog, key, val []byte) error {
		user, bucket, ok := strings.Cut(string(key), "\x00")
		if !ok {
			return &badRecord{fmt.Errorf("raft: malformed grant key %q", key)}
		}
		c.setGrant(user, bucket, Perm(val))
		return nil
	},
	tUpload: loadJSON(func(c *catalog, u MultipartUpload) {
		u.Parts = nil
		c.uploads.add(&uploadRec{up: u})
	}),
	tPart:   (*catalog).loadPart,
	tPolicy: loadJSON(func(c *catalog, p Policy) { c.policy = &p }),
	tSetting: func(c *catalog, key, val []byte) error {
		c.settings = c.settings.set(string(key), string(val))
		return nil
	},
	tJournal:        (*catalog).loadJournal,
	tPin:            loadJSON(func(c *catalog, p Pin) { c.pins = c.pins.set(pinKey(p.Bucket, p.Prefix), p) }),
	tEgress:         (*catalog).loadEgress,
	tJob:            loadJSON(func(c *catalog, j PreloadJob) { c.jobs = c.jobs.set(j.ID, j) }),
	tVersion:        loadJSON(func(c *catalog, v ObjectVersion) { c.versions.add(v) }),
	tVersionGarbage: loadJSON(func(c *catalog, g VersionGarbage) { c.versions.garbage[g.key()] = g }),
	tBucketConf: func(c *catalog, key, val []byte) error {
		bucket, kind, ok := strings.Cut(string(key), "\x00")
		if !ok {
			return &badRecord{fmt.Errorf("raft: malformed bucket configuration key %q", key)}
		}
		kinds, _ := c.bconf.get(bucket)
		if kinds == nil {
			kinds = map[string]string{}
		}
		// Loading builds a catalog nobody reads yet: the map is
		// changed in place, not copied.
		kinds[kind] = string(val)
		c.bconf = c.bconf.set(bucket, kinds)
		return nil
	},
}

// loadJSON is the loader of a table whose values are a T as JSON.
func loadJSON[T any](add func(*catalog, T)) func(c *catalog, key, val []byte) error {
	return func(c *catalog, _, val []byte) error {
		var v T
		if err := json.Unmarshal(val, &v); err != nil {
			return err
		}
		add(c, v)
		return nil
	}
}

func (c *catalog) loadPart(key, val []byte) error {
	id, _, _ := strings.Cut(string(key), "\x00")
	rec, ok := c.uploads.m[id]
	if !ok {
		return &badRecord{fmt.Errorf("raft: part record for unknown upload %q", id)}
	}
	var p Part
	if err := json.Unmarshal(val, &p); err != nil {
		return err
	}
	if rec.parts == nil {
		rec.parts = map[int]Part{}
	}
	rec.parts[p.Number] = p
	return nil
}

func (c *catalog) loadJournal(key, val []byte) error {
	if string(key) == journalClearedKey {
		if len(val) != 8 {
			return &badRecord{fmt.Errorf("raft: %d-byte journal cleared index", len(val))}
		}
		c.journal.cleared = binary.BigEndian.Uint64(val)
		return nil
	}
	var e JournalEntry
	if err := json.Unmarshal(val, &e); err != nil {
		return err
	}
	c.journal.set(e.Bucket, e.Key, &e)
	return nil
}

// snapshotMagic starts every snapshot stream: the format name and version.
const snapshotMagic = "fedgate-fsm\x00\x01"

const (
	maxKeyLen = 64 << 10
	maxValLen = 256 << 20
)

// fsmSnapshot is a point-in-time capture: an immutable catalog plus a copy
// of the multipart sessions (the one table mutated in place).
type fsmSnapshot struct {
	cat     *catalog
	uploads []*uploadRec    // sorted by id
	journal []*JournalEntry // sorted by bucket, key
	egress  []EgressRow     // sorted by key
	// versions are every object version in record-key order, garbage
	// by key.
	versions []ObjectVersion
	garbage  []VersionGarbage
	applied  uint64
}

func capture(c *catalog, applied uint64) *fsmSnapshot {
	t := c.uploads
	t.mu.RLock()
	ups := make([]*uploadRec, 0, len(t.m))
	for _, r := range t.m {
		ups = append(ups, &uploadRec{up: r.up, parts: maps.Clone(r.parts)})
	}
	t.mu.RUnlock()
	slices.SortFunc(ups, func(a, b *uploadRec) int { return strings.Compare(a.up.ID, b.up.ID) })
	j := c.journal
	j.mu.RLock()
	var entries []*JournalEntry
	for _, m := range j.m {
		for _, e := range m {
			ec := e.clone()
			entries = append(entries, &ec)
		}
	}
	j.mu.RUnlock()
	slices.SortFunc(entries, func(a, b *JournalEntry) int {
		return strings.Compare(journalKey(a.Bucket, a.Key), journalKey(b.Bucket, b.Key))
	})
	et := c.egress
	et.mu.RLock()
	egress := make([]EgressRow, 0, len(et.m))
	for _, r := range et.m {
		egress = append(egress, r)
	}
	et.mu.RUnlock()
	slices.SortFunc(egress, func(a, b EgressRow) int { return strings.Compare(a.key(), b.key()) })
	vt := c.versions
	vt.mu.RLock()
	var versions []ObjectVersion
	for _, bucket := range slices.Sorted(maps.Keys(vt.buckets)) {
		vt.buckets[bucket].Ascend(func(vk *versionedKey) bool {
			for _, v := range vk.versions {
				versions = append(versions, v.clone())
			}
			return true
		})
	}
	garbage := slices.Collect(maps.Values(vt.garbage))
	vt.mu.RUnlock()
	slices.SortFunc(garbage, func(a, b VersionGarbage) int { return strings.Compare(a.key(), b.key()) })
	return &fsmSnapshot{cat: c, uploads: ups, journal: entries, egress: egress, versions: versions, garbage: garbage, applied: applied}
}

// writeTo streams the snapshot's records: the applied index first, then
// every table in load order, each sorted by key, then tEnd.
func (s *fsmSnapshot) writeTo(w *bufio.Writer) error {
	rec := func(t table, key string, val []byte) {
		w.WriteByte(byte(t))
		w.Write(binary.AppendUvarint(nil, uint64(len(key))))
		w.WriteString(key)
		w.Write(binary.AppendUvarint(nil, uint64(len(val))))
		w.Write(val)
	}
	c := s.cat
	w.WriteString(snapshotMagic)
	rec(tMeta, appliedKey, u64(s.applied))
	for _, bk := range c.buckets.all() { // in name order
		rec(tBucket, bk.Name, mustJSON(bk))
	}
	for _, u := range sortedValues(c.users.all(), func(a, b User) int { return strings.Compare(a.Name, b.Name) }) {
		rec(tUser, u.Name, mustJSON(u))
	}
	for _, user := range c.grants.keys() {
		g, _ := c.grants.get(user)
		for bucket, p := range g.all() { // in name order
			rec(tGrant, grantKey(user, bucket), []byte(p))
		}
	}
	for _, r := range s.uploads {
		rec(tUpload, r.up.ID, mustJSON(r.up))
		for _, n := range slices.Sorted(maps.Keys(r.parts)) {
			rec(tPart, partKey(r.up.ID, n), mustJSON(r.parts[n]))
		}
	}
	if c.policy != nil {
		rec(tPolicy, policyKey, mustJSON(c.policy))
	}
	for _, k := range c.settings.keys() {
		v, _ := c.settings.get(k)
		rec(tSetting, k, []byte(v))
	}
	for _, e := range s.journal {
		rec(tJournal, journalKey(e.Bucket, e.Key), mustJSON(e))
	}
	for _, k := range c.pins.keys() {
		p, _ := c.pins.get(k)
		rec(tPin, k, mustJSON(p))
	}
	for _, id := range c.jobs.keys() {
		j, _ := c.jobs.get(id)
		rec(tJob, id, mustJSON(j))
	}
	for _, r := range s.egress {
		rec(tEgress, r.key(), mustJSON(r))
	}
	for _, v := range s.versions {
		rec(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq), mustJSON(v))
	}
	for _, g := range s.garbage {
		rec(tVersionGarbage, g.key(), mustJSON(g))
	}
	for _, bucket := range c.bconf.keys() {
		kinds, _ := c.bconf.get(bucket)
		for _, kind := range slices.Sorted(maps.Keys(kinds)) {
			rec(tBucketConf, bconfKey(bucket, kind), []byte(kinds[kind]))
		}
	}
	w.WriteByte(byte(tEnd))
	return w.Flush() // bufio.Writer keeps the first write error
}

// readSnapshot calls fn for every record of a snapshot stream. A stream
// without the magic or the end record is an error.
func readSnapshot(r *bufio.Reader, fn func(t table, key, val []byte) error) error {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapshotMagic {
		return fmt.Errorf("raft: not a fedgate FSM snapshot (or an unknown format version)")
	}
	blob := func(limit uint64) ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, fmt.Errorf("raft: snapshot record of %d bytes exceeds %d", n, limit)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for {
		tag, err := r.ReadByte()
		if err != nil {
			return truncated(err)
		}
		if table(tag) == tEnd {
			return nil
		}
		key, err := blob(maxKeyLen)
		if err != nil {
			return truncated(err)
		}
		val, err := blob(maxValLen)
		if err != nil {
			return truncated(err)
		}
		if err := fn(table(tag), key, val); err != nil {
			return err
		}
	}
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("raft: read snapshot: %w", err)
}
