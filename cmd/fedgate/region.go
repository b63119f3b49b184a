package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/cachetier/staging"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/federation/store"
	"github.com/fedgate/fedgate/raft"
)

// The cluster as the namespace's federation.Region: staged copies of
// write-back writes and read barriers over the internal API.

var _ federation.Region = (*cluster)(nil)

// Self implements federation.Region.
func (c *cluster) Self() string { return c.id }

// membersTTL bounds how stale the cached member list may be.
const membersTTL = time.Second

type memberCache struct {
	mu  sync.Mutex
	ids []string
	at  time.Time
}

// Members implements federation.Region: the ids in the Raft configuration
// (cached for a second; a change of membership is rare).
func (c *cluster) Members() []string {
	c.members.mu.Lock()
	defer c.members.mu.Unlock()
	if c.members.ids != nil && time.Since(c.members.at) < membersTTL {
		return c.members.ids
	}
	ms, err := c.node.Members()
	if err != nil || len(ms) == 0 {
		if c.members.ids == nil {
			return []string{c.id}
		}
		return c.members.ids
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	c.members.ids, c.members.at = ids, time.Now()
	return ids
}

// streamClient is the client for bulk internal transfers: no overall
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

// streamCall sends a signed request with an unsigned streaming body and
// returns the answer; a non-2xx answer is an error (its body closed).
func (c *cluster) streamCall(ctx context.Context, node, method, path string, body io.Reader, size int64) (*http.Response, error) {
	base := c.httpOf(ctx, node)
	if base == "" {
		return nil, fmt.Errorf("the HTTP address of node %s is not known", node)
	}
	base, err := c.internalOf(ctx, base)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+internalPrefix+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	if err := signUnsigned(ctx, req, c.ak, c.sk, c.region); err != nil {
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

// StageTo implements federation.Region.
func (c *cluster) StageTo(ctx context.Context, node, id string, r io.Reader, n int64) error {
	resp, err := c.streamCall(ctx, node, http.MethodPut, "stage/"+id, r, n)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ReadStaged implements federation.Region.
func (c *cluster) ReadStaged(ctx context.Context, node, id string, off, n int64) (io.ReadCloser, error) {
	resp, err := c.streamCall(ctx, node, http.MethodGet,
		"stage/"+id+"?off="+strconv.FormatInt(off, 10)+"&n="+strconv.FormatInt(n, 10), nil, 0)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength != n {
		resp.Body.Close()
		return nil, fmt.Errorf("node %s sent %d bytes of staged %s, want %d", node, resp.ContentLength, id, n)
	}
	return resp.Body, nil
}

// ReadBarrier implements federation.Region: it waits until this node has
// applied the leader's commit index, asked now, so a read here sees every
// write acknowledged anywhere before it.
func (c *cluster) ReadBarrier(ctx context.Context) error {
	if c.node.IsLeader() {
		return c.node.WaitApplied(ctx, c.node.CommitIndex())
	}
	if !c.tcp {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		idx, err := c.leaderCommit(ctx)
		if err == nil {
			return c.node.WaitApplied(ctx, idx)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: no leader answered a read barrier: %v", raft.ErrNoLeader, err)
		}
		t := time.NewTimer(time.Duration(min(attempt+1, 10)) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// leaderCommit asks the leader for its commit index.
func (c *cluster) leaderCommit(ctx context.Context) (uint64, error) {
	lid, _ := c.node.Leader()
	if lid == "" {
		return 0, raft.ErrNoLeader
	}
	if lid == c.id {
		return c.node.CommitIndex(), nil
	}
	base := c.httpOf(ctx, lid)
	if base == "" {
		return 0, fmt.Errorf("the leader's HTTP address is not known")
	}
	var out struct {
		Index uint64 `json:"index"`
	}
	if err := c.call(ctx, base, http.MethodGet, "readindex", nil, &out); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// stageRoutes adds the internal API's write-back and read-barrier routes.
func (c *cluster) stageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+internalPrefix+"readindex", func(w http.ResponseWriter, r *http.Request) {
		if !c.node.IsLeader() {
			c.fail(w, &raft.NotLeaderError{})
			return
		}
		writeInternal(w, http.StatusOK, map[string]uint64{"index": c.node.CommitIndex()})
	})
	mux.HandleFunc("PUT "+internalPrefix+"stage/{id}", func(w http.ResponseWriter, r *http.Request) {
		ns := c.ns.Load()
		if ns == nil {
			c.fail(w, fmt.Errorf("%w: this node is still starting", raft.ErrClosed))
			return
		}
		if r.ContentLength < 0 {
			http.Error(w, "a staged copy needs a Content-Length", http.StatusLengthRequired)
			return
		}
		err := ns.StageHere(r.Context(), r.PathValue("id"), r.Body, r.ContentLength)
		switch {
		case errors.Is(err, federation.ErrStagingUnavailable):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case errors.Is(err, staging.ErrInvalidID), errors.Is(err, staging.ErrShortBody):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("GET "+internalPrefix+"stage/{id}", func(w http.ResponseWriter, r *http.Request) {
		ns := c.ns.Load()
		if ns == nil {
			c.fail(w, fmt.Errorf("%w: this node is still starting", raft.ErrClosed))
			return
		}
		off, err1 := strconv.ParseInt(r.URL.Query().Get("off"), 10, 64)
		n, err2 := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err1 != nil || err2 != nil {
			http.Error(w, "off and n must be integers", http.StatusBadRequest)
			return
		}
		rc, _, err := ns.OpenStaged(r.PathValue("id"), off, n)
		switch {
		case errors.Is(err, staging.ErrNotFound):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer rc.Close()
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, rc)
	})
}

// ReadChunk implements cachetier.PeerClient: [off, off+n) of chunk k from
// node's cache.
func (c *cluster) ReadChunk(ctx context.Context, node string, k cachetier.ChunkKey, off, n int64) (io.ReadCloser, error) {
	q := url.Values{}
	q.Set("store", k.Store)
	q.Set("key", k.Key)
	q.Set("validator", string(k.Validator))
	q.Set("size", strconv.FormatInt(k.Size, 10))
	q.Set("index", strconv.FormatInt(k.Index, 10))
	q.Set("off", strconv.FormatInt(off, 10))
	q.Set("n", strconv.FormatInt(n, 10))
	resp, err := c.streamCall(ctx, node, http.MethodGet, "chunk?"+q.Encode(), nil, 0)
	if err != nil {
		return nil, err
	}
	if n >= 0 && resp.ContentLength != n {
		resp.Body.Close()
		return nil, fmt.Errorf("node %s sent %d bytes of a chunk range, want %d", node, resp.ContentLength, n)
	}
	return resp.Body, nil
}

// chunkRoute serves a peer's ReadChunk from this node's cache.
func (c *cluster) chunkRoute(mux *http.ServeMux) {
	mux.HandleFunc("GET "+internalPrefix+"chunk", func(w http.ResponseWriter, r *http.Request) {
		ns := c.ns.Load()
		if ns == nil {
			c.fail(w, fmt.Errorf("%w: this node is still starting", raft.ErrClosed))
			return
		}
		q := r.URL.Query()
		var nums [4]int64
		for i, name := range []string{"size", "index", "off", "n"} {
			v, err := strconv.ParseInt(q.Get(name), 10, 64)
			if err != nil {
				http.Error(w, name+" must be an integer", http.StatusBadRequest)
				return
			}
			nums[i] = v
		}
		k := cachetier.ChunkKey{ObjectID: cachetier.ObjectID{Store: q.Get("store"), Key: q.Get("key"),
			Validator: store.Validator(q.Get("validator")), Size: nums[0]}, Index: nums[1]}
		off, n := nums[2], nums[3]
		rc, err := ns.ServeChunk(r.Context(), k, off, n)
		if err != nil {
			status := http.StatusBadGateway
			switch {
			case errors.Is(err, store.ErrNotFound):
				status = http.StatusNotFound
			case errors.Is(err, store.ErrPreconditionFailed):
				status = http.StatusPreconditionFailed
			case errors.Is(err, cachetier.ErrInvalidRange):
				status = http.StatusRequestedRangeNotSatisfiable
			}
			http.Error(w, err.Error(), status)
			return
		}
		defer rc.Close()
		// Wait for the first byte before the status line, so an origin
		// failure on the owner is an error status, not a short body.
		br := bufio.NewReaderSize(rc, 64<<10)
		if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, br)
	})
}

// syncMembers keeps the cache's ring in step with the Raft membership.
func (c *cluster) syncMembers(ctx context.Context, cache *cachetier.Cache) {
	var last string
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		ids := slices.Clone(c.Members())
		slices.Sort(ids)
		if key := strings.Join(ids, ","); key != last {
			cache.SetMembers(ids)
			c.log.Info("cache ring members", "members", ids)
			last = key
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
