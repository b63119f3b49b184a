package azure

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/fedgate/fedgate/store"
)

// modelList is the listing the store contract asks for (as storetest's).
func modelList(keys []string, opts store.ListOptions) []string {
	keys = slices.Sorted(slices.Values(keys))
	var out []string
	last := ""
	for _, k := range keys {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if cp > opts.StartAfter && cp != last {
					out = append(out, "P:"+cp)
				}
				last = cp
				continue
			}
		}
		if k > opts.StartAfter {
			out = append(out, k)
		}
	}
	return out
}

func listAll(t *testing.T, s *Store, opts store.ListOptions, pageSize int) []string {
	t.Helper()
	var out []string
	for {
		n := 0
		for e, err := range s.List(t.Context(), opts) {
			if err != nil {
				t.Fatalf("List(%+v): %v", opts, err)
			}
			k := e.Key
			if e.IsPrefix {
				k = "P:" + k
			}
			out = append(out, k)
			if n++; n == pageSize {
				break
			}
		}
		if pageSize == 0 || n < pageSize {
			return out
		}
		opts.StartAfter = strings.TrimPrefix(out[len(out)-1], "P:")
	}
}

// TestListUTF16Order: Azurite lists by UTF-16 code units, so a name with a
// supplementary character (emoji) comes before one with U+E000-U+FFFF at
// the same place; List must still yield byte order, paged or not.
func TestListUTF16Order(t *testing.T) {
	s := newStore(t, nil)
	keys := []string{"\uE000x", "Ａ", "Ａ/b", "🙂", "🙂/a", "🙂/b", "a🙂", "a\uFFFD", "a\uE000/x",
		"a🙂/y", "a🙂🙂", "a🙂\uFFFD", "z", "a", "a/🙂", "a/\uFFFD", "b🙂c/d", "b\uFFFDc/d"}
	putAll(t, s, keys)
	for _, opts := range []store.ListOptions{
		{}, {Delimiter: "/"}, {Prefix: "a"}, {Prefix: "a", Delimiter: "/"}, {Delimiter: "c/"},
		{StartAfter: "a🙂"}, {StartAfter: "\uE000x"}, {Delimiter: "/", StartAfter: "a"}, {Delimiter: "🙂"},
	} {
		want := modelList(keys, opts)
		for _, ps := range []int{0, 1, 2, 3} {
			if got := listAll(t, s, opts, ps); !slices.Equal(got, want) {
				t.Errorf("List(%+v) in pages of %d:\n got %q\nwant %q", opts, ps, got, want)
			}
		}
	}
}

func putAll(t *testing.T, s *Store, keys []string) {
	t.Helper()
	for _, k := range keys {
		if _, err := s.Put(t.Context(), k, strings.NewReader(k), int64(len(k)), store.PutOptions{}); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
}

type countLists struct{ n *atomic.Int64 }

func (c countLists) Do(req *policy.Request) (*http.Response, error) {
	if req.Raw().URL.Query().Get("comp") == "list" {
		c.n.Add(1)
	}
	return req.Next()
}

// TestListResumes: paging as the gateway does (read one entry past the
// page, resume after the page's last entry) continues from the cached
// Azure marker instead of listing from the prefix again.
func TestListResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	var n atomic.Int64
	s := newStore(t, func(c *Config) { c.policies = []policy.Policy{countLists{&n}} })
	var keys []string
	for i := range 3500 {
		keys = append(keys, strings.Repeat("k", 1+i%3)+"/"+string(rune('a'+i%26))+strings.Repeat("x", i%7)+"-"+strconv.Itoa(i))
	}
	putAll(t, s, keys)
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: "kk/"}} {
		orig := opts
		n.Store(0)
		want := modelList(keys, opts)
		var got []string
		pages := 0
		for {
			var page []string
			for e, err := range s.List(t.Context(), opts) {
				if err != nil {
					t.Fatal(err)
				}
				k := e.Key
				if e.IsPrefix {
					k = "P:" + k
				}
				page = append(page, k)
				if len(page) == 301 { // 300 and one more, as the gateway does
					break
				}
			}
			pages++
			if len(page) < 301 {
				got = append(got, page...)
				break
			}
			got = append(got, page[:300]...)
			opts.StartAfter = strings.TrimPrefix(page[299], "P:")
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged listing: %d entries, want %d", len(got), len(want))
		}
		// Each S3 page costs at most two Azure pages (the one holding the
		// resume point and the next); listing from the prefix every time
		// would cost about pages^2/7.
		if max := int64(2*pages + 1); n.Load() > max {
			t.Errorf("List(%+v): %d S3 pages took %d Azure list requests, want <= %d", orig, pages, n.Load(), max)
		}
		t.Logf("List(%+v): %d S3 pages of 300, %d Azure list requests", orig, pages, n.Load())
	}
}
