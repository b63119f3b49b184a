package placement

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

// FuzzDecodeManifest: a manifest is read from stores that anyone with the
// bucket's credentials can write to; decoding never panics, and what it
// accepts encodes back to a manifest that decodes the same.
func FuzzDecodeManifest(f *testing.F) {
	ctx := context.Background()
	var stores []store.Store
	for i := range 3 {
		s, err := posix.New("s"+string(rune('0'+i)), placementLoc, f.TempDir())
		if err != nil {
			f.Fatal(err)
		}
		stores = append(stores, s)
	}
	e, err := NewErasure("ec", placementLoc, stores, 2, 1, WithSegmentSize(4096), WithBlockSize(512), WithInlineLimit(16))
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 10, 1000, 9000} {
		body := bytes.Repeat([]byte{byte(n)}, n)
		if _, err := e.Put(ctx, "k", bytes.NewReader(body), int64(n), store.PutOptions{}); err != nil {
			f.Fatal(err)
		}
		rc, err := stores[0].ReadRange(ctx, "k", 0, -1, "")
		if err != nil {
			f.Fatal(err)
		}
		raw, _ := io.ReadAll(rc)
		rc.Close()
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, headerOnly := range []bool{true, false} {
			m, err := decodeManifest(raw, "k", headerOnly)
			if err != nil || headerOnly {
				continue
			}
			again, err := decodeManifest(m.encode(), "k", false)
			if err != nil {
				t.Fatalf("an accepted manifest does not decode after encoding: %v", err)
			}
			if again.Size != m.Size || len(again.Segments) != len(m.Segments) || again.Version != m.Version {
				t.Fatalf("re-decoded manifest differs: %+v vs %+v", again.header, m.header)
			}
			if len(m.Segments) > 0 {
				_ = m.segmentAt(m.Size - 1) // must not panic
			}
		}
	})
}
