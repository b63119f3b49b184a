package regionstate

import (
	"errors"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/wait"
)

// TestJournalDrainOrder: a drain claim on an old version holds the key
// until it is finished, so an old upload can never land after a newer
// one; finishing a superseded drain leaves the newer entry; a tombstone is
// an entry like any other.
func TestJournalDrainOrder(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	s := n.State()
	seg := func(id string) []Segment { return []Segment{{ID: id, Size: 3, Nodes: []string{"n1", "n2"}}} }
	stage := func(e JournalEntry) uint64 {
		t.Helper()
		idx, err := n.ApplyIndex(t.Context(), StageObject{Entry: e})
		if err != nil {
			t.Fatal(err)
		}
		return idx
	}
	v1 := stage(JournalEntry{Bucket: "b", Key: "k", Store: "s", StoreKey: "b/k", Size: 3, Segments: seg("one")})
	if e, ok := s.JournalEntry("b", "k"); !ok || e.Version != v1 || e.Created.IsZero() {
		t.Fatalf("entry after stage = %+v, %v (want version %d)", e, ok, v1)
	}
	wantErr(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v1 + 100, Node: "n1", Lease: time.Minute}, ErrSuperseded)
	apply(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v1, Node: "n1", Lease: time.Minute})
	wantErr(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v1, Node: "n2", Lease: time.Minute}, ErrDrainClaimed)

	v2 := stage(JournalEntry{Bucket: "b", Key: "k", Store: "s", StoreKey: "b/k", Size: 3, Segments: seg("two")})
	e, _ := s.JournalEntry("b", "k")
	if e.Version != v2 || e.Claim == nil || e.Claim.Version != v1 {
		t.Fatalf("a newer write dropped the claim on the old one: %+v", e)
	}
	// v2 cannot drain while v1's upload may still be running, on any node.
	wantErr(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v2, Node: "n2", Lease: time.Minute}, ErrDrainClaimed)
	wantErr(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v2, Node: "n1", Lease: time.Minute}, ErrDrainClaimed)
	// Someone else's finish is a no-op; n1's finish of v1 keeps v2.
	apply(t, n, FinishDrain{Bucket: "b", Key: "k", Version: v1, Node: "n2"})
	apply(t, n, FinishDrain{Bucket: "b", Key: "k", Version: v1, Node: "n1"})
	if e, ok := s.JournalEntry("b", "k"); !ok || e.Version != v2 || e.Claim != nil {
		t.Fatalf("after the old drain finished: %+v, %v", e, ok)
	}
	wantErr(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v1, Node: "n1", Lease: time.Minute}, ErrSuperseded)
	apply(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v2, Node: "n2", Lease: time.Minute})
	apply(t, n, FinishDrain{Bucket: "b", Key: "k", Version: v2, Node: "n2"})
	if _, ok := s.JournalEntry("b", "k"); ok {
		t.Fatal("a drained entry stayed in the journal")
	}

	// A failed drain gives the claim back and keeps the entry.
	v4 := stage(JournalEntry{Bucket: "b", Key: "k", Store: "s", StoreKey: "b/k", Size: 3, Segments: seg("four")})
	apply(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v4, Node: "n1", Lease: time.Minute})
	apply(t, n, FinishDrain{Bucket: "b", Key: "k", Version: v4, Node: "n1", Failed: true})
	if e, ok := s.JournalEntry("b", "k"); !ok || e.Version != v4 || e.Claim != nil {
		t.Fatalf("after a failed drain: %+v, %v", e, ok)
	}
	apply(t, n, ClaimDrain{Bucket: "b", Key: "k", Version: v4, Node: "n2", Lease: time.Minute})
	apply(t, n, FinishDrain{Bucket: "b", Key: "k", Version: v4, Node: "n2"})

	// An expired claim can be taken over.
	v3 := stage(JournalEntry{Bucket: "b", Key: "gone", Tombstone: true, Store: "s", StoreKey: "b/gone"})
	apply(t, n, ClaimDrain{Bucket: "b", Key: "gone", Version: v3, Node: "n1", Lease: time.Millisecond})
	applied := time.Now() // the lease runs from the entry's time, before this
	wait.For(t, time.Second, "the 1 ms claim lease to run out", func() bool { return time.Since(applied) > 2*time.Millisecond })
	apply(t, n, ClaimDrain{Bucket: "b", Key: "gone", Version: v3, Node: "n3", Lease: time.Minute})
	if e, _ := s.JournalEntry("b", "gone"); !e.Tombstone || e.Claim.Node != "n3" {
		t.Fatalf("tombstone after takeover = %+v", e)
	}
	if n, bytes, oldest := s.JournalStats(); n != 1 || bytes != 0 || oldest.IsZero() {
		t.Fatalf("JournalStats = %d, %d, %v", n, bytes, oldest)
	}

	// Malformed entries change nothing.
	wantErr(t, n, StageObject{Entry: JournalEntry{Bucket: "b", Key: "x", Size: 4, Segments: seg("bad")}}, ErrInvalid)
	wantErr(t, n, StageObject{Entry: JournalEntry{Bucket: "b", Key: "x", Tombstone: true, Segments: seg("bad")}}, ErrInvalid)
	wantErr(t, n, StageObject{Entry: JournalEntry{Bucket: "b", Key: "", Size: 3, Segments: seg("bad")}}, ErrInvalid)
	if got := s.Journal("b", ""); len(got) != 1 || got[0].Key != "gone" {
		t.Fatalf("Journal(b) = %+v", got)
	}
}

func TestPinsAndJobs(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	s := n.State()
	apply(t, n, SetPin{Pin: Pin{Bucket: "b", Prefix: "z/"}}, SetPin{Pin: Pin{Bucket: "b", Prefix: "a/"}})
	if p := s.Pins(); len(p) != 2 || p[0].Prefix != "a/" || p[1].Prefix != "z/" {
		t.Fatalf("Pins = %+v", p)
	}
	apply(t, n, SetPin{Pin: Pin{Bucket: "b", Prefix: "z/"}, Delete: true})
	if p := s.Pins(); len(p) != 1 {
		t.Fatalf("Pins after unpin = %+v", p)
	}
	wantErr(t, n, JobProgressUpdate{ID: "nope", Node: "n1"}, ErrNoSuchJob)
	apply(t, n, PutJob{Job: PreloadJob{ID: "j1", Bucket: "b", Prefix: "a/"}},
		JobProgressUpdate{ID: "j1", Node: "n1", Progress: JobProgress{After: "a/5", Objects: 5, Bytes: 50}, TotalObjects: 10, TotalBytes: 100},
		JobProgressUpdate{ID: "j1", Node: "n2", Progress: JobProgress{Objects: 5, Bytes: 50, Done: true}})
	j, ok := s.Job("j1")
	if !ok || j.TotalObjects != 10 || j.Nodes["n1"].After != "a/5" || !j.Nodes["n2"].Done {
		t.Fatalf("Job = %+v", j)
	}
	apply(t, n, DeleteJob{ID: "j1"})
	if len(s.Jobs()) != 0 {
		t.Fatal("deleted job still listed")
	}
}

// TestJournalConditionalStage: a StageObject with IfUnchangedSince fails
// with ErrChanged, changing nothing, once its key has a newer entry or any
// entry was drained and removed after that index; the removal's index
// survives a restart (state loaded from the FSM file), so every node
// decides a replayed conditional write the same way.
func TestJournalConditionalStage(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	s := n.State()
	seg := func(id string) []Segment { return []Segment{{ID: id, Size: 3, Nodes: []string{"n1"}}} }
	entry := func(key, id string) JournalEntry {
		return JournalEntry{Bucket: "b", Key: key, Store: "s", StoreKey: "b/" + key, Size: 3, Segments: seg(id)}
	}
	seen := s.AppliedIndex()
	if _, err := n.ApplyIndex(t.Context(), StageObject{Entry: entry("k", "one"), IfUnchangedSince: seen}); err != nil {
		t.Fatalf("a conditional write with nothing in between: %v", err)
	}
	// Another write of k after seen: refused, and k keeps "one".
	wantErr(t, n, StageObject{Entry: entry("k", "late"), IfUnchangedSince: seen}, ErrChanged)
	if e, _ := s.JournalEntry("b", "k"); e.Segments[0].ID != "one" {
		t.Fatalf("a refused conditional write replaced the entry: %+v", e)
	}
	// A write of another key does not conflict.
	seen = s.AppliedIndex()
	apply(t, n, StageObject{Entry: entry("other", "two")})
	if _, err := n.ApplyIndex(t.Context(), StageObject{Entry: entry("k", "three"), IfUnchangedSince: seen}); err != nil {
		t.Fatalf("a write of another key made a conditional write fail: %v", err)
	}
	// A drained and removed entry leaves no key behind, so any removal
	// after seen conflicts.
	seen = s.AppliedIndex()
	e, _ := s.JournalEntry("b", "other")
	apply(t, n, ClaimDrain{Bucket: "b", Key: "other", Version: e.Version, Node: "n1", Lease: time.Minute},
		FinishDrain{Bucket: "b", Key: "other", Version: e.Version, Node: "n1"})
	wantErr(t, n, StageObject{Entry: entry("new", "four"), IfUnchangedSince: seen}, ErrChanged)
	wantErr(t, n, CompleteUpload{UploadID: "none", Stage: ptr(entry("new", "five")), IfUnchangedSince: seen}, ErrNoSuchUpload)
	if _, ok := s.JournalEntry("b", "new"); ok {
		t.Fatal("a refused conditional write created an entry")
	}

	closeNode(t, n)
	n = openNode(t, testConfig(t, dir))
	wantErr(t, n, StageObject{Entry: entry("new", "six"), IfUnchangedSince: seen}, ErrChanged)
	if _, err := n.ApplyIndex(t.Context(), StageObject{Entry: entry("new", "seven"), IfUnchangedSince: n.State().AppliedIndex()}); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestJournalSuperseded: applying a write that replaces an undrained entry
// tells subscribers which staged segments nobody refers to any more.
func TestJournalSuperseded(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	got := make(chan []string, 4)
	defer n.Subscribe(func(c Command) {
		if s, ok := c.(*StageObject); ok {
			got <- s.Superseded
		}
	})()
	entry := func(ids ...string) JournalEntry {
		e := JournalEntry{Bucket: "b", Key: "k", Store: "s", StoreKey: "b/k"}
		for _, id := range ids {
			e.Segments = append(e.Segments, Segment{ID: id, Size: 1, Nodes: []string{"n1"}})
			e.Size++
		}
		return e
	}
	apply(t, n, StageObject{Entry: entry("one", "two")})
	if s := <-got; len(s) != 0 {
		t.Fatalf("first write superseded %v", s)
	}
	apply(t, n, StageObject{Entry: entry("two", "three")})
	if s := <-got; len(s) != 1 || s[0] != "one" {
		t.Fatalf("superseded %v; want [one] (two is still referred to)", s)
	}
}

// TestRegionID: the region's id is set once; the same id again is a
// no-op, another is refused, and a plain setting cannot overwrite it.
func TestRegionID(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	if id := n.State().RegionID(); id != "" {
		t.Fatalf("a new region has id %q", id)
	}
	apply(t, n, SetRegionID{ID: "r1"}, SetRegionID{ID: "r1"})
	wantErr(t, n, SetRegionID{ID: "r2"}, ErrRegionIDSet)
	wantErr(t, n, SetSetting{Key: RegionIDSetting, Value: "r3"}, ErrInvalid)
	if id := n.State().RegionID(); id != "r1" {
		t.Fatalf("region id %q; want r1", id)
	}
}

// TestClaimUpload: of two claims on a session the first wins until it is
// released or the session ends; a claimed session takes no parts; a claim
// older than ClaimTTL is taken over.
func TestClaimUpload(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	apply(t, n, CreateUpload{Upload: MultipartUpload{ID: "u1", Bucket: "b", Key: "k", Store: "s"}})
	ctx := t.Context()
	claim := func(c string, at time.Time) error { return n.Apply(ctx, ClaimUpload{UploadID: "u1", Claim: c, At: at}) }
	if err := claim("complete-1", at); err != nil {
		t.Fatal(err)
	}
	if err := claim("complete-1", at); err != nil {
		t.Fatalf("the same claim again: %v", err)
	}
	if err := claim("abort-1", at.Add(time.Second)); !errors.Is(err, ErrUploadClaimed) {
		t.Fatalf("a second claim: %v, want ErrUploadClaimed", err)
	}
	if err := n.Apply(ctx, PutPart{UploadID: "u1", Part: Part{Number: 1, Size: 1, ETag: "e"}}); !errors.Is(err, ErrUploadClaimed) {
		t.Fatalf("PutPart on a claimed session: %v, want ErrUploadClaimed", err)
	}
	if err := n.Apply(ctx, ClaimUpload{UploadID: "u1", Claim: "complete-1", At: at, Release: true}); err != nil {
		t.Fatal(err)
	}
	if err := claim("abort-1", at.Add(2*time.Second)); err != nil {
		t.Fatalf("a claim after the release: %v", err)
	}
	if err := claim("complete-2", at.Add(ClaimTTL+2*time.Second)); err != nil {
		t.Fatalf("taking over a claim older than ClaimTTL: %v", err)
	}
	if ups := n.State().Uploads("b", ""); len(ups) != 1 || ups[0].Claim != "complete-2" {
		t.Fatalf("uploads %+v, want u1 claimed by complete-2", ups)
	}
	apply(t, n, AbortUpload{UploadID: "u1"})
	if err := claim("x", at); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("a claim on an ended session: %v, want ErrNoSuchUpload", err)
	}
}
