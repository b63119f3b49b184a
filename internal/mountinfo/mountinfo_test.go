package mountinfo

import "testing"

func TestFSType(t *testing.T) {
	if typ, ok := FSType("/proc"); !ok || typ != "proc" {
		t.Errorf("FSType(/proc) = %q, %v; want proc", typ, ok)
	}
	if typ, ok := FSType("/proc/self"); ok {
		t.Errorf("FSType(/proc/self) = %q, %v; want nothing mounted there", typ, ok)
	}
}
