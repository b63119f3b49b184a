package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/fedgate/fedgate/store"
)

// teeChunk is how many bytes of a body are in flight to the sinks at once.
const teeChunk = 256 << 10

// errAborted closes the pipes of the other sinks when one sink of an
// all-or-nothing tee failed.
var errAborted = errors.New("placement: write aborted: another store failed")

// errSinkReturned: a sink returned before reading its body to the end.
var errSinkReturned = errors.New("placement: store returned before the end of the body")

// Tee streams body to every sink at once, each through its own pipe: the
// body is read once, a chunk (teeChunk bytes) at a time, and a chunk goes
// to every live sink before the next is read, so memory is one chunk
// whatever the size. With size >= 0 exactly size bytes are read and the
// body must end there (io.ErrUnexpectedEOF for fewer, ErrBodyTooLong for
// more); the sinks get io.EOF only after that check, so a store that reads
// to the end before committing commits nothing when the body fails.
//
// allOrNothing: when one sink fails before the end, every other sink's
// pipe is closed with errAborted (and abort is called), so none of them
// commits. Otherwise a failed sink is dropped and the others go on; abort
// is called only when the body fails or no sink is left.
//
// Replicated and erasure-coded placements write their copies with it, and
// write-back staging its local and peer copies.
//
// It returns each sink's error and the body's error (nil when the body
// was read to its end).
func Tee(ctx context.Context, body io.Reader, size int64, sinks []func(io.Reader) error, allOrNothing bool, abort func()) (sinkErrs []error, bodyErr error) {
	n := len(sinks)
	sinkErrs = make([]error, n)
	pws := make([]*io.PipeWriter, n)
	var wg sync.WaitGroup
	for i, sink := range sinks {
		pr, pw := io.Pipe()
		pws[i] = pw
		wg.Go(func() {
			err := sink(pr)
			sinkErrs[i] = err
			if err == nil {
				err = errSinkReturned
			}
			pr.CloseWithError(err)
		})
	}
	var src io.Reader = store.ContextReader(ctx, body)
	if size >= 0 {
		src = io.LimitReader(src, size)
	}
	live := make([]bool, n)
	for i := range live {
		live[i] = true
	}
	werrs := make([]error, n)
	buf := make([]byte, teeChunk)
	var total int64
	var failure error
	for failure == nil {
		nr, er := src.Read(buf)
		if nr > 0 {
			total += int64(nr)
			var ww sync.WaitGroup
			for i, pw := range pws {
				if live[i] {
					ww.Go(func() { _, werrs[i] = pw.Write(buf[:nr]) })
				}
			}
			ww.Wait()
			alive := 0
			for i := range pws {
				if live[i] && werrs[i] != nil {
					live[i] = false
					if allOrNothing {
						failure = errAborted
					}
				}
				if live[i] {
					alive++
				}
			}
			if alive == 0 && failure == nil {
				failure = errAborted
			}
		}
		if errors.Is(er, io.EOF) {
			break
		}
		if er != nil && failure == nil {
			bodyErr, failure = er, er
		}
	}
	if failure == nil && size >= 0 {
		switch {
		case total < size:
			bodyErr = fmt.Errorf("%d of %d bytes: %w", total, size, io.ErrUnexpectedEOF)
		default:
			bodyErr = store.ExpectEOF(store.ContextReader(ctx, body))
		}
		failure = bodyErr
	}
	for _, pw := range pws {
		if failure != nil {
			pw.CloseWithError(failure)
		} else {
			pw.Close()
		}
	}
	if failure != nil && abort != nil {
		abort()
	}
	wg.Wait()
	return sinkErrs, bodyErr
}
