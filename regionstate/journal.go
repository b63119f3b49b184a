package regionstate

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// The write-back journal: one entry per key of a write-back bucket whose
// newest write (or delete) has not reached the bucket's store yet. The
// object's bytes live in staging files on the nodes named by each segment;
// Raft holds only where they are.

// Journal errors (compare with errors.Is).
var (
	// ErrSuperseded: the journal entry named by version is no longer the
	// key's newest write (a newer write or a delete replaced it, or it was
	// drained already).
	ErrSuperseded = errors.New("raft: journal entry superseded")
	// ErrDrainClaimed: another node holds an unexpired claim to drain the key.
	ErrDrainClaimed = errors.New("raft: drain claimed by another node")
	// ErrChanged: a conditional write-back write (StageObject or
	// CompleteUpload with IfUnchangedSince) found that its key may have
	// changed after the writer checked the condition: check again.
	ErrChanged = errors.New("raft: the key changed after its write condition was checked")
)

// Segment is one staged piece of a journaled object: a file named ID in the
// staging area of every node in Nodes. A PUT has one segment; a completed
// multipart upload has one per part.
type Segment struct {
	ID    string
	Size  int64
	Nodes []string
}

// DrainClaim says which node is uploading which version of a key to the
// store, until when.
type DrainClaim struct {
	Node    string
	Version uint64
	Expires time.Time
}

// JournalEntry is the newest write-back write of one key.
type JournalEntry struct {
	Bucket string
	// Key is the object's key, or for the bytes of a version of a
	// versioned bucket the version's store key (Object is then its key).
	Key    string
	Object string `json:",omitempty"`
	// Version is the Raft index of the write (set by the FSM).
	Version uint64
	// Tombstone: the newest write is a delete.
	Tombstone bool `json:",omitempty"`
	// Store and StoreKey are where the drain writes (or deletes).
	Store    string
	StoreKey string
	Size     int64
	ETag     string
	Meta     ObjectMeta
	// Checksums are the object's x-amz-checksum-* values (algorithm -> value).
	Checksums map[string]string `json:",omitempty"`
	Segments  []Segment         `json:",omitempty"`
	Created   time.Time
	// Claim is the drain in progress, possibly of an older version.
	Claim *DrainClaim `json:",omitempty"`
}

func (e JournalEntry) clone() JournalEntry {
	e.Meta = e.Meta.clone()
	e.Checksums = maps.Clone(e.Checksums)
	e.Segments = slices.Clone(e.Segments)
	for i := range e.Segments {
		e.Segments[i].Nodes = slices.Clone(e.Segments[i].Nodes)
	}
	if e.Claim != nil {
		c := *e.Claim
		e.Claim = &c
	}
	return e
}

// Pin keeps a bucket's objects under Prefix in the region's cache.
type Pin struct {
	Bucket  string
	Prefix  string
	Created time.Time
}

// PreloadJob is a cache preload of Bucket/Prefix. Each node warms the
// chunks it owns and records its progress, so a restarted node resumes
// after the last key it finished.
type PreloadJob struct {
	ID       string
	Bucket   string
	Prefix   string
	Pin      bool `json:",omitempty"`
	Created  time.Time
	Canceled bool `json:",omitempty"`
	// Total is what the job found to read (set by the first node to list it;
	// 0 while unknown).
	TotalObjects int64 `json:",omitempty"`
	TotalBytes   int64 `json:",omitempty"`
	// Nodes holds each node's progress by node id.
	Nodes map[string]JobProgress `json:",omitempty"`
}

// JobProgress is one node's share of a preload job.
type JobProgress struct {
	After   string `json:",omitempty"` // the last key this node finished
	Objects int64
	Bytes   int64 // bytes of the chunks it warmed
	// AfterBytes is the part of Bytes of the objects up to After: a
	// resumed run starts from it, as it warms the objects past After again.
	AfterBytes int64 `json:",omitempty"`
	Errors     int64 `json:",omitempty"`
	Done       bool  `json:",omitempty"`
	Updated    time.Time
}

func (j PreloadJob) clone() PreloadJob {
	j.Nodes = maps.Clone(j.Nodes)
	return j
}

// journalTable holds the journal. Only the FSM goroutine writes it, under mu.
type journalTable struct {
	mu sync.RWMutex
	m  map[string]map[string]*JournalEntry // bucket -> key -> entry
	// cleared is the log index of the last FinishDrain that removed an
	// entry (persisted under journalClearedKey): a key whose entry was
	// removed after a conditional writer checked it may have changed.
	cleared uint64
}

// journalClearedKey is the journal table's record of cleared; no entry's
// key starts with NUL (bucket names are never empty).
const journalClearedKey = "\x00cleared"

// changedSince reports whether bucket/key may have changed after log index
// seen: a newer entry, or any entry drained and removed since (removed
// entries leave no trace of their key, so any removal counts).
func (t *journalTable) changedSince(bucket, key string, seen uint64) bool {
	if e, ok := t.get(bucket, key); ok && e.Version > seen {
		return true
	}
	return t.cleared > seen
}

func journalKey(bucket, key string) string { return bucket + "\x00" + key }

func pinKey(bucket, prefix string) string { return bucket + "\x00" + prefix }

func (t *journalTable) get(bucket, key string) (*JournalEntry, bool) {
	e, ok := t.m[bucket][key]
	return e, ok
}

// set replaces (or, with e nil, removes) an entry; callers hold no lock.
func (t *journalTable) set(bucket, key string, e *JournalEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e == nil {
		delete(t.m[bucket], key)
		if len(t.m[bucket]) == 0 {
			delete(t.m, bucket)
		}
		return
	}
	if t.m[bucket] == nil {
		t.m[bucket] = map[string]*JournalEntry{}
	}
	t.m[bucket][key] = e
}

// Journal commands.

// StageObject records the newest write of a key of a write-back bucket:
// its staged segments, or a delete (Tombstone). It replaces the key's
// entry; a drain claim in progress on an older version stays, so the older
// upload finishes (or expires) before the new version may drain. The
// entry's Version is the log index of this command.
//
// IfUnchangedSince makes the write conditional (If-None-Match, If-Match):
// the writer checked its condition against the region's state at that log
// index, and the command fails with ErrChanged, changing nothing, when the
// key may have changed since. Check and write are then one step.
//
// Applying it sets Superseded (never sent): the staged segments of the
// entry it replaced, which no entry refers to any more.
type StageObject struct {
	Entry            JournalEntry
	IfUnchangedSince uint64   `json:",omitempty"`
	Superseded       []string `json:"-"`
}

// ClaimDrain claims the right to upload Version of a key to its store for
// Lease. It fails with ErrSuperseded when Version is not the key's newest
// entry, and ErrDrainClaimed while another claim is unexpired.
type ClaimDrain struct {
	Bucket, Key string
	Version     uint64
	Node        string
	Lease       time.Duration
}

// FinishDrain ends Node's claim on Version: the entry is removed when it is
// still the newest (the store now has it); a newer entry stays to be
// drained. Failed gives the claim back without removing anything (the
// upload failed; another attempt may start at once). Finishing a claim
// that is not Node's is a no-op.
type FinishDrain struct {
	Bucket, Key string
	Version     uint64
	Node        string
	Failed      bool `json:",omitempty"`
	// Drained lists the staged segment ids the drain copied to the store:
	// every node holding one removes it when it applies this command.
	Drained []string `json:",omitempty"`
	// Validator is the store's validator of what the drain wrote: a
	// version whose bytes the entry held records it (ObjectVersion.Staged).
	Validator string `json:",omitempty"`
}

// SetPin adds (or, with Delete, removes) a cache pin.
type SetPin struct {
	Pin    Pin
	Delete bool
}

// PutJob creates or replaces a preload job (node progress included).
type PutJob struct{ Job PreloadJob }

// JobProgressUpdate records one node's progress on a job (and, when
// given, the job's totals). It fails with ErrNoSuchJob.
type JobProgressUpdate struct {
	ID           string
	Node         string
	Progress     JobProgress
	TotalObjects int64 `json:",omitempty"`
	TotalBytes   int64 `json:",omitempty"`
}

// DeleteJob removes a job. It fails with ErrNoSuchJob.
type DeleteJob struct{ ID string }

// Touch records that a key changed in its store through fedgate (a
// write-through write). It changes no state: every node's apply hook drops
// what it cached about the key, so a read anywhere after the write's
// acknowledgement sees it even in a bucket whose metadata TTL is above 0.
type Touch struct {
	Store, Key string
}

// Type implements Command.
func (Touch) Type() CommandType { return TypeTouch }

func (c *Touch) apply(*batch) error { return nil }

// ErrNoSuchJob: no preload job has the id.
var ErrNoSuchJob = errors.New("raft: no such preload job")

// Type implements Command.
func (StageObject) Type() CommandType { return TypeStageObject }

// Type implements Command.
func (ClaimDrain) Type() CommandType { return TypeClaimDrain }

// Type implements Command.
func (FinishDrain) Type() CommandType { return TypeFinishDrain }

// Type implements Command.
func (SetPin) Type() CommandType { return TypeSetPin }

// Type implements Command.
func (PutJob) Type() CommandType { return TypePutJob }

// Type implements Command.
func (JobProgressUpdate) Type() CommandType { return TypeJobProgress }

// Type implements Command.
func (DeleteJob) Type() CommandType { return TypeDeleteJob }

func (c *StageObject) apply(b *batch) error {
	e := c.Entry.clone()
	if err := validName("bucket name", e.Bucket); err != nil {
		return err
	}
	if err := validName("key", e.Key); err != nil {
		return err
	}
	if e.Tombstone && len(e.Segments) > 0 {
		return invalid("a tombstone has no segments")
	}
	var total int64
	for _, s := range e.Segments {
		if s.ID == "" || len(s.Nodes) == 0 || s.Size < 0 {
			return invalid("segment %q: needs an id, a size and at least one node", s.ID)
		}
		total += s.Size
	}
	if !e.Tombstone && total != e.Size {
		return invalid("segments hold %d bytes, the object %d", total, e.Size)
	}
	t := b.cat.journal
	if c.IfUnchangedSince > 0 && t.changedSince(e.Bucket, e.Key, c.IfUnchangedSince) {
		return ErrChanged
	}
	c.Superseded = nil
	old, ok := t.get(e.Bucket, e.Key)
	if ok && old.Claim != nil {
		claim := *old.Claim
		e.Claim = &claim
	} else {
		e.Claim = nil
	}
	if ok {
		for _, s := range old.Segments {
			if !slices.ContainsFunc(e.Segments, func(n Segment) bool { return n.ID == s.ID }) {
				c.Superseded = append(c.Superseded, s.ID)
			}
		}
	}
	e.Version = b.index
	e.Created = b.stamp(e.Created)
	t.set(e.Bucket, e.Key, &e)
	b.put(tJournal, journalKey(e.Bucket, e.Key), mustJSON(e))
	return nil
}

func (c *ClaimDrain) apply(b *batch) error {
	t := b.cat.journal
	e, ok := t.get(c.Bucket, c.Key)
	if !ok || e.Version != c.Version {
		return ErrSuperseded
	}
	if c.Node == "" || c.Lease <= 0 {
		return invalid("a drain claim needs a node and a lease")
	}
	if e.Claim != nil && e.Claim.Node != c.Node && b.now.Before(e.Claim.Expires) {
		return ErrDrainClaimed
	}
	if e.Claim != nil && e.Claim.Node == c.Node && e.Claim.Version != c.Version && b.now.Before(e.Claim.Expires) {
		return ErrDrainClaimed // this node is still uploading an older version
	}
	next := e.clone()
	next.Claim = &DrainClaim{Node: c.Node, Version: c.Version, Expires: b.now.Add(c.Lease).UTC().Round(0)}
	t.set(c.Bucket, c.Key, &next)
	b.put(tJournal, journalKey(c.Bucket, c.Key), mustJSON(next))
	return nil
}

func (c *FinishDrain) apply(b *batch) error {
	t := b.cat.journal
	e, ok := t.get(c.Bucket, c.Key)
	if !ok || e.Claim == nil || e.Claim.Node != c.Node || e.Claim.Version != c.Version {
		return nil
	}
	if e.Version == c.Version && !c.Failed {
		if !e.Tombstone {
			b.drainedVersion(e, c.Validator)
		}
		t.set(c.Bucket, c.Key, nil)
		b.del(tJournal, journalKey(c.Bucket, c.Key))
		t.cleared = b.index
		b.put(tJournal, journalClearedKey, u64(b.index))
		return nil
	}
	next := e.clone()
	next.Claim = nil
	t.set(c.Bucket, c.Key, &next)
	b.put(tJournal, journalKey(c.Bucket, c.Key), mustJSON(next))
	return nil
}

func (c *SetPin) apply(b *batch) error {
	p := c.Pin
	if err := validName("bucket name", p.Bucket); err != nil {
		return err
	}
	k := pinKey(p.Bucket, p.Prefix)
	if c.Delete {
		if b.cat.pins.has(k) {
			b.cat.pins = b.cat.pins.del(k)
			b.dirty |= dPins
			b.del(tPin, k)
		}
		return nil
	}
	if old, ok := b.cat.pins.get(k); ok {
		p.Created = old.Created
	}
	p.Created = b.stamp(p.Created)
	b.cat.pins = b.cat.pins.set(k, p)
	b.dirty |= dPins
	b.put(tPin, k, mustJSON(p))
	return nil
}

func (c *PutJob) apply(b *batch) error {
	j := c.Job.clone()
	if err := validName("job id", j.ID); err != nil {
		return err
	}
	if err := validName("bucket name", j.Bucket); err != nil {
		return err
	}
	j.Created = b.stamp(j.Created)
	b.cat.jobs = b.cat.jobs.set(j.ID, j)
	b.dirty |= dJobs
	b.put(tJob, j.ID, mustJSON(j))
	return nil
}

func (c *JobProgressUpdate) apply(b *batch) error {
	old, ok := b.cat.jobs.get(c.ID)
	if !ok {
		return ErrNoSuchJob
	}
	if err := validName("node id", c.Node); err != nil {
		return err
	}
	j := old.clone()
	if j.Nodes == nil {
		j.Nodes = map[string]JobProgress{}
	}
	p := c.Progress
	p.Updated = b.stamp(p.Updated)
	j.Nodes[c.Node] = p
	if c.TotalObjects > 0 || c.TotalBytes > 0 {
		j.TotalObjects, j.TotalBytes = c.TotalObjects, c.TotalBytes
	}
	b.cat.jobs = b.cat.jobs.set(j.ID, j)
	b.dirty |= dJobs
	b.put(tJob, j.ID, mustJSON(j))
	return nil
}

func (c *DeleteJob) apply(b *batch) error {
	if !b.cat.jobs.has(c.ID) {
		return ErrNoSuchJob
	}
	b.cat.jobs = b.cat.jobs.del(c.ID)
	b.dirty |= dJobs
	b.del(tJob, c.ID)
	return nil
}

// Read views.

// JournalEntry returns the newest pending write-back write of a key.
func (s *State) JournalEntry(bucket, key string) (JournalEntry, bool) {
	t := s.load().journal
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.m[bucket][key]
	if !ok {
		return JournalEntry{}, false
	}
	return e.clone(), true
}

// Journal returns the pending entries of bucket whose key starts with
// prefix, sorted by key; an empty bucket returns every bucket's entries,
// sorted by bucket, then key.
func (s *State) Journal(bucket, prefix string) []JournalEntry {
	t := s.load().journal
	t.mu.RLock()
	var out []JournalEntry
	add := func(m map[string]*JournalEntry) {
		for k, e := range m {
			if strings.HasPrefix(k, prefix) {
				out = append(out, e.clone())
			}
		}
	}
	if bucket != "" {
		add(t.m[bucket])
	} else {
		for _, m := range t.m {
			add(m)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b JournalEntry) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Key, b.Key))
	})
	return out
}

// JournalStats sums the pending journal: entries, bytes and the oldest
// entry's creation time (zero when empty).
func (s *State) JournalStats() (entries int, bytes int64, oldest time.Time) {
	t := s.load().journal
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range t.m {
		for _, e := range m {
			entries++
			bytes += e.Size
			if oldest.IsZero() || e.Created.Before(oldest) {
				oldest = e.Created
			}
		}
	}
	return entries, bytes, oldest
}

// Pins returns the cache pins sorted by bucket, then prefix.
func (s *State) Pins() []Pin {
	return sortedValues(s.load().pins.all(), func(a, b Pin) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Prefix, b.Prefix))
	})
}

// Job returns the preload job id.
func (s *State) Job(id string) (PreloadJob, bool) {
	j, ok := s.load().jobs.get(id)
	return j.clone(), ok
}

// Jobs returns the preload jobs, oldest first.
func (s *State) Jobs() []PreloadJob {
	out := sortedValues(s.load().jobs.all(), func(a, b PreloadJob) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
	})
	for i := range out {
		out[i] = out[i].clone()
	}
	return out
}
