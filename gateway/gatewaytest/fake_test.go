package gatewaytest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/store"
)

// listKeys renders a listing as "key" for objects and "key/" entries
// marked with a trailing "(p)" for common prefixes.
func listKeys(t *testing.T, b backend.Bucket, opts store.ListOptions) []string {
	t.Helper()
	var out []string
	for e, err := range b.List(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		if e.IsPrefix {
			out = append(out, e.Key+"(p)")
			continue
		}
		out = append(out, e.Key)
	}
	return out
}

func TestFakeList(t *testing.T) {
	f := New()
	f.AddBucket("bkt", backend.RootUser)
	for _, k := range []string{"a", "a/b", "a/c", "a0", "b/x/y", "b/z", "B", "é"} {
		f.PutObject("bkt", k, []byte(k), store.Metadata{})
	}
	b, err := f.Bucket("bkt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts store.ListOptions
		want []string
	}{
		{"all in byte order", store.ListOptions{}, []string{"B", "a", "a/b", "a/c", "a0", "b/x/y", "b/z", "é"}},
		{"prefix", store.ListOptions{Prefix: "a/"}, []string{"a/b", "a/c"}},
		{"delimiter", store.ListOptions{Delimiter: "/"}, []string{"B", "a", "a/(p)", "a0", "b/(p)", "é"}},
		{"prefix and delimiter", store.ListOptions{Prefix: "b/", Delimiter: "/"}, []string{"b/x/(p)", "b/z"}},
		{"start after key", store.ListOptions{StartAfter: "a/b"}, []string{"a/c", "a0", "b/x/y", "b/z", "é"}},
		// A prefix at or before StartAfter is not yielded again even though
		// keys folded into it sort after StartAfter.
		{"start after prefix", store.ListOptions{Delimiter: "/", StartAfter: "a/"}, []string{"a0", "b/(p)", "é"}},
		{"start after inside prefix", store.ListOptions{Delimiter: "/", StartAfter: "a/b"}, []string{"a0", "b/(p)", "é"}},
		{"multi-byte delimiter", store.ListOptions{Delimiter: "/x/"}, []string{"B", "a", "a/b", "a/c", "a0", "b/x/(p)", "b/z", "é"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listKeys(t, b, tc.opts); !slices.Equal(got, tc.want) {
				t.Errorf("List(%+v) = %q, want %q", tc.opts, got, tc.want)
			}
		})
	}
}

func TestFakeFail(t *testing.T) {
	f := New()
	f.AddBucket("bkt", backend.RootUser)
	b, _ := f.Bucket("bkt")
	f.Fail(OpPut, backend.ErrNoLeader)
	if _, err := b.Put(context.Background(), "k", strings.NewReader("x"), 1, store.PutOptions{}); !errors.Is(err, backend.ErrNoLeader) {
		t.Fatalf("Put with OpPut failing = %v, want ErrNoLeader", err)
	}
	f.Fail(OpPut, nil)
	info, err := b.Put(context.Background(), "k", strings.NewReader("x"), 1, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != "9dd4e461268c8034f5c8564e155c67a6" { // md5("x")
		t.Errorf("ETag = %q", info.ETag)
	}
	if _, err := b.Put(context.Background(), "k", strings.NewReader("xy"), 1, store.PutOptions{}); !errors.Is(err, store.ErrBodyTooLong) {
		t.Errorf("Put of a body longer than its size = %v, want ErrBodyTooLong", err)
	}
	f.Fail(OpList, store.ErrThrottled)
	var errs []error
	for _, err := range b.List(context.Background(), store.ListOptions{}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], store.ErrThrottled) {
		t.Errorf("List with OpList failing yields %v, want one ErrThrottled", errs)
	}
}
