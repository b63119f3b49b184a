package store

import (
	"hash"
	"sync"
)

// pipeBufSize is the size of the blocks a PipeHash hands to its goroutine.
const pipeBufSize = 256 << 10

// pipeDepth is how many blocks may wait to be hashed: a writer runs at
// most this far ahead of the hash.
const pipeDepth = 4

var pipeBufs = sync.Pool{New: func() any { b := make([]byte, pipeBufSize); return &b }}

// PipeHash is an io.Writer that hashes what is written to it on a
// goroutine of its own, so that a write path's hash (an object's MD5) runs
// on another core beside the disk and network work of the goroutine that
// writes, instead of in series with it. Write copies its input into pooled
// blocks (at most pipeDepth waiting, 1 MiB) and returns; Sum waits for the
// hash to catch up. It is not safe for concurrent Writes. Close (or Sum)
// must be called to end the goroutine.
type PipeHash struct {
	h    hash.Hash
	work chan *[]byte
	done chan struct{}
	open bool
	n    int // the block being filled: (*cur)[:n]
	cur  *[]byte
}

// NewPipeHash starts hashing with h.
func NewPipeHash(h hash.Hash) *PipeHash {
	p := &PipeHash{h: h, work: make(chan *[]byte, pipeDepth), done: make(chan struct{}), open: true}
	go p.run()
	return p
}

func (p *PipeHash) run() {
	defer close(p.done)
	for b := range p.work {
		p.h.Write(*b)
		*b = (*b)[:cap(*b)]
		pipeBufs.Put(b)
	}
}

// Write implements io.Writer; it never fails.
func (p *PipeHash) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		if p.cur == nil {
			p.cur, p.n = pipeBufs.Get().(*[]byte), 0
		}
		k := copy((*p.cur)[p.n:], b)
		p.n += k
		b = b[k:]
		if p.n == len(*p.cur) {
			p.flush()
		}
	}
	return total, nil
}

func (p *PipeHash) flush() {
	if p.cur == nil {
		return
	}
	*p.cur = (*p.cur)[:p.n]
	p.work <- p.cur
	p.cur = nil
}

// Close ends the goroutine after it has hashed everything written.
func (p *PipeHash) Close() {
	if !p.open {
		return
	}
	p.open = false
	p.flush()
	close(p.work)
	<-p.done
}

// Sum appends the hash of everything written to b (it closes p).
func (p *PipeHash) Sum(b []byte) []byte {
	p.Close()
	return p.h.Sum(b)
}
