package nodetest

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
)

// network is the region's loopback network as its nodes dial it
// (node.Config.Dial): it knows which node owns each address and refuses,
// or cuts, every connection between the two sides of a partition.
type network struct {
	mu    sync.Mutex
	owner map[string]int // "host:port" -> node index
	far   map[int]bool   // the nodes cut off by Partition
	conns map[*conn]struct{}
	// frozen is the node Freeze stopped (-1: none); thawed is closed when
	// it thaws.
	frozen int
	thawed chan struct{}
}

func newNetwork() *network {
	return &network{owner: map[string]int{}, far: map[int]bool{}, conns: map[*conn]struct{}{}, frozen: -1, thawed: make(chan struct{})}
}

// freeze makes node i behave as a stopped process (SIGSTOP) does to its
// peers: connections to it still open (the kernel accepts them), but
// nothing it is sent reaches it and nothing it sends arrives, until thaw.
func (nw *network) freeze(i int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.frozen = i
	nw.thawed = make(chan struct{})
}

func (nw *network) thaw() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.frozen >= 0 {
		nw.frozen = -1
		close(nw.thawed)
	}
}

// hold blocks while c runs to or from the frozen node, until the node
// thaws or c is closed.
func (nw *network) hold(c *conn) error {
	nw.mu.Lock()
	to, ok := nw.owner[c.addr]
	held := nw.frozen >= 0 && (c.from == nw.frozen || ok && to == nw.frozen)
	thawed := nw.thawed
	nw.mu.Unlock()
	if !held {
		return nil
	}
	select {
	case <-thawed:
		return nil
	case <-c.closed:
		return net.ErrClosed
	}
}

// own records that addr belongs to node i.
func (nw *network) own(i int, addr string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.owner[addr] = i
}

// blocked reports whether node from may not reach addr (nw.mu held). An
// address of no node (while the region forms) is always reachable.
func (nw *network) blocked(from int, addr string) bool {
	to, ok := nw.owner[addr]
	return ok && nw.far[from] != nw.far[to]
}

// dialer is node from's node.Config.Dial. A blocked dial fails as a
// closed port does (ECONNREFUSED: the request certainly was not sent).
func (nw *network) dialer(from int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		refused := &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		nw.mu.Lock()
		b := nw.blocked(from, addr)
		nw.mu.Unlock()
		if b {
			return nil, refused
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &conn{Conn: c, nw: nw, from: from, addr: addr, closed: make(chan struct{})}
		nw.mu.Lock()
		defer nw.mu.Unlock()
		if nw.blocked(from, addr) { // partitioned while dialing
			c.Close()
			return nil, refused
		}
		nw.conns[tc] = struct{}{}
		return tc, nil
	}
}

// partition cuts the nodes in far off from the others (and closes the
// connections between the sides); an empty far heals the network.
func (nw *network) partition(far []int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.far = map[int]bool{}
	for _, i := range far {
		nw.far[i] = true
	}
	for c := range nw.conns {
		if nw.blocked(c.from, c.addr) {
			delete(nw.conns, c)
			c.closeOnce.Do(func() { close(c.closed) })
			c.Conn.Close()
		}
	}
}

// conn is a connection a node dialed, tracked so a partition can cut it.
type conn struct {
	net.Conn
	nw        *network
	from      int
	addr      string
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	if err := c.nw.hold(c); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *conn) Write(b []byte) (int, error) {
	if err := c.nw.hold(c); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.nw.mu.Lock()
	delete(c.nw.conns, c)
	c.nw.mu.Unlock()
	return c.Conn.Close()
}
