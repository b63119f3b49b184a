package regionstate

import (
	"crypto/tls"

	"github.com/fedgate/fedgate/raft/logstore"
	"github.com/fedgate/fedgate/raft/transport"
)

// Raft log stores (Config.LogStore); see raft/logstore.
const (
	LogStoreWAL     = logstore.WAL
	LogStoreBoltDB  = logstore.BoltDB
	DefaultLogStore = logstore.Default
)

// NoPipelining is transport.NoPipelining: the region's TCP transports
// never pipeline replication.
const NoPipelining = transport.NoPipelining

// PeerTLSConfig builds Config.TLS from PEM files (transport.PeerTLSConfig).
func PeerTLSConfig(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	return transport.PeerTLSConfig(certFile, keyFile, caFile, serverName)
}
