package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/node/peerapi"
)

// Clock skew between the nodes of a region. Raft itself needs no clock
// agreement, but fedgate's leases do: a write-back drain claim is a lease
// that a node gives up drainSafety (5 s) before it ends by its own clock, so
// a node whose clock runs more than that behind may still be uploading an
// old version when another node's claim on a newer one starts (the store
// could end up with the older bytes). Multipart and cache TTLs, egress
// ledger hours and Created times also use the wall clock. Every node
// measures every peer's clock against its own, reports the offsets as a
// metric and in `fedgate cluster status`, and logs when one is beyond the
// limit.

// ClockSkewLimit is how far a peer's clock may be from this node's before
// the node reports it (docs/operations.md, "Clocks").
const ClockSkewLimit = 2 * time.Second

// clockEvery is how often the peers' clocks are measured.
const clockEvery = 15 * time.Second

// clockOffset measures peer's clock against this node's: the peer's time
// minus this node's at the midpoint of the request, and half the round
// trip, within which the true offset lies.
func (c *cluster) clockOffset(ctx context.Context, base string) (in peerapi.Info, offset, within time.Duration, err error) {
	t0 := c.now()
	in, err = c.client.Info(ctx, base)
	t1 := c.now()
	if err != nil {
		return in, 0, 0, err
	}
	if in.Time.IsZero() {
		return in, 0, 0, fmt.Errorf("%s does not report its clock (an older fedgate)", base)
	}
	within = t1.Sub(t0) / 2
	return in, in.Time.Sub(t0.Round(0).Add(within)), within, nil
}

// skewProblem describes an offset beyond ClockSkewLimit ("" if within).
func skewProblem(self string, offset, within time.Duration) string {
	if offset.Abs()-within <= ClockSkewLimit {
		return ""
	}
	dir := "ahead of"
	if offset < 0 {
		dir = "behind"
	}
	return fmt.Sprintf("its clock is %.1fs %s %s's; node clocks must agree within %v (run NTP; see docs/operations.md, Clocks)",
		offset.Abs().Seconds(), dir, self, ClockSkewLimit)
}

// clockWatch is the metric of the measured offsets.
type clockWatch struct {
	offsets *prometheus.GaugeVec
	mu      sync.Mutex
	skewed  map[string]bool // peers last logged as beyond the limit
}

func newClockWatch() *clockWatch {
	return &clockWatch{
		offsets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fedgate_cluster_clock_offset_seconds",
			Help: "A peer's clock minus this node's, measured every 15 s (|offset| above 2 s is reported as a problem)."}, []string{"peer"}),
		skewed: map[string]bool{},
	}
}

// watchClocks measures every peer's clock a second after the node starts
// (when the peers' addresses are known), then every clockEvery, until ctx
// ends.
func (c *cluster) watchClocks(ctx context.Context) {
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		c.measureClocks(ctx)
		wait = clockEvery
	}
}

func (c *cluster) measureClocks(ctx context.Context) {
	members, err := c.raft.Members()
	if err != nil {
		return
	}
	for _, m := range members {
		base := c.KnownHTTP(m.ID)
		if m.ID == c.id || base == "" {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, offset, within, err := c.clockOffset(mctx, base)
		cancel()
		if err != nil {
			continue
		}
		c.clocks.offsets.WithLabelValues(m.ID).Set(offset.Seconds())
		problem := skewProblem(c.id, offset, within)
		c.clocks.mu.Lock()
		was := c.clocks.skewed[m.ID]
		c.clocks.skewed[m.ID] = problem != ""
		c.clocks.mu.Unlock()
		switch {
		case problem != "" && !was:
			c.log.Warn("cluster: clock skew: "+m.ID+": "+problem, "peer", m.ID, "offset_seconds", offset.Seconds())
		case problem == "" && was:
			c.log.Info("cluster: clock skew resolved", "peer", m.ID, "offset_seconds", offset.Seconds())
		}
	}
}
