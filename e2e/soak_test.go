package e2e

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"testing"

	"github.com/minio/minio-go/v7"
)

// Soak tests use large objects and long loops; `make soak` runs them
// (FEDGATE_SOAK=1), `make test` skips them.
func soak(t *testing.T) {
	if os.Getenv("FEDGATE_SOAK") == "" {
		t.Skip("soak test: run with `make soak` (FEDGATE_SOAK=1)")
	}
}

// patterned is a deterministic stream of n bytes, hashed as it is read.
type patterned struct {
	n, off int64
	h      hash.Hash
}

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off)]
	for i := range b {
		x := uint64(p.off + int64(i))
		b[i] = byte(x*2654435761>>13) ^ byte(x>>20)
	}
	p.off += int64(len(b))
	p.h.Write(b)
	return len(b), nil
}

// TestSoakLargeObjects streams 256 MiB and 1 GiB objects of unknown size
// through fedgate with minio-go (multipart, streaming signatures) and reads
// them back, comparing sha256.
func TestSoakLargeObjects(t *testing.T) {
	soak(t)
	s := startServer(t)
	mc := s.minio(rootAK, rootSK)
	c := ctx(t)
	if err := mc.MakeBucket(c, "soak", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{256 << 20, 1 << 30} {
		src := &patterned{n: size, h: sha256.New()}
		key := fmt.Sprintf("large-%d", size)
		if _, err := mc.PutObject(c, "soak", key, src, -1, minio.PutObjectOptions{PartSize: 64 << 20}); err != nil {
			t.Fatal(err)
		}
		obj, err := mc.GetObject(c, "soak", key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, obj)
		obj.Close()
		if err != nil || n != size || string(h.Sum(nil)) != string(src.h.Sum(nil)) {
			t.Fatalf("%s: read back %d bytes (%v), hash match %v", key, n, err, string(h.Sum(nil)) == string(src.h.Sum(nil)))
		}
	}
}

// TestSoakCrashLoop repeats the kill -9 crash test five times.
func TestSoakCrashLoop(t *testing.T) {
	soak(t)
	for round := range 5 {
		t.Run(fmt.Sprint("round", round), TestCrashDuringWrites)
	}
}
