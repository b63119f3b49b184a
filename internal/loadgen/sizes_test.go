package loadgen

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		max      int64
		possible []int64 // every value Pick may return (nil: a range)
	}{
		{"16KiB", 16 << 10, []int64{16 << 10}},
		{"4096", 4096, []int64{4096}},
		{"1.5MB", 1_500_000, []int64{1_500_000}},
		{" 4KiB, 64KiB ,1MiB", 1 << 20, []int64{4 << 10, 64 << 10, 1 << 20}},
		{"16KiB:90,8MiB:10", 8 << 20, []int64{16 << 10, 8 << 20}},
		{"1KiB:0,2KiB", 2 << 10, []int64{2 << 10}},
		{"0", 0, []int64{0}},
		{"1KiB-1MiB", 1 << 20, nil},
	} {
		s, err := ParseSizes(tc.spec)
		if err != nil {
			t.Fatalf("ParseSizes(%q): %v", tc.spec, err)
		}
		if s.Max() != tc.max {
			t.Errorf("ParseSizes(%q).Max() = %d, want %d", tc.spec, s.Max(), tc.max)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			v := s.Pick(r)
			if tc.possible == nil {
				if v < 1<<10 || v > 1<<20 {
					t.Fatalf("%q picked %d, outside the range", tc.spec, v)
				}
				continue
			}
			ok := false
			for _, p := range tc.possible {
				ok = ok || v == p
			}
			if !ok {
				t.Fatalf("%q picked %d, want one of %v", tc.spec, v, tc.possible)
			}
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"", "empty size"},
		{"16KB:x", "weight"},
		{"16QiB", "unknown size unit"},
		{"1MiB-1KiB", "1 <= MIN < MAX"},
		{"0-1KiB", "1 <= MIN < MAX"},
		{"6GiB", "5GiB"},
		{"1KiB:0", "every weight is 0"},
	} {
		if _, err := ParseSizes(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSizes(%q) = %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}

// Weights and the log-uniform range draw what they say.
func TestSizesDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := MustSizes("16KiB:90,8MiB:10")
	large := 0
	const n = 20000
	for range n {
		if s.Pick(r) == 8<<20 {
			large++
		}
	}
	if frac := float64(large) / n; frac < 0.08 || frac > 0.12 {
		t.Errorf("8MiB drawn %.3f of the time, want about 0.10", frac)
	}
	// Log-uniform over 1 KiB..1 MiB: half the draws below 32 KiB.
	s = MustSizes("1KiB-1MiB")
	below := 0
	for range n {
		if s.Pick(r) < 32<<10 {
			below++
		}
	}
	if frac := float64(below) / n; frac < 0.46 || frac > 0.54 {
		t.Errorf("%.3f of the draws below 32KiB, want about 0.5 (log-uniform)", frac)
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix("get=45, stat=30,put=15,delete=10")
	if err != nil || m != DefaultMix {
		t.Fatalf("ParseMix = %+v, %v; want %+v", m, err, DefaultMix)
	}
	if got := m.String(); got != "get 45%, stat 30%, put 15%, delete 10%" {
		t.Errorf("String() = %q", got)
	}
	m, err = ParseMix("head=1,get=3")
	if err != nil || m != (Mix{Get: 3, Stat: 1}) {
		t.Fatalf("ParseMix(head=1,get=3) = %+v, %v", m, err)
	}
	counts := map[Op]int{}
	r := rand.New(rand.NewPCG(5, 6))
	for range 8000 {
		counts[m.pick(r)]++
	}
	if counts[OpPut] != 0 || counts[OpDelete] != 0 || counts[OpGet] < 5600 || counts[OpGet] > 6400 {
		t.Errorf("picks %v: want about 6000 get, 2000 stat, nothing else", counts)
	}
	for _, tc := range []struct{ spec, want string }{
		{"get=1,list=2", "unknown operation"},
		{"get", "OP=WEIGHT"},
		{"get=-1", "OP=WEIGHT"},
		{"get=1,get=2", "twice"},
		{"get=0,put=0", "every weight is 0"},
	} {
		if _, err := ParseMix(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMix(%q) = %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}

// An object's body is exactly its size, the block from its salt on
// (wrapping around), and rewinds for a resend.
func TestBody(t *testing.T) {
	size := int64(blockSize + 1000)
	b := newBody(size, blockSize-10)
	got, err := io.ReadAll(b)
	if err != nil || int64(len(got)) != size {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, size)
	}
	data := block()
	if !bytes.Equal(got[:10], data[blockSize-10:]) || !bytes.Equal(got[10:20], data[:10]) {
		t.Fatal("the body does not start at its salt and wrap around the block")
	}
	if n, err := b.Seek(0, io.SeekEnd); n != size || err != nil {
		t.Fatalf("Seek(0, end) = %d, %v", n, err)
	}
	if _, err := b.Seek(5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	again, _ := io.ReadAll(b)
	if !bytes.Equal(again, got[5:]) {
		t.Fatal("a rewound body reads other bytes")
	}
	if n, _ := io.ReadAll(newBody(0, 7)); len(n) != 0 {
		t.Fatalf("an empty body read %d bytes", len(n))
	}
}
