package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/node"
	"github.com/fedgate/fedgate/node/peerapi"
)

// adminClient signs admin API requests with the root credentials.
type adminClient struct {
	endpoint, region, accessKey, secretKey, dataDir string
	// caFile is a PEM CA bundle trusted, besides the system's roots, for
	// an https endpoint ("": $FEDGATE_CA_FILE).
	caFile string
	http   *http.Client
	// credFile is where the credentials came from, when from a file.
	credFile string
	// timeout bounds each request (0: 30 s; negative: only the context
	// bounds it, for requests that list a whole bucket).
	timeout time.Duration
}

func (c *adminClient) bind(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&c.endpoint, "endpoint", "", "server URL (default $FEDGATE_ENDPOINT, else http://127.0.0.1:9000)")
	fl.StringVar(&c.accessKey, "root-access-key", "", "root access key (default $FEDGATE_ACCESS_KEY, else DATA-DIR/root-credentials.json)")
	fl.StringVar(&c.secretKey, "root-secret-key", "", "root secret key (default $FEDGATE_SECRET_KEY, else DATA-DIR/root-credentials.json)")
	fl.StringVar(&c.region, "s3-region", "us-east-1", "the server's signing region")
	fl.StringVar(&c.dataDir, "data-dir", "", "the server's --data-dir, where it keeps root-credentials.json (default $FEDGATE_DATA_DIR, else ./var)")
	bindCAFile(fl, &c.caFile)
}

// bindCAFile adds --ca-file, the CA an https server's certificate is
// checked against besides the system's roots.
func bindCAFile(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "ca-file", "", "PEM CA bundle that signed an https server's certificate, trusted besides the system's roots (default $FEDGATE_CA_FILE)")
}

// clientTLS is the TLS configuration for an https endpoint: the system's
// roots plus the certificates in caFile ("": $FEDGATE_CA_FILE, else none).
func clientTLS(caFile string) (*tls.Config, error) {
	flag := "--ca-file"
	if caFile == "" {
		caFile, flag = os.Getenv("FEDGATE_CA_FILE"), "FEDGATE_CA_FILE"
	}
	if caFile == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// reachError is the error for a request to the server at endpoint that got
// no answer, with a hint when the server's certificate was not trusted or
// the scheme is wrong.
func reachError(endpoint string, err error) error {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &ua):
		return fmt.Errorf("cannot reach the fedgate server at %s: %w (give the CA that signed its certificate with --ca-file or FEDGATE_CA_FILE)", endpoint, err)
	case errors.As(err, &he):
		return fmt.Errorf("cannot reach the fedgate server at %s: %w (the endpoint's host must be a name or IP address its certificate lists)", endpoint, err)
	case errors.As(err, &rh):
		return fmt.Errorf("cannot reach the fedgate server at %s: %w (it serves plain HTTP: use http://)", endpoint, err)
	}
	return fmt.Errorf("cannot reach the fedgate server at %s: %w", endpoint, err)
}

func (c *adminClient) resolve() error {
	if c.endpoint == "" {
		c.endpoint = os.Getenv("FEDGATE_ENDPOINT")
	}
	if c.endpoint == "" {
		c.endpoint = "http://127.0.0.1:9000"
	}
	if !strings.Contains(c.endpoint, "://") {
		c.endpoint = "http://" + c.endpoint
	}
	if c.accessKey == "" && c.secretKey == "" {
		c.accessKey, c.secretKey = os.Getenv("FEDGATE_ACCESS_KEY"), os.Getenv("FEDGATE_SECRET_KEY")
	}
	fileNote := ""
	if c.accessKey == "" && c.secretKey == "" {
		dir := c.dataDir
		if dir == "" {
			dir = os.Getenv("FEDGATE_DATA_DIR")
		}
		if dir == "" {
			dir = "./var"
		}
		file := node.CredentialsFile(dir)
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		data, err := os.ReadFile(file)
		switch {
		case err != nil:
			fileNote = fmt.Sprintf("%s (%v)", file, errors.Unwrap(err))
		default:
			var cr backend.Credentials
			if err := json.Unmarshal(data, &cr); err != nil || cr.AccessKey == "" || cr.SecretKey == "" {
				fileNote = fmt.Sprintf("%s (not a credentials file: want {\"access_key\": ..., \"secret_key\": ...})", file)
			} else {
				c.accessKey, c.secretKey, c.credFile = cr.AccessKey, cr.SecretKey, file
			}
		}
	}
	if c.accessKey == "" || c.secretKey == "" {
		if fileNote == "" {
			return errors.New("no root credentials: give both --root-access-key and --root-secret-key (or both FEDGATE_ACCESS_KEY and FEDGATE_SECRET_KEY)")
		}
		return fmt.Errorf("no root credentials: looked at --root-access-key/--root-secret-key, $FEDGATE_ACCESS_KEY/$FEDGATE_SECRET_KEY and %s; "+
			"pass --data-dir (or set $FEDGATE_DATA_DIR) to the server's --data-dir, where it wrote root-credentials.json on first start, or set FEDGATE_ACCESS_KEY and FEDGATE_SECRET_KEY", fileNote)
	}
	tlsCfg, err := clientTLS(c.caFile)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	switch {
	case c.timeout == 0:
		c.http = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	case c.timeout < 0:
		c.http = &http.Client{Transport: tr}
	default:
		c.http = &http.Client{Timeout: c.timeout, Transport: tr}
	}
	return nil
}

// answerError is the error for an admin API answer of status with body
// data, with a hint of what to do where there is one.
func (c *adminClient) answerError(status string, data []byte) error {
	var ae adminapi.Error
	if json.Unmarshal(data, &ae) != nil || ae.Error == "" {
		if strings.Contains(string(data), "HTTP request to an HTTPS server") {
			return fmt.Errorf("server answered %s: %s (its S3 port serves TLS: give --endpoint or FEDGATE_ENDPOINT as https://...)",
				status, strings.TrimSpace(string(data)))
		}
		return fmt.Errorf("server answered %s: %s", status, strings.TrimSpace(string(data)))
	}
	err := fmt.Errorf("%s (%s)", ae.Error, ae.Code)
	switch ae.Code {
	case "AccessDenied":
		from := "the access key given"
		if c.credFile != "" {
			from = "the key pair in " + c.credFile
		}
		return fmt.Errorf("%w: %s is not the region's root user; the admin commands need root's (a server that generated them keeps them in its DATA-DIR/root-credentials.json, mode 0600); other users get access to buckets with 'fedgate user grant'", err, from)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch":
		if c.credFile != "" {
			return fmt.Errorf("%w: the key pair came from %s; is it this server's --data-dir?", err, c.credFile)
		}
	}
	return err
}

// do sends one signed admin request and decodes a JSON answer into out.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	if err := c.resolve(); err != nil {
		return err
	}
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.endpoint, "/")+"/_fedgate/admin"+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := peerapi.SignRequest(ctx, req, payload, c.accessKey, c.secretKey, c.region); err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return reachError(c.endpoint, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 256<<20)) // an egress ledger of a busy month is large
	if resp.StatusCode >= 300 {
		return c.answerError(resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func newUserCmd() *cobra.Command {
	var c adminClient
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage S3 users, their keys and bucket grants on a running server",
	}
	c.bind(cmd)

	var ak, sk string
	var listJSON, addJSON bool
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a user and print its access key and secret key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cr struct {
				AccessKey string `json:"access_key"`
				SecretKey string `json:"secret_key"`
			}
			err := c.do(cmd.Context(), http.MethodPost, "/users", adminapi.AddUser{Name: args[0], AccessKey: ak, SecretKey: sk}, &cr)
			if err != nil {
				return err
			}
			if addJSON {
				return printJSON(cmd.OutOrStdout(), map[string]string{"name": args[0], "access_key": cr.AccessKey, "secret_key": cr.SecretKey})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "User %s created.\nAccessKey: %s\nSecretKey: %s\n", args[0], cr.AccessKey, cr.SecretKey)
			return nil
		},
	}
	add.Flags().StringVar(&ak, "access-key", "", "use this access key instead of generating one (for migrating clients)")
	add.Flags().StringVar(&sk, "secret-key", "", "use this secret key instead of generating one")

	list := &cobra.Command{
		Use:   "list",
		Short: "List users, their access keys and grants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var users []adminapi.User
			if err := c.do(cmd.Context(), http.MethodGet, "/users", nil, &users); err != nil {
				return err
			}
			if listJSON {
				return printJSON(cmd.OutOrStdout(), users)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tACCESS KEY\tCREATED\tGRANTS")
			for _, u := range users {
				var grants []string
				for b, p := range u.Grants {
					grants = append(grants, b+":"+p)
				}
				sort.Strings(grants)
				g := strings.Join(grants, ",")
				if u.Root {
					g = "(root: everything)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.AccessKey, u.Created, g)
			}
			return tw.Flush()
		},
	}

	list.Flags().BoolVar(&listJSON, "json", false, `print [{"name", "access_key", "root", "created", "grants": {BUCKET: read|write}}]`)
	add.Flags().BoolVar(&addJSON, "json", false, `print {"name", "access_key", "secret_key"}`)

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a user, its keys and grants (refused while it owns buckets)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.do(cmd.Context(), http.MethodDelete, "/users/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "User %s removed.\n", args[0])
			return nil
		},
	}

	grant := &cobra.Command{
		Use:   "grant NAME BUCKET read|write",
		Short: "Give a user read or write access to a bucket",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[2] != "read" && args[2] != "write" {
				return fmt.Errorf("permission %q: want read or write", args[2])
			}
			err := c.do(cmd.Context(), http.MethodPost, "/users/"+url.PathEscape(args[0])+"/grants", adminapi.Grant{Bucket: args[1], Perm: args[2]}, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Granted %s %s access to bucket %s.\n", args[0], args[2], args[1])
			return nil
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke NAME BUCKET",
		Short: "Remove a user's grant on a bucket",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := c.do(cmd.Context(), http.MethodDelete, "/users/"+url.PathEscape(args[0])+"/grants/"+url.PathEscape(args[1]), nil, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked %s's access to bucket %s.\n", args[0], args[1])
			return nil
		},
	}
	cmd.AddCommand(add, list, remove, grant, revoke)
	return cmd
}
