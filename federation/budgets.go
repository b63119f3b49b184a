package federation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation/placement"
	"github.com/fedgate/fedgate/store"
)

// ErrEgressBudget: a cold read (a cache miss that would read from the
// store) is refused because the bucket's egress budget with action
// block-cold-reads is spent for the month. The message names the budget.
var ErrEgressBudget = backend.ErrEgressBudget

// DefaultBudgetRefresh is Config.BudgetRefresh's default: how stale the
// budget statuses a read sees may be.
const DefaultBudgetRefresh = 5 * time.Second

// budgets keeps the policy's egress budgets evaluated against the region's
// ledger of the current month (priced with the policy's overrides).
type budgets struct {
	mu       sync.Mutex
	at       time.Time
	version  uint64 // policy version the statuses were computed for
	statuses []egress.Status
	alerted  map[string]bool // budget+month already logged as spent
	used     *prometheus.GaugeVec
}

func newBudgets() *budgets {
	return &budgets{alerted: map[string]bool{}, used: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedgate_egress_budget_used_ratio",
		Help: "Egress cost of the current month over each budget's monthly limit (1 or more: spent), region-wide.",
	}, []string{"budget", "action"})}
}

// budgetStatuses returns the current statuses, re-evaluating them when
// older than Config.BudgetRefresh or computed for another policy version.
func (n *Namespace) budgetStatuses(ctx context.Context) []egress.Status {
	v := n.v()
	if v.policy == nil || len(v.policy.Egress.Budgets) == 0 || n.egress == nil {
		return nil
	}
	b := n.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	now := n.now()
	if b.statuses != nil && b.version == v.version && now.Sub(b.at) < n.budgetTTL {
		return b.statuses
	}
	_ = n.flushEgress(ctx) // this node's latest counts belong in the sum
	month := egress.MonthStart(now)
	var rows []egress.Row
	for _, r := range n.rs.State().Egress(month.Unix()/3600, now.Unix()/3600+1) {
		rows = append(rows, egress.Row{Key: egress.Key{Hour: r.Hour, Src: r.Src, Dst: r.Dst, Bucket: r.Bucket, Store: r.Store,
			Direction: egress.Direction(r.Direction)}, Counts: egress.Counts{Bytes: r.Bytes}})
	}
	table, err := egress.NewTable(v.policy.Egress.Prices)
	if err != nil {
		n.log.Warn("egress budgets: price table", "error", err)
		return b.statuses
	}
	priced, err := egress.Price(rows, table, egress.Options{})
	if err != nil {
		n.log.Warn("egress budgets: pricing the ledger", "error", err)
		return b.statuses
	}
	st, err := egress.EvaluateBudgets(v.policy.Egress.Budgets, priced, now)
	if err != nil {
		n.log.Warn("egress budgets", "error", err)
		return b.statuses
	}
	for _, s := range st {
		ratio, _ := s.Spent.Rat().Float64()
		limit, _ := s.Limit.Monthly.Rat().Float64()
		if limit > 0 {
			ratio /= limit
		}
		b.used.WithLabelValues(s.Limit.Name(), string(s.Limit.Action)).Set(ratio)
		if key := s.Limit.Name() + "|" + s.Month; s.Exceeded && !b.alerted[key] {
			b.alerted[key] = true
			n.log.Warn("egress budget spent", "budget", s.Limit.Name(), "month", s.Month, "message", s.Message())
		}
	}
	b.statuses, b.at, b.version = st, now, v.version
	return st
}

// checkColdRead refuses a read from st for bucket when a spent budget with
// action block-cold-reads covers it.
//
// A composite placement is not checked here: each member store is, as it
// is read (meteredStore), so a read routes around members whose pair is
// blocked and is refused only when it cannot (see blockedRead).
func (n *Namespace) checkColdRead(ctx context.Context, bucket string, st store.Store) error {
	if n.egress == nil || isComposite(st) {
		return nil
	}
	statuses := n.budgetStatuses(ctx)
	if len(statuses) == 0 {
		return nil
	}
	if s, blocked := egress.ColdReadBlocked(statuses, bucket, st.Location().String(), n.RegionLocation()); blocked {
		return fmt.Errorf("%w: %s; cached data is still served", ErrEgressBudget, s.Message())
	}
	return nil
}

// blockedRead remembers that a member store of a composite placement
// refused a read of this request because of a budget, so that a read the
// placement then cannot serve from the other members fails with that
// clear budget error rather than a generic one.
type blockedRead struct{ err atomic.Pointer[error] }

func (b *blockedRead) set(err error) {
	if b != nil {
		b.err.Store(&err)
	}
}

func (b *blockedRead) get() error {
	if b == nil {
		return nil
	}
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

// budgetError returns the budget refusal behind a failed read of a
// composite placement, if a member refused it, else err.
func budgetError(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrEgressBudget) {
		return err
	}
	if berr := egressTagOf(ctx).blocked.get(); berr != nil && errors.Is(err, placement.ErrUnrecoverable) {
		return fmt.Errorf("%w (%v)", berr, err)
	}
	return err
}
