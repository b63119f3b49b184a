package peerapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/regionstate"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// AccessKey and SecretKey are the region's root credentials; every
	// request is signed with them for SigningRegion.
	AccessKey, SecretKey, SigningRegion string
	// Self is this node's S3 address ("http://host:port") and
	// SelfInternal its internal API URL: calls to Self go straight there.
	Self, SelfInternal string
	// Join are other nodes' S3 addresses ("http://host:port"), asked by
	// AskPeers.
	Join []string
	// TLS, when set, is the peers' mutual TLS (client side), for the
	// internal API.
	TLS *tls.Config
	// S3TLS verifies other nodes' S3 ports where they serve https (the
	// info call; nil: the system's roots).
	S3TLS *tls.Config
	// Dial, when set, opens the connections to other nodes instead of a
	// net.Dialer (tests cut nodes off with it).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client makes internal API calls. It learns, and keeps, each node's
// internal API URL (asked once from the node's S3 port) and the S3
// addresses other nodes report for themselves and their leader. It is
// safe for concurrent use.
type Client struct {
	cfg    ClientConfig
	call   *http.Client // small calls: forwarded writes, barriers
	stream *http.Client // bulk transfers: staged copies, chunks
	s3     *http.Client // info, on a node's S3 port

	mu       sync.Mutex
	peers    map[string]string // node id -> S3 address, learnt from peers
	internal map[string]string // S3 address -> internal API URL
}

// NewClient returns a client for cfg.
func NewClient(cfg ClientConfig) *Client {
	c := &Client{cfg: cfg, call: newCallClient(), stream: newStreamClient(), s3: newCallClient(),
		peers: map[string]string{}, internal: map[string]string{}}
	for _, hc := range []*http.Client{c.call, c.stream, c.s3} {
		t := hc.Transport.(*http.Transport)
		switch {
		case hc == c.s3 && cfg.S3TLS != nil:
			t.TLSClientConfig = cfg.S3TLS.Clone()
		case hc != c.s3 && cfg.TLS != nil:
			t.TLSClientConfig = cfg.TLS.Clone()
		}
		if cfg.Dial != nil {
			t.DialContext = cfg.Dial
		}
	}
	return c
}

// newStreamClient is the client for bulk internal transfers: no overall
// timeout (a 1 GiB copy takes as long as it takes), but bounded waits for
// a connection and for the answer's headers.
func newStreamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		DisableCompression:    true,
	}}
}

// newCallClient is the client for small internal calls (forwarded writes,
// info, read barriers): connections are kept for reuse, so a busy
// follower does not open one per forwarded write.
func newCallClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Timeout: 60 * time.Second, Transport: t}
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() {
	c.call.CloseIdleConnections()
	c.stream.CloseIdleConnections()
	c.s3.CloseIdleConnections()
}

// StatusError is an error answered by another node as an ErrorBody.
// Unwrap rebuilds the sender's error, so errors.Is(err, regionstate.ErrNotLeader)
// and the like work across the call.
type StatusError struct {
	Status int
	Body   ErrorBody
}

func (e *StatusError) Error() string { return e.Body.Message }
func (e *StatusError) Unwrap() error { return e.Body.Err() }

// Refused reports an error that proves the request never reached a server.
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// do sends one signed request to base (a node's S3 address) and decodes a
// 2xx JSON answer into out. Every path but info goes to the node's
// internal API. A non-2xx answer carrying an ErrorBody is a *StatusError.
func (c *Client) do(ctx context.Context, base, method, path string, body []byte, out any) error {
	hc := c.s3
	if path != "info" {
		var err error
		if base, err = c.internalOf(ctx, base); err != nil {
			return err
		}
		hc = c.call
	}
	req, err := http.NewRequestWithContext(ctx, method, base+Prefix+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if err := SignRequest(ctx, req, body, c.cfg.AccessKey, c.cfg.SecretKey, c.cfg.SigningRegion); err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Code != "" {
			return &StatusError{Status: resp.StatusCode, Body: eb}
		}
		return fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Info asks the node serving S3 at base who it is (on its S3 port) and
// remembers where its internal API is.
func (c *Client) Info(ctx context.Context, base string) (Info, error) {
	var in Info
	if err := c.do(ctx, base, http.MethodGet, "info", nil, &in); err != nil {
		return Info{}, err
	}
	c.learnInternal(NormalizeHTTP(in.HTTPAddr), in.InternalURL)
	c.learnInternal(base, in.InternalURL)
	return in, nil
}

// AskPeers asks each Join peer for its info (2 s each), remembers the
// peer's S3 address and hands the answers of those that replied to f. It
// returns the last error of a peer that did not answer (nil: all did), for
// the log of a node waiting for its peers (an untrusted certificate, a
// wrong address).
func (c *Client) AskPeers(ctx context.Context, f func(peer string, in Info)) error {
	var last error
	for _, p := range c.cfg.Join {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		in, err := c.Info(ictx, p)
		cancel()
		if err != nil {
			last = fmt.Errorf("%s: %w", p, err)
			continue
		}
		c.Remember(in.ID, NormalizeHTTP(in.HTTPAddr))
		f(p, in)
	}
	return last
}

// Remember records id's S3 address as another node reported it.
func (c *Client) Remember(id, httpAddr string) {
	if id == "" || httpAddr == "" {
		return
	}
	c.mu.Lock()
	c.peers[id] = httpAddr
	c.mu.Unlock()
}

// Learned is id's S3 address as other nodes reported it ("": unknown).
func (c *Client) Learned(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers[id]
}

// Forward posts an encoded regionstate.Command to the leader serving S3 at base
// and returns the index the leader applied it at. The error is the
// leader's own (rebuilt, so errors.Is works), a *regionstate.NotLeaderError when
// the write was certainly not sent (the leader's port refused it), or an
// error saying the outcome is unknown.
func (c *Client) Forward(ctx context.Context, leaderID, base string, data []byte) (uint64, error) {
	var out indexAnswer
	err := c.do(ctx, base, http.MethodPost, "apply", data, &out)
	if se := (*StatusError)(nil); errors.As(err, &se) {
		return 0, se.Body.Err()
	}
	if err != nil {
		if Refused(err) {
			return 0, &regionstate.NotLeaderError{}
		}
		// Sent, and no answer: the leader may have applied it before it
		// died or the connection broke. That is ErrLeadershipLost (outcome
		// unknown), which clients are told to check or retry (503), not
		// an internal error.
		return 0, fmt.Errorf("%w: forward the write to the leader %s at %s: %w", regionstate.ErrLeadershipLost, leaderID, base, err)
	}
	return out.Index, nil
}

// ReadIndex asks the leader serving S3 at base for its commit index.
func (c *Client) ReadIndex(ctx context.Context, base string) (uint64, error) {
	var out indexAnswer
	if err := c.do(ctx, base, http.MethodGet, "readindex", nil, &out); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// Join asks the node serving S3 at base to add j as a voter, following
// "not the leader" answers (up to 3) to the leader they name; each try
// gets 30 s.
func (c *Client) Join(ctx context.Context, base string, j JoinRequest) error {
	req := jsonBody(j)
	for range 3 {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.do(jctx, base, http.MethodPost, "join", req, nil)
		cancel()
		se := (*StatusError)(nil)
		if !errors.As(err, &se) || se.Body.LeaderHTTP == "" || se.Body.Code != regionstate.CodeNotLeader {
			return err
		}
		base = NormalizeHTTP(se.Body.LeaderHTTP)
	}
	return errors.New("too many redirects to the leader")
}

// Remove asks the leader serving S3 at base to remove member id.
func (c *Client) Remove(ctx context.Context, base, id string) error {
	return c.do(ctx, base, http.MethodPost, "remove", jsonBody(RemoveRequest{ID: id}), nil)
}

// StageTo copies exactly n bytes of r into the staging area of the node
// serving S3 at base as id; it returns once that node has fsynced them.
func (c *Client) StageTo(ctx context.Context, base, id string, r io.Reader, n int64) error {
	resp, err := c.streamCall(ctx, base, http.MethodPut, "stage/"+id, r, n)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ReadStaged streams [off, off+n) of the file id staged on the node
// serving S3 at base.
func (c *Client) ReadStaged(ctx context.Context, base, id string, off, n int64) (io.ReadCloser, error) {
	resp, err := c.streamCall(ctx, base, http.MethodGet,
		"stage/"+id+"?off="+strconv.FormatInt(off, 10)+"&n="+strconv.FormatInt(n, 10), nil, 0)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength != n {
		resp.Body.Close()
		return nil, fmt.Errorf("%s sent %d bytes of staged %s, want %d", base, resp.ContentLength, id, n)
	}
	return resp.Body, nil
}

// HoldStaged asks the node serving S3 at base to keep the files ids staged
// there for d.
func (c *Client) HoldStaged(ctx context.Context, base string, ids []string, d time.Duration) error {
	return c.do(ctx, base, http.MethodPost, "hold", jsonBody(HoldRequest{IDs: ids, Millis: d.Milliseconds()}), nil)
}

// ReadChunk streams [off, off+n) of chunk k from the cache of the node
// serving S3 at base.
func (c *Client) ReadChunk(ctx context.Context, base string, k cachetier.ChunkKey, off, n int64) (io.ReadCloser, error) {
	q := url.Values{}
	q.Set("store", k.Store)
	q.Set("key", k.Key)
	q.Set("validator", string(k.Validator))
	q.Set("size", strconv.FormatInt(k.Size, 10))
	q.Set("index", strconv.FormatInt(k.Index, 10))
	q.Set("off", strconv.FormatInt(off, 10))
	q.Set("n", strconv.FormatInt(n, 10))
	resp, err := c.streamCall(ctx, base, http.MethodGet, "chunk?"+q.Encode(), nil, 0)
	if err != nil {
		return nil, err
	}
	if n >= 0 && resp.ContentLength != n {
		resp.Body.Close()
		return nil, fmt.Errorf("%s sent %d bytes of a chunk range, want %d", base, resp.ContentLength, n)
	}
	return resp.Body, nil
}

// streamCall sends a signed request with an unsigned streaming body and
// returns the answer; a non-2xx answer is an error (its body closed).
func (c *Client) streamCall(ctx context.Context, base, method, path string, body io.Reader, size int64) (*http.Response, error) {
	base, err := c.internalOf(ctx, base)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+Prefix+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	if err := SignUnsigned(ctx, req, c.cfg.AccessKey, c.cfg.SecretKey, c.cfg.SigningRegion); err != nil {
		return nil, err
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s answered %s: %s", method, path, resp.Status, data)
	}
	return resp, nil
}

// internalOf returns the internal API URL of the node serving S3 at base,
// asking that node (its info, on the S3 port) the first time.
func (c *Client) internalOf(ctx context.Context, base string) (string, error) {
	if base == c.cfg.Self && c.cfg.SelfInternal != "" {
		return c.cfg.SelfInternal, nil
	}
	c.mu.Lock()
	u := c.internal[base]
	c.mu.Unlock()
	if u != "" {
		return u, nil
	}
	in, err := c.Info(ctx, base)
	if err != nil {
		return "", fmt.Errorf("ask %s where its internal API is: %w", base, err)
	}
	if in.InternalURL == "" {
		return "", fmt.Errorf("%s did not say where its internal API is", base)
	}
	return in.InternalURL, nil
}

func (c *Client) learnInternal(base, url string) {
	if base == "" || url == "" {
		return
	}
	c.mu.Lock()
	c.internal[base] = url
	c.mu.Unlock()
}
