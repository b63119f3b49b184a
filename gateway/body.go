package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// DefaultBodyTimeout is how long a request body may stall (no byte
// arriving) before the request fails with RequestTimeout, when
// Config.BodyTimeout is 0. AWS S3 cuts an idle upload after about 20 s.
const DefaultBodyTimeout = 30 * time.Second

// bodyGuard is every request's body as the handlers read it: it counts what
// arrived, and bounds how long one read may wait for the client (the
// connection's read deadline moves forward as bytes arrive, so a steady
// upload of any length goes on, and a stalled one fails with
// RequestTimeout instead of holding its connection, its descriptor and its
// staging file for ever). Nothing is read before a handler asks, so a
// request refused before its body is read never makes net/http send
// "100 Continue".
type bodyGuard struct {
	r    io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	// until, when set, caps every deadline (an error answer's drain).
	until    time.Time
	armedAt  time.Time // when the deadline was last moved
	armed    bool
	n        int64
	eof      bool
	timedOut bool
}

func newBodyGuard(w http.ResponseWriter, r *http.Request, idle time.Duration) *bodyGuard {
	return &bodyGuard{r: r.Body, rc: http.NewResponseController(w), idle: idle}
}

// errBodyTimeout is the answer to a body that stopped arriving.
func errBodyTimeout(idle time.Duration) error {
	return s3err.Newf(s3err.CodeRequestTimeout, "Your socket connection to the server was not read from within the timeout period: no byte of the request body arrived for %s; nothing was stored.", idle)
}

func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.eof {
		return 0, io.EOF
	}
	if g.idle > 0 {
		g.arm()
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	switch {
	case err == io.EOF:
		g.eof = true
		g.disarm()
	case err != nil && isTimeout(err):
		g.timedOut = true
		return n, fmt.Errorf("%w (%v)", errBodyTimeout(g.idle), err)
	}
	return n, err
}

// arm moves the read deadline to idle from now, at most every idle/8 (a
// deadline is a timer update, not a system call, but a 16 KiB read per
// update would still be waste).
func (g *bodyGuard) arm() {
	now := time.Now()
	if g.armed && now.Sub(g.armedAt) < g.idle/8 && g.until.IsZero() {
		return
	}
	d := now.Add(g.idle)
	if !g.until.IsZero() && g.until.Before(d) {
		d = g.until
	}
	if g.rc.SetReadDeadline(d) == nil {
		g.armed, g.armedAt = true, now
	}
}

// disarm clears the deadline once the body is read: net/http then reads
// the connection in the background (to notice a client going away), and a
// deadline left behind would cancel a long request's context.
func (g *bodyGuard) disarm() {
	if g.armed {
		_ = g.rc.SetReadDeadline(time.Time{})
		g.armed = false
	}
}

func (g *bodyGuard) Close() error { return g.r.Close() }

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// maxErrorDrain bounds what an error answer reads of a request body the
// handler left unread, and errorDrainTime how long it may take.
const (
	maxErrorDrain  = 16 << 20
	errorDrainTime = 5 * time.Second
)

// settleBody decides, before an error answer's header is written, what
// becomes of a request body the handler did not read to its end; status is
// the answer's. It returns what to run once the answer is written (nil:
// nothing).
//   - A body nobody asked for (Expect: 100-continue, nothing read yet) of a
//     request refused for what its headers say (a 4xx) is never invited:
//     the answer goes out at once, as S3's does, and the connection closes.
//   - A body that stalled is not waited for: the connection closes after
//     the answer.
//   - Any other body may still be arriving from a client that sends all of
//     it before it reads (a PUT refused half-way by a full device, or made
//     to wait for staging room until it timed out its 100-continue): the
//     answer goes out first, then what arrives is read and dropped, up to
//     maxErrorDrain and errorDrainTime and only while bytes keep coming,
//     so that the client reads the answer instead of meeting a reset; then
//     the connection closes. A stalled client holds its connection at most
//     that long after its answer.
//
// Closing matters as much as not reading: net/http would otherwise read up
// to 256 KiB of what is left itself, waiting on a stalled client, before
// the answer (to keep the connection) or after it (closing the body).
func settleBody(w http.ResponseWriter, r *http.Request, status int) func() {
	ri := infoFrom(r.Context())
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || ri == nil || ri.body == nil {
		return nil
	}
	g := ri.body
	if g.eof {
		return nil
	}
	w.Header().Set("Connection", "close")
	if g.timedOut || g.n == 0 && status < 500 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// net/http still reads up to 256 KiB of what is left when the
		// handler returns (closing the body, after the answer is sent):
		// let that read fail at once instead of waiting on the client.
		_ = g.rc.SetReadDeadline(time.Now())
		return nil
	}
	// Read after the answer is written: net/http allows it only in full
	// duplex mode.
	if g.rc.EnableFullDuplex() != nil {
		_ = g.rc.SetReadDeadline(time.Now())
		return nil
	}
	return func() {
		_ = g.rc.Flush()
		g.until = time.Now().Add(errorDrainTime)
		if g.idle <= 0 || g.idle > errorDrainTime {
			g.idle = errorDrainTime
		}
		_, _ = io.CopyN(io.Discard, g, maxErrorDrain)
		g.until = time.Time{}
		_ = g.rc.SetReadDeadline(time.Now())
		g.armed = false
	}
}
