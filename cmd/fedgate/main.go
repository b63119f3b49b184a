// Command fedgate is the one binary of fedgate: the gateway server and the
// tools that talk to it.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "fedgate:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "fedgate",
		Short: "fedgate: one S3 endpoint per GPU region over every cloud's storage",
		Long: `fedgate is a multi-cloud data federation gateway for GPU training. Each GPU region
runs fedgate nodes that present one S3 namespace over AWS S3, Google Cloud Storage,
Azure Blob and on-prem stores, with a local NVMe cache.

Start a single-node region on embedded defaults with:  fedgate server`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServerCmd(), newUserCmd(), newPolicyCmd(), newClusterCmd(), newCacheCmd(), newEgressCmd(), newRepairCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fedgate's version and build information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			commit := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						commit = " commit " + s.Value
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fedgate %s%s %s %s/%s\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
