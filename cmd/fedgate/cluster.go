package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/raft"
)

// The internal API: node-to-node calls on the S3 port under
// /_fedgate/internal/, signed with SigV4 by the root credentials given to
// the node by flag or environment (not Raft state: a joining node has none).
const internalPrefix = gateway.ReservedPrefix + "internal/"

// nodeInfo is the answer of GET /_fedgate/internal/info.
type nodeInfo struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	State      string `json:"state"`
	LeaderID   string `json:"leader_id,omitempty"`
	LeaderHTTP string `json:"leader_http,omitempty"`
	Term       uint64 `json:"term"`
	Applied    uint64 `json:"applied_index"`
	Commit     uint64 `json:"commit_index"`
	Members    int    `json:"members"` // servers in its configuration (0: not in a cluster yet)
	// InternalURL is where its internal API listens (https with peer TLS).
	InternalURL string `json:"internal_url,omitempty"`
	gateway.NodeUsage
}

// joinRequest is the body of POST /_fedgate/internal/join.
type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// removeRequest is the body of POST /_fedgate/internal/remove.
type removeRequest struct {
	ID string `json:"id"`
}

// internalError is every internal API error body: a raft.WireError plus
// the leader's HTTP address when the answer is "not the leader".
type internalError struct {
	raft.WireError
	LeaderHTTP string `json:"leader_http,omitempty"`
}

// memberKey is the Raft setting holding a member's HTTP (S3 port) address.
func memberKey(id string) string { return "member." + id + ".http" }

// cluster is this node's side of a multi-node region: discovery, the
// internal API, the Forward hook and the admin cluster operations.
type cluster struct {
	node     *raft.Node
	id       string
	httpAddr string   // this node's S3 address, "http://host:port"
	join     []string // other nodes' S3 addresses, "http://host:port"
	expect   int
	tcp      bool // Raft runs over TCP (--raft-addr): membership can change
	ak, sk   string
	region   string
	log      *slog.Logger
	client   *http.Client

	mu       sync.Mutex
	peers    map[string]string // node id -> HTTP address, learnt from peers
	internal map[string]string // HTTP (S3) address -> internal API URL

	internalURL string // this node's internal API URL
	// started is set once node is (the HTTP servers start before Raft
	// opens, so handlers check it before touching node).
	started atomic.Bool

	usage   atomic.Pointer[func() gateway.NodeUsage] // this node's cache and staging use (nil: none yet)
	stream  *http.Client                             // bulk transfers (staged copies, chunks)
	ns      atomic.Pointer[federation.Namespace]     // set once the namespace is open
	members memberCache
}

func normalizeHTTP(addr string) string {
	addr = strings.TrimRight(strings.TrimSpace(addr), "/")
	if addr != "" && !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr
}

// --- the client side ---

// call sends one signed internal API request to base (a node's S3 address)
// and decodes a 2xx JSON answer into out. A non-2xx answer carrying an
// internalError is returned as *peerError.
func (c *cluster) call(ctx context.Context, base, method, path string, body []byte, out any) error {
	if path != "info" {
		var err error
		if base, err = c.internalOf(ctx, base); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, base+internalPrefix+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if err := signRequest(ctx, req, body, c.ak, c.sk, c.region); err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var ie internalError
		if json.Unmarshal(data, &ie) == nil && ie.Code != "" {
			return &peerError{status: resp.StatusCode, wire: ie}
		}
		return fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// peerError is an error answered by another node.
type peerError struct {
	status int
	wire   internalError
}

func (e *peerError) Error() string { return e.wire.Message }
func (e *peerError) Unwrap() error { return e.wire.Err() }

func jsonBody(v any) []byte { b, _ := json.Marshal(v); return b }

// refused reports an error that proves the request never reached a server.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func (c *cluster) remember(id, httpAddr string) {
	if id == "" || httpAddr == "" {
		return
	}
	c.mu.Lock()
	c.peers[id] = httpAddr
	c.mu.Unlock()
}

// knownHTTP is id's HTTP address from the Raft settings or what peers told
// this node ("" when unknown); it never asks the network.
func (c *cluster) knownHTTP(id string) string {
	if id == c.id {
		return c.httpAddr
	}
	if v, ok := c.node.State().Setting(memberKey(id)); ok && v != "" {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers[id]
}

// httpOf is knownHTTP, else asks the --join peers (each knows itself and,
// often, the leader).
func (c *cluster) httpOf(ctx context.Context, id string) string {
	if a := c.knownHTTP(id); a != "" {
		return a
	}
	c.askPeers(ctx, func(_ string, in nodeInfo) { c.remember(in.LeaderID, normalizeHTTP(in.LeaderHTTP)) })
	return c.knownHTTP(id)
}

// askPeers asks each --join peer for its info (2 s each), remembers the
// peer's HTTP address and hands the answers of those that replied to f.
func (c *cluster) askPeers(ctx context.Context, f func(peer string, in nodeInfo)) {
	for _, p := range c.join {
		var in nodeInfo
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.call(ictx, p, http.MethodGet, "info", nil, &in)
		cancel()
		if err != nil {
			continue
		}
		c.remember(in.ID, normalizeHTTP(in.HTTPAddr))
		c.learnInternal(normalizeHTTP(in.HTTPAddr), in.InternalURL)
		c.learnInternal(p, in.InternalURL)
		f(p, in)
	}
}

// forward is raft.Config.Forward: it posts the encoded command to the
// leader's internal API and, once the leader has applied it, waits until
// this node has applied it too, so a read on the node that acknowledged a
// write sees it.
func (c *cluster) forward(ctx context.Context, leaderID, _ string, data []byte) (uint64, error) {
	base := c.httpOf(ctx, leaderID)
	if base == "" {
		// Not sent: let raft retry until the wait for a leader ends.
		return 0, &raft.NotLeaderError{}
	}
	var out struct {
		Index uint64 `json:"index"`
	}
	err := c.call(ctx, base, http.MethodPost, "apply", data, &out)
	if pe := (*peerError)(nil); errors.As(err, &pe) {
		return 0, pe.wire.Err()
	}
	if err != nil {
		if refused(err) {
			// The leader we knew is gone; the write was not sent.
			return 0, &raft.NotLeaderError{}
		}
		return 0, fmt.Errorf("forward the write to the leader %s at %s (outcome unknown): %w", leaderID, base, err)
	}
	if err := c.node.WaitApplied(ctx, out.Index); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// --- forming and joining ---

// form makes this node a member: with --bootstrap-expect N it collects N
// members through the --join peers' info and bootstraps them all (or joins
// a cluster a peer already belongs to); with only --join it asks the
// leader to add it. A node that is already a member does nothing.
func (c *cluster) form(ctx context.Context) error {
	if m, err := c.node.Members(); err != nil || len(m) > 0 {
		return err
	}
	if c.expect <= 1 {
		return c.joinCluster(ctx)
	}
	c.log.Info("cluster: waiting for peers to bootstrap", "expect", c.expect, "join", c.join)
	lastLog := time.Now()
	for attempt := 0; ; attempt++ {
		if m, err := c.node.Members(); err != nil || len(m) > 0 {
			return err // added, or bootstrapped by a peer's list
		}
		known := map[string]raft.Member{c.id: {ID: c.id, Address: c.node.Addr(), Voter: true}}
		existing := ""
		c.askPeers(ctx, func(p string, in nodeInfo) {
			if in.Members > 0 && in.LeaderID != "" {
				existing = p
			}
			known[in.ID] = raft.Member{ID: in.ID, Address: in.RaftAddr, Voter: true}
		})
		if existing != "" {
			c.log.Info("cluster: a peer already belongs to a cluster with a leader; joining it", "peer", existing)
			return c.joinCluster(ctx)
		}
		if len(known) >= c.expect {
			members := make([]raft.Member, 0, len(known))
			for _, m := range known {
				members = append(members, m)
			}
			slices.SortFunc(members, func(a, b raft.Member) int { return strings.Compare(a.ID, b.ID) })
			c.log.Info("cluster: bootstrapping", "members", members)
			return c.node.BootstrapCluster(members)
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Info("cluster: still waiting for peers", "known", len(known), "expect", c.expect)
			lastLog = time.Now()
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("waiting for %d nodes to bootstrap (have %d): %w", c.expect, len(known), err)
		}
	}
}

// joinCluster asks the --join peers (following them to the leader) to add
// this node as a voter, until one does.
func (c *cluster) joinCluster(ctx context.Context) error {
	req := jsonBody(joinRequest{ID: c.id, RaftAddr: c.node.Addr(), HTTPAddr: c.httpAddr})
	lastLog := time.Time{}
	for attempt := 0; ; attempt++ {
		var lastErr error
		for _, p := range c.join {
			if lastErr = c.joinVia(ctx, p, req); lastErr == nil {
				c.log.Info("cluster: joined", "via", p)
				return nil
			}
		}
		if m, err := c.node.Members(); err == nil && len(m) > 0 {
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Info("cluster: waiting to join", "join", c.join, "last_error", lastErr)
			lastLog = time.Now()
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("joining the cluster through %s: %w (last error: %v)", strings.Join(c.join, ","), err, lastErr)
		}
	}
}

// joinVia posts a join request to base, following one "not the leader"
// answer to the leader it names.
func (c *cluster) joinVia(ctx context.Context, base string, req []byte) error {
	for range 3 {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.call(jctx, base, http.MethodPost, "join", req, nil)
		cancel()
		pe := (*peerError)(nil)
		if !errors.As(err, &pe) || pe.wire.LeaderHTTP == "" || pe.wire.Code != raft.CodeNotLeader {
			return err
		}
		base = normalizeHTTP(pe.wire.LeaderHTTP)
	}
	return errors.New("too many redirects to the leader")
}

// backoff waits 100ms, 200ms ... up to 2s, or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	d := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// register records this node's HTTP address as a Raft setting. The write
// goes through the leader and returns once this node has applied it, so
// it also brings this node's state up to date with the region's.
func (c *cluster) register(ctx context.Context) error {
	lastLog := time.Now()
	for attempt := 0; ; attempt++ {
		_, err := c.node.ApplyIndex(ctx, raft.SetSetting{Key: memberKey(c.id), Value: c.httpAddr})
		if err == nil {
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			c.log.Warn("cluster: waiting for the region's leader", "error", err)
			lastLog = time.Now()
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("register this node with the region's leader: %w", err)
		}
	}
}

// --- the server side ---

func (c *cluster) info() nodeInfo {
	st := c.node.Status()
	in := nodeInfo{ID: c.id, RaftAddr: c.node.Addr(), HTTPAddr: c.httpAddr, State: st.State,
		LeaderID: st.LeaderID, Term: st.Term, Applied: st.AppliedIndex, Commit: st.CommitIndex, Members: st.Members,
		InternalURL: c.internalURL}
	if in.LeaderID != "" {
		in.LeaderHTTP = c.knownHTTP(in.LeaderID)
	}
	if f := c.usage.Load(); f != nil {
		in.NodeUsage = (*f)()
	}
	return in
}

// addVoter adds a member as the leader, or returns a *NotLeaderError.
func (c *cluster) addVoter(ctx context.Context, j joinRequest) error {
	if j.ID == "" || j.RaftAddr == "" {
		return fmt.Errorf("%w: join needs an id and a raft_addr", raft.ErrInvalid)
	}
	if err := c.node.AddVoter(ctx, j.ID, j.RaftAddr); err != nil {
		return err
	}
	if j.HTTPAddr != "" {
		c.remember(j.ID, normalizeHTTP(j.HTTPAddr))
		return c.node.Apply(ctx, raft.SetSetting{Key: memberKey(j.ID), Value: normalizeHTTP(j.HTTPAddr)})
	}
	return nil
}

// internalHandler serves /_fedgate/internal/.
func (c *cluster) internalHandler() http.Handler {
	verifier := &sigv4.Verifier{Region: c.region, Service: "s3", Lookup: func(ak string) (string, bool) {
		return c.sk, ak == c.ak
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+internalPrefix+"info", func(w http.ResponseWriter, _ *http.Request) {
		writeInternal(w, http.StatusOK, c.info())
	})
	notStarted := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeInternal(w, http.StatusServiceUnavailable, internalError{WireError: raft.WireError{Code: raft.CodeClosed,
			Message: "this node is still opening its Raft state"}})
	})
	mux.HandleFunc("POST "+internalPrefix+"join", func(w http.ResponseWriter, r *http.Request) {
		var j joinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&j); err != nil {
			c.fail(w, fmt.Errorf("%w: malformed join request: %v", raft.ErrInvalid, err))
			return
		}
		c.remember(j.ID, normalizeHTTP(j.HTTPAddr))
		if err := c.addVoter(r.Context(), j); err != nil {
			c.fail(w, err)
			return
		}
		c.log.Info("cluster: added a member", "id", j.ID, "raft_addr", j.RaftAddr, "http_addr", j.HTTPAddr)
		writeInternal(w, http.StatusOK, c.info())
	})
	mux.HandleFunc("POST "+internalPrefix+"remove", func(w http.ResponseWriter, r *http.Request) {
		var j removeRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&j); err != nil || j.ID == "" {
			c.fail(w, fmt.Errorf("%w: remove needs an id", raft.ErrInvalid))
			return
		}
		if err := c.node.RemoveServer(r.Context(), j.ID); err != nil {
			c.fail(w, err)
			return
		}
		c.log.Info("cluster: removed a member", "id", j.ID)
		w.WriteHeader(http.StatusNoContent)
	})
	c.stageRoutes(mux)
	c.chunkRoute(mux)
	mux.HandleFunc("POST "+internalPrefix+"apply", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			c.fail(w, err)
			return
		}
		idx, err := c.node.ApplyEncoded(r.Context(), data)
		if err != nil {
			c.fail(w, err)
			return
		}
		writeInternal(w, http.StatusOK, map[string]uint64{"index": idx})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := verifier.Verify(r)
		if err != nil || res.Anonymous {
			msg := "the internal API needs a request signed with the root credentials given to this node"
			if err != nil {
				msg += ": " + err.Error()
			}
			writeInternal(w, http.StatusForbidden, internalError{WireError: raft.WireError{Code: "access_denied", Message: msg}})
			return
		}
		if res.Body != nil {
			r.Body = res.Body
		}
		if !c.started.Load() {
			notStarted(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// fail answers err as an internalError with a status that says what it is.
func (c *cluster) fail(w http.ResponseWriter, err error) {
	ie := internalError{WireError: *raft.ToWire(err)}
	status := http.StatusInternalServerError
	switch ie.Code {
	case raft.CodeNotLeader:
		status = http.StatusMisdirectedRequest
		if ie.LeaderID != "" {
			ie.LeaderHTTP = c.knownHTTP(ie.LeaderID)
		}
	case raft.CodeNoLeader, raft.CodeClosed, raft.CodeLeadershipLost:
		status = http.StatusServiceUnavailable
	case raft.CodeInvalid, raft.CodeUnknownCommand:
		status = http.StatusBadRequest
	case raft.CodeCanceled, raft.CodeDeadlineExceeded:
		status = http.StatusGatewayTimeout
	case raft.CodeInternal:
	default: // a command's own error (bucket exists, no such user, ...)
		status = http.StatusConflict
	}
	writeInternal(w, status, ie)
}

func writeInternal(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// --- the admin API's cluster operations (gateway.Cluster) ---

func (c *cluster) ClusterStatus(ctx context.Context) (gateway.AdminCluster, error) {
	members, err := c.node.Members()
	if err != nil {
		return gateway.AdminCluster{}, err
	}
	leader, _ := c.node.Leader()
	out := gateway.AdminCluster{Leader: leader, Members: make([]gateway.AdminMember, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		am := gateway.AdminMember{ID: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.Leader, HTTP: c.knownHTTP(m.ID)}
		out.Members[i] = am
		wg.Go(func() {
			var in nodeInfo
			switch {
			case m.ID == c.id:
				in = c.info()
			case am.HTTP == "":
				out.Members[i].Problem = "its HTTP address is not known"
				return
			default:
				ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := c.call(ictx, am.HTTP, http.MethodGet, "info", nil, &in)
				cancel()
				if err != nil {
					out.Members[i].Problem = err.Error()
					return
				}
			}
			o := &out.Members[i]
			o.State, o.Term, o.Applied, o.Commit, o.Reported = in.State, in.Term, in.Applied, in.Commit, in.ID
			o.NodeUsage = in.NodeUsage
			o.Healthy = in.LeaderID != "" && in.ID == m.ID
			if !o.Healthy {
				o.Problem = "it knows no leader"
			}
		})
	}
	wg.Wait()
	if ns := c.ns.Load(); ns != nil {
		b := ns.Backlog()
		out.DrainBacklog = gateway.AdminBacklog{Objects: b.Entries, Bytes: b.Bytes, OldestSeconds: b.OldestAge.Seconds()}
	}
	return out, nil
}

func (c *cluster) Snapshot(ctx context.Context) (uint64, error) {
	if err := c.node.Snapshot(ctx); err != nil {
		return 0, err
	}
	return c.node.State().AppliedIndex(), nil
}

func (c *cluster) AddMember(ctx context.Context, address string) (gateway.AdminMember, error) {
	if !c.tcp {
		return gateway.AdminMember{}, errors.New("this node runs without --raft-addr: a one-node region in memory cannot grow; restart it with --raft-addr")
	}
	base := normalizeHTTP(address)
	var in nodeInfo
	if err := c.call(ctx, base, http.MethodGet, "info", nil, &in); err != nil {
		return gateway.AdminMember{}, fmt.Errorf("ask %s who it is: %w", base, err)
	}
	j := joinRequest{ID: in.ID, RaftAddr: in.RaftAddr, HTTPAddr: in.HTTPAddr}
	err := c.addVoter(ctx, j)
	if errors.Is(err, raft.ErrNotLeader) {
		lid, _ := c.node.Leader()
		lh := c.httpOf(ctx, lid)
		if lid == "" || lh == "" {
			return gateway.AdminMember{}, fmt.Errorf("%w: no leader known to add %s", raft.ErrNoLeader, in.ID)
		}
		err = c.joinVia(ctx, lh, jsonBody(j))
	}
	if err != nil {
		return gateway.AdminMember{}, err
	}
	return gateway.AdminMember{ID: in.ID, Address: in.RaftAddr, HTTP: in.HTTPAddr, Voter: true}, nil
}

func (c *cluster) RemoveMember(ctx context.Context, id string) error {
	if !c.tcp {
		return errors.New("this node runs without --raft-addr: a one-node region in memory has no other members")
	}
	members, err := c.node.Members()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(members, func(m raft.Member) bool { return m.ID == id }) {
		return fmt.Errorf("%q is not a member of this region", id)
	}
	err = c.node.RemoveServer(ctx, id)
	if errors.Is(err, raft.ErrNotLeader) {
		lid, _ := c.node.Leader()
		lh := c.httpOf(ctx, lid)
		if lid == "" || lh == "" {
			return fmt.Errorf("%w: no leader known to remove %s", raft.ErrNoLeader, id)
		}
		err = c.call(ctx, lh, http.MethodPost, "remove", jsonBody(removeRequest{ID: id}), nil)
	}
	return err
}

// advertisedHTTP is the address peers reach this node's S3 port at: the
// listener's, with the host of --raft-addr when it listens on a wildcard.
func advertisedHTTP(ln net.Addr, raftAddr string) string {
	host, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return "http://" + ln.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if rh, _, err := net.SplitHostPort(raftAddr); err == nil && rh != "" {
			host = rh
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// --- the internal API's own port ---

// setTLS makes the internal API clients use the peers' mutual TLS.
func (c *cluster) setTLS(cfg *tls.Config) {
	if cfg == nil {
		return
	}
	for _, cl := range []*http.Client{c.client, c.stream} {
		t, ok := cl.Transport.(*http.Transport)
		if !ok || t == nil {
			t = http.DefaultTransport.(*http.Transport).Clone()
			cl.Transport = t
		}
		t.TLSClientConfig = cfg.Clone()
	}
}

// internalOf returns the internal API URL of the node serving S3 at base,
// asking that node (its info, on the S3 port) the first time.
func (c *cluster) internalOf(ctx context.Context, base string) (string, error) {
	if base == c.httpAddr && c.internalURL != "" {
		return c.internalURL, nil
	}
	c.mu.Lock()
	u := c.internal[base]
	c.mu.Unlock()
	if u != "" {
		return u, nil
	}
	var in nodeInfo
	if err := c.call(ctx, base, http.MethodGet, "info", nil, &in); err != nil {
		return "", fmt.Errorf("ask %s where its internal API is: %w", base, err)
	}
	if in.InternalURL == "" {
		return "", fmt.Errorf("%s did not say where its internal API is", base)
	}
	c.learnInternal(base, in.InternalURL)
	return in.InternalURL, nil
}

func (c *cluster) learnInternal(base, url string) {
	if base == "" || url == "" {
		return
	}
	c.mu.Lock()
	if c.internal == nil {
		c.internal = map[string]string{}
	}
	c.internal[base] = url
	c.mu.Unlock()
}

// discoveryHandler serves, on the S3 port, what a node started with
// --join S3-ADDRESS needs before it knows a peer's internal port: info.
func (c *cluster) discoveryHandler() http.Handler {
	verifier := &sigv4.Verifier{Region: c.region, Service: "s3", Lookup: func(ak string) (string, bool) {
		return c.sk, ak == c.ak
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != internalPrefix+"info" {
			writeInternal(w, http.StatusNotFound, internalError{WireError: raft.WireError{Code: "not_found",
				Message: "the internal API listens on each node's --internal-addr; the S3 port answers only " + internalPrefix + "info"}})
			return
		}
		if res, err := verifier.Verify(r); err != nil || res.Anonymous {
			writeInternal(w, http.StatusForbidden, internalError{WireError: raft.WireError{Code: "access_denied",
				Message: "the internal API needs a request signed with the root credentials given to this node"}})
			return
		}
		if !c.started.Load() {
			writeInternal(w, http.StatusServiceUnavailable, internalError{WireError: raft.WireError{Code: raft.CodeClosed,
				Message: "this node is still opening its Raft state"}})
			return
		}
		writeInternal(w, http.StatusOK, c.info())
	})
}
