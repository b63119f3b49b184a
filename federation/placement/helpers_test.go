package placement

import (
	"context"
	"errors"
	"io"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// swappable is a store whose inner store a test can replace, as an
// operator replaces a dead disk or server with an empty one.
type swappable struct {
	name  string
	loc   policies.Location
	inner atomic.Pointer[store.Store]
}

func newSwappable(s store.Store) *swappable {
	w := &swappable{name: s.Name(), loc: s.Location()}
	w.inner.Store(&s)
	return w
}

func (w *swappable) swap(s store.Store) { w.inner.Store(&s) }
func (w *swappable) get() store.Store   { return *w.inner.Load() }

func (w *swappable) Name() string                { return w.name }
func (w *swappable) Location() policies.Location { return w.loc }
func (w *swappable) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	return w.get().Stat(ctx, key)
}
func (w *swappable) ReadRange(ctx context.Context, key string, off, n int64, v store.Validator) (io.ReadCloser, error) {
	return w.get().ReadRange(ctx, key, off, n, v)
}
func (w *swappable) Put(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return w.get().Put(ctx, key, r, size, opts)
}
func (w *swappable) Delete(ctx context.Context, key string) error { return w.get().Delete(ctx, key) }
func (w *swappable) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return w.get().List(ctx, opts)
}

// listKeys collects a listing as "key" and "P:prefix" strings.
func listKeys(t testing.TB, s store.Store, opts store.ListOptions) []string {
	t.Helper()
	var out []string
	for e, err := range s.List(t.Context(), opts) {
		if err != nil {
			t.Fatalf("List(%+v): %v", opts, err)
		}
		if e.IsPrefix {
			out = append(out, "P:"+e.Key)
		} else {
			out = append(out, e.Key)
		}
	}
	return out
}

// listModel is the listing the store contract asks for over keys.
func listModel(keys []string, opts store.ListOptions) []string {
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

// storedBytes sums the sizes of the objects in s (all of them, shards and
// manifests included), and counts them.
func storedBytes(t testing.TB, s store.Store, prefix string) (total int64, n int) {
	t.Helper()
	for e, err := range s.List(t.Context(), store.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatalf("List(%s): %v", s.Name(), err)
		}
		total += e.Info.Size
		n++
	}
	return total, n
}

// shardLocations returns every (store, shard key) the manifest of key
// names, read from the placement.
func shardLocations(t testing.TB, e *Erasure, key string) [][2]string {
	t.Helper()
	m, err := e.loadManifest(t.Context(), "test", key, false)
	if err != nil {
		t.Fatalf("manifest of %s: %v", key, err)
	}
	var out [][2]string
	for _, s := range m.Segments {
		for j, st := range s.Stores {
			out = append(out, [2]string{m.Stores[st], shardKey(keyHash(key), s.Set, s.Index, j)})
		}
	}
	return out
}

// checkAllShards asserts that every shard and every manifest of keys is in
// its store.
func checkAllShards(t testing.TB, e *Erasure, keys []string) {
	t.Helper()
	byName := map[string]store.Store{}
	for _, s := range e.stores {
		byName[s.Name()] = s
	}
	for _, key := range keys {
		for _, s := range e.stores {
			info, err := s.Stat(t.Context(), key)
			if err != nil {
				t.Errorf("manifest of %s in %s: %v", key, s.Name(), err)
				continue
			}
			if _, ok := isManifest(info); !ok {
				t.Errorf("%s in %s is not a manifest", key, s.Name())
			}
		}
		for _, loc := range shardLocations(t, e, key) {
			if _, err := byName[loc[0]].Stat(t.Context(), loc[1]); err != nil {
				t.Errorf("shard %s of %s in %s: %v", loc[1], key, loc[0], err)
			}
		}
	}
}

func wantErrIs(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}
