package azure

// Azure's listing order is not S3's. Azurite (checked: see
// TestListUTF16Order) lists names by UTF-16 code units, as .NET's ordinal
// comparison does, and the Blob service is assumed to do the same. That is
// byte (code point) order except where one name has a supplementary
// character (U+10000 and up, such as emoji: a surrogate pair, D800-DFFF)
// and the other a character of U+E000-U+FFFF at the first difference:
// UTF-16 puts the supplementary one first, UTF-8 bytes put it last.
//
// reorder restores byte order on the fly. A name without a supplementary
// character is never overtaken by a later one, so it is final when it
// arrives. A name whose first supplementary character is at byte i may be
// overtaken only by later names that share its first i bytes; it is held
// until the listing has left that prefix. So only names with supplementary
// characters are ever held, and only while names of their prefix that sort
// below them in bytes may still come.

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// heldEntry is one entry of a listing: a store.Entry for List, a key's
// versions for ListVersions.
type heldEntry[T any] struct {
	key    string
	v      T
	page   int    // sequence number of the Azure page it came on
	risk   string // the prefix later names must leave before it is final
	atRisk bool
}

type reorder[T any] struct {
	held []heldEntry[T] // in byte order
	last string         // the last name Azure listed
}

// riskOf returns the name's prefix before its first supplementary
// character, if it has one.
func riskOf(name string) (string, bool) {
	for i, r := range name {
		if r >= 0x10000 {
			return name[:i], true
		}
	}
	return "", false
}

// push takes the next entry, of key, in Azure's order, listed at name (the
// blob name a client-folded prefix came from).
func (o *reorder[T]) push(key string, v T, name string, page int) {
	risk, atRisk := riskOf(key)
	h := heldEntry[T]{key: key, v: v, page: page, risk: risk, atRisk: atRisk}
	i, _ := slices.BinarySearchFunc(o.held, key, func(h heldEntry[T], k string) int { return strings.Compare(h.key, k) })
	o.held = slices.Insert(o.held, i, h)
	o.last = name
}

// pop returns the smallest held entry if it is final. With end set (the
// listing is over), every entry is.
func (o *reorder[T]) pop(end bool) (heldEntry[T], bool) {
	if len(o.held) == 0 {
		return heldEntry[T]{}, false
	}
	h := o.held[0]
	if !end && h.atRisk && strings.HasPrefix(o.last, h.risk) {
		return heldEntry[T]{}, false
	}
	o.held = o.held[1:]
	return h, true
}

// oldestPage is the first page holding an entry not yet popped, or page.
func (o *reorder[T]) oldestPage(page int) int {
	for _, h := range o.held {
		page = min(page, h.page)
	}
	return page
}

// utf16Less reports whether a sorts before b by UTF-16 code units: the
// order in which Azure lists blobs and prefixes.
func utf16Less(a, b string) bool {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Unit(ra) < utf16Unit(rb) || utf16Unit(ra) == utf16Unit(rb) && ra < rb
		}
		a, b = a[na:], b[nb:]
	}
	return a == "" && b != ""
}

// utf16Unit is the first UTF-16 code unit of r.
func utf16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}
