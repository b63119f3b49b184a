package rmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gauges show the view read at scrape time, under the group's prefix.
func TestGauges(t *testing.T) {
	v := View{HasLeader: true, Term: 7, CommitIndex: 42, AppliedIndex: 40, LastContact: time.Now().Add(-time.Hour)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Gauges("fedgate_catalog", "catalog", func() View { return v })...)
	want := `
# HELP fedgate_catalog_applied_index The last Raft log index this node's state applied (behind commit: catching up).
# TYPE fedgate_catalog_applied_index gauge
fedgate_catalog_applied_index 40
# HELP fedgate_catalog_commit_index The last Raft log index this node knows committed.
# TYPE fedgate_catalog_commit_index gauge
fedgate_catalog_commit_index 42
# HELP fedgate_catalog_has_leader 1 when this node knows a leader of the catalog's Raft group (0: an election, or cut off from the majority).
# TYPE fedgate_catalog_has_leader gauge
fedgate_catalog_has_leader 1
# HELP fedgate_catalog_leader 1 when this node is the catalog's Raft leader.
# TYPE fedgate_catalog_leader gauge
fedgate_catalog_leader 0
# HELP fedgate_catalog_term The Raft term this node is in (each election starts a new one).
# TYPE fedgate_catalog_term gauge
fedgate_catalog_term 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fedgate_catalog_applied_index", "fedgate_catalog_commit_index",
		"fedgate_catalog_has_leader", "fedgate_catalog_leader", "fedgate_catalog_term"); err != nil {
		t.Fatal(err)
	}
	v.Term = 8
	if got := testutil.ToFloat64(Gauges("fedgate_catalog", "catalog", func() View { return v })[2]); got != 8 {
		t.Fatalf("term after a change: %v", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fedgate_catalog_last_contact_seconds" {
			if s := mf.GetMetric()[0].GetGauge().GetValue(); s < 3500 {
				t.Fatalf("last contact %v s ago, want about an hour", s)
			}
			return
		}
	}
	t.Fatal("no fedgate_catalog_last_contact_seconds")
}
