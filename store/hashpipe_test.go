package store

import (
	"crypto/md5"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"testing"
)

// TestPipeHash: the pipelined hash equals the plain one for writes of
// every size around its block size, and Close without Sum ends it.
func TestPipeHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3*pipeBufSize+17)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, chunk := range []int{1, 1000, pipeBufSize - 1, pipeBufSize, pipeBufSize + 1, len(data)} {
		p := NewPipeHash(md5.New())
		for off := 0; off < len(data); off += chunk {
			if n, err := p.Write(data[off:min(off+chunk, len(data))]); err != nil || n != min(chunk, len(data)-off) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		want := md5.Sum(data)
		if got := p.Sum(nil); string(got) != string(want[:]) {
			t.Errorf("chunks of %d: md5 %x, want %x", chunk, got, want)
		}
		p.Close() // a second Close is harmless
	}
	empty := NewPipeHash(sha256.New())
	if got, want := empty.Sum(nil), sha256.Sum256(nil); string(got) != string(want[:]) {
		t.Errorf("empty: %x", got)
	}
	abandoned := NewPipeHash(md5.New())
	io.WriteString(abandoned, "x")
	abandoned.Close()
}

func BenchmarkPipeHash(b *testing.B) {
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	p := NewPipeHash(md5.New())
	for b.Loop() {
		p.Write(buf)
	}
	p.Sum(nil)
}
