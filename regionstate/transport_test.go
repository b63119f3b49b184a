package regionstate

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/raft"
)

// The TCP transports never pipeline replication (see NoPipelining): a
// follower that rejects one append must not leave the leader's replication
// to it parked for ever.
func TestTransportDoesNotPipeline(t *testing.T) {
	pki := newTestPKI(t)
	for name, cfg := range map[string]Config{
		"tcp": {NodeID: "n1", BindAddr: "127.0.0.1:0"},
		"tls": {NodeID: "n1", BindAddr: "127.0.0.1:0", TLS: pki.config(t, "n1")},
		"dial": {NodeID: "n1", BindAddr: "127.0.0.1:0", Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := newTransport(cfg, newHCLog(testLogger(t), "raft"))
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
