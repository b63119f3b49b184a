package placement

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
)

func faultyStores(t testing.TB, n int) ([]store.Store, []*faulty.Store, []store.Store) {
	t.Helper()
	inner, _ := posixStores(t, n)
	fs := make([]*faulty.Store, n)
	wrapped := make([]store.Store, n)
	for i, s := range inner {
		fs[i] = faulty.Wrap(s, faulty.Config{})
		wrapped[i] = fs[i]
	}
	return inner, fs, wrapped
}

// TestReplicatedStoreDown: with one store failing every call, reads, Stat
// and List fail over to the others with the same Validator; writes and
// deletes fail naming the store and (for a Put) change nothing.
func TestReplicatedStoreDown(t *testing.T) {
	inner, fs, wrapped := faultyStores(t, 3)
	r, err := NewReplicated("rep", placementLoc, wrapped, WithCooldown(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(1, 300_000)
	v := mustPut(t, r, "obj", b).Validator
	mustPut(t, r, "dir/other", []byte("x"))
	for _, s := range inner {
		got, err := readAll(t, s, "obj", 0, -1)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("copy in %s: %d bytes, %v", s.Name(), len(got), err)
		}
	}
	for down := range fs {
		fs[down].SetConfig(faulty.Config{ErrorRate: 1})
		info, err := r.Stat(t.Context(), "obj")
		if err != nil || info.Validator != v || info.ETag != md5hexOf(b) {
			t.Errorf("store %d down: Stat = %+v, %v; want Validator %s", down, info, err, v)
		}
		checkBytes(t, r, "obj", b)
		rc, err := r.ReadRange(t.Context(), "obj", 10, 10, v)
		if err != nil {
			t.Errorf("store %d down: ReadRange with the Validator: %v", down, err)
		} else {
			rc.Close()
		}
		if got := listKeys(t, r, store.ListOptions{}); strings.Join(got, ",") != "dir/other,obj" {
			t.Errorf("store %d down: List = %q", down, got)
		}
		_, err = r.Put(t.Context(), "new", bytes.NewReader(b), int64(len(b)), store.PutOptions{})
		if err == nil || !strings.Contains(err.Error(), inner[down].Name()) || !errors.Is(err, faulty.ErrInjected) {
			t.Errorf("store %d down: Put = %v, want an error naming %s", down, err, inner[down].Name())
		}
		if err := r.Delete(t.Context(), "dir/other"); err == nil || !strings.Contains(err.Error(), inner[down].Name()) {
			t.Errorf("store %d down: Delete = %v, want an error naming %s", down, err, inner[down].Name())
		}
		fs[down].SetConfig(faulty.Config{})
		for _, s := range inner {
			if _, err := s.Stat(t.Context(), "new"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("store %d down: the failed Put left a copy in %s: %v", down, s.Name(), err)
			}
		}
		// The failed Delete removed the other copies; one is left, still
		// served, and a Delete now removes it.
		if _, err := r.Stat(t.Context(), "dir/other"); down > 0 && err != nil {
			t.Errorf("store %d down: dir/other after a partial Delete: %v", down, err)
		}
		if err := r.Delete(t.Context(), "dir/other"); err != nil {
			t.Fatal(err)
		}
		mustPut(t, r, "dir/other", []byte("x"))
	}
}

func md5hexOf(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// TestReplicatedRepair: a copy lost from one store (or left at an older
// version) is still served from the others and Repair restores it.
func TestReplicatedRepair(t *testing.T) {
	inner, _, wrapped := faultyStores(t, 3)
	r, err := NewReplicated("rep", placementLoc, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]byte{"a": testData(1, 1000), "b/c": testData(2, 500_000), "d": nil}
	for k, b := range objs {
		mustPut(t, r, k, b)
	}
	// Lose "a" in the first store, and put an older "b/c" in the second.
	if err := inner[0].Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	old := encodeRepMeta(store.Metadata{}, "0000000000000001"+strings.Repeat("0", 16), "")
	if _, err := inner[1].Put(t.Context(), "b/c", bytes.NewReader([]byte("old")), 3, store.PutOptions{Metadata: old}); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, r, "a", objs["a"])
	for range 2 { // a dry run reports and writes nothing
		found := map[string][]string{}
		st, err := r.Repair(DryRun(t.Context(), func(key string, stores []string) { found[key] = stores }), "", nil)
		if err != nil || st.Repaired != 2 || st.Copies != 2 || len(found) != 2 ||
			!slices.Equal(found["a"], []string{inner[0].Name()}) || !slices.Equal(found["b/c"], []string{inner[1].Name()}) {
			t.Errorf("dry-run Repair = %+v, %v, found %v; want a on %s and b/c on %s", st, err, found, inner[0].Name(), inner[1].Name())
		}
	}
	var calls int
	var lastRead int64
	st, err := r.Repair(t.Context(), "", func(p RepairProgress) {
		calls++
		lastRead = p.BytesRead
		if p.Total != 3 {
			t.Errorf("progress total %d, want 3", p.Total)
		}
	})
	if err != nil || st.Objects != 3 || st.Copies != 2 || st.Repaired != 2 || st.Healthy != 1 || calls != 3 {
		t.Errorf("Repair = %+v, %v (%d progress calls); want 2 copies made", st, err, calls)
	}
	// Each copy rewritten was read once from a good copy: a and b/c
	// (issue 37: the summary said "0 bytes read").
	if want := int64(len(objs["a"]) + len(objs["b/c"])); st.BytesRead != want || lastRead != want {
		t.Errorf("Repair read %d bytes (last progress %d), want %d", st.BytesRead, lastRead, want)
	}
	for k, b := range objs {
		for _, s := range inner {
			got, err := readAll(t, s, k, 0, -1)
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s in %s after Repair: %d bytes, %v", k, s.Name(), len(got), err)
			}
		}
	}
}

// TestReplicatedConcurrentWriters: writers of one key racing each other
// leave every store with the same version.
func TestReplicatedConcurrentWriters(t *testing.T) {
	inner, _, wrapped := faultyStores(t, 3)
	r, err := NewReplicated("rep", placementLoc, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			b := testData(uint64(w), 200_000+w)
			for range 8 {
				if _, err := r.Put(t.Context(), "hot", bytes.NewReader(b), int64(len(b)), store.PutOptions{}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var first string
	var size int64
	for i, s := range inner {
		info, err := s.Stat(t.Context(), "hot")
		if err != nil {
			t.Fatal(err)
		}
		_, v, _ := decodeRepMeta(info.Metadata)
		if i == 0 {
			first, size = v, info.Size
		} else if v != first || info.Size != size {
			t.Errorf("%s holds version %s (%d bytes), %s holds %s (%d bytes)", s.Name(), v, info.Size, inner[0].Name(), first, size)
		}
	}
}

// TestReplicatedRank: reads go to the store the rank puts first.
func TestReplicatedRank(t *testing.T) {
	_, fs, wrapped := faultyStores(t, 3)
	r, err := NewReplicated("rep", placementLoc, wrapped, WithRank(func() []int { return []int{2, 0, 1} }))
	if err != nil {
		t.Fatal(err)
	}
	b := testData(3, 10_000)
	mustPut(t, r, "k", b)
	checkBytes(t, r, "k", b)
	if fs[2].Count.ReadCalls.Load() == 0 || fs[0].Count.ReadCalls.Load()+fs[1].Count.ReadCalls.Load() != 0 {
		t.Errorf("reads per store: %d %d %d; want all from store 2",
			fs[0].Count.ReadCalls.Load(), fs[1].Count.ReadCalls.Load(), fs[2].Count.ReadCalls.Load())
	}
}

// TestReplicatedMetadataNames: user metadata names that look like the
// placement's own round-trip.
func TestReplicatedMetadataNames(t *testing.T) {
	_, _, wrapped := faultyStores(t, 2)
	r, err := NewReplicated("rep", placementLoc, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	user := map[string]string{repMetaVersion: "mine", repMetaEscape + "x": "y", "plain": "p"}
	if _, err := r.Put(t.Context(), "m", strings.NewReader("x"), 1, store.PutOptions{Metadata: store.Metadata{User: user}}); err != nil {
		t.Fatal(err)
	}
	info, err := r.Stat(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.User) != 3 || info.User[repMetaVersion] != "mine" || info.User[repMetaEscape+"x"] != "y" || info.User["plain"] != "p" {
		t.Errorf("user metadata = %v, want %v", info.User, user)
	}
	if !strings.HasPrefix(string(info.Validator), repValidatorPrefix) || info.Validator == store.Validator(repValidatorPrefix+"mine") {
		t.Errorf("Validator = %q", info.Validator)
	}
}
