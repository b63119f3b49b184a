package s3

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
)

// budget bounds the bytes buffered by a store's writes at once. It counts
// in units of 64 KiB; acquire is FIFO-fair enough (one acquirer at a time
// takes all its units) and honours ctx.
type budget struct {
	turn   chan struct{} // held while one acquirer takes its units
	tokens chan struct{}
}

const budgetUnit = 64 << 10

func newBudget(bytes int64) *budget {
	return &budget{turn: make(chan struct{}, 1), tokens: make(chan struct{}, units(bytes))}
}

func units(bytes int64) int { return int(max((bytes+budgetUnit-1)/budgetUnit, 1)) }

// acquire waits until bytes fit in the budget, or ctx ends.
func (b *budget) acquire(ctx context.Context, bytes int64) error {
	n := min(units(bytes), cap(b.tokens))
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.turn }()
	for i := range n {
		select {
		case b.tokens <- struct{}{}:
		case <-ctx.Done():
			b.releaseUnits(i)
			return ctx.Err()
		}
	}
	return nil
}

// tryAcquire takes bytes from the budget if they fit now.
func (b *budget) tryAcquire(bytes int64) bool {
	select {
	case b.turn <- struct{}{}:
	default:
		return false
	}
	defer func() { <-b.turn }()
	n := min(units(bytes), cap(b.tokens))
	for i := range n {
		select {
		case b.tokens <- struct{}{}:
		default:
			b.releaseUnits(i)
			return false
		}
	}
	return true
}

func (b *budget) release(bytes int64) { b.releaseUnits(min(units(bytes), cap(b.tokens))) }

func (b *budget) releaseUnits(n int) {
	for range n {
		<-b.tokens
	}
}

// bufPool recycles part-size buffers.
type bufPool struct {
	size int
	pool sync.Pool
}

// get returns a buffer of at least n bytes (n <= size uses the pool).
func (p *bufPool) get(n int) []byte {
	if n < p.size/4 {
		return make([]byte, n)
	}
	if b, ok := p.pool.Get().(*[]byte); ok {
		return (*b)[:p.size]
	}
	return make([]byte, p.size)
}

func (p *bufPool) put(b []byte) {
	if cap(b) == p.size {
		b = b[:p.size]
		p.pool.Put(&b)
	}
}

var errTooLong = errors.New("body longer than its declared size")

// probeEOF reads once more from r, which has delivered all the bytes it
// should: nil when r is at io.EOF, errTooLong when it has more, else its
// error.
func probeEOF(r io.Reader) error {
	var one [1]byte
	switch n, err := io.ReadAtLeast(r, one[:], 1); {
	case n > 0:
		return errTooLong
	case err == io.EOF:
		return nil
	default:
		return err
	}
}

// readPart fills buf from r. With want >= 0 it reads exactly want bytes
// (fewer: io.ErrUnexpectedEOF); with last set it then checks that r is at
// io.EOF. With want < 0 it reads up to len(buf) bytes and reports eof when r
// ended. A read error is returned as is.
func readPart(r io.Reader, buf []byte, want int64, last bool) (n int, eof bool, err error) {
	if want >= 0 {
		n, err = io.ReadFull(r, buf[:want])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, false, fmt.Errorf("body ended after %d of %d bytes: %w", n, want, io.ErrUnexpectedEOF)
		}
		if err != nil || !last {
			return n, false, err
		}
		return n, true, probeEOF(r)
	}
	n, err = io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, true, nil
	}
	return n, false, err
}

// exactReader streams exactly size bytes of r into a request body, hashing
// them with MD5. It holds the last byte back until r has returned io.EOF,
// so a body that fails at its end (a verifying reader) or runs long never
// completes the request: the server stores nothing. err is its first error.
type exactReader struct {
	r    io.Reader
	left int64
	md5  hash.Hash
	err  error
	done bool
}

func newExactReader(r io.Reader, size int64) *exactReader {
	return &exactReader{r: r, left: size, md5: md5.New()}
}

func (x *exactReader) fail(err error) (int, error) {
	if x.err == nil {
		x.err = err
	}
	return 0, x.err
}

func (x *exactReader) Read(p []byte) (int, error) {
	switch {
	case x.err != nil:
		return 0, x.err
	case x.done:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	case x.left > 1:
		n, err := x.r.Read(p[:min(int64(len(p)), x.left-1)])
		x.md5.Write(p[:n])
		x.left -= int64(n)
		if err == io.EOF {
			err = fmt.Errorf("body ended %d bytes early: %w", x.left, io.ErrUnexpectedEOF)
		}
		if err != nil {
			x.err = err
		}
		return n, err
	case x.left == 1:
		var last [1]byte
		if _, err := io.ReadFull(x.r, last[:]); err != nil {
			if err == io.EOF {
				err = fmt.Errorf("body ended 1 byte early: %w", io.ErrUnexpectedEOF)
			}
			return x.fail(err)
		}
		if err := probeEOF(x.r); err != nil {
			return x.fail(err)
		}
		x.md5.Write(last[:])
		x.left, x.done = 0, true
		p[0] = last[0]
		return 1, nil
	default: // an empty body
		if err := probeEOF(x.r); err != nil {
			return x.fail(err)
		}
		x.done = true
		return 0, io.EOF
	}
}
