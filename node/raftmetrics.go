package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/regionstate"
)

// raftMetrics are gauges of this node's view of the region's Raft group,
// read at each scrape: who leads, the term, how far the log is committed
// and applied here, and how long ago a follower heard from its leader.
func raftMetrics(rn *regionstate.Node) []prometheus.Collector {
	g := func(name, help string, f func(regionstate.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(rn.Status()) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		g("fedgate_raft_leader", "1 when this node is the region's Raft leader.", func(s regionstate.Status) float64 { return b(s.State == "Leader") }),
		g("fedgate_raft_has_leader", "1 when this node knows a leader (0: an election, or cut off from the majority).",
			func(s regionstate.Status) float64 { return b(s.LeaderID != "") }),
		g("fedgate_raft_term", "The Raft term this node is in (each election starts a new one).", func(s regionstate.Status) float64 { return float64(s.Term) }),
		g("fedgate_raft_commit_index", "The last Raft log index this node knows committed.", func(s regionstate.Status) float64 { return float64(s.CommitIndex) }),
		g("fedgate_raft_applied_index", "The last Raft log index this node's state applied (behind commit: catching up).",
			func(s regionstate.Status) float64 { return float64(s.AppliedIndex) }),
		g("fedgate_raft_last_contact_seconds", "Seconds since a follower last heard from its leader (0 on the leader).", func(s regionstate.Status) float64 {
			if s.State == "Leader" || s.LastContact.IsZero() {
				return 0
			}
			return time.Since(s.LastContact).Seconds()
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_raft_group_entries_total",
			Help: "Log entries this node appended as leader that hold a group of writes (group commit)."},
			func() float64 { e, _ := rn.GroupStats(); return float64(e) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_raft_group_commands_total",
			Help: "Writes this node committed as leader inside group entries."},
			func() float64 { _, c := rn.GroupStats(); return float64(c) }),
	}
}
