package regionstate

import (
	"iter"

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
