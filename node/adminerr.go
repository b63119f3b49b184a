package node

import (
	"context"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
)

// regionErrCluster and regionErrPolicy hand the gateway the region's
// errors as backend sentinels (federation.RegionError), as its Cluster and
// PolicyAdmin contracts say.
type regionErrCluster struct{ c gateway.Cluster }

func (r regionErrCluster) ClusterStatus(ctx context.Context) (adminapi.Cluster, error) {
	st, err := r.c.ClusterStatus(ctx)
	return st, federation.RegionError(err)
}

func (r regionErrCluster) AddMember(ctx context.Context, address string) (adminapi.Member, error) {
	m, err := r.c.AddMember(ctx, address)
	return m, federation.RegionError(err)
}

func (r regionErrCluster) RemoveMember(ctx context.Context, id string) error {
	return federation.RegionError(r.c.RemoveMember(ctx, id))
}

func (r regionErrCluster) Snapshot(ctx context.Context) (uint64, error) {
	i, err := r.c.Snapshot(ctx)
	return i, federation.RegionError(err)
}

type regionErrPolicy struct{ pm *policyManager }

func (r regionErrPolicy) ActivePolicy(ctx context.Context) (adminapi.Policy, error) {
	p, err := r.pm.ActivePolicy(ctx)
	return p, federation.RegionError(err)
}

func (r regionErrPolicy) ApplyPolicy(ctx context.Context, req adminapi.PolicyApply) (adminapi.Policy, error) {
	p, err := r.pm.ApplyPolicy(ctx, req)
	return p, federation.RegionError(err)
}
