package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// want is an expected List entry: a key, or a common prefix ending in "/".
type want struct {
	key      string
	isPrefix bool
}

func (w want) String() string {
	if w.isPrefix {
		return "P:" + quote(w.key)
	}
	return quote(w.key)
}

func objects(keys ...string) []want {
	out := make([]want, len(keys))
	for i, k := range keys {
		out[i] = want{key: k}
	}
	return out
}

// list collects a whole listing, failing the test on an error.
func list(t testing.TB, s store.Store, opts store.ListOptions) []store.Entry {
	t.Helper()
	var out []store.Entry
	for e, err := range s.List(t.Context(), opts) {
		if err != nil {
			t.Fatalf("List(%+v): %v", opts, err)
		}
		out = append(out, e)
	}
	return out
}

func asWant(es []store.Entry) []want {
	out := make([]want, len(es))
	for i, e := range es {
		out[i] = want{key: e.Key, isPrefix: e.IsPrefix}
	}
	return out
}

func checkList(t testing.TB, s store.Store, opts store.ListOptions, w []want) {
	t.Helper()
	got := list(t, s, opts)
	if g := asWant(got); !slices.Equal(g, w) {
		t.Errorf("List(%+v)\n got %v\nwant %v", opts, g, w)
	}
	for _, e := range got {
		if !e.IsPrefix && (e.Info.Key != e.Key || e.Info.ETag == "") {
			t.Errorf("List(%+v): entry %s has Info.Key %s, ETag %q", opts, quote(e.Key), quote(e.Info.Key), e.Info.ETag)
		}
	}
}

// model computes the listing the contract asks for: keys (sorted) with the
// prefix, after StartAfter, folded at the delimiter; a common prefix at or
// before StartAfter is left out.
func model(keys []string, opts store.ListOptions) []want {
	var out []want
	last := ""
	for _, k := range keys {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if cp > opts.StartAfter && cp != last {
					out = append(out, want{key: cp, isPrefix: true})
				}
				last = cp
				continue
			}
		}
		if k > opts.StartAfter {
			out = append(out, want{key: k})
		}
	}
	return out
}

// putAll stores every key (small bodies) with a few writers at once and
// returns the keys held, sorted: all of them, or with caps.PathKeys those
// not refused with ErrInvalidKey (of "a" and "a/b", the one written first).
func putAll(t testing.TB, s store.Store, keys []string, caps Capabilities) []string {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []string
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range next {
				_, err := s.Put(t.Context(), k, strings.NewReader(k), int64(len(k)), store.PutOptions{})
				switch {
				case err == nil:
					mu.Lock()
					held = append(held, k)
					mu.Unlock()
				case caps.PathKeys && errors.Is(err, store.ErrInvalidKey):
				default:
					t.Errorf("Put(%s): %v", quote(k), err)
				}
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.Sort(held)
	return held
}

var listKeys = []string{
	"a", "a/", "a/b", "a-b", "a.b", "a0", "ab", "A", "a b", "é", "b", "a/b/c", "a/b-c", "a/b/", "a/bc",
	"a//b", "a/a", "dir/", "dir/x", "dir/x/y", "dir/y", "dir-", "dir0", "~", "z/z/z/z",
	strings.Repeat("y", 239), strings.Repeat("y", 240), strings.Repeat("y", 240) + "/a",
	strings.Repeat("y", 240) + "-a", strings.Repeat("y", 240) + "a", strings.Repeat("y", 250) + "/",
	strings.Repeat("y", 300) + "/b/c", strings.Repeat("%", 100) + "/x", strings.Repeat("%", 80),
}

func runListTests(t *testing.T, newStore NewStore, caps Capabilities) {
	run := func(name string, f func(t *testing.T, s store.Store, caps Capabilities)) {
		t.Run(name, func(t *testing.T) { f(t, newStore(t), caps) })
	}
	run("ListOrder", testListOrder)
	run("ListDelimiter", testListDelimiter)
	run("ListStartAfterInsidePrefix", testListStartAfterInside)
	run("ListStopEarly", testListStopEarly)
	run("ListModel", testListModel)
	run("ListPaginate", testListPaginate)
}

func testListOrder(t *testing.T, s store.Store, caps Capabilities) {
	sorted := putAll(t, s, caps.keep(listKeys), caps)
	got := list(t, s, store.ListOptions{})
	checkList(t, s, store.ListOptions{}, objects(sorted...))
	pos := map[string]int{}
	for i, e := range got {
		pos[e.Key] = i
		if e.Info.Size != int64(len(e.Key)) || e.Info.ETag != md5hex([]byte(e.Key)) {
			t.Errorf("List entry %s: size %d, ETag %s; want %d, %s", quote(e.Key), e.Info.Size, e.Info.ETag,
				len(e.Key), md5hex([]byte(e.Key)))
		}
	}
	for _, p := range [][2]string{{"a-b", "a/b"}, {"a", "a/"}, {"a/", "a/b"}, {"a.b", "a/"}, {"a/b", "a/b-c"}, {"a/b-c", "a/b/"}} {
		_, ok0 := pos[p[0]]
		_, ok1 := pos[p[1]]
		if ok0 && ok1 && pos[p[0]] >= pos[p[1]] {
			t.Errorf("List: %q at %d, %q at %d; S3 byte order puts the first first", p[0], pos[p[0]], p[1], pos[p[1]])
		}
	}
	for _, p := range []string{"a", "a/", "a/b", "dir", "dir/", "y", "zz", "é", strings.Repeat("y", 240)} {
		checkList(t, s, store.ListOptions{Prefix: p}, model(sorted, store.ListOptions{Prefix: p}))
	}
}

func testListDelimiter(t *testing.T, s store.Store, caps Capabilities) {
	if caps.PathKeys {
		// Keys that are all file paths at once; the model says the rest.
		keys := putAll(t, s, []string{"a", "a-b", "d/b", "d/c/d", "a0", "b/x", "c"}, caps)
		for _, opts := range []store.ListOptions{{Delimiter: "/"}, {Prefix: "d/", Delimiter: "/"}, {Prefix: "b/", Delimiter: "/"},
			{Prefix: "a", Delimiter: "/", StartAfter: "a-b"}, {Delimiter: "-"}, {Delimiter: "c/"}} {
			checkList(t, s, opts, model(keys, opts))
		}
		return
	}
	putAll(t, s, []string{"a", "a-b", "a/b", "a/c/d", "a0", "b/", "b/x", "c"}, caps)
	checkList(t, s, store.ListOptions{Delimiter: "/"}, []want{
		{key: "a"}, {key: "a-b"}, {key: "a/", isPrefix: true}, {key: "a0"}, {key: "b/", isPrefix: true}, {key: "c"},
	})
	checkList(t, s, store.ListOptions{Prefix: "a/", Delimiter: "/"}, []want{
		{key: "a/b"}, {key: "a/c/", isPrefix: true},
	})
	checkList(t, s, store.ListOptions{Prefix: "b/", Delimiter: "/"}, objects("b/", "b/x"))
	checkList(t, s, store.ListOptions{Prefix: "a", Delimiter: "/", StartAfter: "a-b"}, []want{
		{key: "a/", isPrefix: true}, {key: "a0"},
	})
	// A delimiter other than "/".
	checkList(t, s, store.ListOptions{Delimiter: "-"}, []want{
		{key: "a"}, {key: "a-", isPrefix: true}, {key: "a/b"}, {key: "a/c/d"}, {key: "a0"}, {key: "b/"}, {key: "b/x"}, {key: "c"},
	})
	checkList(t, s, store.ListOptions{Delimiter: "c/"}, []want{
		{key: "a"}, {key: "a-b"}, {key: "a/b"}, {key: "a/c/", isPrefix: true}, {key: "a0"}, {key: "b/"}, {key: "b/x"}, {key: "c"},
	})
}

// testListStartAfterInside: a StartAfter inside a folded prefix leaves the
// prefix out (it sorts before StartAfter), and the listing goes on after it.
func testListStartAfterInside(t *testing.T, s store.Store, caps Capabilities) {
	putAll(t, s, []string{"x/1", "x/2", "x/3/4", "x0", "y"}, caps)
	opts := store.ListOptions{Delimiter: "/", StartAfter: "x/1"}
	checkList(t, s, opts, objects("x0", "y"))
	checkList(t, s, store.ListOptions{Delimiter: "/", StartAfter: "x/"}, objects("x0", "y"))
	checkList(t, s, store.ListOptions{Delimiter: "/", StartAfter: "x"}, []want{{key: "x/", isPrefix: true}, {key: "x0"}, {key: "y"}})
	checkList(t, s, store.ListOptions{Prefix: "x/", Delimiter: "/", StartAfter: "x/1"}, []want{{key: "x/2"}, {key: "x/3/", isPrefix: true}})
	checkList(t, s, store.ListOptions{StartAfter: "x/1"}, objects("x/2", "x/3/4", "x0", "y"))
	checkList(t, s, store.ListOptions{StartAfter: "x/3/4"}, objects("x0", "y"))
	checkList(t, s, store.ListOptions{StartAfter: "y"}, nil)
}

func testListStopEarly(t *testing.T, s store.Store, caps Capabilities) {
	putAll(t, s, []string{"a/1", "a/2", "b/1", "b/2", "c"}, caps)
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: "b/"}} {
		n := 0
		for _, err := range s.List(t.Context(), opts) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 2 {
				break // List must not yield again after this
			}
		}
		if n != 2 {
			t.Errorf("List(%+v) yielded %d entries before the break, want 2", opts, n)
		}
	}
	checkList(t, s, store.ListOptions{}, objects("a/1", "a/2", "b/1", "b/2", "c"))
}

// testListModel compares many prefix/delimiter/StartAfter combinations on
// tricky keys with the model.
func testListModel(t *testing.T, s store.Store, caps Capabilities) {
	keys := putAll(t, s, caps.keep(listKeys), caps)
	y240 := strings.Repeat("y", 240)
	prefixes := []string{"", "a", "a/", "a/b", "a-", "dir", "dir/", "é", "y", y240, y240 + "/", "zz", "a//", "%"}
	delims := []string{"", "/", "-", "b/", "//", "y"}
	afters := []string{"", "a", "a/", "a/b", "a/b/", "a-b", "a/a", "dir/", "dir/x", "dir/x/z", "~", "y", y240, y240 + "/", "b"}
	for _, p := range prefixes {
		for _, d := range delims {
			for _, a := range afters {
				opts := store.ListOptions{Prefix: p, Delimiter: d, StartAfter: a}
				if got, w := asWant(list(t, s, opts)), model(keys, opts); !slices.Equal(got, w) {
					t.Errorf("List(%+v)\n got %v\nwant %v", opts, got, w)
				}
			}
		}
	}
}

// testListPaginate: paging by StartAfter = last entry gives the same
// sequence as one listing, with and without a delimiter.
func testListPaginate(t *testing.T, s store.Store, caps Capabilities) {
	n := caps.manyKeys()
	keys := make([]string, 0, n)
	for i := range n {
		var k string
		switch i % 4 {
		case 0:
			k = fmt.Sprintf("g%d/%03d/obj-%d", i%7, i%13, i)
		case 1:
			k = fmt.Sprintf("g%d/%03d-%d", i%7, i%13, i)
		case 2:
			k = fmt.Sprintf("g%d/%03d/deep/er/%d", i%5, i%11, i)
		default:
			k = fmt.Sprintf("top-%05d", i)
		}
		keys = append(keys, k)
	}
	putAll(t, s, keys, caps)
	slices.Sort(keys)
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: "g1/", Delimiter: "/"}, {Prefix: "g2/0"}} {
		full := asWant(list(t, s, opts))
		if w := model(keys, opts); !slices.Equal(full, w) {
			t.Errorf("List(%+v): %d entries, want %d (first difference near %d)", opts, len(full), len(w), firstDiff(full, w))
			continue
		}
		var paged []want
		for page := 0; ; page++ {
			o := opts
			if len(paged) > 0 {
				o.StartAfter = paged[len(paged)-1].key
			}
			got := 0
			for e, err := range s.List(t.Context(), o) {
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, want{key: e.Key, isPrefix: e.IsPrefix})
				if got++; got == 97 {
					break
				}
			}
			if got < 97 || page > n {
				break
			}
		}
		if !slices.Equal(paged, full) {
			t.Errorf("List(%+v) paged by 97: %d entries, one listing %d (first difference near %d)",
				opts, len(paged), len(full), firstDiff(paged, full))
		}
	}
}

func firstDiff(a, b []want) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
