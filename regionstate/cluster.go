package regionstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Member is one server of the region's Raft configuration.
type Member struct {
	ID      string
	Address string // the Raft transport address peers dial
	Voter   bool   // false: a non-voter, which replicates but does not vote
	Leader  bool   // set by Members for the current leader
}

// Status is a point-in-time view of this node's Raft state.
type Status struct {
	ID           string
	Addr         string
	State        string // "Leader", "Follower", "Candidate" or "Shutdown"
	LeaderID     string // empty when no leader is known
	LeaderAddr   string
	Term         uint64
	LastLogIndex uint64 // last entry in the log (or snapshot)
	CommitIndex  uint64 // last entry known committed
	AppliedIndex uint64 // State().AppliedIndex(): last entry the FSM applied
	LastContact  time.Time
	Members      int // servers in the configuration, this one included
	NumPeers     int // voters other than this node
	Voter        bool
}

// ID returns this node's id (Config.NodeID).
func (n *Node) ID() string { return n.id }

// Addr returns the transport's address, the one to give AddVoter or
// BootstrapCluster for this node: AdvertiseAddr, else the real listening
// address (the chosen port for "host:0"), or "inmem:ID" in memory.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Leader returns the leader's id and address, empty when none is known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitForLeader waits until a leader is known (this node or another). It
// returns ErrClosed, or ErrNoLeader joined with ctx's error.
func (n *Node) WaitForLeader(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		if id, _ := n.Leader(); id != "" {
			return nil
		}
		select {
		case <-n.done:
			return ErrClosed
		default:
		}
		if err := leaderRetry.Sleep(ctx, min(attempt, 3)+1); err != nil {
			return fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
	}
}

// BootstrapCluster starts a new cluster made of servers, which must
// include this node and, with Config.BootstrapExpect, at least that many
// members. Every founding node should be given the same list (any of them
// may be called; each records the list, and they elect a leader once a
// majority is up). It returns nil without change when this node already
// has a configuration (bootstrapped before, or added by a leader), without
// looking at servers, so it is safe to call again.
func (n *Node) BootstrapCluster(servers []Member) error {
	if cur, err := n.configuration(); err != nil || len(cur.Servers) > 0 {
		return err
	}
	if len(servers) < n.expect {
		return fmt.Errorf("raft: bootstrap with %d members, Config.BootstrapExpect is %d", len(servers), n.expect)
	}
	var conf raft.Configuration
	self, voters, seen := false, 0, map[string]bool{}
	for _, m := range servers {
		if m.ID == "" || m.Address == "" || seen[m.ID] {
			return fmt.Errorf("raft: bootstrap: member %+v lacks an id or address, or repeats an id", m)
		}
		seen[m.ID] = true
		self = self || m.ID == n.id
		s := raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Address)}
		if m.Voter {
			s.Suffrage = raft.Voter
			voters++
		}
		conf.Servers = append(conf.Servers, s)
	}
	if !self || voters == 0 {
		return fmt.Errorf("raft: bootstrap: the members must include this node (%s) and a voter", n.id)
	}
	err := n.await(context.Background(), n.raft.BootstrapCluster(conf))
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil
	}
	return err
}

// AddVoter adds (or promotes) server id at addr as a voter; re-adding a
// member with the same address is harmless. Only the leader may: others
// return a *NotLeaderError. It returns once the change is committed.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	return n.change(ctx, id, addr, func(t time.Duration) raft.IndexFuture {
		return n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, t)
	})
}

// AddNonVoter adds server id at addr as a non-voter (it replicates the
// log and serves reads but does not vote), like AddVoter.
func (n *Node) AddNonVoter(ctx context.Context, id, addr string) error {
	return n.change(ctx, id, addr, func(t time.Duration) raft.IndexFuture {
		return n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, t)
	})
}

// RemoveServer removes server id from the configuration (removing an
// absent id is not an error). Only the leader may: others return a
// *NotLeaderError. A leader removing itself steps down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	return n.change(ctx, id, "-", func(t time.Duration) raft.IndexFuture {
		return n.raft.RemoveServer(raft.ServerID(id), 0, t)
	})
}

func (n *Node) change(ctx context.Context, id, addr string, f func(time.Duration) raft.IndexFuture) error {
	if id == "" || addr == "" {
		return invalid("membership change needs a server id and address")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-n.done:
		return ErrClosed
	default:
	}
	return n.await(ctx, f(enqueueTimeout(ctx)))
}

// Members returns the latest Raft configuration (possibly not yet
// committed), with the leader marked; empty before bootstrap.
func (n *Node) Members() ([]Member, error) {
	conf, err := n.configuration()
	if err != nil {
		return nil, err
	}
	leader, _ := n.Leader()
	out := make([]Member, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, Member{ID: string(s.ID), Address: string(s.Address),
			Voter: s.Suffrage == raft.Voter, Leader: string(s.ID) == leader})
	}
	return out, nil
}

func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, n.raftErr(err)
	}
	return f.Configuration(), nil
}

// Status returns this node's Raft state now.
func (n *Node) Status() Status {
	s := Status{
		ID: n.id, Addr: n.Addr(), State: n.raft.State().String(),
		Term: n.raft.CurrentTerm(), LastLogIndex: n.raft.LastIndex(),
		CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.fsm.state.AppliedIndex(),
		LastContact: n.raft.LastContact(),
	}
	s.LeaderID, s.LeaderAddr = n.Leader()
	if conf, err := n.configuration(); err == nil {
		s.Members = len(conf.Servers)
		for _, m := range conf.Servers {
			if string(m.ID) == n.id {
				s.Voter = m.Suffrage == raft.Voter
			} else if m.Suffrage == raft.Voter {
				s.NumPeers++
			}
		}
	}
	return s
}
