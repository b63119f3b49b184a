package cachetier

// etable is an open-addressing hash table of entries (linear probing,
// deletion by backward shift, no tombstones): one pointer per slot, kept
// between 3/8 and 3/4 full, so 11-21 bytes per entry where a Go map of
// keys to pointers costs far more. key gives an entry's 64-bit hash;
// several entries may share one (find's match tells them apart).
type etable struct {
	slots []*entry
	n     int
	key   func(*entry) uint64
}

// find returns the first entry with hash h for which match is true, or nil.
func (t *etable) find(h uint64, match func(*entry) bool) *entry {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; t.slots[i] != nil; i = (i + 1) & mask {
		if e := t.slots[i]; t.key(e) == h && match(e) {
			return e
		}
	}
	return nil
}

func (t *etable) insert(e *entry) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.put(e)
	t.n++
}

func (t *etable) put(e *entry) {
	mask := uint64(len(t.slots) - 1)
	i := t.key(e) & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = e
}

func (t *etable) grow() {
	old := t.slots
	t.slots = make([]*entry, max(16, 2*len(old)))
	for _, e := range old {
		if e != nil {
			t.put(e)
		}
	}
}

// remove takes e out of the table, if it is there.
func (t *etable) remove(e *entry) {
	if len(t.slots) == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	i := t.key(e) & mask
	for t.slots[i] != e {
		if t.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	// Shift back the entries after i whose home slot is not in (i, j].
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		home := t.key(t.slots[j]) & mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = nil
	t.n--
	if len(t.slots) > 16 && t.n*8 < len(t.slots) {
		t.shrink()
	}
}

func (t *etable) shrink() {
	old := t.slots
	t.slots = make([]*entry, len(old)/2)
	for _, e := range old {
		if e != nil {
			t.put(e)
		}
	}
}
