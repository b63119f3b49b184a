package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/bytesize"
)

func newClusterCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change the members of a multi-node region",
		Long: `Show and change the Raft members of the region the server at --endpoint belongs to.
Like 'fedgate user', these commands use the admin API with the root credentials.`,
	}
	c.bind(cmd)

	var asJSON, check bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show members, voters, the leader, and each node's term, applied index and health",
		Long: `Show members, voters, the leader, and each node's term, applied index, cache and staging use,
clock offset and health. With --check the exit status says whether the region is healthy:
0 when it has a leader, every member is healthy and no store fails a member's health check,
2 when not (1: the status could not be read at all), for scripts and health checks. It also
lists the objects members read degraded lately (served by erasure reconstruction or from
another copy because a store lacked theirs); 'fedgate repair' rebuilds them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st adminapi.Cluster
			if err := c.do(cmd.Context(), http.MethodGet, "/cluster", nil, &st); err != nil {
				return err
			}
			unhealthy := func() error {
				if !check {
					return nil
				}
				var bad []string
				if st.Leader == "" {
					bad = append(bad, "no leader")
				}
				for _, m := range st.Members {
					if !m.Healthy {
						bad = append(bad, m.ID+": "+m.Problem)
					}
					for _, p := range m.UnhealthyStores {
						bad = append(bad, fmt.Sprintf("store %s fails %s's health check", p.Store, m.ID))
					}
				}
				if len(bad) == 0 {
					return nil
				}
				return exitError{code: 2, err: fmt.Errorf("the region is not healthy: %s", strings.Join(bad, "; "))}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
				return unhealthy()
			}
			leader := st.Leader
			if leader == "" {
				leader = "(none)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Leader: %s\n", leader)
			b := st.DrainBacklog
			fmt.Fprintf(cmd.OutOrStdout(), "Drain backlog: %d objects, %s, oldest %s\n", b.Objects, humanBytes(b.Bytes),
				(time.Duration(b.OldestSeconds) * time.Second).String())
			printLifecycle(cmd.OutOrStdout(), st.Lifecycle)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tHTTP ADDRESS\tVOTER\tSTATE\tTERM\tAPPLIED\tCACHE\tSTAGING\tCLOCK\tHEALTHY")
			for _, m := range st.Members {
				health := "yes"
				if !m.Healthy {
					health = "no: " + m.Problem
				}
				state := m.State
				if state == "" {
					state = "?"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%d\t%d\t%s/%s\t%s/%s\t%+.3fs\t%s\n", m.ID, m.Address, m.HTTP, m.Voter, state, m.Term, m.Applied,
					humanBytes(m.CacheUsed), humanBytes(m.CacheCapacity), humanBytes(m.StagingUsed), humanBytes(m.StagingCapacity), m.ClockOffset, health)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printDegraded(cmd.OutOrStdout(), st)
			return unhealthy()
		},
	}
	status.Flags().BoolVar(&check, "check", false, "exit 2 when the region has no leader, a member is unhealthy or a store fails its health check (0 when healthy)")
	status.Flags().BoolVar(&asJSON, "json", false, `print {"leader": ID, "members": [{"id", "address", "voter", "healthy", ...}]}`)

	add := &cobra.Command{
		Use:   "add NODE",
		Short: "Add the running node whose S3 address (its --listen) is NODE as a voter",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m adminapi.Member
			if err := c.do(cmd.Context(), http.MethodPost, "/cluster/members", adminapi.AddMember{Address: args[0]}, &m); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Added %s (raft %s, http %s) as a voter.\n", m.ID, m.Address, m.HTTP)
			return nil
		},
	}

	remove := &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove the member whose node id is NODE from the region",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.do(cmd.Context(), http.MethodDelete, "/cluster/members/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Removed %s from the region.\n", args[0])
			return nil
		},
	}
	snapshot := &cobra.Command{
		Use:   "snapshot",
		Short: "Take a Raft snapshot on the node at --endpoint now and compact its log (before a backup)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Index uint64 `json:"index"`
			}
			if err := c.do(cmd.Context(), http.MethodPost, "/cluster/snapshot", nil, &out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Snapshot taken at index %d (in the node's --data-dir, raft/snapshots).\n", out.Index)
			return nil
		},
	}
	cmd.AddCommand(status, add, remove, snapshot)
	return cmd
}

// printDegraded prints the stores failing a member's health check and
// the objects members read degraded lately, merged over the members.
func printDegraded(w io.Writer, st adminapi.Cluster) {
	type obj struct {
		stores, nodes []string
		seen          time.Time
	}
	objs := map[[2]string]*obj{}
	stores := map[string][]string{} // store -> "node: error"
	var reads int64
	for _, m := range st.Members {
		reads += m.DegradedReads
		for _, p := range m.UnhealthyStores {
			stores[p.Store] = append(stores[p.Store], m.ID+": "+p.Error)
		}
		for _, o := range m.DegradedObjects {
			k := [2]string{o.Bucket, o.Key}
			x := objs[k]
			if x == nil {
				x = &obj{}
				objs[k] = x
			}
			x.stores = append(x.stores, o.Stores...)
			x.nodes = append(x.nodes, m.ID)
			if o.Seen.After(x.seen) {
				x.seen = o.Seen
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		fmt.Fprintf(w, "Store %s fails its health check on %s\n", name, strings.Join(stores[name], "; "))
	}
	if reads == 0 && len(objs) == 0 {
		fmt.Fprintln(w, "Degraded data: none seen")
		return
	}
	fmt.Fprintf(w, "Degraded data: %d reads served without some stores since the nodes started; objects read degraded lately (`fedgate repair BUCKET` rebuilds them):\n", reads)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BUCKET\tKEY\tMISSING ON\tREAD BY\tLAST SEEN")
	for _, k := range slices.SortedFunc(maps.Keys(objs), func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }) {
		x := objs[k]
		slices.Sort(x.stores)
		slices.Sort(x.nodes)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", k[0], k[1], strings.Join(slices.Compact(x.stores), ","), strings.Join(slices.Compact(x.nodes), ","), x.seen.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// humanBytes prints n in IEC units ("1.50 GiB"), the one formatter of the
// CLI, the logs and the reports (internal/bytesize; docs/units.md).
func humanBytes(n int64) string { return bytesize.Format(n) }

// printLifecycle prints the lifecycle runner's line of cluster status.
func printLifecycle(w io.Writer, lc adminapi.Lifecycle) {
	next := lc.Next.Local().Format(time.DateTime)
	if lc.LastEnd.IsZero() {
		fmt.Fprintf(w, "Lifecycle: no pass yet; next %s (every %s)\n", next, time.Duration(lc.EverySeconds*float64(time.Second)))
		return
	}
	fmt.Fprintf(w, "Lifecycle: last pass %s on %s (%d scanned, %d expired, %d uploads aborted, %d skipped, %d errors); next %s\n",
		lc.LastEnd.Local().Format(time.DateTime), lc.LastNode, lc.Scanned, lc.Expired, lc.Aborted, lc.Skipped, lc.Errors, next)
}
