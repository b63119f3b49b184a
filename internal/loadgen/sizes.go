package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/policies"
)

// Sizes is a distribution of object sizes: a weighted choice among sizes
// and ranges (a range draws log-uniformly between its ends, so 1KiB-1MiB
// gives as many objects between 1 and 32 KiB as between 32 KiB and 1 MiB).
type Sizes struct {
	spec    string
	choices []sizeChoice
	total   int
}

type sizeChoice struct {
	min, max int64
	weight   int
}

// ParseSizes reads a size distribution: a comma-separated list of SIZE or
// MIN-MAX, each with an optional :WEIGHT (default 1), sizes as in the
// policy file (16KiB, 1MiB, 1.5MB, 4096):
//
//	16KiB                  every object 16 KiB
//	4KiB,64KiB,1MiB        one of three, equally likely
//	16KiB:90,8MiB:10       90 % small, 10 % large
//	1KiB-1MiB              log-uniform between 1 KiB and 1 MiB
func ParseSizes(spec string) (Sizes, error) {
	s := Sizes{spec: strings.TrimSpace(spec)}
	if s.spec == "" {
		return Sizes{}, fmt.Errorf("empty size: want a size like 16KiB, a list like 4KiB,1MiB or a range like 1KiB-1MiB")
	}
	for part := range strings.SplitSeq(s.spec, ",") {
		part = strings.TrimSpace(part)
		c := sizeChoice{weight: 1}
		if v, w, ok := strings.Cut(part, ":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || n < 0 {
				return Sizes{}, fmt.Errorf("size %q: weight %q is not a whole number of 0 or more", part, w)
			}
			part, c.weight = strings.TrimSpace(v), n
		}
		lo, hi, isRange := strings.Cut(part, "-")
		var err error
		if c.min, err = policies.ParseSize(strings.TrimSpace(lo)); err != nil {
			return Sizes{}, err
		}
		c.max = c.min
		if isRange {
			if c.max, err = policies.ParseSize(strings.TrimSpace(hi)); err != nil {
				return Sizes{}, err
			}
			if c.min < 1 || c.max <= c.min {
				return Sizes{}, fmt.Errorf("size range %q: want MIN-MAX with 1 <= MIN < MAX", part)
			}
		}
		if c.max > MaxObjectSize {
			return Sizes{}, fmt.Errorf("size %q: larger than 5GiB, the most one PUT can send", part)
		}
		s.choices = append(s.choices, c)
		s.total += c.weight
	}
	if s.total == 0 {
		return Sizes{}, fmt.Errorf("sizes %q: every weight is 0", spec)
	}
	return s, nil
}

// MustSizes is ParseSizes for constants; it panics on an error.
func MustSizes(spec string) Sizes {
	s, err := ParseSizes(spec)
	if err != nil {
		panic(err)
	}
	return s
}

func (s Sizes) String() string { return s.spec }

func (s Sizes) n() int { return len(s.choices) }

// Max is the largest size s can draw.
func (s Sizes) Max() int64 {
	var m int64
	for _, c := range s.choices {
		if c.weight > 0 {
			m = max(m, c.max)
		}
	}
	return m
}

// Pick draws a size.
func (s Sizes) Pick(r *rand.Rand) int64 {
	n := r.IntN(s.total)
	for _, c := range s.choices {
		if n < c.weight {
			if c.min == c.max {
				return c.min
			}
			lo, hi := math.Log(float64(c.min)), math.Log(float64(c.max))
			v := int64(math.Round(math.Exp(lo + r.Float64()*(hi-lo))))
			return min(max(v, c.min), c.max)
		}
		n -= c.weight
	}
	panic("unreachable")
}

// Mix weighs the operations of mixed mode.
type Mix struct {
	Get, Put, Stat, Delete int
}

// DefaultMix is warp's mixed distribution.
var DefaultMix = Mix{Get: 45, Stat: 30, Put: 15, Delete: 10}

// ParseMix reads "get=45,stat=30,put=15,delete=10"; an operation left out
// has weight 0.
func ParseMix(spec string) (Mix, error) {
	var m Mix
	seen := map[string]bool{}
	for part := range strings.SplitSeq(spec, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if !ok || err != nil || n < 0 {
			return Mix{}, fmt.Errorf("mix %q: want OP=WEIGHT,... with OP one of get, put, stat, delete and WEIGHT a whole number, like get=45,stat=30,put=15,delete=10", spec)
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if seen[name] {
			return Mix{}, fmt.Errorf("mix %q: %s given twice", spec, name)
		}
		seen[name] = true
		switch name {
		case "get":
			m.Get = n
		case "put":
			m.Put = n
		case "stat", "head":
			m.Stat = n
		case "delete":
			m.Delete = n
		default:
			return Mix{}, fmt.Errorf("mix %q: unknown operation %q: want get, put, stat or delete", spec, name)
		}
	}
	if m.total() == 0 {
		return Mix{}, fmt.Errorf("mix %q: every weight is 0", spec)
	}
	return m, nil
}

func (m Mix) total() int { return m.Get + m.Put + m.Stat + m.Delete }

// String is the mix as percentages, largest first.
func (m Mix) String() string {
	type w struct {
		op Op
		n  int
	}
	ws := []w{{OpGet, m.Get}, {OpStat, m.Stat}, {OpPut, m.Put}, {OpDelete, m.Delete}}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].n > ws[j].n })
	var parts []string
	for _, x := range ws {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", x.op, 100*float64(x.n)/float64(m.total())))
		}
	}
	return strings.Join(parts, ", ")
}

// pick draws an operation.
func (m Mix) pick(r *rand.Rand) Op {
	n := r.IntN(m.total())
	for _, x := range []struct {
		op Op
		n  int
	}{{OpGet, m.Get}, {OpPut, m.Put}, {OpStat, m.Stat}, {OpDelete, m.Delete}} {
		if n < x.n {
			return x.op
		}
		n -= x.n
	}
	panic("unreachable")
}
