package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/spf13/cobra"
)

func newRegionCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "region",
		Short: "Show the regions a peered policy declares and how this one sees them",
		Long: `Show the regions of a policy that peers regions through the global bucket catalog
(docs/regions.md), as the node at --endpoint sees them. Uses the admin API with the root credentials.`,
	}
	c.bind(cmd)
	var asJSON, check bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Every region: endpoint, reachability, buckets at home there, bytes read through it; and the catalog's leader and lag",
		Long: `Show every region of the policy: its location and endpoint, whether the endpoint answers
now (and in how many milliseconds), how many buckets are at home there, and the bytes this region
read through that region's gateway this month (and those its cache served instead). Then the
global bucket catalog as this node sees it: its member, the leading region, applied index, lag
and last contact with the leader.

With --check the exit status is 2 when the catalog has no leader or a region does not answer
(1: the status could not be read at all), 0 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st adminapi.Regions
			if err := c.do(cmd.Context(), http.MethodGet, "/regions", nil, &st); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REGION\tLOCATION\tENDPOINT\tREACHABLE\tRTT\tBUCKETS\tREAD THROUGH IT\tCACHE SERVED")
				for _, r := range st.Regions {
					name, reach := r.Name, "yes"
					if r.Self {
						name += " (this)"
					}
					if !r.Reachable {
						reach = "no: " + r.Problem
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1fms\t%d\t%s\t%s\n", name, r.Location, r.Endpoint, reach, r.RTTMillis, r.Buckets,
						humanBytes(r.BytesFrom), humanBytes(r.AvoidedBytes))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				cat, leader := st.Catalog, st.Catalog.Leader
				if leader == "" {
					leader = "(none: buckets cannot be created or deleted now)"
				}
				contact := fmt.Sprintf("%.1fs ago", cat.LastContactSeconds)
				switch {
				case cat.LastContactSeconds < 0:
					contact = "never"
				case cat.LastContactSeconds == 0:
					contact = "(leader)"
				}
				fmt.Fprintf(out, "\nCatalog: member %s (voter: %t), leader %s, applied %d, lag %d, last contact %s, %d buckets\n",
					cat.Member, cat.Voter, leader, cat.Applied, cat.Lag, contact, cat.Buckets)
			}
			if check {
				var bad []string
				if st.Catalog.Leader == "" {
					bad = append(bad, "the catalog has no leader")
				}
				for _, r := range st.Regions {
					if !r.Reachable {
						bad = append(bad, r.Name+" does not answer: "+r.Problem)
					}
				}
				if len(bad) > 0 {
					return exitError{code: 2, err: fmt.Errorf("regions not healthy: %s", strings.Join(bad, "; "))}
				}
			}
			return nil
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, `print {"region", "catalog": {...}, "regions": [{"name", "reachable", ...}]}`)
	status.Flags().BoolVar(&check, "check", false, "exit 2 when the catalog has no leader or a region does not answer")
	cmd.AddCommand(status)
	return cmd
}
