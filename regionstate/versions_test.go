package regionstate

import (
	"fmt"
	"slices"
	"testing"
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
