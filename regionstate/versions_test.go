package regionstate

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func versionIDs(vs []ObjectVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Key + "@" + v.ID
	}
	return out
}

func listAll(s *State, bucket, prefix, afterKey string, afterSeq uint64) []ObjectVersion {
	var out []ObjectVersion
	s.ListVersions(bucket, prefix, afterKey, afterSeq, func(v ObjectVersion) bool { out = append(out, v); return true })
	return out
}

func TestVersionIndex(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	s := n.State()
	obj := func(key, id string) PutVersion {
		return PutVersion{Version: ObjectVersion{Bucket: "ckpt", Key: key, ID: id, Store: "nas", StoreKey: "v/" + key + "/" + id, Size: 1}}
	}
	apply(t, n, CreateBucket{Bucket: Bucket{Name: "ckpt", Owner: "alice"}},
		obj("latest.pt", "a"), obj("latest.pt", "b"), obj("a.pt", "x"), obj("latest.pt", "c"),
		PutVersion{Version: ObjectVersion{Bucket: "ckpt", Key: "z.pt", ID: "dm", DeleteMarker: true}})
	if got := versionIDs(s.Versions("ckpt", "latest.pt")); !slices.Equal(got, []string{"latest.pt@c", "latest.pt@b", "latest.pt@a"}) {
		t.Fatalf("Versions = %v, want newest first", got)
	}
	vs := s.Versions("ckpt", "latest.pt")
	if !(vs[0].Seq > vs[1].Seq && vs[1].Seq > vs[2].Seq) || vs[0].Created.IsZero() {
		t.Fatalf("seqs %d %d %d, created %v", vs[0].Seq, vs[1].Seq, vs[2].Seq, vs[0].Created)
	}
	all := versionIDs(listAll(s, "ckpt", "", "", 0))
	if want := []string{"a.pt@x", "latest.pt@c", "latest.pt@b", "latest.pt@a", "z.pt@dm"}; !slices.Equal(all, want) {
		t.Fatalf("ListVersions = %v, want %v", all, want)
	}
	// Markers: after a key, and inside a key's versions.
	if got := versionIDs(listAll(s, "ckpt", "", "a.pt", 0)); got[0] != "latest.pt@c" {
		t.Errorf("after a.pt: %v", got)
	}
	if got := versionIDs(listAll(s, "ckpt", "", "latest.pt", vs[1].Seq)); !slices.Equal(got, []string{"latest.pt@a", "z.pt@dm"}) {
		t.Errorf("after latest.pt@b: %v", got)
	}
	if got := versionIDs(listAll(s, "ckpt", "latest", "", 0)); len(got) != 3 {
		t.Errorf("prefix latest: %v", got)
	}
	wantErr(t, n, obj("latest.pt", "b"), ErrInvalid) // ids are unique
	wantErr(t, n, PutVersion{Version: ObjectVersion{Bucket: "ckpt", Key: "k", ID: "v"}}, ErrInvalid)
	wantErr(t, n, DeleteVersion{Bucket: "ckpt", Key: "latest.pt", ID: "nope"}, ErrNoSuchVersion)
	wantErr(t, n, DeleteVersion{Bucket: "other", Key: "latest.pt", ID: "a"}, ErrNoSuchVersion)

	// A null version replaces the key's null version; its bytes become garbage.
	apply(t, n, obj("n.pt", NullVersionID))
	first := s.Versions("ckpt", "n.pt")[0]
	apply(t, n, PutVersion{Version: ObjectVersion{Bucket: "ckpt", Key: "n.pt", ID: NullVersionID, Store: "nas", StoreKey: "v/n.pt/second", Size: 2}})
	if got := s.Versions("ckpt", "n.pt"); len(got) != 1 || got[0].StoreKey != "v/n.pt/second" {
		t.Fatalf("null versions = %+v", got)
	}
	garbage := s.PendingVersionGarbage()
	if len(garbage) != 1 || garbage[0].StoreKey != first.StoreKey {
		t.Fatalf("garbage = %+v, want the replaced null version's bytes", garbage)
	}
	// DeleteVersion drops one version; a delete marker leaves no garbage.
	apply(t, n, DeleteVersion{Bucket: "ckpt", Key: "latest.pt", ID: "b"}, DeleteVersion{Bucket: "ckpt", Key: "z.pt", ID: "dm"})
	if got := versionIDs(s.Versions("ckpt", "latest.pt")); !slices.Equal(got, []string{"latest.pt@c", "latest.pt@a"}) {
		t.Fatalf("after DeleteVersion: %v", got)
	}
	if s.Versions("ckpt", "z.pt") != nil {
		t.Fatal("a key without versions is still listed")
	}
	if g := s.PendingVersionGarbage(); len(g) != 2 {
		t.Fatalf("garbage = %+v", g)
	}
	apply(t, n, CollectVersionGarbage{Garbage: s.PendingVersionGarbage()})
	if g := s.PendingVersionGarbage(); len(g) != 0 {
		t.Fatalf("garbage after collection = %+v", g)
	}
	// Deleting the bucket turns every version into garbage; a new bucket
	// of the name starts empty.
	apply(t, n, DeleteBucket{Name: "ckpt"})
	if s.HasVersions("ckpt") || len(s.PendingVersionGarbage()) != 4 {
		t.Fatalf("after DeleteBucket: versions %v, garbage %d", s.HasVersions("ckpt"), len(s.PendingVersionGarbage()))
	}
}

// ListVersions pages through the index; paging must neither skip nor
// repeat a version, whatever the page boundaries.
func TestListVersionsPages(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	var cmds []Command
	var want []string
	for k := range 40 {
		key := fmt.Sprintf("k%03d", k)
		for v := range 20 {
			cmds = append(cmds, PutVersion{Version: ObjectVersion{Bucket: "b", Key: key, ID: fmt.Sprintf("v%02d", v), Store: "s", StoreKey: key + fmt.Sprint(v)}})
		}
		for v := 19; v >= 0; v-- {
			want = append(want, fmt.Sprintf("%s@v%02d", key, v))
		}
	}
	apply(t, n, cmds...)
	got := versionIDs(listAll(n.State(), "b", "", "", 0))
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d versions, want %d in order", len(got), len(want))
	}
	// Stopping early is honoured.
	count := 0
	n.State().ListVersions("b", "", "", 0, func(ObjectVersion) bool { count++; return count < 300 })
	if count != 300 {
		t.Fatalf("yield called %d times after returning false at 300", count)
	}
}

// A version of a write-back bucket is journaled with its staged bytes in
// the same command; the drain records the stored validator; dropping a
// version not drained yet turns its entry into a tombstone; all of it
// survives a restart.
func TestStagedVersions(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	s := n.State()
	seg := func(id string) []Segment { return []Segment{{ID: id, Size: 3, Nodes: []string{"n1"}}} }
	staged := func(key, id, skey string) PutVersion {
		return PutVersion{
			Version: ObjectVersion{Bucket: "ckpt", Key: key, ID: id, Store: "nas", StoreKey: skey, Size: 3, ETag: "e-" + id},
			Stage:   &JournalEntry{Bucket: "ckpt", Key: skey, Store: "nas", StoreKey: skey, Size: 3, ETag: "e-" + id, Segments: seg("s-" + id)},
		}
	}
	apply(t, n, CreateBucket{Bucket: Bucket{Name: "ckpt", Owner: "alice"}},
		staged("latest.pt", "a", "v/a"), staged("latest.pt", "b", "v/b"))
	vs := s.Versions("ckpt", "latest.pt")
	if len(vs) != 2 || vs[0].Staged != vs[0].Seq || vs[1].Staged != vs[1].Seq || vs[0].Validator != "" {
		t.Fatalf("versions = %+v, want both staged at their own index", vs)
	}
	e, ok := s.JournalEntry("ckpt", "v/a")
	if !ok || e.Object != "latest.pt" || e.Version != vs[1].Seq || e.StoreKey != "v/a" {
		t.Fatalf("journal entry of version a = %+v, %v", e, ok)
	}
	// The entry must be keyed at the version's store key, and only once.
	bad := staged("latest.pt", "c", "v/c")
	bad.Stage.Key = "latest.pt"
	wantErr(t, n, bad, ErrInvalid)
	again := staged("latest.pt", "c", "v/a")
	wantErr(t, n, again, ErrInvalid)
	if len(s.Versions("ckpt", "latest.pt")) != 2 {
		t.Fatal("a refused staged version changed the index")
	}

	// Draining a: its version records the store's validator.
	apply(t, n, ClaimDrain{Bucket: "ckpt", Key: "v/a", Version: e.Version, Node: "n1", Lease: time.Minute},
		FinishDrain{Bucket: "ckpt", Key: "v/a", Version: e.Version, Node: "n1", Validator: "etag-a"})
	if _, ok := s.JournalEntry("ckpt", "v/a"); ok {
		t.Fatal("drained entry still journaled")
	}
	vs = s.Versions("ckpt", "latest.pt")
	if vs[1].Staged != 0 || vs[1].Validator != "etag-a" || vs[0].Staged == 0 {
		t.Fatalf("after draining a: %+v", vs)
	}

	// Deleting b before it drains: its entry becomes a tombstone (which
	// drains as a delete of the store key), and its bytes are garbage.
	apply(t, n, DeleteVersion{Bucket: "ckpt", Key: "latest.pt", ID: "b"})
	if e, ok := s.JournalEntry("ckpt", "v/b"); !ok || !e.Tombstone || len(e.Segments) != 0 {
		t.Fatalf("entry of deleted staged version = %+v, %v", e, ok)
	}

	// Adopting a write-back object not drained yet as the null version
	// holds only while that journal entry is the key's.
	apply(t, n, StageObject{Entry: JournalEntry{Bucket: "ckpt", Key: "old.pt", Store: "nas", StoreKey: "old.pt", Size: 3, ETag: "e-old", Segments: seg("s-old")}})
	old, _ := s.JournalEntry("ckpt", "old.pt")
	adopt := PutVersion{Version: ObjectVersion{Bucket: "ckpt", Key: "old.pt", ID: NullVersionID, Store: "nas", StoreKey: "old.pt", Size: 3, ETag: "e-old"}, AdoptStaged: old.Version + 1}
	wantErr(t, n, adopt, ErrChanged)
	adopt.AdoptStaged = old.Version
	apply(t, n, adopt)
	if v := s.Versions("ckpt", "old.pt"); len(v) != 1 || v[0].Staged != old.Version {
		t.Fatalf("adopted null version = %+v", v)
	}

	// A versioned write-back completion stages the version and ends the upload.
	apply(t, n, CreateUpload{Upload: MultipartUpload{ID: "u1", Bucket: "ckpt", Key: "big.pt", Store: "nas", WriteBack: true}})
	cv := staged("big.pt", "m", "v/m")
	apply(t, n, CompleteUpload{UploadID: "u1", Stage: cv.Stage, Version: &cv.Version})
	if _, ok := s.Upload("u1"); ok {
		t.Fatal("upload still open after its versioned completion")
	}
	if v := s.Versions("ckpt", "big.pt"); len(v) != 1 || v[0].Staged == 0 {
		t.Fatalf("completed version = %+v", v)
	}
	if e, ok := s.JournalEntry("ckpt", "v/m"); !ok || e.Object != "big.pt" {
		t.Fatalf("completion's entry = %+v, %v", e, ok)
	}

	closeNode(t, n)
	n = openNode(t, testConfig(t, dir))
	s = n.State()
	vs = s.Versions("ckpt", "latest.pt")
	if len(vs) != 1 || vs[0].ID != "a" || vs[0].Validator != "etag-a" || vs[0].Staged != 0 {
		t.Fatalf("after restart: %+v", vs)
	}
	if e, ok := s.JournalEntry("ckpt", "v/b"); !ok || !e.Tombstone {
		t.Fatalf("tombstone after restart = %+v, %v", e, ok)
	}
	if e, ok := s.JournalEntry("ckpt", "v/m"); !ok || e.Object != "big.pt" {
		t.Fatalf("staged entry after restart = %+v, %v", e, ok)
	}
}
