package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// BigDirKeys returns the keys of a large flat directory under prefix
// (n numbered keys) mixed with keys whose bytes sort differently from
// common on-disk encodings (a control byte escaped as %XX sorts before
// "!" as a key but after it as a name; "a/" sorts after "a-" as a key
// but a directory "a" before a file "a-"), and a few nested keys.
//
// With tree set, keys a file tree cannot hold (a key that is also a
// directory of others, a key ending in "/") are left out.
func BigDirKeys(prefix string, n int, tree bool) []string {
	keys := make([]string, 0, n+16)
	for i := range n {
		keys = append(keys, fmt.Sprintf("%ss%05d", prefix, i))
	}
	for _, k := range []string{"a", "a\x01", "a!", "a%", "a%25", "a-", "a/b", "a/c/d", "a0", "s00100/x", "s00100-", "s0010", "z/"} {
		keys = append(keys, prefix+k)
	}
	slices.Sort(keys)
	if tree {
		all := slices.Clone(keys)
		keys = slices.DeleteFunc(keys, func(k string) bool {
			if strings.HasSuffix(k, "/") {
				return true
			}
			i, _ := slices.BinarySearch(all, k+"/")
			return i < len(all) && strings.HasPrefix(all[i], k+"/")
		})
	}
	return keys
}

// PutKeys writes keys (each key's bytes as its body).
func PutKeys(t testing.TB, s store.Store, keys []string) {
	t.Helper()
	for _, k := range keys {
		if _, err := s.Put(t.Context(), k, bytes.NewReader([]byte(k)), int64(len(k)), store.PutOptions{}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
}

// ListPages lists opts in pages of size entries, each page a new List call
// with StartAfter set to the last entry of the one before, as the gateway
// pages ListObjectsV2; between pages it calls between(page) when set.
func ListPages(t testing.TB, s store.Store, opts store.ListOptions, size int, between func(page int, last string)) []store.Entry {
	t.Helper()
	var out []store.Entry
	for page := 0; ; page++ {
		n := 0
		for e, err := range s.List(t.Context(), opts) {
			if err != nil {
				t.Fatalf("list %+v: %v", opts, err)
			}
			out = append(out, e)
			if n++; n == size {
				break
			}
		}
		if n < size {
			return out
		}
		opts.StartAfter = out[len(out)-1].Key
		if between != nil {
			between(page, opts.StartAfter)
		}
	}
}

// Expected returns what a listing of keys selected by opts holds, in S3
// order (the model List is checked against).
func Expected(keys []string, opts store.ListOptions) []store.Entry {
	keys = slices.Sorted(slices.Values(keys))
	var out []store.Entry
	last := ""
	for _, k := range keys {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if cp > opts.StartAfter && cp != last {
					out = append(out, store.Entry{Key: cp, IsPrefix: true})
					last = cp
				}
				continue
			}
		}
		if k > opts.StartAfter {
			out = append(out, store.Entry{Key: k})
		}
	}
	return out
}

// SameEntries fails t when got and want differ in keys, kinds or order.
func SameEntries(t testing.TB, what string, got, want []store.Entry) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Fatalf("%s: %d entries, want %d; first missing %q", what, len(got), len(want), want[i].Key)
		case i >= len(want):
			t.Fatalf("%s: %d entries, want %d; first extra %q", what, len(got), len(want), got[i].Key)
		case got[i].Key != want[i].Key || got[i].IsPrefix != want[i].IsPrefix:
			t.Fatalf("%s: entry %d is %q (prefix %v), want %q (prefix %v)", what, i, got[i].Key, got[i].IsPrefix, want[i].Key, want[i].IsPrefix)
		}
	}
}

// BigDirQueries checks listings of keys (already in s) against the model
// for prefixes on and off directory boundaries, with and without a
// delimiter, from StartAfter values inside the listing, paged by 7 and by
// 500.
func BigDirQueries(t *testing.T, s store.Store, prefix string, keys []string) {
	rng := rand.New(rand.NewPCG(40, 40))
	prefixes := []string{"", prefix, prefix + "a", prefix + "s000", prefix + "s001", prefix + "a/", prefix + "zz", strings.TrimSuffix(prefix, "/")}
	for _, p := range prefixes {
		for _, d := range []string{"", "/", "0"} {
			afters := []string{"", prefix + "a!", prefix + "s00100", prefix + "s00100/", prefix + "a/b", keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))] + "\x00"}
			for _, a := range afters {
				opts := store.ListOptions{Prefix: p, Delimiter: d, StartAfter: a}
				want := Expected(keys, opts)
				for _, size := range []int{7, 500} {
					if size == 7 && len(want) > 200 {
						continue // the 500 pages cover it; 7 is for the short ones
					}
					got := ListPages(t, s, opts, size, nil)
					SameEntries(t, fmt.Sprintf("%+q by %d", opts, size), got, want)
				}
			}
		}
	}
}

// ChangingListing lists prefix (holding keys, in s) in pages of 100 while
// add and del change it between pages: a key added before the cursor, one
// added after it, the cursor's own key deleted, a key added just after the
// cursor. Every key present for the whole listing must come exactly once
// and in order, the keys added after the cursor too (the store re-reads a
// changed directory), the ones added before it not at all.
func ChangingListing(t *testing.T, s store.Store, prefix string, keys []string, add, del func(key string)) {
	t.Helper()
	var added []string
	got := ListPages(t, s, store.ListOptions{Prefix: prefix}, 100, func(page int, last string) {
		switch page {
		case 0:
			add(prefix + "a1") // before the cursor: not listed
			after := prefix + "s00500x"
			add(after)
			added = append(added, after)
		case 2:
			del(last) // already listed; StartAfter need not exist
		case 4:
			next := last + "0"
			add(next)
			added = append(added, next)
		}
	})
	want := Expected(append(slices.Clone(keys), added...), store.ListOptions{Prefix: prefix})
	SameEntries(t, "listing changed between pages", got, want)
}
