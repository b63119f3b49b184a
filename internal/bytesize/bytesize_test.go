package bytesize

import (
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0:                     "0 B",
		1:                     "1 B",
		1023:                  "1023 B",
		1024:                  "1.00 KiB",
		1536:                  "1.50 KiB",
		1<<20 - 1:             "1.00 MiB", // 1023.999 KiB rounds up into the next unit
		10_000_000:            "9.54 MiB",
		73_000_000_000:        "67.99 GiB",
		201<<30 + 600<<20:     "201.59 GiB",
		3 << 40:               "3.00 TiB",
		-1536:                 "-1.50 KiB",
		-512:                  "-512 B",
		math.MaxInt64:         "8.00 EiB",
		5<<50 + 512<<40:       "5.50 PiB",
		1_500_000_000:         "1.40 GiB",
		1_000_000_000_000_000: "909.49 TiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRate(t *testing.T) {
	if got := Rate(1.5 * (1 << 20)); got != "1.50 MiB/s" {
		t.Errorf("Rate(1.5 MiB) = %q", got)
	}
	if got := Rate(0); got != "0 B/s" {
		t.Errorf("Rate(0) = %q", got)
	}
}
