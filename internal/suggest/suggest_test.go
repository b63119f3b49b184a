package suggest

import "testing"

func TestClosest(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"bukcet", "bucket"},
		{"BUCKET", "bucket"},
		{"s4", "s3"},
		{"zzzzzz", ""},
		{"a", ""},
	} {
		if got := Closest(tc.s, []string{"bucket", "s3", "region"}); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance = %d, want 3", d)
	}
}
