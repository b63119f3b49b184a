package peerapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeJoinAddr(t *testing.T) {
	ctx := context.Background()
	// A port that accepts and closes on an HTTP request, as Raft's does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			c.Close()
		}
	}()
	var wp *WrongPortError
	err = ProbeJoinAddr(ctx, "http://"+ln.Addr().String(), nil)
	if !errors.As(err, &wp) || !strings.Contains(err.Error(), "is a Raft port") ||
		!strings.Contains(err.Error(), "--join takes the S3 --listen address of a node, e.g. --join 127.0.0.1:9000") {
		t.Fatalf("raft-like port: %v", err)
	}
	// A TLS-only port (an internal API with peer TLS) asked in plain HTTP.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	if err := ProbeJoinAddr(ctx, strings.Replace(ts.URL, "https://", "http://", 1), nil); !errors.As(err, &wp) ||
		!strings.Contains(err.Error(), "internal API") {
		t.Fatalf("TLS port: %v", err)
	}
	// An HTTP port (an S3 port with a problem of its own), https given,
	// nothing listening: not a wrong port.
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	free.Close()
	for _, addr := range []string{hs.URL, ts.URL, "http://" + free.Addr().String()} {
		if err := ProbeJoinAddr(ctx, addr, nil); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
}
