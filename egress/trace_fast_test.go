package egress

import (
	"testing"
	"time"
)

// parseUTCFast agrees with time.Parse on every time it reads, reads the
// trace's common forms, and leaves the rest (dates that do not exist
// included) to time.Parse.
func TestParseUTCFastAgrees(t *testing.T) {
	for _, c := range []struct {
		s    string
		fast bool
	}{
		{"2026-11-02T08:00:00Z", true}, {"2026-11-02T08:00:00.25Z", true}, {"2026-11-02T08:00:00.123456789Z", true},
		{"2024-02-29T23:59:59Z", true}, {"0000-01-01T00:00:00Z", true},
		{"2026-02-29T00:00:00Z", false}, {"2026-11-31T00:00:00Z", false}, {"2026-13-01T00:00:00Z", false},
		{"2026-11-02T24:00:00Z", false}, {"2026-11-02T08:00:60Z", false}, {"2026-11-02T08:00:00.Z", false},
		{"2026-11-02T08:00:00.1234567891Z", false}, {"2026-11-02T08:00:00+01:00", false}, {"2026-11-02t08:00:00z", false},
	} {
		ft, ok := parseUTCFast(c.s)
		pt, err := time.Parse(time.RFC3339Nano, c.s)
		if ok != c.fast {
			t.Errorf("%s: read by the fast path %v, want %v", c.s, ok, c.fast)
		}
		if ok && (err != nil || !pt.Equal(ft)) {
			t.Errorf("%s: fast path %v, time.Parse %v (%v)", c.s, ft, pt, err)
		}
	}
}
