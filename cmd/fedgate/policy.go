package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/policies"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check, diff and apply placement-policy files (see docs/policies.md)",
	}
	var all bool
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Parse and validate a policy file; print every error with file:line:column",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := servedFeatures()
			if all {
				f = policies.AllFeatures()
			}
			p, err := policies.Load(args[0], f)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d regions, %d stores, %d buckets)\n", args[0], len(p.Regions), len(p.Stores), len(p.Buckets))
			return nil
		},
	}
	validate.Flags().BoolVar(&all, "all-features", false, "accept features this build does not serve yet (check a file meant for a newer fedgate)")
	cmd.AddCommand(validate, newPolicyShowCmd(), newPolicyDiffCmd(), newPolicyApplyCmd())
	return cmd
}

// loadForRegion validates FILE as this build serves it and returns its
// text and the parsed policy.
func loadForRegion(file string) ([]byte, *policies.Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	p, err := policies.Parse(file, data, servedFeatures())
	if err != nil {
		return nil, nil, err
	}
	return data, p, nil
}

// activeOf fetches and parses the region's active policy (nil: none).
func activeOf(ctx context.Context, c *adminClient) (adminapi.Policy, *policies.Policy, error) {
	var a adminapi.Policy
	if err := c.do(ctx, http.MethodGet, "/policy", nil, &a); err != nil {
		return a, nil, err
	}
	if a.Version == 0 {
		return a, nil, nil
	}
	p, err := policies.Parse(fmt.Sprintf("active policy (version %d)", a.Version), []byte(a.YAML), policies.AllFeatures())
	return a, p, err
}

func printChanges(w io.Writer, changes []string) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "No changes.")
		return
	}
	for _, c := range changes {
		fmt.Fprintln(w, c)
	}
}

func newPolicyShowCmd() *cobra.Command {
	var c adminClient
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the policy in force in the region at --endpoint (the file as applied)",
		Long: `Print the region's active policy: the YAML last applied (or seeded with --config), with its
version. A region that never had one runs on embedded defaults (one on-prem store under the
node's --data-dir), and this says so. Save it to edit and re-apply:
  fedgate policy show > policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var a adminapi.Policy
			if err := c.do(cmd.Context(), http.MethodGet, "/policy", nil, &a); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), a)
			}
			if a.Version == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "# No policy applied: the region runs on embedded defaults (one on-prem store under the node's --data-dir).")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# Active policy, version %d\n%s", a.Version, a.YAML)
			if !strings.HasSuffix(a.YAML, "\n") {
				fmt.Fprintln(cmd.OutOrStdout())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"version": N, "yaml": TEXT}`)
	c.bind(cmd)
	return cmd
}

func newPolicyDiffCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "diff FILE",
		Short: "Show what applying FILE would change against the region's active policy",
		Long: `Validate FILE, fetch the active policy from the server at --endpoint and print what
would change, one line each: + added, - removed, ~ changed (with old -> new values).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, next, err := loadForRegion(args[0])
			if err != nil {
				return err
			}
			a, active, err := activeOf(cmd.Context(), &c)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Against the active policy (version %d):\n", a.Version)
			printChanges(cmd.OutOrStdout(), policies.Diff(active, next))
			return nil
		},
	}
	c.bind(cmd)
	return cmd
}

func newPolicyApplyCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Make FILE the region's active policy on every node, without a restart",
		Long: `Validate FILE, show what changes against the active policy, and apply it through
Raft to every node of the region at --endpoint. The server refuses (and changes nothing) when
the file is invalid, when a store cannot be opened, when a bucket it removes or moves still has
write-back data to drain or multipart uploads in progress, or when the active policy changed
since the diff was taken.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, next, err := loadForRegion(args[0])
			if err != nil {
				return err
			}
			a, active, err := activeOf(cmd.Context(), &c)
			if err != nil {
				return err
			}
			changes := policies.Diff(active, next)
			if len(changes) == 0 && a.Version > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "No changes against the active policy (version %d); nothing applied.\n", a.Version)
				return nil
			}
			var out adminapi.Policy
			req := adminapi.PolicyApply{YAML: string(data), File: args[0], BaseVersion: a.Version}
			if err := c.do(cmd.Context(), http.MethodPut, "/policy", req, &out); err != nil {
				return err
			}
			printChanges(cmd.OutOrStdout(), out.Changes)
			fmt.Fprintf(cmd.OutOrStdout(), "Applied: the region's policy is now version %d.\n", out.Version)
			return nil
		},
	}
	c.bind(cmd)
	return cmd
}

// servedFeatures is what this build serves of the policy file.
func servedFeatures() policies.Features { return node.ServedFeatures() }
