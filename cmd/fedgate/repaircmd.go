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

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/node/peerapi"
)

func newRepairCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "repair BUCKET[/PREFIX]",
		Short: "Rebuild the missing or corrupt copies and erasure shards of a bucket's objects",
		Long: `Check every object of BUCKET under PREFIX in its replicate or erasure placement and
rebuild what a store lost (copies, shards, manifests), with a progress bar. It runs on the server
at --endpoint, which reads the surviving copies or shards and writes the missing ones.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, prefix, _ := strings.Cut(args[0], "/")
			if err := c.resolve(); err != nil {
				return err
			}
			payload, _ := json.Marshal(gateway.AdminRepair{Bucket: bucket, Prefix: prefix})
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimRight(c.endpoint, "/")+"/_fedgate/admin/repair", bytes.NewReader(payload))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if err := peerapi.SignRequest(cmd.Context(), req, payload, c.accessKey, c.secretKey, c.region); err != nil {
				return err
			}
			resp, err := (&http.Client{}).Do(req) // no overall timeout: a repair takes as long as it takes
			if err != nil {
				return fmt.Errorf("cannot reach the fedgate server at %s: %w", c.endpoint, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				var ae gateway.AdminError
				if json.Unmarshal(data, &ae) == nil && ae.Error != "" {
					return fmt.Errorf("%s (%s)", ae.Error, ae.Code)
				}
				return fmt.Errorf("server answered %s: %s", resp.Status, data)
			}
			bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
				progressbar.OptionSetDescription("repairing "+args[0]), progressbar.OptionShowCount(),
				progressbar.OptionSetItsString("objects"), progressbar.OptionShowIts(), progressbar.OptionClearOnFinish())
			sc := bufio.NewScanner(resp.Body)
			var last gateway.AdminRepairLine
			for sc.Scan() {
				if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
					return fmt.Errorf("unreadable progress from the server: %w", err)
				}
				if last.Total > 0 && bar.GetMax64() != last.Total {
					bar.ChangeMax64(last.Total)
				}
				_ = bar.Set64(last.Done)
			}
			_ = bar.Finish()
			if err := sc.Err(); err != nil {
				return fmt.Errorf("the repair's progress stream broke (the repair may go on or stop on the server): %w", err)
			}
			if last.Error != "" {
				return errors.New(last.Error)
			}
			if last.Stats == nil {
				return errors.New("the server ended the repair without a result")
			}
			s := last.Stats
			fmt.Fprintf(cmd.OutOrStdout(), "%d objects: %d healthy, %d repaired, %d failed (%d shards, %d manifests, %d copies rewritten; %d bytes read)\n",
				s.Objects, s.Healthy, s.Repaired, s.Failed, s.Shards, s.Manifests, s.Copies, s.BytesRead)
			if s.Failed > 0 {
				return fmt.Errorf("%d objects could not be repaired (see the server log)", s.Failed)
			}
			return nil
		},
	}
	c.bind(cmd)
	return cmd
}
