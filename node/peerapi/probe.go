package peerapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// WrongPortError says that a --join address answers, but not as a node's
// S3 port: it is a Raft port, or an internal API with peer TLS, or some
// other service. Retrying it never helps.
type WrongPortError struct {
	Addr string // the address as given
	What string // what answers there
}

func (e *WrongPortError) Error() string {
	host, _, err := net.SplitHostPort(hostPort(e.Addr))
	if err != nil {
		host = "HOST"
	}
	return fmt.Sprintf("%s is %s; --join takes the S3 --listen address of a node, e.g. --join %s",
		e.Addr, e.What, net.JoinHostPort(host, "9000"))
}

// hostPort is addr's host:port (a URL's, or addr itself).
func hostPort(addr string) string {
	if u, err := url.Parse(NormalizeHTTP(addr)); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// ProbeJoinAddr tells, for a --join address whose info request failed,
// whether the address answers as something other than a node's S3 port
// (a *WrongPortError), from what it answers to one plain HTTP request: a
// Raft port closes the connection without a byte of HTTP (or answers in
// binary), a TLS-only port (Raft or the internal API with peer TLS) answers
// a TLS alert or Go's "HTTP request to an HTTPS server". It returns nil
// when the address does not answer at all (a node not started yet) or
// answers HTTP (an S3 port with its own problem, reported as it is).
// dial nil: net.Dialer.
func ProbeJoinAddr(ctx context.Context, addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	if strings.HasPrefix(addr, "https://") {
		return nil // TLS expected: the info request's error says what failed
	}
	hp := hostPort(addr)
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, "tcp", hp)
	if err != nil {
		return nil // nothing listens (yet): an ordinary wait
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	req := "GET " + Prefix + "info HTTP/1.1\r\nHost: " + hp + "\r\nUser-Agent: fedgate-join-probe\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil
	}
	buf := make([]byte, 512)
	n, rerr := io.ReadAtLeast(conn, buf, 5)
	got := buf[:n]
	switch {
	case bytes.HasPrefix(got, []byte("HTTP/")):
		if bytes.Contains(got, []byte("HTTP request to an HTTPS server")) {
			return &WrongPortError{Addr: addr, What: "a TLS port that is not an S3 port (a node's internal API, --internal-addr, with peer TLS; an S3 port with --cert-file is written https://" + hp + ")"}
		}
		return nil // HTTP: an S3 port, or not ours; the info error says
	case n > 0 && (got[0] == 0x15 || got[0] == 0x16):
		return &WrongPortError{Addr: addr, What: "a TLS port that does not speak HTTP (a Raft port, --raft-addr, with peer TLS)"}
	case n > 0:
		return &WrongPortError{Addr: addr, What: "a port that answers HTTP in binary, not as an S3 port (a Raft port, --raft-addr?)"}
	case errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, syscall.ECONNRESET):
		return &WrongPortError{Addr: addr, What: "a Raft port (--raft-addr): it accepts connections but closes them on an HTTP request"}
	}
	return nil // silent until the timeout: cannot tell
}
