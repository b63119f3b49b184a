package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
)

// Check runs the checks Open makes of cfg before it touches anything
// (`fedgate server --check`): Validate, the policy file (parsed as the
// node would seed it, its region resolved, a shared default store on a
// multi-node region), the S3 port's certificate and key, the CA files and
// the peer TLS files. It opens no port, creates no directory and writes
// nothing. It returns one line per thing it checked; what it cannot know
// without starting (ports free, peers reachable, store credentials and
// buckets) it does not claim.
func Check(cfg Config) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var done []string
	note := func(format string, a ...any) { done = append(done, fmt.Sprintf(format, a...)) }
	note("flags: valid (node %q, data dir %s, S3 on %s)", cfg.NodeID, cfg.DataDir, cfg.Listen)
	for _, a := range []struct{ flag, addr string }{{"--listen", cfg.Listen}, {"--raft-addr", cfg.RaftAddr}, {"--internal-addr", cfg.InternalAddr}} {
		if a.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			return done, fmt.Errorf("%s %q: %w", a.flag, a.addr, err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return done, fmt.Errorf("%s %q: the port is not a number from 0 to 65535", a.flag, a.addr)
		}
	}
	log := slog.New(slog.DiscardHandler)
	pre, err := checkStart(&cfg, log)
	if err != nil {
		return done, err
	}
	if err := checkPolicy(cfg, pre.policy, note); err != nil {
		return done, err
	}
	if pre.cert != nil {
		note("TLS on the S3 port: --cert-file %s and --key-file %s load as a key pair", cfg.CertFile, cfg.KeyFile)
	}
	if cfg.CAFile != "" || cfg.PeerCAFile != "" {
		if _, err := s3CAPool(&cfg); err != nil {
			return done, err
		}
		note("CA files: read")
	}
	if cfg.PeerCertFile != "" {
		if _, err := regionstate.PeerTLSConfig(cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerCAFile, cfg.PeerServerName); err != nil {
			return done, err
		}
		note("peer TLS: --peer-cert-file, --peer-key-file and --peer-ca-file load")
	}
	if cfg.clustered() {
		switch {
		case cfg.BootstrapExpect > 1:
			note("cluster: forms a region of %d with --join %s (or rejoins with the Raft state in its data dir)", cfg.BootstrapExpect, strings.Join(cfg.Join, ","))
		case len(cfg.Join) > 0:
			note("cluster: joins the region through %s", strings.Join(cfg.Join, ","))
		default:
			note("cluster: a one-node region over TCP (Raft on %s)", cfg.RaftAddr)
		}
	}
	return done, nil
}

// checkPolicy is Check's part on the policy file (data: its bytes, nil
// without --config): the region this node would serve, and the shared
// default store a multi-node region needs.
func checkPolicy(cfg Config, data []byte, note func(string, ...any)) error {
	if data == nil {
		if cfg.clustered() && cfg.joins() {
			return errors.New(SharedStoreMsg + ", and start every new node with it (--config FILE)")
		}
		note("policy: none (--config not given): the embedded one-node defaults")
		return nil
	}
	p, err := policies.Parse(cfg.PolicyFile, data, ServedFeatures())
	if err != nil {
		return err
	}
	name, err := regionName(p, cfg.Region)
	if err != nil {
		return err
	}
	if cfg.clustered() && cfg.joins() && len(p.Stores) == 0 {
		return errors.New(SharedStoreMsg)
	}
	note("policy: %s is valid: region %q, %d store(s), %d bucket(s)", cfg.PolicyFile, name, len(p.Stores), len(p.Buckets))
	return nil
}
