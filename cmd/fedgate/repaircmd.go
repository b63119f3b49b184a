package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/node/peerapi"
)

func newRepairCmd() *cobra.Command {
	var c adminClient
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "repair BUCKET[/PREFIX]",
		Short: "Rebuild the missing or corrupt copies and erasure shards of a bucket's objects",
		Long: `Check every object of BUCKET under PREFIX in its replicate or erasure placement and
rebuild what a store lost (copies, shards, manifests), with a progress bar (when stderr is not a
terminal, a line every 5 s instead). It runs on the server
at --endpoint, which reads the surviving copies or shards and writes the missing ones.

With --dry-run it only checks (it still reads every copy or shard to verify it) and lists each
object that needs repair with the stores that lack its copy, shards or manifest; nothing is
written. 'fedgate cluster status' lists the objects the nodes read degraded lately.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, prefix, _ := strings.Cut(args[0], "/")
			c.timeout = -1 // no overall timeout: a repair takes as long as it takes
			if err := c.resolve(); err != nil {
				return err
			}
			payload, _ := json.Marshal(adminapi.Repair{Bucket: bucket, Prefix: prefix, DryRun: dryRun})
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimRight(c.endpoint, "/")+"/_fedgate/admin/repair", bytes.NewReader(payload))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if err := peerapi.SignRequest(cmd.Context(), req, payload, c.accessKey, c.secretKey, c.region); err != nil {
				return err
			}
			resp, err := c.http.Do(req)
			if err != nil {
				return reachError(c.endpoint, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				return c.answerError(resp.Status, data)
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			verb := "repairing "
			if dryRun {
				verb = "checking "
			}
			last, found, err := followRepair(resp.Body, errw, verb+args[0], asJSON)
			if err != nil {
				return err
			}
			s := last.Stats
			if asJSON {
				if err := printJSON(out, map[string]any{"dry_run": dryRun, "stats": s, "needs_repair": found, "error": last.Error}); err != nil {
					return err
				}
			} else {
				printRepair(out, dryRun, s, found)
			}
			if last.Error != "" {
				return errors.New(last.Error)
			}
			if s.Failed > 0 {
				return fmt.Errorf("%d objects could not be repaired (see the server log)", s.Failed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only check: list the objects that need repair and the stores lacking their data; write nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"dry_run", "stats": {...}, "needs_repair": [{"bucket", "key", "stores"}]} instead of a table`)
	c.bind(cmd)
	return cmd
}

// followRepair reads the repair's progress stream to its result line, and
// shows the progress on errw (a bar on a terminal; into a pipe or a file, a
// line at the first progress and then every watchLine, no \r debris;
// nothing with asJSON). It returns the last line, which has Stats, and the
// objects found needing repair.
func followRepair(body io.Reader, errw io.Writer, what string, asJSON bool) (adminapi.RepairLine, []adminapi.DegradedObject, error) {
	term := isTerminal(errw)
	var lastLine time.Time
	var bar *progressbar.ProgressBar // made with the first progress line
	var found []adminapi.DegradedObject
	sc := bufio.NewScanner(body)
	var last adminapi.RepairLine
	for sc.Scan() {
		last = adminapi.RepairLine{}
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			return last, nil, fmt.Errorf("unreadable progress from the server: %w", err)
		}
		if last.Found != nil {
			found = append(found, *last.Found)
			continue
		}
		if last.Stats != nil || last.Error != "" {
			break
		}
		switch {
		case asJSON:
		case !term:
			if time.Since(lastLine) >= watchLine {
				fmt.Fprintf(errw, "%s: %s objects, %s read\n", what, ofTotal(last.Done, last.Total, itoa), humanBytes(last.BytesRead))
				lastLine = time.Now()
			}
		default:
			if bar == nil {
				bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(errw),
					progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
					progressbar.OptionSetItsString("objects"), progressbar.OptionShowIts(), progressbar.OptionClearOnFinish())
			}
			if last.Total > 0 && bar.GetMax64() != last.Total {
				bar.ChangeMax64(last.Total)
			}
			bar.Describe(fmt.Sprintf("%s (%s read)", what, humanBytes(last.BytesRead)))
			_ = bar.Set64(last.Done)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err := sc.Err(); err != nil {
		return last, nil, fmt.Errorf("the repair's progress stream broke (the repair may go on or stop on the server): %w", err)
	}
	if last.Error != "" && last.Stats == nil {
		return last, nil, errors.New(last.Error)
	}
	if last.Stats == nil {
		return last, nil, errors.New("the server ended the repair without a result")
	}
	return last, found, nil
}

// printRepair prints a repair's result for people: with dryRun, the objects
// that need repair and the stores lacking their data, then the counts.
func printRepair(out io.Writer, dryRun bool, s *backend.RepairStats, found []adminapi.DegradedObject) {
	if !dryRun {
		fmt.Fprintf(out, "%d objects: %d healthy, %d repaired, %d failed (%d shards, %d manifests, %d copies rewritten; %d bytes read)\n",
			s.Objects, s.Healthy, s.Repaired, s.Failed, s.Shards, s.Manifests, s.Copies, s.BytesRead)
		return
	}
	if len(found) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tLACKING ON")
		for _, f := range found {
			fmt.Fprintf(tw, "%s\t%s\n", f.Key, strings.Join(f.Stores, ","))
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(out, "Dry run, nothing written: %d objects checked, %d healthy, %d need repair (%d shards, %d manifests, %d copies to rewrite), %d could not be checked; %d bytes read\n",
		s.Objects, s.Healthy, s.Repaired, s.Shards, s.Manifests, s.Copies, s.Failed, s.BytesRead)
}
