package cachetier

import "fmt"

// Priority is a group's eviction class. Making room evicts the least
// recently used chunk of the lowest class that has one; a fill for a group
// evicts only chunks of its class or lower, so a scan of a low-priority
// bucket never pushes a high-priority one out (it runs uncached when only
// higher classes are left to evict). Pinned chunks are never evicted.
type Priority int8

// The priorities; the zero value leaves a group's class as it is.
const (
	PriorityUnset Priority = iota
	PriorityLow
	PriorityNormal
	PriorityHigh
)

const numClasses = 3

// class is the index into the per-class LRU lists (unset is normal).
func (p Priority) class() int {
	if p < PriorityLow || p > PriorityHigh {
		return int(PriorityNormal) - 1
	}
	return int(p) - 1
}

func (p Priority) String() string {
	switch p {
	case PriorityUnset:
		return "unset"
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	case PriorityHigh:
		return "high"
	}
	return fmt.Sprintf("Priority(%d)", int8(p))
}

// groupOf returns the group of opts, creating it, with its quota and
// priority updated from opts.
func (c *Cache) groupOf(opts *ReadOptions) *group {
	g := c.groupLocked(opts.Group, opts.GroupQuota)
	if opts.GroupPriority != PriorityUnset {
		c.setClassLocked(g, opts.GroupPriority.class())
	}
	return g
}

// SetPriority sets group's eviction class now (say, when a policy that
// changes it is applied, or at start before the first read), moving its
// cached chunks to that class.
func (c *Cache) SetPriority(group string, p Priority) {
	if p == PriorityUnset {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setClassLocked(c.groupLocked(group, -1), p.class())
}
