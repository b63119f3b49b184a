package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultUnauthenticatedConns is how many connections one client address
// may hold open before any request on them was signed by a known user,
// when no other limit is configured.
const DefaultUnauthenticatedConns = 256

// ConnLimiter bounds, per client address, the connections open on the S3
// port that have not yet carried a signed request: a new connection from
// an address already at the limit is closed as soon as it is accepted. A
// connection leaves the count when a request on it is authenticated (its
// SigV4 signature checks out for a known access key), so a client's pool
// of signed connections never counts, however large; anonymous readers of
// a public bucket and anyone who never signs share the limit per address.
//
// It is what keeps one address from taking every descriptor of a node with
// connections that send a header and then nothing (docs/security.md).
type ConnLimiter struct {
	limit   int
	mu      sync.Mutex
	open    map[string]int
	refused prometheus.Counter
}

// NewConnLimiter returns a limiter of limit unauthenticated connections
// per client address (0 or less: no limit, connections are only tracked).
// Its metric is registered with Collector.
func NewConnLimiter(limit int) *ConnLimiter {
	return &ConnLimiter{limit: limit, open: map[string]int{},
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fedgate_connections_refused_total",
			Help: "Connections closed on accept because their client address already held its limit of unauthenticated connections (--unauthenticated-conns).",
		})}
}

// Collector is the limiter's metric, fedgate_connections_refused_total.
func (l *ConnLimiter) Collector() prometheus.Collector { return l.refused }

// Listener wraps ln so that its connections are counted and limited.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

// Unauthenticated returns how many unauthenticated connections host has
// open now.
func (l *ConnLimiter) Unauthenticated(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[host]
}

// ConnContext is for http.Server.ConnContext: it makes the connection's
// entry reachable from its requests, so a signed request can take it out
// of the count.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if t, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, t)
	}
	return ctx
}

type connKey struct{}

func connFrom(ctx context.Context) *trackedConn {
	t, _ := ctx.Value(connKey{}).(*trackedConn)
	return t
}

type limitedListener struct {
	net.Listener
	l *ConnLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c.RemoteAddr().String())
		l := ll.l
		l.mu.Lock()
		if l.limit > 0 && l.open[host] >= l.limit {
			l.mu.Unlock()
			l.refused.Inc()
			_ = c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &trackedConn{Conn: c, l: l, host: host}, nil
	}
}

// trackedConn is a connection counted against its address until a signed
// request arrives on it or it closes.
type trackedConn struct {
	net.Conn
	l      *ConnLimiter
	host   string
	mu     sync.Mutex
	leftAt bool // out of the count (authenticated or closed)
}

// authenticated takes the connection out of its address's count.
func (t *trackedConn) authenticated() { t.leave() }

func (t *trackedConn) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leftAt {
		return
	}
	t.leftAt = true
	t.l.mu.Lock()
	if t.l.open[t.host]--; t.l.open[t.host] <= 0 {
		delete(t.l.open, t.host)
	}
	t.l.mu.Unlock()
}

func (t *trackedConn) Close() error {
	t.leave()
	return t.Conn.Close()
}

// ReadFrom keeps sendfile: net/http hands a response body to its
// connection's io.ReaderFrom, which for a TCP connection sends a file
// without copying it through user space.
func (t *trackedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := t.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(t.Conn, r)
}

// CloseWrite keeps net/http's graceful close (a FIN, then a pause before
// the socket closes, so the client reads an answer sent before the rest of
// its body was read instead of meeting a reset).
func (t *trackedConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
