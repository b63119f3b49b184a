package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/raft/rmetrics"
	"github.com/fedgate/fedgate/regionstate"
)

// raftMetrics are gauges of this node's view of the region's Raft group
// (raft/rmetrics, fedgate_raft_*), read at each scrape, and the counters
// of its group commit.
func raftMetrics(rn *regionstate.Node) []prometheus.Collector {
	view := func() rmetrics.View {
		s := rn.Status()
		return rmetrics.View{Leader: s.State == "Leader", HasLeader: s.LeaderID != "", Term: s.Term,
			CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LastContact: s.LastContact}
	}
	return append(rmetrics.Gauges("fedgate_raft", "region", view),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_raft_group_entries_total",
			Help: "Log entries this node appended as leader that hold a group of writes (group commit)."},
			func() float64 { e, _ := rn.GroupStats(); return float64(e) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_raft_group_commands_total",
			Help: "Writes this node committed as leader inside group entries."},
			func() float64 { _, c := rn.GroupStats(); return float64(c) }),
	)
}
