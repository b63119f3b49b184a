package federation

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation/placement"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Composite placements (replicate, erasure) are stores made of the
// policy's stores (package placement). Each distinct placement is one
// store of the view, named after its layout, so the cache, the journal and
// the drainer treat it like any other store.

// placementName names a composite placement: "replicate(a,b)",
// "erasure(4+2:a,b,c,d)".
func placementName(pl policies.Placement) string {
	switch pl.Kind {
	case policies.PlacementReplicate:
		return "replicate(" + strings.Join(pl.Stores, ",") + ")"
	case policies.PlacementErasure:
		return fmt.Sprintf("erasure(%d+%d:%s)", pl.Data, pl.Parity, strings.Join(pl.Stores, ","))
	}
	return ""
}

// openPlacement builds (or finds in stores) the composite store of pl; it
// adds it to stores. Reads prefer the members that are cheapest to read
// from this region (the egress price table with the policy's overrides).
func (n *Namespace) openPlacement(p *policies.Policy, pb policies.Bucket, stores map[string]store.Store) (store.Store, error) {
	pl := pb.Placement
	prefer := pb.Routing.Prefer
	if prefer == "" && len(pb.Routing.Order) == 0 && p != nil {
		prefer = p.Routing.Prefer
	}
	name := placementName(pl)
	switch {
	case len(pb.Routing.Order) > 0:
		name += "@" + strings.Join(pb.Routing.Order, ",")
	case prefer == policies.PreferNearest:
		name += "@nearest"
	}
	if st, ok := stores[name]; ok {
		return st, nil
	}
	members := make([]store.Store, 0, len(pl.Stores))
	for _, s := range pl.Stores {
		st, ok := stores[s]
		if !ok {
			return nil, fmt.Errorf("store %q of placement %s is not configured", s, name)
		}
		members = append(members, n.meter(st))
	}
	var rank []int
	var costs []float64 // erasure: by price with the cheapest rule only
	switch {
	case len(pb.Routing.Order) > 0:
		rank = explicitRank(pl.Stores, pb.Routing.Order)
	case prefer == policies.PreferNearest:
		rank = n.rankByDistance(members)
	default:
		rank = n.rankByPrice(p, members)
		costs = n.readPrices(p, members)
	}
	loc := members[rank[0]].Location()
	var st store.Store
	var err error
	opts := []placement.Option{placement.WithRank(func() []int { return rank }), placement.WithDegraded(n.degradedRead)}
	switch pl.Kind {
	case policies.PlacementReplicate:
		st, err = placement.NewReplicated(name, loc, members, opts...)
	case policies.PlacementErasure:
		if costs != nil {
			opts = append(opts, placement.WithCosts(func() []float64 { return costs }))
		}
		st, err = placement.NewErasure(name, loc, members, pl.Data, pl.Parity, opts...)
	default:
		return nil, fmt.Errorf("placement %q is not a composite placement", pl.Kind)
	}
	if err != nil {
		return nil, err
	}
	stores[name] = st
	return st, nil
}

// explicitRank puts the listed stores first, in their order, then the
// rest of the placement's stores in listed order.
func explicitRank(stores, order []string) []int {
	var out []int
	for _, name := range order {
		if i := slices.Index(stores, name); i >= 0 {
			out = append(out, i)
		}
	}
	for i := range stores {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// rankBy orders members by score(member location, region location),
// lowest first, listed order breaking ties; members whose location does
// not parse go last, and without a region location the listed order stays.
func (n *Namespace) rankBy(members []store.Store, score func(src, dst policies.Location) float64) []int {
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	scores := n.scores(members, score)
	if scores == nil {
		return order
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	return order
}

// scores returns score(member location, region location) per member
// (+Inf for a member whose location names no known cloud); nil without a
// region location.
func (n *Namespace) scores(members []store.Store, score func(src, dst policies.Location) float64) []float64 {
	if n.egress == nil {
		return nil
	}
	dst, err := policies.ParseLocationOrCloud(n.RegionLocation())
	if err != nil {
		return nil
	}
	scores := make([]float64, len(members))
	for i, m := range members {
		src := m.Location()
		if !slices.Contains(policies.Clouds, src.Cloud) {
			scores[i] = math.Inf(1)
			continue
		}
		scores[i] = score(src, dst)
	}
	return scores
}

// rankByDistance orders members nearest first: the region's own location,
// then the same cloud, then the same continent, then the rest.
func (n *Namespace) rankByDistance(members []store.Store) []int {
	return n.rankBy(members, func(src, dst policies.Location) float64 {
		switch {
		case src == dst:
			return 0
		case src.Cloud == dst.Cloud:
			return 1
		case egress.ContinentOf(src) == egress.ContinentOf(dst):
			return 2
		}
		return 3
	})
}

// rankByPrice orders members by the egress price per byte of reading from
// them into this region (cheapest first; listed order breaks ties).
func (n *Namespace) rankByPrice(p *policies.Policy, members []store.Store) []int {
	return n.rankBy(members, priceScore(p))
}

// readPrices returns each member's egress price per byte into this region
// (nil without a region location): an erasure placement reads the K
// cheapest shards of a stripe by them.
func (n *Namespace) readPrices(p *policies.Policy, members []store.Store) []float64 {
	return n.scores(members, priceScore(p))
}

// priceScore is the egress price per byte from src to dst, by the price
// table with the policy's overrides: the marginal rate once free tiers are
// used up (1 TiB into the month).
func priceScore(p *policies.Policy) func(src, dst policies.Location) float64 {
	var prices []policies.Price
	if p != nil {
		prices = p.Egress.Prices
	}
	table, err := egress.NewTable(prices)
	if err != nil {
		table = egress.DefaultTable()
	}
	return func(src, dst policies.Location) float64 {
		s := table.Schedule(src, dst)
		if s == nil || s.Unit <= 0 {
			return 0
		}
		return float64(s.RateAt(1<<40)) / float64(s.Unit)
	}
}

// Repairer is a store that can rebuild what its members lost.
type Repairer interface {
	Repair(ctx context.Context, prefix string, progress func(placement.RepairProgress)) (placement.RepairStats, error)
}

// ErrNothingToRepair: the bucket's placement is a single store.
var ErrNothingToRepair = backend.ErrNothingToRepair

// Repair rebuilds missing or corrupt copies, shards and manifests of the
// objects of bucket under prefix (a replicate or erasure placement).
func (n *Namespace) Repair(ctx context.Context, bucket, prefix string, progress func(placement.RepairProgress)) (placement.RepairStats, error) {
	b, err := n.Bucket(bucket)
	if err != nil {
		return placement.RepairStats{}, err
	}
	r, ok := b.store.(Repairer)
	if !ok {
		return placement.RepairStats{}, fmt.Errorf("%w (bucket %q, store %q)", ErrNothingToRepair, bucket, b.store.Name())
	}
	if found := placement.DryRunFunc(ctx); found != nil {
		ctx = placement.DryRun(ctx, func(key string, stores []string) { found(strings.TrimPrefix(key, b.prefix), stores) })
	}
	st, err := r.Repair(withEgressTag(ctx, egressTag{bucket: bucket}), b.prefix+prefix, progress)
	if err == nil && n.rs.State().HasVersions(b.Name) {
		// Every version's bytes are an object of their own: repair them too
		// (a prefix selects the versions of its keys).
		var vst placement.RepairStats
		if vst, err = n.repairVersions(ctx, b, r, prefix, progress); err == nil {
			st = addRepairStats(st, vst)
		}
	}
	if err == nil && prefix == "" && placement.DryRunFunc(ctx) == nil {
		if c, ok := b.store.(interface{ Stores() []store.Store }); ok {
			n.clearWiped(c.Stores())
		}
	}
	return st, err
}

// repairVersions repairs the version bytes of b's keys under prefix, one
// version at a time.
func (n *Namespace) repairVersions(ctx context.Context, b *Bucket, r Repairer, prefix string, progress func(placement.RepairProgress)) (placement.RepairStats, error) {
	var total placement.RepairStats
	var keys []string
	n.rs.State().ListVersions(b.Name, prefix, "", 0, func(v regionstate.ObjectVersion) bool {
		if !v.DeleteMarker && v.Staged == 0 && strings.HasPrefix(v.StoreKey, versionsPrefix) { // staged: not in the store yet
			keys = append(keys, v.StoreKey)
		}
		return true
	})
	for _, k := range keys {
		st, err := r.Repair(withEgressTag(ctx, egressTag{bucket: b.Name}), k, progress)
		total = addRepairStats(total, st)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func addRepairStats(a, b placement.RepairStats) placement.RepairStats {
	a.Objects += b.Objects
	a.Healthy += b.Healthy
	a.Repaired += b.Repaired
	a.Failed += b.Failed
	a.Shards += b.Shards
	a.Manifests += b.Manifests
	a.Copies += b.Copies
	a.OldVersions += b.OldVersions
	a.BytesRead += b.BytesRead
	return a
}
