package transport

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"time"
)

// Mux splits one port between Raft, whose connections start with a byte
// below 0x20 (its RPC type), and HTTP (a method name). Raft and HTTP are
// its two listeners; closing the Mux closes both.
type Mux struct {
	ln         net.Listener
	Raft, HTTP net.Listener
	raft, http *chanListener
	once       sync.Once
}

// NewMux starts accepting on ln, under TLS with cfg when it is set.
func NewMux(ln net.Listener, cfg *tls.Config) *Mux {
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	m := &Mux{ln: ln, raft: newChanListener(ln.Addr()), http: newChanListener(ln.Addr())}
	m.Raft, m.HTTP = m.raft, m.http
	go m.loop()
	return m
}

func (m *Mux) loop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.Close()
			return
		}
		go m.route(c)
	}
}

// route reads c's first byte (for at most 10 s) and hands c to the
// listener it belongs to.
func (m *Mux) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, first: b[:]}
	to := m.http
	if b[0] < 0x20 {
		to = m.raft
	}
	if !to.put(pc) {
		c.Close()
	}
}

// Close stops accepting and closes both listeners.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		err = m.ln.Close()
		m.raft.Close()
		m.http.Close()
	})
	return err
}

type prefixConn struct {
	net.Conn
	first []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

type chanListener struct {
	addr net.Addr
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(a net.Addr) *chanListener {
	return &chanListener{addr: a, c: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) put(c net.Conn) bool {
	select {
	case l.c <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
