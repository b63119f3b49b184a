// Package bytesize writes byte counts for people, in the one unit system
// fedgate's CLI, logs and reports use for capacities and bytes moved: IEC
// binary units (KiB = 1024 B, MiB, GiB, TiB, PiB, EiB). Parsing sizes, which
// accepts both SI (GB = 10^9 B) and IEC units, is policies.ParseSize's.
// docs/units.md says which output uses what.
//
// A leaf package: it imports nothing of fedgate.
package bytesize

import (
	"fmt"
	"math"
)

var units = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Format writes n with two decimals in the largest IEC unit that keeps the
// number below 1024: 512 -> "512 B", 1536 -> "1.50 KiB", 3<<30 -> "3.00 GiB".
// Negative counts (differences) keep their sign.
func Format(n int64) string {
	if n > -1024 && n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range units {
		f /= 1024
		// 1023.995 would print as 1024.00: go on to the next unit.
		if math.Abs(f) < 1023.995 || u == units[len(units)-1] {
			return fmt.Sprintf("%.2f %s", f, u)
		}
	}
	return "" // not reached
}

// Rate writes a rate of bytes per second as Format does, with "/s".
func Rate(bytesPerSecond float64) string {
	return Format(int64(math.Round(bytesPerSecond))) + "/s"
}
