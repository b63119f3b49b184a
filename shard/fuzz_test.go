package shard

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// fuzzIndex builds an index of data as format f and reads every member:
// nothing may panic, a built index names members inside the shard, and a
// member read either fails or yields exactly its size.
func fuzzIndex(t *testing.T, f Format, data []byte) {
	s := &memShard{b: data}
	ix, err := Build(context.Background(), f, int64(len(data)), s.rr)
	if err != nil {
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: an error other than ErrFormat: %v", f, err)
		}
		return
	}
	for _, m := range ix.Members() {
		if f != TarGz && (m.Offset < 0 || m.Offset > int64(len(data))) {
			t.Fatalf("member %q at %d outside %d bytes", m.Name, m.Offset, len(data))
		}
		got, err := ix.Lookup(m.Name)
		if err != nil {
			continue // unsupported, or a duplicate's earlier copy
		}
		if got.Size > 64<<20 {
			continue
		}
		rc, err := ix.Open(context.Background(), got, s.rr, 0, -1)
		if err != nil {
			continue
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil && n != got.Size {
			t.Fatalf("member %q: read %d bytes without error, size %d", got.Name, n, got.Size)
		}
	}
}

func FuzzTarIndex(f *testing.F) {
	f.Add(makeTar(f, webdataset(3, 100), nil))
	f.Add(makeTar(f, []file{{"./a", []byte("x")}, {strings.Repeat("n", 300) + "long", []byte("y")}}, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzIndex(t, Tar, data)
		fuzzIndex(t, TarGz, data)
	})
}

func FuzzZipIndex(f *testing.F) {
	f.Add(makeZip(f, webdataset(3, 100), zip.Deflate))
	f.Add(makeZip(f, webdataset(2, 50), zip.Store))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzIndex(t, Zip, data)
	})
}
