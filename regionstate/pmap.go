package regionstate

import (
	"iter"
	"slices"

	"github.com/benbjohnson/immutable"
)

// pmap is a persistent map from string: set and del return a new map that
// shares all but O(log n) of its nodes with the old one (a hash array
// mapped trie), and never change the old one. A batch's write to a table
// of the catalog therefore costs O(log n) whatever the table's size, and
// readers holding an older catalog keep seeing their version.
type pmap[V any] struct{ m *immutable.Map[string, V] }

func newPMap[V any]() pmap[V] {
	return pmap[V]{immutable.NewMap[string, V](immutable.NewHasher(""))}
}

func (p pmap[V]) get(k string) (V, bool) { return p.m.Get(k) }

func (p pmap[V]) has(k string) bool {
	_, ok := p.m.Get(k)
	return ok
}

func (p pmap[V]) set(k string, v V) pmap[V] { return pmap[V]{p.m.Set(k, v)} }

func (p pmap[V]) del(k string) pmap[V] { return pmap[V]{p.m.Delete(k)} }

// all yields every entry, in no particular order.
func (p pmap[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for it := p.m.Iterator(); !it.Done(); {
			k, v, _ := it.Next()
			if !yield(k, v) {
				return
			}
		}
	}
}

// spmap is a persistent map from string kept sorted by key (a B+tree whose
// set and del copy O(log n) nodes): from yields the entries from a key on
// in key order, so a page of a listing costs O(log n + page).
type spmap[V any] struct {
	m *immutable.SortedMap[string, V]
}

func newSPMap[V any]() spmap[V] {
	return spmap[V]{immutable.NewSortedMap[string, V](immutable.NewComparer(""))}
}

func (p spmap[V]) get(k string) (V, bool) { return p.m.Get(k) }

func (p spmap[V]) len() int { return p.m.Len() }

func (p spmap[V]) set(k string, v V) spmap[V] { return spmap[V]{p.m.Set(k, v)} }

func (p spmap[V]) del(k string) spmap[V] { return spmap[V]{p.m.Delete(k)} }

// from yields the entries whose key is >= k, in key order. The zero
// spmap yields nothing.
func (p spmap[V]) from(k string) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if p.m == nil {
			return
		}
		it := p.m.Iterator()
		it.Seek(k)
		for !it.Done() {
			k, v, _ := it.Next()
			if !yield(k, v) {
				return
			}
		}
	}
}

// all yields every entry in key order.
func (p spmap[V]) all() iter.Seq2[string, V] { return p.from("") }

// len is the number of entries.
func (p pmap[V]) len() int { return p.m.Len() }

// keys returns the keys, sorted.
func (p pmap[V]) keys() []string {
	out := make([]string, 0, p.m.Len())
	for k := range p.all() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
