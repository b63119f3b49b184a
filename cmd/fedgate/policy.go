package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/policies"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check placement-policy files (see docs/policies.md)",
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
	cmd.AddCommand(validate)
	return cmd
}

// servedFeatures is what this build serves of the policy file: every store
// kind, origins (mounting existing data), per-bucket cache settings and
// write-back buckets. Replication, erasure coding, pinning, routing
// preferences and egress budgets are refused as "not supported yet".
func servedFeatures() policies.Features {
	return policies.Features{
		StoreKinds: map[policies.StoreKind]bool{policies.KindS3: true, policies.KindGCS: true, policies.KindAzure: true, policies.KindPosix: true},
		Origin:     true,
		Cache:      true,
		Prefetch:   true,
		WriteBack:  true,
		Pin:        true,
	}
}
