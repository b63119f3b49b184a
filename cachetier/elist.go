package cachetier

// elist is a doubly linked list of entries threaded through the entries
// themselves (entry.links[which]), front: most recently used. Each entry is
// in two lists at a time, the whole cache's (which = allLinks) and its
// group's (grpLinks), so a chunk costs two pairs of pointers instead of two
// container/list elements (48 bytes each, plus an interface per element).
type elist struct {
	head, tail *entry
	n          int
	which      uint8
}

const (
	allLinks = 0
	grpLinks = 1
)

type links struct{ prev, next *entry }

func (l *elist) lk(e *entry) *links { return &e.links[l.which] }

func (l *elist) Len() int             { return l.n }
func (l *elist) Front() *entry        { return l.head }
func (l *elist) Back() *entry         { return l.tail }
func (l *elist) Next(e *entry) *entry { return l.lk(e).next }

// InsertBefore puts e before at (at nil: at the back).
func (l *elist) InsertBefore(e, at *entry) {
	k := l.lk(e)
	k.next = at
	if at == nil {
		k.prev = l.tail
		l.tail = e
	} else {
		ak := l.lk(at)
		k.prev = ak.prev
		ak.prev = e
	}
	if k.prev == nil {
		l.head = e
	} else {
		l.lk(k.prev).next = e
	}
	l.n++
}

func (l *elist) PushFront(e *entry) { l.InsertBefore(e, l.head) }
func (l *elist) PushBack(e *entry)  { l.InsertBefore(e, nil) }

// Remove takes e out of l; e must be in l.
func (l *elist) Remove(e *entry) {
	k := l.lk(e)
	if k.prev == nil {
		l.head = k.next
	} else {
		l.lk(k.prev).next = k.next
	}
	if k.next == nil {
		l.tail = k.prev
	} else {
		l.lk(k.next).prev = k.prev
	}
	*k = links{}
	l.n--
}

func (l *elist) MoveToFront(e *entry) {
	if l.head != e {
		l.Remove(e)
		l.PushFront(e)
	}
}

func (l *elist) MoveToBack(e *entry) {
	if l.tail != e {
		l.Remove(e)
		l.PushBack(e)
	}
}
