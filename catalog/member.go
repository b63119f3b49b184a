package catalog

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/raft/logstore"
	"github.com/fedgate/fedgate/raft/rlog"
	"github.com/fedgate/fedgate/raft/transport"
)

// MemberConfig is one node's membership of the catalog on a real network.
// Every node of every peered region runs a member on its --catalog-addr:
// the node whose address the policy names for its region is the region's
// voter (Raft id: the region's name); the region's other nodes are
// non-voters (id REGION/NODE), which receive every change and serve the
// catalog from their own applied copy, so no node asks another to answer
// a bucket lookup.
type MemberConfig struct {
	Region, NodeID string
	// Bind is the address the member listens on; Advertise the one other
	// members dial (default Bind).
	Bind, Advertise string
	// Voters is every region's voter address (the policy's
	// regions[].catalog), by region name.
	Voters map[string]string
	// Dir holds the member's Raft log and snapshots.
	Dir string
	// TLS, when set, is mutual TLS on every catalog link (the peering
	// certificate). Without it, forwarded changes are authenticated by an
	// HMAC with Secret (the peering secret key).
	TLS    *tls.Config
	Secret []byte
	RTT    time.Duration
	// Dial, when set, opens the Raft connections to other members (under
	// TLS too) instead of a net.Dialer; tests cut members off with it.
	Dial transport.DialFunc
	// LogStore is the Raft log store (raft/logstore): "boltdb", "wal", or
	// "" (logstore.Default, or raft-wal for a Dir that has it).
	LogStore string
	// Logger receives the member's and Raft's logs (nil: none).
	Logger *slog.Logger
}

// Member is a Node on the network: Raft over TCP (or TLS) and, on the
// same port, the small HTTP API members use to forward changes to the
// leader and to join as non-voters.
type Member struct {
	*Node
	cfg    MemberConfig
	id     string
	voter  bool
	mux    *transport.Mux
	hs     *http.Server
	client *http.Client
	store  logstore.Store
	stream *transport.Stream
	trans  *raft.NetworkTransport
	done   chan struct{}
	wg     sync.WaitGroup
}

// OpenMember starts the member and, for a voter with no Raft state yet,
// bootstraps the catalog with every region's voter (the same
// configuration on every voter, so the start order does not matter); a
// non-voter asks the leader to add it, retrying in the background.
func OpenMember(cfg MemberConfig) (*Member, error) {
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Bind
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	voterAddr, ok := cfg.Voters[cfg.Region]
	if !ok {
		return nil, fmt.Errorf("catalog: region %q names no catalog voter", cfg.Region)
	}
	m := &Member{cfg: cfg, voter: voterAddr == cfg.Advertise, done: make(chan struct{})}
	m.id = cfg.Region
	if !m.voter {
		m.id = cfg.Region + "/" + cfg.NodeID
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("catalog: listen on %s: %w", cfg.Bind, err)
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("catalog: advertise address %s: %w", cfg.Advertise, err)
	}
	hl := rlog.New(cfg.Logger, "raft")
	m.mux = transport.NewMux(ln, cfg.TLS)
	m.stream = transport.NewStream(m.mux.Raft, adv, cfg.TLS, cfg.Dial)
	m.trans = transport.NewNetwork(m.stream, transport.Config{MaxPool: 2, Logger: hl.Named("transport")})
	m.store, _, err = logstore.Open(cfg.Dir, cfg.LogStore, cfg.Logger)
	if err != nil {
		m.closeNet()
		return nil, fmt.Errorf("catalog: %w", err)
	}
	snaps, err := logstore.Snapshots(cfg.Dir, hl.Named("snapshot"))
	if err != nil {
		m.closeNet()
		return nil, fmt.Errorf("catalog: %w", err)
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	m.client = newClient(cfg.TLS)
	node, err := Open(Config{Region: cfg.Region, ID: m.id, Transport: m.trans, Logs: m.store, Stable: m.store, Snapshots: snaps,
		RTT: cfg.RTT, Logger: cfg.Logger, Forward: m.forwarder(scheme)})
	if err != nil {
		m.closeNet()
		return nil, err
	}
	m.Node = node
	m.hs = &http.Server{Handler: m.api(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.hs.Serve(m.mux.HTTP) }()

	has, err := raft.HasExistingState(m.store, m.store, snaps)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("catalog: %w", err)
	}
	switch {
	case has:
	case m.voter:
		members := map[string]raft.ServerAddress{}
		for r, a := range cfg.Voters {
			members[r] = raft.ServerAddress(a)
		}
		if err := m.Bootstrap(members); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			m.Close()
			return nil, fmt.Errorf("catalog: bootstrap: %w", err)
		}
	default:
		m.wg.Add(1)
		go m.joinLoop(scheme)
	}
	return m, nil
}

// newClient is the HTTP client of the catalog API (TLS: the peering
// certificate, nil: plain HTTP with HMAC-signed requests).
func newClient(cfg *tls.Config) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}
	if cfg != nil {
		tr.TLSClientConfig = cfg.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Voter reports whether this member is its region's voter.
func (m *Member) Voter() bool { return m.voter }

// ID is the member's Raft id.
func (m *Member) ID() string { return m.id }

// Leader names the region leading the catalog ("" when none is known).
func (m *Member) Leader() string { return m.Node.Leader() }

// Close stops the member.
func (m *Member) Close() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	close(m.done)
	var err error
	if m.Node != nil {
		err = m.Node.Close()
	}
	m.wg.Wait()
	if m.hs != nil {
		_ = m.hs.Close()
	}
	m.closeNet()
	return err
}

func (m *Member) closeNet() {
	if m.trans != nil {
		_ = m.trans.Close()
	}
	_ = m.mux.Close()
	if m.stream != nil {
		// A heartbeat that came in just before Raft shut down may still
		// be handled: it writes the term to the store, and hashicorp/raft
		// panics if the store is closed by then. Its connection is closed
		// here and the store waits for its handler to let go of it.
		m.stream.Drain(5 * time.Second)
	}
	if m.store != nil {
		_ = m.store.Close()
	}
}

// joinLoop asks the leader, through any voter, to add this node as a
// non-voter until it is in the configuration.
func (m *Member) joinLoop(scheme string) {
	defer m.wg.Done()
	body, _ := json.Marshal(joinRequest{ID: m.id, Addr: m.cfg.Advertise})
	for wait := m.rtt(); ; wait = min(2*wait, 5*time.Second) {
		if m.inConfig() {
			return
		}
		for _, addr := range m.cfg.Voters {
			if _, err := m.post(context.Background(), scheme, addr, "/catalog/v1/join", body); err == nil {
				break
			}
		}
		select {
		case <-m.done:
			return
		case <-time.After(wait):
		}
	}
}

func (m *Member) inConfig() bool {
	f := m.Node.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == m.id {
			return true
		}
	}
	return false
}

type joinRequest struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// wireAnswer is the leader's answer to a forwarded change.
type wireAnswer struct {
	Index    uint64  `json:"index"`
	Error    string  `json:"error,omitempty"`
	Kind     string  `json:"kind,omitempty"` // exists, no-majority, not-home, no-such-bucket
	Existing *Bucket `json:"existing,omitempty"`
	Owned    bool    `json:"owned,omitempty"`
}

func encodeErr(idx uint64, err error) wireAnswer {
	a := wireAnswer{Index: idx}
	if err == nil {
		return a
	}
	a.Error = err.Error()
	var ex *BucketExistsError
	switch {
	case errors.As(err, &ex):
		a.Kind, a.Existing, a.Owned = "exists", &ex.Existing, ex.OwnedByCaller
	case errors.Is(err, ErrNoMajority):
		a.Kind = "no-majority"
	case errors.Is(err, ErrNotHome):
		a.Kind = "not-home"
	case errors.Is(err, ErrNoSuchBucket):
		a.Kind = "no-such-bucket"
	case errors.Is(err, ErrKeyInUse):
		a.Kind = "key-in-use"
	}
	return a
}

func (a wireAnswer) err() error {
	switch {
	case a.Error == "":
		return nil
	case a.Kind == "exists" && a.Existing != nil:
		return &BucketExistsError{Existing: *a.Existing, OwnedByCaller: a.Owned}
	case a.Kind == "no-majority":
		return fmt.Errorf("%w (at the leader: %s)", ErrNoMajority, a.Error)
	case a.Kind == "not-home":
		return fmt.Errorf("%w (%s)", ErrNotHome, a.Error)
	case a.Kind == "key-in-use":
		return fmt.Errorf("%w (%s)", ErrKeyInUse, a.Error)
	case a.Kind == "no-such-bucket":
		return fmt.Errorf("%w (%s)", ErrNoSuchBucket, a.Error)
	}
	return errors.New(a.Error)
}

// forwarder sends a change to the leader's catalog port.
func (m *Member) forwarder(scheme string) Forward {
	return func(ctx context.Context, _ string, data []byte) (uint64, error) {
		addr, _ := m.Node.raft.LeaderWithID()
		if addr == "" {
			return 0, ErrNoMajority
		}
		out, err := m.post(ctx, scheme, string(addr), "/catalog/v1/apply", data)
		if err != nil {
			return 0, fmt.Errorf("%w: forwarding to %s: %v", ErrNoMajority, addr, err)
		}
		var a wireAnswer
		if err := json.Unmarshal(out, &a); err != nil {
			return 0, fmt.Errorf("%w: answer of %s: %v", ErrNoMajority, addr, err)
		}
		return a.Index, a.err()
	}
}

const (
	hdrTime = "X-Fedgate-Catalog-Time"
	hdrMAC  = "X-Fedgate-Catalog-Mac"
)

func (m *Member) mac(ts string, body []byte) string {
	h := hmac.New(sha256.New, m.cfg.Secret)
	h.Write([]byte(ts))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Member) post(ctx context.Context, scheme, addr, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set(hdrTime, ts)
	req.Header.Set(hdrMAC, m.mac(ts, body))
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

// api is the HTTP side of the catalog port.
func (m *Member) api() http.Handler {
	mux := http.NewServeMux()
	auth := func(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if m.cfg.TLS == nil { // mutual TLS authenticated the peer already
				ts, _ := strconv.ParseInt(r.Header.Get(hdrTime), 10, 64)
				if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute ||
					!hmac.Equal([]byte(r.Header.Get(hdrMAC)), []byte(m.mac(r.Header.Get(hdrTime), body))) {
					http.Error(w, "catalog: request not signed with the peering secret (or clocks more than 5 minutes apart)", http.StatusForbidden)
					return
				}
			}
			h(w, r, body)
		}
	}
	mux.HandleFunc("POST /catalog/v1/apply", auth(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var a wireAnswer
		if m.Node.raft.State() != raft.Leader {
			a = encodeErr(0, fmt.Errorf("%w: %s does not lead the catalog", ErrNoMajority, m.id))
		} else {
			ctx, cancel := context.WithTimeout(r.Context(), 10*m.rtt())
			a = encodeErr(m.ApplyLocal(ctx, body))
			cancel()
		}
		_ = json.NewEncoder(w).Encode(a)
	}))
	mux.HandleFunc("POST /catalog/v1/join", auth(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var j joinRequest
		if err := json.Unmarshal(body, &j); err != nil || j.ID == "" || j.Addr == "" {
			http.Error(w, "catalog: join needs id and addr", http.StatusBadRequest)
			return
		}
		if m.Node.raft.State() != raft.Leader {
			addr, _ := m.Node.raft.LeaderWithID()
			if addr == "" {
				http.Error(w, "catalog: no leader", http.StatusServiceUnavailable)
				return
			}
			scheme := "http"
			if m.cfg.TLS != nil {
				scheme = "https"
			}
			if _, err := m.post(r.Context(), scheme, string(addr), "/catalog/v1/join", body); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			return
		}
		if err := m.Node.raft.AddNonvoter(raft.ServerID(j.ID), raft.ServerAddress(j.Addr), 0, 10*m.rtt()).Error(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	return mux
}

// Status is what a member reports of the catalog.
type Status struct {
	ID      string   `json:"id"`
	Voter   bool     `json:"voter"`
	Leader  string   `json:"leader"`
	Applied uint64   `json:"applied"`
	Lag     uint64   `json:"lag"`
	Voters  []string `json:"voters"`
	// LastContact is how long ago this member last heard from the leader
	// (0 on the leader).
	LastContact time.Duration `json:"last_contact_ns"`
}

// Status reports this member's view.
func (m *Member) Status() Status {
	s := Status{ID: m.id, Voter: m.voter, Leader: m.Leader(), Applied: m.State().Applied(), Lag: m.Lag()}
	if m.Node.raft.State() != raft.Leader {
		if lc := m.Node.raft.LastContact(); !lc.IsZero() {
			s.LastContact = time.Since(lc)
		} else {
			s.LastContact = -1
		}
	}
	if f := m.Node.raft.GetConfiguration(); f.Error() == nil {
		for _, sv := range f.Configuration().Servers {
			if sv.Suffrage == raft.Voter {
				s.Voters = append(s.Voters, string(sv.ID))
			}
		}
	}
	return s
}
