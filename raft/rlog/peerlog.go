package rlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerFailures are hashicorp/raft's (v1.7) messages for one failed RPC to
// one peer, with the argument that names the peer. While a member is down
// (a rolling restart) the leader logs one of them per heartbeat and per
// replication attempt: dozens of ERROR lines for one expected absence.
var peerFailures = map[string]string{
	"failed to heartbeat to":                  "peer",      // raft.ServerAddress
	"failed to appendEntries to":              "peer",      // raft.Server
	"failed to pipeline appendEntries":        "peer",      // raft.Server
	"failed to start pipeline replication to": "peer",      // raft.Server
	"failed to make requestVote RPC":          "target",    // raft.Server
	"failed to contact":                       "server-id", // raft.ServerID
}

// peerAnswered is raft's message after an AppendEntries to the peer
// succeeded (a leader's first contact, or replication resuming).
const peerAnswered = "pipelining replication"

// peerLog turns those failures into one WARN when a peer becomes
// unreachable ("peer n2 unreachable"), DEBUG for every further failure,
// and one INFO when it answers again ("peer n2 reachable again after
// 12s"). It learns that a peer answered from raft's observations
// (ResumedHeartbeatObservation, a LeaderObservation naming it) and from
// peerAnswered; every copy of the adapter (Named, With) shares one.
type peerLog struct {
	now func() time.Time

	mu   sync.Mutex
	ids  map[raft.ServerAddress]raft.ServerID // learned from raft.Server values
	down map[string]*downPeer                 // by id, or by address while the id is unknown
}

type downPeer struct {
	id     raft.ServerID
	addr   raft.ServerAddress
	since  time.Time
	failed int // failures since the WARN, logged at DEBUG
}

func newPeerLog(now func() time.Time) *peerLog {
	return &peerLog{now: now, ids: map[raft.ServerAddress]raft.ServerID{}, down: map[string]*downPeer{}}
}

// name is how a message names the peer: its id, else its address.
func (d *downPeer) name() string {
	if d.id != "" {
		return string(d.id)
	}
	return string(d.addr)
}

// peerOf reads the peer a message names.
func peerOf(args []any, key string) (id raft.ServerID, addr raft.ServerAddress, ok bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] != key {
			continue
		}
		switch v := args[i+1].(type) {
		case raft.Server:
			return v.ID, v.Address, true
		case *raft.Server:
			if v != nil {
				return v.ID, v.Address, true
			}
		case raft.ServerAddress:
			return "", v, true
		case raft.ServerID:
			return v, "", true
		case string:
			return "", raft.ServerAddress(v), true
		}
	}
	return "", "", false
}

func argValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == key {
			return args[i+1]
		}
	}
	return nil
}

// learn records that id has addr, moving a peer known only by its address
// under its id. Callers hold mu.
func (p *peerLog) learn(id raft.ServerID, addr raft.ServerAddress) {
	if id == "" || addr == "" {
		return
	}
	p.ids[addr] = id
	if d, ok := p.down[string(addr)]; ok {
		delete(p.down, string(addr))
		if _, dup := p.down[string(id)]; !dup {
			d.id = id
			p.down[string(id)] = d
		}
	}
}

// key is the map key of a peer; callers hold mu.
func (p *peerLog) key(id raft.ServerID, addr raft.ServerAddress) (string, raft.ServerID) {
	if id == "" {
		id = p.ids[addr]
	}
	if id != "" {
		return string(id), id
	}
	return string(addr), ""
}

// handle logs msg if it is about reaching a peer and reports whether it
// did; the adapter logs every other message itself.
func (p *peerLog) handle(l *slog.Logger, msg string, args []any) bool {
	if msg == peerAnswered {
		if id, addr, ok := peerOf(args, "peer"); ok {
			p.answered(l, id, addr)
		}
		return false // still logged, at raft's Info (our Debug)
	}
	argKey, ok := peerFailures[msg]
	if !ok {
		return false
	}
	id, addr, ok := peerOf(args, argKey)
	if !ok {
		return false
	}
	p.mu.Lock()
	p.learn(id, addr)
	k, id := p.key(id, addr)
	d, known := p.down[k]
	if !known {
		d = &downPeer{id: id, addr: addr, since: p.now()}
		p.down[k] = d
	} else {
		d.failed++
		if d.addr == "" {
			d.addr = addr
		}
	}
	name, daddr := d.name(), d.addr
	p.mu.Unlock()

	if known {
		l.Log(context.Background(), slog.LevelDebug, msg, args...)
		return true
	}
	attrs := []any{"peer", name, "addr", string(daddr), "failed", msg}
	if err := argValue(args, "error"); err != nil {
		attrs = append(attrs, "error", fmt.Sprint(err))
	}
	l.Warn(fmt.Sprintf("raft: peer %s unreachable; further failures to reach it are logged at debug until it answers again", name), attrs...)
	return true
}

// answered logs the return of a peer that was down (and nothing for one
// that was not).
func (p *peerLog) answered(l *slog.Logger, id raft.ServerID, addr raft.ServerAddress) {
	p.mu.Lock()
	p.learn(id, addr)
	k, _ := p.key(id, addr)
	d, ok := p.down[k]
	if ok {
		delete(p.down, k)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	took := p.now().Sub(d.since)
	if took >= time.Second {
		took = took.Round(time.Second)
	} else {
		took = took.Round(time.Millisecond)
	}
	l.Info(fmt.Sprintf("raft: peer %s reachable again after %s", d.name(), took),
		"peer", d.name(), "addr", string(d.addr), "down_seconds", took.Seconds(), "failures_suppressed", d.failed)
}

// forget drops a peer removed from the configuration, without a message.
func (p *peerLog) forget(id raft.ServerID, addr raft.ServerAddress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.learn(id, addr)
	k, _ := p.key(id, addr)
	delete(p.down, k)
}

// observer returns a raft observer that feeds the peer log. Its filter
// does the work and keeps nothing, so raft never blocks on it.
func (p *peerLog) observer(l *slog.Logger) *raft.Observer {
	return raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		p.observe(l, o)
		return false
	})
}

// observe takes the observations that say a peer answered, was added or
// was removed.
func (p *peerLog) observe(l *slog.Logger, o *raft.Observation) {
	switch v := o.Data.(type) {
	case raft.ResumedHeartbeatObservation:
		p.answered(l, v.PeerID, "")
	case raft.PeerObservation:
		if v.Removed {
			p.forget(v.Peer.ID, v.Peer.Address)
			return
		}
		p.mu.Lock()
		p.learn(v.Peer.ID, v.Peer.Address)
		p.mu.Unlock()
	case raft.LeaderObservation:
		if v.LeaderID != "" { // it just sent us an AppendEntries
			p.answered(l, v.LeaderID, v.LeaderAddr)
		}
	}
}
