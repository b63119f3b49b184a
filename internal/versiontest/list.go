package versiontest

import (
	"fmt"
	"testing"
)

// listScenario fills a bucket with keys that exercise ListObjectVersions'
// order and roll-ups: versions and markers interleaved within a key, keys
// around a delimiter ("b-x" < "b/" < "b0"), a prefix whose only key is
// deleted ("gone/").
//
//	a       marker, v, v
//	b-x     v
//	b/1     v, marker, v
//	b/2     v
//	b/c/3   v
//	b0      marker, v, marker, v
//	gone/x  marker, v
func listScenario(t *testing.T, tg Target) *model {
	t.Helper()
	tg.enable(t)
	m := newModel()
	put := func(key string) {
		tg.putVersion(t, m, key, data(fmt.Sprint(key, len(m.keys[key])), 100+len(m.keys[key])))
	}
	put("a")
	put("b/1")
	put("a")
	tg.mark(t, m, "b/1")
	put("b-x")
	tg.mark(t, m, "a")
	put("b0")
	put("b/2")
	tg.mark(t, m, "b0")
	put("b0")
	put("b/1")
	put("b/c/3")
	put("gone/x")
	tg.mark(t, m, "b0")
	tg.mark(t, m, "gone/x")
	return m
}

// ListObjectVersions lists keys in ascending order and each key's versions
// and markers newest first, IsLatest on the newest only; Prefix filters,
// Delimiter rolls keys up into CommonPrefixes.
func testList(t *testing.T, tg Target) {
	m := listScenario(t, tg)
	for _, c := range []struct{ prefix, delim string }{
		{"", ""}, {"b/", ""}, {"b", ""}, {"zzz", ""}, {"", "/"}, {"b/", "/"}, {"b", "/"},
	} {
		tg.checkList(t, m, c.prefix, c.delim, 0)
	}
}

// Paging ListObjectVersions with MaxKeys through NextKeyMarker and
// NextVersionIdMarker yields exactly the unpaged listing, whether a page
// ends between two versions of one key, at a delete marker or at a key's
// last version.
func testListPaged(t *testing.T, tg Target) {
	m := listScenario(t, tg)
	for _, n := range []int32{1, 2, 3} {
		tg.checkListing(t, m, "", "", n, false)
	}
	tg.checkListing(t, m, "b/", "", 1, false)
	tg.optional(t, CapPagedIsLatest, func(t *testing.T) {
		// IsLatest is the key's newest version, also on a page that
		// starts in the middle of the key's versions.
		for _, n := range []int32{1, 2, 3} {
			tg.checkList(t, m, "", "", n)
		}
	})
	tg.optional(t, CapPagedDelimiter, func(t *testing.T) {
		// A page that ends at a common prefix continues after every key
		// under it.
		for _, n := range []int32{1, 2} {
			tg.checkListing(t, m, "", "/", n, false)
			tg.checkListing(t, m, "b", "/", n, false)
		}
	})
}

// ListObjectsV2 shows only keys whose newest version is an object: a key
// under a delete marker is not listed, nor a common prefix holding only
// such keys.
func testListObjects(t *testing.T, tg Target) {
	m := listScenario(t, tg)
	for _, c := range []struct{ prefix, delim string }{{"", ""}, {"b", "/"}, {"b/", "/"}, {"gone/", ""}} {
		tg.checkCurrent(t, m, c.prefix, c.delim)
	}
	tg.optional(t, CapHiddenPrefix, func(t *testing.T) {
		// "gone/" holds only a key under a delete marker: no prefix.
		tg.checkCurrent(t, m, "", "/")
	})
}
