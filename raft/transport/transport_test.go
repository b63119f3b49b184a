package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/raft/transport"
)

func plainDial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// The TCP transports never pipeline replication (see NoPipelining): a
// follower that rejects one append must not leave the leader's replication
// to it parked for ever.
func TestTransportDoesNotPipeline(t *testing.T) {
	ca := testserver.NewCA(t)
	for name, cfg := range map[string]transport.Config{
		"tcp":  {Bind: "127.0.0.1:0"},
		"tls":  {Bind: "127.0.0.1:0", TLS: ca.PeerTLS(t, "n1")},
		"dial": {Bind: "127.0.0.1:0", Dial: plainDial},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := transport.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			p, err := tr.AppendEntriesPipeline("n2", tr.LocalAddr())
			if p != nil {
				p.Close()
			}
			if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
				t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
			}
		})
	}
}

// answerVotes answers every RequestVote that tr receives, granting it.
func answerVotes(tr raft.Transport) {
	go func() {
		for rpc := range tr.Consumer() {
			rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
		}
	}()
}

func vote(from raft.Transport, to raft.ServerAddress) error {
	var resp raft.RequestVoteResponse
	err := from.RequestVote("n2", to, &raft.RequestVoteRequest{Term: 1}, &resp)
	if err == nil && !resp.Granted {
		err = errors.New("vote not granted")
	}
	return err
}

// Every connection to a peer goes through Config.Dial, TLS or not: a
// dialer that refuses cuts the peer off.
func TestDialIsHonoured(t *testing.T) {
	ca := testserver.NewCA(t)
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprint("tls=", withTLS), func(t *testing.T) {
			var dials atomic.Int64
			var refuse atomic.Bool
			cfg := func(name string) transport.Config {
				c := transport.Config{Bind: "127.0.0.1:0", Timeout: 2 * time.Second, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					if refuse.Load() {
						return nil, errors.New("cut off by the test")
					}
					return plainDial(ctx, network, addr)
				}}
				if withTLS {
					c.TLS = ca.PeerTLS(t, name)
				}
				return c
			}
			a, err := transport.New(cfg("a"))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := transport.New(cfg("b"))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			answerVotes(b)
			if err := vote(a, b.LocalAddr()); err != nil {
				t.Fatalf("RequestVote: %v", err)
			}
			if dials.Load() == 0 {
				t.Fatal("the RPC did not dial through Config.Dial")
			}
			refuse.Store(true)
			if n, ok := a.(interface{ CloseStreams() }); ok {
				n.CloseStreams() // drop the pooled connection
			}
			if err := vote(a, b.LocalAddr()); err == nil {
				t.Fatal("RequestVote succeeded with the dialer refusing")
			}
		})
	}
}

// One port serves Raft and HTTP, over mutual TLS: each reaches its own
// listener, and Drain lets go of accepted connections.
func TestMux(t *testing.T) {
	ca := testserver.NewCA(t)
	serverTLS, clientTLS := ca.PeerTLS(t, "a"), ca.PeerTLS(t, "b")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := transport.NewMux(ln, serverTLS)
	defer mux.Close()
	stream := transport.NewStream(mux.Raft, ln.Addr(), serverTLS, nil)
	a := transport.NewNetwork(stream, transport.Config{})
	defer a.Close()
	answerVotes(a)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "http side") }),
		ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(mux.HTTP)
	defer hs.Close()

	b, err := transport.New(transport.Config{Bind: "127.0.0.1:0", TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := vote(b, raft.ServerAddress(ln.Addr().String())); err != nil {
		t.Fatalf("Raft through the mux: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 5 * time.Second}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("HTTP through the mux: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "http side" {
		t.Fatalf("HTTP answer %q", body)
	}
	a.Close()
	done := make(chan struct{})
	go func() { stream.Drain(5 * time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return")
	}
}

// A Bind whose host is a name is advertised as that name (with the port
// bound), so that peers record the name and resolve it on every dial: a
// node whose IP changes (a Kubernetes pod rescheduled behind its stable
// DNS name) stays reachable. An IP Bind advertises the IP, as before, and
// a vote over the name reaches the node.
func TestBindByNameAdvertisesName(t *testing.T) {
	for name, cfg := range map[string]transport.Config{
		"tcp":  {Bind: "localhost:0"},
		"dial": {Bind: "localhost:0", Dial: plainDial},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := transport.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			host, port, err := net.SplitHostPort(string(tr.LocalAddr()))
			if err != nil || host != "localhost" || port == "0" {
				t.Fatalf("LocalAddr %q: want localhost:<the bound port>", tr.LocalAddr())
			}
			peer, err := transport.New(transport.Config{Bind: "127.0.0.1:0", Dial: cfg.Dial})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			answerVotes(tr)
			if err := vote(peer, tr.LocalAddr()); err != nil {
				t.Fatalf("RequestVote to %s: %v", tr.LocalAddr(), err)
			}
		})
	}
	tr, err := transport.New(transport.Config{Bind: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if host, _, _ := net.SplitHostPort(string(tr.LocalAddr())); host != "127.0.0.1" {
		t.Fatalf("an IP Bind advertises %q", tr.LocalAddr())
	}
}
