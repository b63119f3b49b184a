// Command fedgate is the one binary of fedgate: the gateway server and the
// tools that talk to it.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedgate/fedgate/internal/suggest"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	if filepath.Base(os.Args[0]) == mountHelperName { // mount(8)'s helper for type fedgate
		os.Exit(runMountHelper(os.Args[1:], os.Stderr))
	}
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "fedgate:", err)
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// exitError ends fedgate with its own exit status (1 is any other error).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

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
		Version:       readBuildInfo().String(), // fedgate --version
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newServerCmd(), newUserCmd(), newPolicyCmd(), newClusterCmd(), newRegionCmd(), newCacheCmd(), newEgressCmd(), newRepairCmd(), newBenchCmd(), newMountCmd(), newVersionCmd())
	strictGroups(root)
	root.SetFlagErrorFunc(suggestFlag)
	return root
}

// suggestFlag adds "did you mean" to an unknown flag's error (cobra
// suggests subcommands, not flags).
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	}
	var names []string
	visit := func(f *pflag.Flag) { names = append(names, f.Name) }
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	best := suggest.Closest(name, names)
	if best != "" {
		return fmt.Errorf("%s; did you mean --%s? (see '%s --help')", msg, best, cmd.CommandPath())
	}
	return fmt.Errorf("%s (see '%s --help')", msg, cmd.CommandPath())
}

// strictGroups makes every command that only groups others (fedgate
// policy, fedgate cluster, ...) fail on an unknown subcommand, with "did
// you mean", instead of printing its help and exiting 0: a script that
// mistypes `fedgate policy aply` must see a failure. With no argument it
// still prints its help.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return fmt.Errorf("%s (see '%s --help')", msg, cmd.CommandPath())
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fedgate's version, the commit it was built from and its Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), readBuildInfo())
			return nil
		},
	}
}
