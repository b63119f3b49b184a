package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/internal/backoff"
	"github.com/fedgate/fedgate/node/peerapi"
	"github.com/fedgate/fedgate/regionstate"
)

// cluster is this node's side of its region: discovery, forming and
// joining, the Forward hook, the Raft operations the internal API answers
// for this node (through member, which adds the node's usage), the
// namespace's federation.Region, the cache's cachetier.PeerClient and the
// admin API's member operations (through regionAdmin, which adds the
// namespace's status). newCluster builds it once the Raft state is open;
// nothing in it is set afterwards.
type cluster struct {
	id       string
	httpAddr string                   // this node's S3 address, "http://host:port" (https with TLS)
	s3URL    func(addr string) string // an S3 address given without a scheme, with this node's (Config.s3URL)
	join     []string
	expect   int
	tcp      bool // Raft runs over TCP (RaftAddr): membership can change
	log      *slog.Logger
	client   *peerapi.Client
	internal string // this node's internal API URL ("": none)
	raft     *regionstate.Node
	members  memberCache
	now      func() time.Time // the wall clock peers are told (Config.Now)
	clocks   *clockWatch
	dial     func(ctx context.Context, network, addr string) (net.Conn, error) // Config.Dial
}

// newCluster is this node's side of its region over its opened Raft
// state rn, reached through what the listen phase opened (l).
func newCluster(cfg *Config, log *slog.Logger, l links, rn *regionstate.Node) *cluster {
	c := &cluster{id: cfg.NodeID, log: log, tcp: cfg.clustered(), now: cfg.Now, clocks: newClockWatch(), s3URL: cfg.s3URL,
		dial: cfg.Dial, httpAddr: l.httpAddr, internal: l.internal, client: l.client, raft: rn}
	if cfg.clustered() {
		c.join, c.expect, c.log = cfg.Join, cfg.BootstrapExpect, clusterLog(log)
	}
	return c
}

// clusterLog is the logger of a multi-node node's cluster and internal API.
func clusterLog(log *slog.Logger) *slog.Logger { return log.With("component", "cluster") }

// member is this node as the internal API answers for it: the cluster's
// Raft operations, and an Info that reports the node's usage.
type member struct {
	*cluster
	usage nodeUsage
}

// regionAdmin is the admin API's cluster operations: the cluster's, and a
// status that includes the namespace's drain backlog and lifecycle runs.
type regionAdmin struct {
	*member
	ns *federation.Namespace
}

var (
	_ federation.Region    = (*cluster)(nil)
	_ cachetier.PeerClient = (*cluster)(nil)
	_ gateway.Cluster      = (*regionAdmin)(nil)
	_ peerapi.Backend      = (*member)(nil)
)

// KnownHTTP is id's S3 address from the Raft settings or what peers told
// this node ("" when unknown); it never asks the network.
func (c *cluster) KnownHTTP(id string) string {
	if id == c.id {
		return c.httpAddr
	}
	if v, ok := c.raft.State().Setting(peerapi.MemberKey(id)); ok && v != "" {
		return v
	}
	return c.client.Learned(id)
}

// httpOf is KnownHTTP, else asks the Join peers (each knows itself and,
// often, the leader).
func (c *cluster) httpOf(ctx context.Context, id string) string {
	if a := c.KnownHTTP(id); a != "" {
		return a
	}
	_ = c.client.AskPeers(ctx, func(_ string, in peerapi.Info) {
		c.client.Remember(in.LeaderID, peerapi.NormalizeHTTP(in.LeaderHTTP))
	})
	return c.KnownHTTP(id)
}

// forward is regionstate.Config.Forward: it posts the encoded command to the
// leader's internal API and returns the index the leader applied it at
// (regionstate then waits for this node to apply it, or, for ApplyAcked,
// notes it for AwaitAcked).
func (c *cluster) forward(ctx context.Context, leaderID, _ string, data []byte) (uint64, error) {
	base := c.httpOf(ctx, leaderID)
	if base == "" {
		// Not sent: let raft retry until the wait for a leader ends.
		return 0, &regionstate.NotLeaderError{}
	}
	// A leader that freezes (a GC pause, a hung disk, a stopped VM) must
	// not hold the write past the election that replaces it: the call is
	// given up once another leader is known (and the old one stayed
	// silent), and the write's outcome is unknown.
	fctx, stop := c.raft.WhileLeader(ctx, leaderID)
	idx, err := c.client.Forward(fctx, leaderID, base, data)
	gaveUp := fctx.Err() != nil // read before stop, which cancels fctx
	stop()
	if err != nil && gaveUp && ctx.Err() == nil {
		return 0, fmt.Errorf("%w: the write was forwarded to %s, which is no longer the leader and did not answer", regionstate.ErrLeadershipLost, leaderID)
	}
	if err != nil {
		return 0, err
	}
	return idx, nil
}

// --- forming and joining ---

// form makes this node a member: with BootstrapExpect N it collects N
// members through the Join peers' info and bootstraps them all (or joins
// a cluster a peer already belongs to); with only Join it asks the leader
// to add it. A node that is already a member does nothing.
func (c *cluster) form(ctx context.Context) error {
	if m, err := c.raft.Members(); err != nil || len(m) > 0 {
		return err
	}
	if c.expect <= 1 {
		return c.joinCluster(ctx)
	}
	c.log.Info("cluster: waiting for peers to bootstrap", "expect", c.expect, "join", c.join)
	start, lastLog := time.Now(), time.Now()
	probe := newJoinProbe(c)
	for attempt := 0; ; attempt++ {
		if m, err := c.raft.Members(); err != nil || len(m) > 0 {
			return err // added, or bootstrapped by a peer's list
		}
		known := map[string]regionstate.Member{c.id: {ID: c.id, Address: c.raft.Addr(), Voter: true}}
		existing := ""
		answered := map[string]bool{}
		askErr := c.client.AskPeers(ctx, func(p string, in peerapi.Info) {
			answered[p] = true
			if in.Members > 0 && in.LeaderID != "" {
				existing = p
			}
			known[in.ID] = regionstate.Member{ID: in.ID, Address: in.RaftAddr, Voter: true}
		})
		for _, p := range c.join {
			if !answered[p] {
				if err := probe.check(ctx, p, askErr); err != nil {
					return err
				}
			}
		}
		if existing != "" {
			c.log.Info("cluster: a peer already belongs to a cluster with a leader; joining it", "peer", existing)
			return c.joinCluster(ctx)
		}
		if len(known) >= c.expect {
			members := make([]regionstate.Member, 0, len(known))
			for _, m := range known {
				members = append(members, m)
			}
			slices.SortFunc(members, func(a, b regionstate.Member) int { return strings.Compare(a.ID, b.ID) })
			c.log.Info("cluster: bootstrapping", "members", members)
			return c.raft.BootstrapCluster(members)
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Log(ctx, waitLevel(start), "cluster: still waiting for peers", "known", len(known), "expect", c.expect,
				"waited", time.Since(start).Round(time.Second), "last_error", askErr)
			lastLog = time.Now()
		}
		if err := joinBackoff.Sleep(ctx, attempt+1); err != nil {
			return fmt.Errorf("waiting for %d nodes to bootstrap (have %d): %w", c.expect, len(known), err)
		}
	}
}

// joinCluster asks the Join peers (following them to the leader) to add
// this node as a voter, until one does.
func (c *cluster) joinCluster(ctx context.Context) error {
	req := peerapi.JoinRequest{ID: c.id, RaftAddr: c.raft.Addr(), HTTPAddr: c.httpAddr, RegionID: c.raft.State().RegionID()}
	start, lastLog := time.Now(), time.Time{}
	probe := newJoinProbe(c)
	for attempt := 0; ; attempt++ {
		var lastErr error
		for _, p := range c.join {
			if lastErr = c.client.Join(ctx, p, req); lastErr == nil {
				c.log.Info("cluster: joined", "via", p)
				return nil
			}
			if err := probe.check(ctx, p, lastErr); err != nil {
				return err
			}
		}
		if m, err := c.raft.Members(); err == nil && len(m) > 0 {
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Log(ctx, waitLevel(start), "cluster: waiting to join", "join", c.join,
				"waited", time.Since(start).Round(time.Second), "last_error", lastErr)
			lastLog = time.Now()
		}
		if err := joinBackoff.Sleep(ctx, attempt+1); err != nil {
			return fmt.Errorf("joining the cluster through %s: %w (last error: %v)", strings.Join(c.join, ","), err, lastErr)
		}
	}
}

// waitLevel is the level of a "still waiting" line: INFO for the first
// minute of a wait (peers start at about the same time), WARN after it
// (something is wrong: the line says what).
func waitLevel(start time.Time) slog.Level {
	if time.Since(start) < time.Minute {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// joinProbe tells --join addresses that answer as something other than a
// node's S3 port (a Raft port, an internal API with peer TLS) from nodes
// not up yet: a join through them can never succeed, so the start is
// refused naming the address to use. An address is probed at most every
// 2 s, after a failure that is not an answer of fedgate's (a StatusError),
// and refused after 3 such diagnoses in a row (not one: a node's S3 port
// closing for a restart resets connections too).
type joinProbe struct {
	c     *cluster
	last  map[string]time.Time
	wrong map[string]int
}

func newJoinProbe(c *cluster) *joinProbe {
	return &joinProbe{c: c, last: map[string]time.Time{}, wrong: map[string]int{}}
}

// check returns a *peerapi.WrongPortError once peer is known to be the
// wrong kind of port; err is the last request's error to it.
func (p *joinProbe) check(ctx context.Context, peer string, err error) error {
	var se *peerapi.StatusError
	if err == nil || errors.As(err, &se) {
		delete(p.wrong, peer)
		return nil
	}
	if time.Since(p.last[peer]) < 2*time.Second {
		return nil
	}
	p.last[peer] = time.Now()
	u := peer
	if p.c.s3URL != nil {
		u = p.c.s3URL(peer)
	}
	werr := peerapi.ProbeJoinAddr(ctx, u, p.c.dial)
	var wp *peerapi.WrongPortError
	if !errors.As(werr, &wp) {
		delete(p.wrong, peer)
		return nil
	}
	wp.Addr = peer
	if p.wrong[peer]++; p.wrong[peer] < 3 {
		return nil
	}
	return wp
}

// joinBackoff paces discovery and join attempts: 100ms, 200ms ... up to 2s.
var joinBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}

// register records this node's S3 address as a Raft setting. The write
// goes through the leader and returns once this node has applied it, so
// it also brings this node's state up to date with the region's.
func (c *cluster) register(ctx context.Context) error {
	lastLog := time.Now()
	for attempt := 0; ; attempt++ {
		_, err := c.raft.ApplyIndex(ctx, regionstate.SetSetting{Key: peerapi.MemberKey(c.id), Value: c.httpAddr})
		if err == nil {
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Warn("cluster: waiting for the region's leader", "error", err)
			lastLog = time.Now()
		}
		if err := joinBackoff.Sleep(ctx, attempt+1); err != nil {
			return fmt.Errorf("register this node with the region's leader: %w", err)
		}
	}
}

// --- what the internal API answers for this node (peerapi.Backend) ---

// info is what the internal API's info says of this node, but its usage.
func (c *cluster) info() peerapi.Info {
	st := c.raft.Status()
	in := peerapi.Info{ID: c.id, RaftAddr: c.raft.Addr(), HTTPAddr: c.httpAddr, State: st.State,
		LeaderID: st.LeaderID, Term: st.Term, Applied: st.AppliedIndex, Commit: st.CommitIndex, Members: st.Members,
		InternalURL: c.internal, Time: c.now(), RegionID: c.raft.State().RegionID()}
	if in.LeaderID != "" {
		in.LeaderHTTP = c.KnownHTTP(in.LeaderID)
	}
	return in
}

// Info implements peerapi.Backend.
func (m *member) Info() peerapi.Info {
	in := m.info()
	in.NodeUsage = m.usage.report()
	return in
}

// maxDegradedObjects is how many objects read degraded a node reports in
// its Info.
const maxDegradedObjects = 100

// nodeUsage is what a node reports of itself: its cache's and staging's
// use and its degraded data.
type nodeUsage struct {
	cache *cachetier.Cache
	stage *staging.Area
	ns    func() *federation.Namespace // nil result: not built yet (no degraded data to report)
}

// report is this node's cache and staging use and its degraded data.
func (u nodeUsage) report() adminapi.NodeUsage {
	cs, ss := u.cache.Stats(), u.stage.Stats()
	r := adminapi.NodeUsage{}
	if ns := u.ns(); ns != nil {
		if d, err := ns.Degraded(context.Background()); err == nil {
			r = adminapi.DegradedUsage(d, maxDegradedObjects)
		}
	}
	r.CacheUsed, r.CacheCapacity, r.StagingUsed, r.StagingCapacity = cs.Used, cs.Capacity, ss.Used+ss.Reserved, ss.Capacity
	return r
}

// AddVoter implements peerapi.Backend: it adds a member as the leader, or
// returns a *NotLeaderError.
func (c *cluster) AddVoter(ctx context.Context, j peerapi.JoinRequest) error {
	c.client.Remember(j.ID, peerapi.NormalizeHTTP(j.HTTPAddr))
	if j.ID == "" || j.RaftAddr == "" {
		return fmt.Errorf("%w: join needs an id and a raft_addr", regionstate.ErrInvalid)
	}
	if why := otherRegion(c.id, peerapi.Info{ID: j.ID, RegionID: j.RegionID}, c.raft.State().RegionID()); why != "" {
		return fmt.Errorf("%w: %s", regionstate.ErrInvalid, why)
	}
	if err := c.raft.AddVoter(ctx, j.ID, j.RaftAddr); err != nil {
		return err
	}
	if j.HTTPAddr != "" {
		return c.raft.Apply(ctx, regionstate.SetSetting{Key: peerapi.MemberKey(j.ID), Value: peerapi.NormalizeHTTP(j.HTTPAddr)})
	}
	return nil
}

// RemoveServer implements peerapi.Backend.
func (c *cluster) RemoveServer(ctx context.Context, id string) error {
	return c.raft.RemoveServer(ctx, id)
}

// ApplyEncoded implements peerapi.Backend.
func (c *cluster) ApplyEncoded(ctx context.Context, data []byte) (uint64, error) {
	return c.raft.ApplyEncoded(ctx, data)
}

// IsLeader implements peerapi.Backend.
func (c *cluster) IsLeader() bool { return c.raft.IsLeader() }

// ReadIndex implements peerapi.Backend.
func (c *cluster) ReadIndex(ctx context.Context) (uint64, error) { return c.raft.ReadIndex(ctx) }

// --- the admin API's cluster operations (gateway.Cluster) ---

// ClusterStatus implements gateway.Cluster.
func (c *regionAdmin) ClusterStatus(ctx context.Context) (adminapi.Cluster, error) {
	members, err := c.raft.Members()
	if err != nil {
		return adminapi.Cluster{}, err
	}
	leader, _ := c.raft.Leader()
	out := adminapi.Cluster{Leader: leader, Members: make([]adminapi.Member, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		am := adminapi.Member{ID: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.Leader, HTTP: c.KnownHTTP(m.ID)}
		out.Members[i] = am
		wg.Go(func() {
			var in peerapi.Info
			var offset, within time.Duration
			switch {
			case m.ID == c.id:
				in = c.Info()
			case am.HTTP == "":
				out.Members[i].Problem = "its HTTP address is not known"
				return
			default:
				ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
				var err error
				in, offset, within, err = c.clockOffset(ictx, am.HTTP)
				cancel()
				if err != nil {
					out.Members[i].Problem = err.Error()
					return
				}
			}
			o := &out.Members[i]
			o.State, o.Term, o.Applied, o.Commit, o.Reported = in.State, in.Term, in.Applied, in.Commit, in.ID
			o.NodeUsage = in.NodeUsage
			o.ClockOffset = offset.Seconds()
			o.Healthy = in.LeaderID != "" && in.ID == m.ID
			switch {
			case !o.Healthy:
				o.Problem = "it knows no leader"
			case skewProblem(c.id, offset, within) != "":
				o.Healthy, o.Problem = false, skewProblem(c.id, offset, within)
			}
		})
	}
	wg.Wait()
	b := c.ns.Backlog()
	out.DrainBacklog = adminapi.Backlog{Objects: b.Entries, Bytes: b.Bytes, OldestSeconds: b.OldestAge.Seconds()}
	lc := c.ns.LifecycleStatus()
	out.Lifecycle = adminapi.Lifecycle{LastStart: lc.Last.Start, LastEnd: lc.Last.End, LastNode: lc.Last.Node, Next: lc.Next,
		EverySeconds: lc.Every.Seconds(), Scanned: lc.Last.Scanned, Expired: lc.Last.Expired, Aborted: lc.Last.Aborted,
		Skipped: lc.Last.Skipped, Errors: lc.Last.Errors}
	return out, nil
}

// Snapshot implements gateway.Cluster.
func (c *cluster) Snapshot(ctx context.Context) (uint64, error) {
	if err := c.raft.Snapshot(ctx); err != nil {
		return 0, err
	}
	return c.raft.State().AppliedIndex(), nil
}

// AddMember implements gateway.Cluster.
func (c *cluster) AddMember(ctx context.Context, address string) (adminapi.Member, error) {
	if !c.tcp {
		return adminapi.Member{}, errors.New("this node runs without --raft-addr: a one-node region in memory cannot grow; restart it with --raft-addr")
	}
	base := c.s3URL(address)
	in, err := c.client.Info(ctx, base)
	if err != nil {
		return adminapi.Member{}, fmt.Errorf("ask %s who it is: %w", base, err)
	}
	if why := otherRegion(c.id, in, c.raft.State().RegionID()); why != "" {
		return adminapi.Member{}, fmt.Errorf("%w: %s", regionstate.ErrInvalid, why)
	}
	j := peerapi.JoinRequest{ID: in.ID, RaftAddr: in.RaftAddr, HTTPAddr: in.HTTPAddr, RegionID: in.RegionID}
	err = c.AddVoter(ctx, j)
	if errors.Is(err, regionstate.ErrNotLeader) {
		lid, _ := c.raft.Leader()
		lh := c.httpOf(ctx, lid)
		if lid == "" || lh == "" {
			return adminapi.Member{}, fmt.Errorf("%w: no leader known to add %s", regionstate.ErrNoLeader, in.ID)
		}
		err = c.client.Join(ctx, lh, j)
	}
	if err != nil {
		return adminapi.Member{}, err
	}
	return adminapi.Member{ID: in.ID, Address: in.RaftAddr, HTTP: in.HTTPAddr, Voter: true}, nil
}

// RemoveMember implements gateway.Cluster.
func (c *cluster) RemoveMember(ctx context.Context, id string) error {
	if !c.tcp {
		return errors.New("this node runs without --raft-addr: a one-node region in memory has no other members")
	}
	members, err := c.raft.Members()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(members, func(m regionstate.Member) bool { return m.ID == id }) {
		return fmt.Errorf("%q is not a member of this region", id)
	}
	err = c.raft.RemoveServer(ctx, id)
	if errors.Is(err, regionstate.ErrNotLeader) {
		lid, _ := c.raft.Leader()
		lh := c.httpOf(ctx, lid)
		if lid == "" || lh == "" {
			return fmt.Errorf("%w: no leader known to remove %s", regionstate.ErrNoLeader, id)
		}
		err = c.client.Remove(ctx, lh, id)
	}
	return err
}

// advertisedURL is the URL (scheme http or https) peers reach a listener
// of this node at: the listener's address, with the host of RaftAddr when
// it listens on a wildcard.
func advertisedURL(scheme string, ln net.Addr, raftAddr string) string {
	host, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return scheme + "://" + ln.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if rh, _, err := net.SplitHostPort(raftAddr); err == nil && rh != "" {
			host = rh
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// advertisedInternal is the URL peers reach the internal API at.
func advertisedInternal(ln net.Addr, raftAddr string, useTLS bool) string {
	if useTLS {
		return advertisedURL("https", ln, raftAddr)
	}
	return advertisedURL("http", ln, raftAddr)
}
