package main

import (
	"io"
	"testing"

	"github.com/fedgate/fedgate/adminapi"
)

// The preload bar while the job's totals are unknown, then known: its
// count is the bytes cached, never a sum of every update (a spinner's
// count stayed 0 and its byte count added up each update, so the bar sat
// at "0 B" and ended at rates like 5.7 TiB/s).
func TestPreloadBarCountsTheBytesCached(t *testing.T) {
	b := newBarProgress(io.Discard)
	for i := range int64(5) {
		b.update(adminapi.Job{Objects: i, Bytes: (i + 1) << 20})
	}
	if st := b.bar.State(); st.CurrentNum != 0 || st.CurrentBytes != 0 {
		t.Fatalf("spinner state = %+v, want nothing counted until the totals are known", st)
	}
	b.update(adminapi.Job{Objects: 6, Bytes: 6 << 20, TotalObjects: 20, TotalBytes: 20 << 20})
	b.update(adminapi.Job{Objects: 7, Bytes: 7 << 20, TotalObjects: 20, TotalBytes: 20 << 20})
	if st := b.bar.State(); st.CurrentNum != 7<<20 || int64(st.CurrentBytes) != 7<<20 || st.Max != 20<<20 {
		t.Fatalf("bar state = %+v, want 7 MiB of 20 MiB", st)
	}
}
