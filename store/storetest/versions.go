package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// VersionCapabilities declares how a store's native versions behave where
// the clouds differ, and sizes.
type VersionCapabilities struct {
	// DeleteMarkers: deleting the live object of a versioned key adds a
	// delete marker, which becomes the key's latest version (S3). Without
	// it the deleted object's versions stay and none is latest (GCS,
	// Azure).
	DeleteMarkers bool
	// LatestFallsBack: deleting the latest version by its id makes the
	// next newest version the live object (S3). Without it the key is left
	// with no live object (GCS, Azure).
	LatestFallsBack bool
	// ManyKeys is the number of keys of the paging test (default 40, 12
	// when short).
	ManyKeys int
	// Short shrinks the paging test; `go test -short` sets it too.
	Short bool
}

func (c VersionCapabilities) manyKeys() int {
	switch {
	case c.ManyKeys > 0:
		return c.ManyKeys
	case c.Short || testing.Short():
		return 12
	}
	return 40
}

// EnableVersioning turns on native versioning of the bucket under s.
type EnableVersioning func(t *testing.T, s store.Store)

// RunVersions runs the store.Versioner suite. newStore makes a fresh store
// on a bucket whose versioning was never enabled; enable turns it on. The
// "Unversioned" tests run on such a bucket as it is (one version per key);
// the "Versioned" ones after enable. With enable nil (a stand-in that
// keeps no versions, as Azurite) only the unversioned tests run.
func RunVersions(t *testing.T, newStore NewStore, enable EnableVersioning, caps VersionCapabilities) {
	if _, ok := newStore(t).(store.Versioner); !ok {
		t.Fatal("store is not a store.Versioner")
	}
	type test func(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities)
	run := func(t *testing.T, name string, versioned bool, f test) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			if versioned {
				enable(t, s)
			}
			f(t, s, s.(store.Versioner), caps)
		})
	}
	t.Run("Unversioned", func(t *testing.T) {
		run(t, "NativeVersioning", false, testVersioningOff)
		run(t, "OneVersion", false, testOneVersion)
		run(t, "UnknownID", false, testUnknownIDUnversioned)
		run(t, "Paging", false, func(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
			testVersionPaging(t, s, v, caps, false)
		})
		run(t, "Delimiter", false, func(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
			testVersionDelimiter(t, s, v, caps, false)
		})
	})
	if enable == nil {
		return
	}
	t.Run("Versioned", func(t *testing.T) {
		run(t, "NativeVersioning", true, testVersioningOn)
		run(t, "ThreeVersions", true, testThreeVersions)
		run(t, "DeleteVersion", true, testDeleteVersion)
		run(t, "DeleteLive", true, testDeleteLive)
		run(t, "UnknownID", true, testUnknownIDVersioned)
		run(t, "Paging", true, func(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
			testVersionPaging(t, s, v, caps, true)
		})
		run(t, "Delimiter", true, func(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
			testVersionDelimiter(t, s, v, caps, true)
		})
	})
}

// listVersions collects a whole version listing, failing the test on an
// error.
func listVersions(t testing.TB, v store.Versioner, opts store.VersionListOptions) []store.VersionEntry {
	t.Helper()
	var out []store.VersionEntry
	for e, err := range v.ListVersions(t.Context(), opts) {
		if err != nil {
			t.Fatalf("ListVersions(%+v): %v", opts, err)
		}
		out = append(out, e)
	}
	return out
}

// row is what the suite compares of a VersionEntry: the key, and for a
// version its ETag (the bytes it names) or that it is a delete marker.
type row struct {
	key      string
	prefix   bool
	marker   bool
	latest   bool
	etag, id string
}

func (r row) String() string {
	switch {
	case r.prefix:
		return "P:" + quote(r.key)
	case r.marker:
		return fmt.Sprintf("%s:marker(latest=%t)", quote(r.key), r.latest)
	}
	return fmt.Sprintf("%s:%.8s(latest=%t)", quote(r.key), r.etag, r.latest)
}

// rows turns a listing into rows; withIDs keeps the version ids.
func rows(es []store.VersionEntry, withIDs bool) []row {
	out := make([]row, len(es))
	for i, e := range es {
		out[i] = row{key: e.Key, prefix: e.IsPrefix, marker: e.DeleteMarker, latest: e.IsLatest}
		if !e.IsPrefix && !e.DeleteMarker {
			out[i].etag = e.Info.ETag
		}
		if withIDs {
			out[i].id = e.Info.VersionID
		}
	}
	return out
}

// checkEntries asserts the fields every listed version must have.
func checkEntries(t testing.TB, opts store.VersionListOptions, es []store.VersionEntry) {
	t.Helper()
	seen := map[[2]string]bool{}
	for _, e := range es {
		if e.IsPrefix {
			continue
		}
		id := [2]string{e.Key, e.Info.VersionID}
		if e.Info.VersionID == "" || e.Info.Key != e.Key || e.Info.ModTime.IsZero() || seen[id] {
			t.Errorf("ListVersions(%+v): entry %s has version id %q (seen before: %t), Info.Key %s, ModTime %v",
				opts, quote(e.Key), e.Info.VersionID, seen[id], quote(e.Info.Key), e.Info.ModTime)
		}
		seen[id] = true
	}
}

func checkVersions(t testing.TB, v store.Versioner, opts store.VersionListOptions, want []row) []store.VersionEntry {
	t.Helper()
	got := listVersions(t, v, opts)
	checkEntries(t, opts, got)
	if g := rows(got, false); !slices.Equal(g, want) {
		t.Errorf("ListVersions(%+v)\n got %v\nwant %v", opts, g, want)
	}
	return got
}

func versionRow(key string, b []byte, latest bool) row {
	return row{key: key, etag: md5hex(b), latest: latest}
}

func readVersion(t testing.TB, v store.Versioner, key, id string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := v.ReadVersionRange(t.Context(), key, id, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// checkVersion asserts that version id of key holds want, by StatVersion
// and by reads of the whole and of ranges.
func checkVersion(t testing.TB, v store.Versioner, key, id string, want []byte) {
	t.Helper()
	info, err := v.StatVersion(t.Context(), key, id)
	if err != nil {
		t.Fatalf("StatVersion(%s, %s): %v", quote(key), id, err)
	}
	if info.Key != key || info.VersionID != id || info.Size != int64(len(want)) || info.ETag != md5hex(want) {
		t.Errorf("StatVersion(%s, %s) = key %s, version %s, size %d, ETag %s; want size %d, ETag %s",
			quote(key), id, quote(info.Key), info.VersionID, info.Size, info.ETag, len(want), md5hex(want))
	}
	n := int64(len(want))
	for _, r := range [][2]int64{{0, -1}, {0, n}, {1, 3}, {n / 2, -1}, {n - 1, 1}, {0, 0}, {n, -1}, {n, 5}} {
		got, err := readVersion(t, v, key, id, r[0], r[1])
		if err != nil {
			t.Errorf("ReadVersionRange(%s, %s, %d, %d): %v", quote(key), id, r[0], r[1], err)
			continue
		}
		end := n
		if r[1] >= 0 {
			end = min(n, r[0]+r[1])
		}
		if w := want[min(r[0], n):end]; !bytes.Equal(got, w) {
			t.Errorf("ReadVersionRange(%s, %s, %d, %d): %d bytes (md5 %s), want %d (md5 %s)",
				quote(key), id, r[0], r[1], len(got), md5hex(got), len(w), md5hex(w))
		}
	}
}

func wantNoSuchVersion(t testing.TB, v store.Versioner, key, id string) {
	t.Helper()
	_, err := v.StatVersion(t.Context(), key, id)
	wantErr(t, fmt.Sprintf("StatVersion(%s, %q)", quote(key), id), err, store.ErrNoSuchVersion)
	if _, ok := store.IsDeleteMarker(err); ok {
		t.Errorf("StatVersion(%s, %q): a delete marker, want no such version", quote(key), id)
	}
	_, err = readVersion(t, v, key, id, 0, -1)
	wantErr(t, fmt.Sprintf("ReadVersionRange(%s, %q)", quote(key), id), err, store.ErrNoSuchVersion)
}

func testVersioningOff(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	put(t, s, "k", []byte("x"), store.PutOptions{})
	st, err := v.NativeVersioning(t.Context())
	if err != nil || st != "" {
		t.Errorf(`NativeVersioning() of a bucket never versioned = %q, %v; want ""`, st, err)
	}
}

func testVersioningOn(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	st, err := v.NativeVersioning(t.Context())
	if err != nil || st != store.VersioningEnabled {
		t.Errorf("NativeVersioning() after enabling = %q, %v; want %q", st, err, store.VersioningEnabled)
	}
}

// testOneVersion: in a bucket without versioning a key has one version,
// its live object, which the Versioner reads and deletes by its id.
func testOneVersion(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	a, b := data(70, 1000), data(71, 3000)
	put(t, s, "one/k", a, store.PutOptions{})
	put(t, s, "one/k", b, store.PutOptions{Metadata: store.Metadata{ContentType: "text/x-b"}})
	es := checkVersions(t, v, store.VersionListOptions{Prefix: "one/"}, []row{versionRow("one/k", b, true)})
	if len(es) != 1 {
		t.FailNow()
	}
	id := es[0].Info.VersionID
	checkVersion(t, v, "one/k", id, b)
	if info, err := v.StatVersion(t.Context(), "one/k", id); err == nil && info.ContentType != "text/x-b" {
		t.Errorf("StatVersion: content type %q, want text/x-b", info.ContentType)
	}
	if err := v.DeleteVersion(t.Context(), "one/k", id); err != nil {
		t.Fatalf("DeleteVersion(one/k, %s): %v", id, err)
	}
	wantNotFound(t, s, "one/k")
	checkVersions(t, v, store.VersionListOptions{Prefix: "one/"}, nil)
	wantNoSuchVersion(t, v, "one/k", id)
	if err := v.DeleteVersion(t.Context(), "one/k", id); err != nil {
		t.Errorf("DeleteVersion of a deleted version: %v, want nil", err)
	}
}

// testUnknownIDUnversioned: ids a key does not have (a malformed one, one
// deleted) are ErrNoSuchVersion to reads and nothing to DeleteVersion.
func testUnknownIDUnversioned(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	put(t, s, "gone", []byte("gone"), store.PutOptions{})
	es := listVersions(t, v, store.VersionListOptions{Prefix: "gone"})
	if len(es) != 1 {
		t.Fatalf("ListVersions(gone): %d entries, want 1", len(es))
	}
	goneID := es[0].Info.VersionID
	if err := s.Delete(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", []byte("live"), store.PutOptions{})
	for _, id := range []string{"not-a-version-id", "0", "1234567890"} {
		wantNoSuchVersion(t, v, "k", id)
		if err := v.DeleteVersion(t.Context(), "k", id); err != nil {
			t.Errorf("DeleteVersion(k, %q): %v, want nil", id, err)
		}
	}
	wantNoSuchVersion(t, v, "gone", goneID)
	wantNoSuchVersion(t, v, "never", goneID)
	if err := v.DeleteVersion(t.Context(), "never", goneID); err != nil {
		t.Errorf("DeleteVersion(never, %q): %v, want nil", goneID, err)
	}
	checkObject(t, s, "k", []byte("live"))
}

// testThreeVersions: three writes of a key are three versions, newest
// first, only the newest latest, each readable (ranges too) by its id with
// its own metadata.
func testThreeVersions(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	vs := [][]byte{data(80, 10), data(81, 1000), data(82, 100)}
	var written []string
	for i, b := range vs {
		info := put(t, s, "v/obj", b, store.PutOptions{Metadata: store.Metadata{ContentType: fmt.Sprintf("text/x-%d", i)}})
		written = append(written, info.VersionID)
	}
	other := data(83, 7)
	put(t, s, "v/obj2", other, store.PutOptions{})
	es := checkVersions(t, v, store.VersionListOptions{Prefix: "v/obj"}, []row{
		versionRow("v/obj", vs[2], true), versionRow("v/obj", vs[1], false), versionRow("v/obj", vs[0], false),
		versionRow("v/obj2", other, true),
	})
	if len(es) != 4 {
		t.FailNow()
	}
	for i, e := range es[:3] {
		b := vs[2-i]
		if e.Info.Size != int64(len(b)) {
			t.Errorf("ListVersions: version %d of v/obj has size %d, want %d", i, e.Info.Size, len(b))
		}
		checkVersion(t, v, "v/obj", e.Info.VersionID, b)
		info, err := v.StatVersion(t.Context(), "v/obj", e.Info.VersionID)
		if want := fmt.Sprintf("text/x-%d", 2-i); err == nil && info.ContentType != want {
			t.Errorf("StatVersion(v/obj, %s): content type %q, want %q", e.Info.VersionID, info.ContentType, want)
		}
	}
	checkVersion(t, v, "v/obj2", es[3].Info.VersionID, other)
	checkObject(t, s, "v/obj", vs[2])
	// Put and Stat name the version they wrote and saw.
	for i, e := range es[:3] {
		if written[2-i] != e.Info.VersionID {
			t.Errorf("Put %d of v/obj answered version %q; the listing has %q", 2-i, written[2-i], e.Info.VersionID)
		}
	}
	if info, err := s.Stat(t.Context(), "v/obj"); err != nil || info.VersionID != es[0].Info.VersionID {
		t.Errorf("Stat(v/obj) = version %q, %v; want the latest, %q", info.VersionID, err, es[0].Info.VersionID)
	}
	// Exact prefixes and a prefix that is no key.
	checkVersions(t, v, store.VersionListOptions{Prefix: "v/obj2"}, []row{versionRow("v/obj2", other, true)})
	checkVersions(t, v, store.VersionListOptions{Prefix: "v/objx"}, nil)
	// Stopping early yields no more.
	n := 0
	for _, err := range v.ListVersions(t.Context(), store.VersionListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
}

// testDeleteVersion: DeleteVersion removes one version for good, an older
// one or the latest, and is idempotent.
func testDeleteVersion(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	vs := [][]byte{data(90, 11), data(91, 12), data(92, 13)}
	for _, b := range vs {
		put(t, s, "d/obj", b, store.PutOptions{})
	}
	es := listVersions(t, v, store.VersionListOptions{Prefix: "d/"})
	if len(es) != 3 {
		t.Fatalf("ListVersions(d/): %d entries, want 3", len(es))
	}
	ids := []string{es[2].Info.VersionID, es[1].Info.VersionID, es[0].Info.VersionID} // oldest first
	if err := v.DeleteVersion(t.Context(), "d/obj", ids[1]); err != nil {
		t.Fatalf("DeleteVersion(middle): %v", err)
	}
	wantNoSuchVersion(t, v, "d/obj", ids[1])
	if err := v.DeleteVersion(t.Context(), "d/obj", ids[1]); err != nil {
		t.Errorf("DeleteVersion(middle) again: %v, want nil", err)
	}
	checkVersions(t, v, store.VersionListOptions{Prefix: "d/"}, []row{versionRow("d/obj", vs[2], true), versionRow("d/obj", vs[0], false)})
	checkObject(t, s, "d/obj", vs[2])

	// The latest.
	if err := v.DeleteVersion(t.Context(), "d/obj", ids[2]); err != nil {
		t.Fatalf("DeleteVersion(latest): %v", err)
	}
	wantNoSuchVersion(t, v, "d/obj", ids[2])
	if caps.LatestFallsBack {
		checkVersions(t, v, store.VersionListOptions{Prefix: "d/"}, []row{versionRow("d/obj", vs[0], true)})
		checkObject(t, s, "d/obj", vs[0])
	} else {
		checkVersions(t, v, store.VersionListOptions{Prefix: "d/"}, []row{versionRow("d/obj", vs[0], false)})
		wantNotFound(t, s, "d/obj")
	}
	checkVersion(t, v, "d/obj", ids[0], vs[0])
	if err := v.DeleteVersion(t.Context(), "d/obj", ids[0]); err != nil {
		t.Fatalf("DeleteVersion(last one): %v", err)
	}
	checkVersions(t, v, store.VersionListOptions{Prefix: "d/"}, nil)
	wantNotFound(t, s, "d/obj")
}

// testDeleteLive: Delete of a versioned key's live object keeps its
// versions; with delete markers a marker becomes latest, and deleting the
// marker brings the object back.
func testDeleteLive(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	v1, v2 := data(100, 21), data(101, 22)
	put(t, s, "dl/obj", v1, store.PutOptions{})
	put(t, s, "dl/obj", v2, store.PutOptions{})
	markerID, err := v.DeleteCurrent(t.Context(), "dl/obj")
	if err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, "dl/obj")
	opts := store.VersionListOptions{Prefix: "dl/"}
	if !caps.DeleteMarkers {
		if markerID != "" {
			t.Errorf("DeleteCurrent = marker %q in a store without delete markers", markerID)
		}
		es := checkVersions(t, v, opts, []row{versionRow("dl/obj", v2, false), versionRow("dl/obj", v1, false)})
		if len(es) == 2 {
			checkVersion(t, v, "dl/obj", es[0].Info.VersionID, v2)
			checkVersion(t, v, "dl/obj", es[1].Info.VersionID, v1)
		}
		return
	}
	es := checkVersions(t, v, opts, []row{
		{key: "dl/obj", marker: true, latest: true}, versionRow("dl/obj", v2, false), versionRow("dl/obj", v1, false),
	})
	if len(es) != 3 {
		t.FailNow()
	}
	mid := es[0].Info.VersionID
	if markerID != mid {
		t.Errorf("DeleteCurrent = marker %q; the listing's marker is %q", markerID, mid)
	}
	_, err = s.Stat(t.Context(), "dl/obj")
	if dm, ok := store.IsDeleteMarker(err); !ok || dm.VersionID != mid || !dm.Latest {
		t.Errorf("Stat of a key under a delete marker = %v; want a *store.DeleteMarker, version %s, latest", err, mid)
	}
	_, err = v.StatVersion(t.Context(), "dl/obj", mid)
	wantErr(t, "StatVersion(delete marker)", err, store.ErrNotFound)
	if dm, ok := store.IsDeleteMarker(err); !ok || dm.Key != "dl/obj" || dm.VersionID != mid || !dm.Latest {
		t.Errorf("StatVersion(delete marker) = %v; want a *store.DeleteMarker of dl/obj, version %s, latest", err, mid)
	}
	if errors.Is(err, store.ErrNoSuchVersion) {
		t.Errorf("StatVersion(delete marker) = %v; a marker is a version, not ErrNoSuchVersion", err)
	}
	_, err = readVersion(t, v, "dl/obj", mid, 0, -1)
	if dm, ok := store.IsDeleteMarker(err); !ok || dm.VersionID != mid {
		t.Errorf("ReadVersionRange(delete marker) = %v; want a *store.DeleteMarker", err)
	}
	checkVersion(t, v, "dl/obj", es[1].Info.VersionID, v2)

	// A write after the marker: the marker is no longer latest.
	v3 := data(102, 23)
	put(t, s, "dl/obj", v3, store.PutOptions{})
	es2 := checkVersions(t, v, opts, []row{
		versionRow("dl/obj", v3, true), {key: "dl/obj", marker: true},
		versionRow("dl/obj", v2, false), versionRow("dl/obj", v1, false),
	})
	_, err = v.StatVersion(t.Context(), "dl/obj", mid)
	if dm, ok := store.IsDeleteMarker(err); !ok || dm.Latest {
		t.Errorf("StatVersion(older delete marker) = %v; want a *store.DeleteMarker, not latest", err)
	}
	if len(es2) == 4 {
		if err := v.DeleteVersion(t.Context(), "dl/obj", es2[0].Info.VersionID); err != nil {
			t.Fatal(err)
		}
	}
	wantNotFound(t, s, "dl/obj")
	if err := v.DeleteVersion(t.Context(), "dl/obj", mid); err != nil {
		t.Fatalf("DeleteVersion(delete marker): %v", err)
	}
	checkObject(t, s, "dl/obj", v2)
	checkVersions(t, v, opts, []row{versionRow("dl/obj", v2, true), versionRow("dl/obj", v1, false)})
}

// testUnknownIDVersioned: another key's version id, a malformed id and a
// deleted version are ErrNoSuchVersion; DeleteVersion of them does nothing.
func testUnknownIDVersioned(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities) {
	put(t, s, "u/k", []byte("one"), store.PutOptions{})
	put(t, s, "u/k", []byte("two"), store.PutOptions{})
	put(t, s, "u/other", []byte("other"), store.PutOptions{})
	es := listVersions(t, v, store.VersionListOptions{Prefix: "u/"})
	if len(es) != 3 {
		t.Fatalf("ListVersions(u/): %d entries, want 3", len(es))
	}
	otherID := es[2].Info.VersionID
	for _, id := range []string{otherID, "not-a-version-id"} {
		wantNoSuchVersion(t, v, "u/k", id)
		if err := v.DeleteVersion(t.Context(), "u/k", id); err != nil {
			t.Errorf("DeleteVersion(u/k, %q): %v, want nil", id, err)
		}
	}
	wantNoSuchVersion(t, v, "u/never", es[0].Info.VersionID)
	if err := v.DeleteVersion(t.Context(), "u/never", es[0].Info.VersionID); err != nil {
		t.Errorf("DeleteVersion(u/never): %v, want nil", err)
	}
	if err := v.DeleteVersion(t.Context(), "u/k", es[1].Info.VersionID); err != nil {
		t.Fatal(err)
	}
	wantNoSuchVersion(t, v, "u/k", es[1].Info.VersionID)
	checkVersions(t, v, store.VersionListOptions{Prefix: "u/"}, []row{
		versionRow("u/k", []byte("two"), true), versionRow("u/other", []byte("other"), true),
	})
}

// versionModel is what a test wrote: per key, its versions oldest first
// (nil bytes: a delete of the live object), in a bucket with or without
// versioning.
type versionModel struct {
	versioned bool
	caps      VersionCapabilities
	keys      map[string][][]byte
}

// rows is the listing the contract asks for under opts.
func (m versionModel) rows(opts store.VersionListOptions) []row {
	keys := make([]string, 0, len(m.keys))
	for k := range m.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []row
	lastPrefix := ""
	for _, k := range keys {
		rs := m.keyRows(k)
		if !strings.HasPrefix(k, opts.Prefix) || len(rs) == 0 {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if cp != lastPrefix && cp > opts.KeyMarker {
					out = append(out, row{key: cp, prefix: true})
				}
				lastPrefix = cp
				continue
			}
		}
		if k > opts.KeyMarker {
			out = append(out, rs...)
		}
	}
	return out
}

// keyRows are key's rows, newest first.
func (m versionModel) keyRows(key string) []row {
	vs := m.keys[key]
	if !m.versioned {
		if last := vs[len(vs)-1]; last != nil {
			return []row{versionRow(key, last, true)}
		}
		return nil
	}
	var out []row
	for i := len(vs) - 1; i >= 0; i-- {
		latest := i == len(vs)-1
		switch {
		case vs[i] != nil:
			out = append(out, versionRow(key, vs[i], latest))
		case m.caps.DeleteMarkers:
			out = append(out, row{key: key, marker: true, latest: latest})
		}
	}
	return out
}

// write applies the model's writes to s.
func (m versionModel) write(t *testing.T, s store.Store) {
	for k, vs := range m.keys {
		for _, b := range vs {
			if b == nil {
				if err := s.Delete(t.Context(), k); err != nil {
					t.Fatalf("Delete(%s): %v", quote(k), err)
				}
				continue
			}
			put(t, s, k, b, store.PutOptions{})
		}
	}
}

// testVersionPaging: paging with KeyMarker and VersionIDMarker set to the
// last row yielded (as the gateway does) yields every row once, resuming
// inside a key's versions too, with and without a delimiter.
func testVersionPaging(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities, versioned bool) {
	m := versionModel{versioned: versioned, caps: caps, keys: map[string][][]byte{}}
	n := caps.manyKeys()
	for i := range n {
		k := fmt.Sprintf("p/%02d/obj-%03d", i%5, i)
		if i%3 == 0 {
			k = fmt.Sprintf("p/top-%03d", i)
		}
		for j := range 1 + i%3 {
			m.keys[k] = append(m.keys[k], data(uint64(1000+10*i+j), 5+j))
		}
		if i%7 == 4 {
			m.keys[k] = append(m.keys[k], nil) // the live object deleted
		}
	}
	m.write(t, s)
	for _, base := range []store.VersionListOptions{{Prefix: "p/"}, {Prefix: "p/", Delimiter: "/"}, {Prefix: "p/0"}} {
		full := listVersions(t, v, base)
		checkEntries(t, base, full)
		if g, w := rows(full, false), m.rows(base); !slices.Equal(g, w) {
			t.Errorf("ListVersions(%+v)\n got %v\nwant %v", base, g, w)
			continue
		}
		want := rows(full, true)
		for _, size := range []int{1, 2, 5} {
			var paged []store.VersionEntry
			for page := 0; page <= len(full); page++ {
				o := base
				if len(paged) > 0 {
					last := paged[len(paged)-1]
					o.KeyMarker = last.Key
					if !last.IsPrefix {
						o.VersionIDMarker = last.Info.VersionID
					}
				}
				got := 0
				for e, err := range v.ListVersions(t.Context(), o) {
					if err != nil {
						t.Fatalf("ListVersions(%+v): %v", o, err)
					}
					paged = append(paged, e)
					if got++; got == size {
						break
					}
				}
				if got < size {
					break
				}
			}
			if g := rows(paged, true); !slices.Equal(g, want) {
				t.Errorf("ListVersions(%+v) paged by %d:\n got %v\nwant %v", base, size, g, want)
			}
		}
	}
	// A KeyMarker alone starts after every version of that key.
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m.keys {
			if len(m.keyRows(k)) > 0 && !yield(k) {
				return
			}
		}
	})
	for _, i := range []int{0, 1, len(keys) / 2, len(keys) - 1} {
		opts := store.VersionListOptions{Prefix: "p/", KeyMarker: keys[i]}
		checkVersions(t, v, opts, m.rows(opts))
	}
}

// testVersionDelimiter: common prefixes come once each, in key order, also
// for keys with only old versions (or delete markers), and a KeyMarker at
// or inside a common prefix starts after it, as List's StartAfter does.
func testVersionDelimiter(t *testing.T, s store.Store, v store.Versioner, caps VersionCapabilities, versioned bool) {
	m := versionModel{versioned: versioned, caps: caps, keys: map[string][][]byte{
		"d/a/1":     {data(110, 3), data(111, 4)},
		"d/a/2":     {data(112, 5)},
		"d/b":       {data(113, 6), data(114, 7)},
		"d/c/x/y":   {data(115, 8)},
		"d/e":       {data(116, 9), nil},
		"d/g/x":     {data(117, 10), nil},
		"d/h":       {data(118, 11)},
		"d/m--1":    {data(119, 12), data(120, 13)},
		"d/m--2/z":  {data(121, 14)},
		"d/m-":      {data(122, 15)},
		"d/n/--/x":  {data(123, 16)},
		"dz":        {data(124, 17)},
		"d/zz/last": {data(125, 18), data(126, 19)},
	}}
	m.write(t, s)
	for _, opts := range []store.VersionListOptions{
		{Prefix: "d/", Delimiter: "/"},
		{Delimiter: "/"},
		{Prefix: "d/a/", Delimiter: "/"},
		{Prefix: "d/", Delimiter: "/", KeyMarker: "d/a/"},
		{Prefix: "d/", Delimiter: "/", KeyMarker: "d/a/1"},
		{Prefix: "d/", Delimiter: "/", KeyMarker: "d/b"},
		{Prefix: "d/", Delimiter: "/", KeyMarker: "d/c"},
		{Prefix: "d/", Delimiter: "--"},
		{Prefix: "d/", Delimiter: "--", KeyMarker: "d/m--"},
		{Prefix: "d/m", Delimiter: "-"},
	} {
		checkVersions(t, v, opts, m.rows(opts))
	}
}
