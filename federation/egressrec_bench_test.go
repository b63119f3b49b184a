package federation_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/fedgate/fedgate/store"
)

// BenchmarkEgressOpenRead is the recorder's hot path: one GET of a small
// object from a store in another location than the region (Open,
// the bytes read through the counting reader, Close), cycling over one or
// many distinct objects; the last case reads in small Read calls (what
// is allocated per Read call shows in allocs/op).
func BenchmarkEgressOpenRead(b *testing.B) {
	for _, c := range []struct{ objects, size, buf int }{{1, 64 << 10, 32 << 10}, {1024, 64 << 10, 32 << 10}, {1, 4 << 20, 4 << 10}} {
		objects := c.objects
		b.Run(fmt.Sprintf("objects=%d/size=%d/buf=%d", c.objects, c.size, c.buf), func(b *testing.B) {
			ns := meterFixtureWith(b, nil, time.Now, 0)
			ctx := context.Background()
			bk, err := ns.Bucket("plain")
			if err != nil {
				b.Fatal(err)
			}
			data := bytes.Repeat([]byte("x"), c.size)
			infos := make([]store.ObjectInfo, objects)
			for i := range objects {
				key := fmt.Sprintf("train/part-%d/obj-%05d", i%8, i)
				if _, err := bk.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
				if infos[i], err = bk.Stat(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, c.buf)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				info := infos[i%objects]
				rc, err := bk.Open(ctx, info, 0, info.Size)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
