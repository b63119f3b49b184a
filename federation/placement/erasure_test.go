package placement

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
	"github.com/fedgate/fedgate/store/posix"
)

// Small sizes, so the test objects span several segments and blocks.
const (
	testSeg   = 256 << 10
	testBlock = 32 << 10
)

func newTestErasure(t testing.TB, stores []store.Store, opts ...Option) *Erasure {
	t.Helper()
	opts = append([]Option{WithSegmentSize(testSeg), WithBlockSize(testBlock)}, opts...)
	e, err := NewErasure("ec", placementLoc, stores, 4, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testObjects is a set of objects of every shape: empty, inline, one
// segment, many segments with a short last one, unknown size, multipart.
type testObject struct {
	key     string
	data    []byte
	unknown bool // Put with size -1
	parts   int  // > 0: multipart upload of that many parts
}

func sampleObjects() []testObject {
	return []testObject{
		{key: "empty", data: nil},
		{key: "tiny", data: testData(1, 100)},
		{key: "dir/one-segment", data: testData(2, 70_000)},
		{key: "dir/segments", data: testData(3, 3*testSeg+12_345)},
		{key: "dir/sub/unknown-size", data: testData(4, 2*testSeg+1), unknown: true},
		{key: "ckpt/multipart", data: testData(5, 2*testSeg+testSeg/2+77), parts: 3},
		{key: "exact", data: testData(6, 4*testSeg)},
	}
}

func putObjects(t testing.TB, s store.Store, objs []testObject) {
	t.Helper()
	ctx := t.Context()
	for _, o := range objs {
		switch {
		case o.parts > 0:
			mp := s.(store.Multiparter)
			id, err := mp.CreateMultipart(ctx, o.key, store.PutOptions{Metadata: store.Metadata{ContentType: "application/x-ckpt"}})
			if err != nil {
				t.Fatalf("CreateMultipart(%s): %v", o.key, err)
			}
			var parts []store.PartInfo
			step := (len(o.data) + o.parts - 1) / o.parts
			for n := range o.parts {
				b := o.data[n*step : min((n+1)*step, len(o.data))]
				p, err := mp.UploadPart(ctx, o.key, id, n+1, bytes.NewReader(b), int64(len(b)))
				if err != nil {
					t.Fatalf("UploadPart(%s, %d): %v", o.key, n+1, err)
				}
				parts = append(parts, p)
			}
			if _, err := mp.CompleteMultipart(ctx, o.key, id, parts, store.PutOptions{}); err != nil {
				t.Fatalf("CompleteMultipart(%s): %v", o.key, err)
			}
		case o.unknown:
			if _, err := s.Put(ctx, o.key, onlyReader{bytes.NewReader(o.data)}, -1, store.PutOptions{}); err != nil {
				t.Fatalf("Put(%s, size -1): %v", o.key, err)
			}
		default:
			mustPut(t, s, o.key, o.data)
		}
	}
}

func checkObjects(t testing.TB, s store.Store, objs []testObject) {
	t.Helper()
	for _, o := range objs {
		info, err := s.Stat(t.Context(), o.key)
		if err != nil {
			t.Errorf("Stat(%s): %v", o.key, err)
			continue
		}
		if info.Size != int64(len(o.data)) {
			t.Errorf("Stat(%s).Size = %d, want %d", o.key, info.Size, len(o.data))
		}
		checkBytes(t, s, o.key, o.data)
	}
}

func objectKeys(objs []testObject) []string {
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.key)
	}
	return keys
}

type onlyReader struct{ r *bytes.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestErasureLostStore: each store in turn loses everything (its
// directory is deleted and replaced by an empty one): every object still
// reads back byte-identical, whole and in ranges; Repair re-creates every
// shard and manifest; a second Repair finds nothing to do.
func TestErasureLostStore(t *testing.T) {
	stores, dirs := posixStores(t, 4)
	sw := make([]*swappable, len(stores))
	wrapped := make([]store.Store, len(stores))
	for i, s := range stores {
		sw[i] = newSwappable(s)
		wrapped[i] = sw[i]
	}
	e := newTestErasure(t, wrapped)
	objs := sampleObjects()
	putObjects(t, e, objs)
	checkObjects(t, e, objs)
	keys := objectKeys(objs)
	parent := t
	for lost := range stores {
		t.Run(fmt.Sprintf("store%d", lost), func(t *testing.T) {
			if err := os.RemoveAll(dirs[lost]); err != nil {
				t.Fatal(err)
			}
			fresh, err := posix.New(stores[lost].Name(), stores[lost].Location(), dirs[lost])
			if err != nil {
				t.Fatal(err)
			}
			parent.Cleanup(func() { fresh.Close() })
			sw[lost].swap(fresh)
			checkObjects(t, e, objs)

			// A dry run names every object and the lost store, and writes
			// nothing: a second one finds the same.
			for range 2 {
				found := map[string][]string{}
				st, err := e.Repair(DryRun(t.Context(), func(key string, stores []string) { found[key] = stores }), "", nil)
				if err != nil || st.Repaired != int64(len(objs)) || st.Manifests != int64(len(objs)) {
					t.Fatalf("dry-run Repair = %+v, %v; want %d objects to repair", st, err, len(objs))
				}
				for _, k := range keys {
					if !slices.Equal(found[k], []string{stores[lost].Name()}) {
						t.Errorf("dry run: %s lacks on %v, want [%s]", k, found[k], stores[lost].Name())
					}
				}
			}

			// Progress comes per object and per segment read, so it moves
			// with the bytes within a large object.
			var last, lastBytes int64
			moved := false
			st, err := e.Repair(t.Context(), "", func(p RepairProgress) {
				if p.BytesRead < lastBytes || p.Objects < last {
					t.Errorf("progress went back: %+v after %d objects, %d bytes", p, last, lastBytes)
				}
				if p.Objects == last && p.BytesRead > lastBytes {
					moved = true
				}
				last, lastBytes = p.Objects, p.BytesRead
			})
			if err != nil {
				t.Fatalf("Repair: %v (%+v)", err, st)
			}
			if st.Objects != int64(len(objs)) || last != int64(len(objs)) || lastBytes != st.BytesRead || !moved {
				t.Errorf("Repair examined %d objects, progress ended at %d objects and %d of %d bytes (moved within an object: %v), want %d",
					st.Objects, last, lastBytes, st.BytesRead, moved, len(objs))
			}
			if st.Manifests != int64(len(objs)) || st.Shards == 0 || st.Failed != 0 {
				t.Errorf("Repair = %+v; want %d manifests and some shards re-created", st, len(objs))
			}
			checkAllShards(t, e, keys)
			if st, err := e.Repair(t.Context(), "", nil); err != nil || st.Healthy != int64(len(objs)) || st.Shards+st.Manifests != 0 {
				t.Errorf("second Repair = %+v, %v; want every object healthy", st, err)
			}
			checkObjects(t, e, objs)
			if got := listKeys(t, e, store.ListOptions{}); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
				t.Errorf("List after Repair = %q, want %q", got, keys)
			}
		})
	}
}

// TestErasureStoreDown: one store fails every call (an outage): reads,
// Stat and List carry on from the others, writes fail naming the store;
// once it is back, Repair finds every shard in place.
func TestErasureStoreDown(t *testing.T) {
	stores, _ := posixStores(t, 4)
	fs := make([]*faulty.Store, len(stores))
	wrapped := make([]store.Store, len(stores))
	for i, s := range stores {
		fs[i] = faulty.Wrap(s, faulty.Config{})
		wrapped[i] = fs[i]
	}
	e := newTestErasure(t, wrapped, WithCooldown(time.Hour))
	objs := sampleObjects()
	putObjects(t, e, objs)
	keys := objectKeys(objs)
	for down := range stores {
		fs[down].SetConfig(faulty.Config{ErrorRate: 1})
		checkObjects(t, e, objs)
		if got := listKeys(t, e, store.ListOptions{}); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
			t.Errorf("store %d down: List = %q, want %q", down, got, keys)
		}
		_, err := e.Put(t.Context(), "during-outage", bytes.NewReader(testData(9, 100_000)), 100_000, store.PutOptions{})
		if err == nil || !strings.Contains(err.Error(), stores[down].Name()) || !errors.Is(err, faulty.ErrInjected) {
			t.Errorf("store %d down: Put = %v, want an error naming %s", down, err, stores[down].Name())
		}
		fs[down].SetConfig(faulty.Config{})
		if _, err := e.Stat(t.Context(), "during-outage"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("store %d down: the failed Put left an object: %v", down, err)
		}
		for _, s := range stores {
			if n, k := storedBytes(t, s, reservedPrefix+keyHash("during-outage")); k != 0 {
				t.Errorf("store %d down: the failed Put left %d shards (%d bytes) in %s", down, k, n, s.Name())
			}
		}
		st, err := e.Repair(t.Context(), "", nil)
		if err != nil || st.Healthy != int64(len(objs)) {
			t.Errorf("store %d back: Repair = %+v, %v; want every object healthy", down, st, err)
		}
	}
	checkAllShards(t, e, keys)
}

// TestErasureCorruptShard: a shard whose bytes changed in its store is
// caught by its checksum, the read is rebuilt from the others, and Repair
// rewrites it; a damaged manifest copy is skipped and rewritten too.
func TestErasureCorruptShard(t *testing.T) {
	stores, dirs := posixStores(t, 4)
	e := newTestErasure(t, stores)
	b := testData(10, 3*testSeg+999)
	mustPut(t, e, "obj", b)
	byName := map[string]store.Store{}
	for _, s := range stores {
		byName[s.Name()] = s
	}
	// Data shard 1 of segment 1: one block of it in every stripe of the
	// segment, in the middle of the object.
	locs := shardLocations(t, e, "obj")
	victim := locs[6+1]
	s := byName[victim[0]]
	orig, err := readAll(t, s, victim[1], 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	bad[len(bad)/2] ^= 0xff
	mustPut(t, s, victim[1], bad)
	checkBytes(t, e, "obj", b)
	// A damaged manifest in the first store: readers use another copy.
	mustPut(t, stores[0], "obj", []byte("{not a manifest"))
	checkBytes(t, e, "obj", b)
	if info, err := e.Stat(t.Context(), "obj"); err != nil || info.Size != int64(len(b)) {
		t.Errorf("Stat with a damaged manifest copy = %+v, %v", info, err)
	}

	st, err := e.Repair(t.Context(), "", nil)
	if err != nil || st.Shards != 1 || st.Manifests != 1 || st.Repaired != 1 {
		t.Fatalf("Repair = %+v, %v; want 1 shard and 1 manifest rewritten", st, err)
	}
	if got, err := readAll(t, s, victim[1], 0, -1); err != nil || !bytes.Equal(got, orig) {
		t.Errorf("shard after Repair: %d bytes, %v; want the original %d", len(got), err, len(orig))
	}
	checkAllShards(t, e, []string{"obj"})

	// Bit rot on disk: flip a byte inside a shard's file (the posix store
	// keeps an object's bytes from offset 0 of its file; see its keys.go
	// for the names).
	rot := locs[6+3]
	dir := dirs[slices.IndexFunc(stores, func(s store.Store) bool { return s.Name() == rot[0] })]
	segs := strings.Split(rot[1], "/")
	path := dir
	for _, d := range segs[:len(segs)-1] {
		path = filepath.Join(path, "d"+d)
	}
	path = filepath.Join(path, "f"+segs[len(segs)-1])
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	if _, err := f.ReadAt(one[:], 100); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x01
	if _, err := f.WriteAt(one[:], 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkBytes(t, e, "obj", b)
	if st, err := e.Repair(t.Context(), "", nil); err != nil || st.Shards != 1 {
		t.Errorf("Repair after bit rot = %+v, %v; want 1 shard rewritten", st, err)
	}

	// Corrupt M shards of one segment (the most a segment survives) and
	// one more in another: still readable, and repaired.
	locs = shardLocations(t, e, "obj")
	for _, x := range []int{0, 5, 6 + 2} {
		loc := locs[x]
		mustPut(t, byName[loc[0]], loc[1], testData(99, 100))
	}
	checkBytes(t, e, "obj", b)
	if st, err := e.Repair(t.Context(), "obj", nil); err != nil || st.Shards != 3 {
		t.Errorf("Repair = %+v, %v; want 3 shards rewritten", st, err)
	}
	// M+1 lost shards of a segment lose it: the read says so.
	for _, x := range []int{0, 1, 2} {
		if err := byName[locs[x][0]].Delete(t.Context(), locs[x][1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readAll(t, e, "obj", 0, -1); !errors.Is(err, ErrUnrecoverable) {
		t.Errorf("read with 3 shards of a segment lost: %v, want ErrUnrecoverable", err)
	}
	if _, err := e.Repair(t.Context(), "", nil); !errors.Is(err, ErrUnrecoverable) {
		t.Errorf("Repair with 3 shards of a segment lost: %v, want ErrUnrecoverable", err)
	}
	// The other segments still read.
	if got, err := readAll(t, e, "obj", testSeg, testSeg); err != nil || !bytes.Equal(got, b[testSeg:2*testSeg]) {
		t.Errorf("read of segment 1 = %d bytes, %v", len(got), err)
	}
}

// TestErasureOverhead: the shards of an object take (K+M)/K times its
// size, a replaced version's shards are removed, and a Delete leaves
// nothing.
func TestErasureOverhead(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e := newTestErasure(t, stores)
	size := 8*testSeg + 4000
	mustPut(t, e, "big", testData(11, size))
	mustPut(t, e, "big", testData(12, size)) // the first version's shards go
	var shards, manifests int64
	for _, s := range stores {
		n, _ := storedBytes(t, s, reservedPrefix)
		shards += n
		m, _ := storedBytes(t, s, "big")
		manifests += m
	}
	ratio := float64(shards) / float64(size)
	if ratio < 1.5 || ratio > 1.5001 {
		t.Errorf("shards hold %d bytes for a %d-byte object: %.4f times, want 1.5", shards, size, ratio)
	}
	if manifests > int64(size)/100 {
		t.Errorf("manifests hold %d bytes for a %d-byte object", manifests, size)
	}
	t.Logf("%d bytes: shards %d (%.4fx), manifests %d", size, shards, ratio, manifests)
	if err := e.Delete(t.Context(), "big"); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if n, k := storedBytes(t, s, ""); k != 0 {
			t.Errorf("%s after Delete: %d objects, %d bytes", s.Name(), k, n)
		}
	}
}

// TestErasureListHidesShards: listings show user keys only, whatever the
// prefix and delimiter, including delimiters that fold the reserved names
// together with user keys.
func TestErasureListHidesShards(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e := newTestErasure(t, stores)
	keys := []string{"a", "a/b", ".f", ".fedgate-x", ".fedgate", "z/big", "-", ".", "m/n/o"}
	for i, k := range keys {
		n := 100
		if i%2 == 1 {
			n = 2*testSeg + i // shards
		}
		mustPut(t, e, k, testData(uint64(20+i), n))
	}
	// An open multipart upload keeps records under the reserved prefix too.
	if _, err := e.CreateMultipart(t.Context(), "open-upload", store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Put(t.Context(), reservedPrefix+"x", bytes.NewReader([]byte("x")), 1, store.PutOptions{}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Put under the reserved prefix: %v, want ErrInvalidKey", err)
	}
	for _, p := range []string{"", ".", ".f", ".fedgate-", reservedPrefix, "a", "z"} {
		for _, d := range []string{"", "/", "-", ".", "e", "c/"} {
			for _, after := range []string{"", ".", ".fedgate-ec", reservedPrefix + "0"} {
				opts := store.ListOptions{Prefix: p, Delimiter: d, StartAfter: after}
				want := listModel(keys, opts)
				if p == reservedPrefix {
					want = nil
				}
				if got := listKeys(t, e, opts); !slices.Equal(got, want) {
					t.Errorf("List(%+v)\n got %q\nwant %q", opts, got, want)
				}
			}
		}
	}
	// The stores themselves do hold the shards.
	if _, n := storedBytes(t, stores[0], reservedPrefix); n == 0 {
		t.Error("no shards in the first store")
	}
}

// TestErasureConcurrentWriters: writers of one key racing each other never
// mix shards: every read returns one complete version, and in the end
// every store holds the same manifest and only its shards.
func TestErasureConcurrentWriters(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e := newTestErasure(t, stores)
	const writers, rounds = 4, 6
	bodies := make([][]byte, writers)
	for w := range bodies {
		bodies[w] = testData(uint64(30+w), 2*testSeg+w*1000)
	}
	mustPut(t, e, "hot", bodies[0])
	var stop atomic.Bool
	var reads, failed atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				got, err := readAll(t, e, "hot", 0, -1)
				if err != nil {
					failed.Add(1) // an overwrite removed the shards mid-read
					continue
				}
				reads.Add(1)
				if !slices.ContainsFunc(bodies, func(b []byte) bool { return bytes.Equal(b, got) }) {
					t.Errorf("read %d bytes that are none of the versions written", len(got))
					return
				}
			}
		})
	}
	var ww sync.WaitGroup
	for w := range writers {
		ww.Go(func() {
			for range rounds {
				if _, err := e.Put(t.Context(), "hot", bytes.NewReader(bodies[w]), int64(len(bodies[w])), store.PutOptions{}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	ww.Wait()
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads, %d failed by an overwrite", reads.Load(), failed.Load())
	if reads.Load() == 0 {
		t.Error("no read succeeded")
	}
	var version string
	for _, s := range stores {
		info, err := s.Stat(t.Context(), "hot")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := isManifest(info)
		if version == "" {
			version = v
		} else if v != version {
			t.Errorf("%s holds version %s, another store %s", s.Name(), v, version)
		}
	}
	final, err := readAll(t, e, "hot", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var shards int64
	for _, s := range stores {
		n, _ := storedBytes(t, s, reservedPrefix)
		shards += n
	}
	if want := int64(len(final)) * 3 / 2; shards < want || shards > want+64 {
		t.Errorf("shards hold %d bytes after the race, want %d (one version's)", shards, want)
	}
}

// TestErasureLayouts: the constructor refuses a layout that losing one
// store would break.
func TestErasureLayouts(t *testing.T) {
	stores, _ := posixStores(t, 4)
	for _, c := range []struct {
		n, k, m int
		ok      bool
	}{
		{4, 4, 2, true}, {3, 4, 2, true}, {2, 4, 2, false}, {4, 10, 1, false}, {4, 3, 1, true},
		{4, 2, 2, true}, {1, 1, 1, false}, {4, 4, 0, false},
	} {
		_, err := NewErasure("x", placementLoc, stores[:c.n], c.k, c.m)
		if (err == nil) != c.ok {
			t.Errorf("NewErasure(%d stores, %d+%d) = %v, want ok=%v", c.n, c.k, c.m, err, c.ok)
		}
	}
}

// TestErasureRank: reads take the manifest from the store the rank puts
// first, and read data shards only (no parity) while all are healthy.
func TestErasureRank(t *testing.T) {
	stores, _ := posixStores(t, 4)
	fs := make([]*faulty.Store, 4)
	wrapped := make([]store.Store, 4)
	for i, s := range stores {
		fs[i] = faulty.Wrap(s, faulty.Config{})
		wrapped[i] = fs[i]
	}
	e := newTestErasure(t, wrapped, WithRank(func() []int { return []int{2, 3} }))
	b := testData(40, 3*testSeg)
	mustPut(t, e, "r", b)
	before := make([]int64, 4)
	for i, f := range fs {
		before[i] = f.Count.ReadCalls.Load()
	}
	if _, err := e.Stat(t.Context(), "r"); err != nil {
		t.Fatal(err)
	}
	if got := fs[2].Count.ReadCalls.Load() - before[2]; got != 1 {
		t.Errorf("Stat read the manifest %d times from the first-ranked store, want 1", got)
	}
	for i := range fs {
		before[i] = fs[i].Count.ReadCalls.Load()
	}
	checkBytes(t, e, "r", b)
	m, err := e.loadManifest(t.Context(), "test", "r", false)
	if err != nil {
		t.Fatal(err)
	}
	// Every read above is of a manifest (from store 2) or of a data shard.
	var total int64
	for i := range fs {
		total += fs[i].Count.ReadCalls.Load() - before[i]
	}
	if total == 0 || len(m.Segments) != 3 {
		t.Fatalf("reads %d, segments %d", total, len(m.Segments))
	}
	if got, err := readAll(t, e, "r", 10, 100); err != nil || !bytes.Equal(got, b[10:110]) {
		t.Errorf("small read: %v", err)
	}
}

// TestErasureConditional: IfNoneMatch and IfMatch are decided once for the
// whole layout.
func TestErasureConditional(t *testing.T) {
	stores, _ := posixStores(t, 4)
	e := newTestErasure(t, stores)
	b1, b2 := testData(50, testSeg+1), testData(51, 1000)
	v1 := mustPut(t, e, "c", b1).Validator
	_, err := e.Put(t.Context(), "c", bytes.NewReader(b2), int64(len(b2)), store.PutOptions{IfNoneMatch: true})
	wantErrIs(t, "IfNoneMatch over an object", err, store.ErrPreconditionFailed)
	info, err := e.Put(t.Context(), "c", bytes.NewReader(b2), int64(len(b2)), store.PutOptions{IfMatch: v1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Put(t.Context(), "c", bytes.NewReader(b1), int64(len(b1)), store.PutOptions{IfMatch: v1})
	wantErrIs(t, "IfMatch with a stale validator", err, store.ErrPreconditionFailed)
	_, err = e.ReadRange(t.Context(), "c", 0, -1, v1)
	wantErrIs(t, "ReadRange with a stale validator", err, store.ErrPreconditionFailed)
	checkBytes(t, e, "c", b2)
	// The failed writes left no shards behind, and b1's went when b2
	// (small enough to live inside its manifest) replaced it.
	for _, s := range stores {
		if _, n := storedBytes(t, s, reservedPrefix); n != 0 {
			t.Errorf("%s holds %d shards; the current version is inline", s.Name(), n)
		}
		st, err := s.Stat(t.Context(), "c")
		if v, _ := isManifest(st); err != nil || validatorPrefix+v != string(info.Validator) {
			t.Errorf("%s manifest version %s, %v; want %s", s.Name(), v, err, info.Validator)
		}
	}
}
