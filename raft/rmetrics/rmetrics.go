// Package rmetrics is the Prometheus side of fedgate's Raft groups: the
// same gauges for the region's group (fedgate_raft_*) and the catalog's
// (fedgate_catalog_*), read from a member's view at each scrape.
package rmetrics

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// View is what one member knows of its group.
type View struct {
	Leader       bool // this member leads
	HasLeader    bool // a leader is known
	Term         uint64
	CommitIndex  uint64    // the last index known committed
	AppliedIndex uint64    // the last index the state machine applied
	LastContact  time.Time // when a follower last heard from its leader
}

// Of is r's view, with applied as the state machine's applied index.
func Of(r *raft.Raft, applied uint64) View {
	_, id := r.LeaderWithID()
	return View{Leader: r.State() == raft.Leader, HasLeader: id != "", Term: r.CurrentTerm(),
		CommitIndex: r.CommitIndex(), AppliedIndex: applied, LastContact: r.LastContact()}
}

// Gauges are the gauges prefix_leader, _has_leader, _term, _commit_index,
// _applied_index and _last_contact_seconds of a member of group ("region",
// "catalog"), each read from view at each scrape.
func Gauges(prefix, group string, view func() View) []prometheus.Collector {
	g := func(name, help string, f func(View) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "_" + name, Help: help}, func() float64 { return f(view()) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		g("leader", "1 when this node is the "+group+"'s Raft leader.", func(v View) float64 { return b(v.Leader) }),
		g("has_leader", "1 when this node knows a leader of the "+group+"'s Raft group (0: an election, or cut off from the majority).",
			func(v View) float64 { return b(v.HasLeader) }),
		g("term", "The Raft term this node is in (each election starts a new one).", func(v View) float64 { return float64(v.Term) }),
		g("commit_index", "The last Raft log index this node knows committed.", func(v View) float64 { return float64(v.CommitIndex) }),
		g("applied_index", "The last Raft log index this node's state applied (behind commit: catching up).",
			func(v View) float64 { return float64(v.AppliedIndex) }),
		g("last_contact_seconds", "Seconds since a follower last heard from its leader (0 on the leader).", func(v View) float64 {
			if v.Leader || v.LastContact.IsZero() {
				return 0
			}
			return time.Since(v.LastContact).Seconds()
		}),
	}
}
