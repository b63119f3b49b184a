package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

var _ gateway.PolicyAdmin = (*policyManager)(nil)

// policyManager keeps the policy in force on this node in step with the
// region's active policy (Raft), and serves `fedgate policy diff|apply`
// through the admin API. Stores whose configuration did not change are
// kept open across policy versions.
type policyManager struct {
	node      *regionstate.Node
	ns        *federation.Namespace
	dataDir   string
	clustered bool
	lookupEnv func(string) (string, bool)
	log       *slog.Logger
	wake      chan struct{}
	region    string // the region of the policy this node serves (--region)

	mu        sync.Mutex // serializes applies and installs
	installed uint64     // the version in force here (0: embedded defaults or none)
	open      map[string]openedStore
	failed    prometheus.Gauge
	version   prometheus.Gauge
}

// openedStore is a store this node opened and the configuration it was
// opened with.
type openedStore struct {
	cfg policies.Store
	st  store.Store
}

func newPolicyManager(node *regionstate.Node, ns *federation.Namespace, cfg *Config, p *policies.Policy,
	stores map[string]store.Store, version uint64, log *slog.Logger) *policyManager {
	pm := &policyManager{node: node, ns: ns, dataDir: cfg.DataDir, clustered: cfg.clustered(), lookupEnv: cfg.LookupEnv, log: log, region: cfg.Region,
		wake: make(chan struct{}, 1), installed: version, open: map[string]openedStore{},
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fedgate_policy_install_failed",
			Help: "1 while this node could not put the region's newest policy in force (see the log), else 0."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fedgate_policy_version",
			Help: "Version of the region policy in force on this node (0: embedded defaults)."}),
	}
	if p != nil {
		for _, ps := range p.Stores {
			if st, ok := stores[ps.Name]; ok {
				pm.open[ps.Name] = openedStore{cfg: ps, st: st}
			}
		}
	}
	pm.version.Set(float64(version))
	return pm
}

func (pm *policyManager) register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(pm.failed), reg.Register(pm.version))
}

// onApply is the policy manager's Raft subscription: a new active policy
// (or a restored snapshot) wakes run.
func (pm *policyManager) onApply(cmd regionstate.Command) {
	if _, ok := cmd.(*regionstate.SetPolicy); ok || cmd == nil {
		pm.notify()
	}
}

// notify wakes run; it never blocks.
func (pm *policyManager) notify() {
	select {
	case pm.wake <- struct{}{}:
	default:
	}
}

// run installs newer active policies as they are applied, retrying every
// 10 s while one cannot be put in force here.
func (pm *policyManager) run(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pm.wake:
		case <-t.C:
		}
		if err := pm.catchUp(ctx); err != nil {
			pm.failed.Set(1)
			pm.log.Error("the region's newest policy cannot be put in force on this node; the previous one stays in force", "error", err)
		} else {
			pm.failed.Set(0)
		}
	}
}

// catchUp puts the active policy in force if it is newer than this node's.
func (pm *policyManager) catchUp(ctx context.Context) error {
	active, ok := pm.node.State().Policy()
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if !ok || active.Version <= pm.installed {
		return nil
	}
	name := "active policy (version " + strconv.FormatUint(active.Version, 10) + ")"
	p, err := policies.Parse(name, active.YAML, ServedFeatures())
	if err != nil {
		return err
	}
	stores, def, err := pm.openStores(ctx, p)
	if err != nil {
		return err
	}
	return pm.install(p, stores, def, active.Version)
}

// openStores opens the stores of p, reusing those already open with the
// same configuration. The embedded store stays available while buckets
// created on it exist.
func (pm *policyManager) openStores(ctx context.Context, p *policies.Policy) (map[string]store.Store, string, error) {
	if len(p.Stores) == 0 {
		return openStores(ctx, pm.dataDir, nil, pm.region, pm.lookupEnv)
	}
	stores := map[string]store.Store{}
	for _, ps := range p.Stores {
		if !reachable(p, pm.region, ps) {
			continue
		}
		if o, ok := pm.open[ps.Name]; ok && reflect.DeepEqual(o.cfg, ps) {
			stores[ps.Name] = o.st
			continue
		}
		st, err := openStore(ctx, ps, pm.lookupEnv)
		if err != nil {
			return nil, "", fmt.Errorf("store %q (%s) cannot be opened on this node: %w", ps.Name, ps.Kind, err)
		}
		stores[ps.Name] = st
	}
	if _, declared := stores["local"]; !declared {
		for _, b := range pm.node.State().Buckets() {
			if b.Store == "local" {
				st, err := posix.New("local", policies.Location{Cloud: "onprem", Region: "local"}, filepath.Join(pm.dataDir, "store"))
				if err != nil {
					return nil, "", err
				}
				stores["local"] = st
				break
			}
		}
	}
	def := defaultStore(p, pm.region)
	if _, ok := stores[def]; !ok {
		st, err := embeddedStore(pm.dataDir)
		if err != nil {
			return nil, "", err
		}
		stores[def] = st
	}
	return stores, def, nil
}

func (pm *policyManager) install(p *policies.Policy, stores map[string]store.Store, def string, version uint64) error {
	// The region's location first: the new view ranks placements' members
	// by their price from it; egress counts, metrics, budgets and reports
	// use it from now on.
	oldLoc, loc := pm.ns.RegionLocation(), regionLocation(p, pm.region)
	if !pm.ns.SetRegionLocation(loc) {
		pm.log.Warn("egress accounting is off on this node; restart it to count egress at the region's location", "location", loc)
	}
	if err := pm.ns.ApplyPolicy(p, stores, def, version); err != nil {
		pm.ns.SetRegionLocation(oldLoc)
		return err
	}
	if loc != oldLoc {
		pm.log.Info("region location changed", "from", oldLoc, "to", loc)
	}
	open := map[string]openedStore{}
	for _, ps := range p.Stores {
		open[ps.Name] = openedStore{cfg: ps, st: stores[ps.Name]}
	}
	pm.open, pm.installed = open, version
	pm.version.Set(float64(version))
	pm.log.Info("policy in force", "version", version, "stores", len(stores), "buckets", len(p.Buckets))
	return nil
}

// ActivePolicy implements gateway.PolicyAdmin.
func (pm *policyManager) ActivePolicy(context.Context) (adminapi.Policy, error) {
	active, ok := pm.node.State().Policy()
	if !ok {
		return adminapi.Policy{}, nil
	}
	return adminapi.Policy{Version: active.Version, YAML: string(active.YAML)}, nil
}

// ApplyPolicy implements gateway.PolicyAdmin: validate, open the new
// stores here, refuse changes that would strand data, then commit the file
// through Raft; every node puts it in force as it applies it.
func (pm *policyManager) ApplyPolicy(ctx context.Context, req adminapi.PolicyApply) (adminapi.Policy, error) {
	file := req.File
	if file == "" {
		file = "policy"
	}
	next, err := policies.Parse(file, []byte(req.YAML), ServedFeatures())
	if err != nil {
		return adminapi.Policy{}, err
	}
	if pm.clustered && len(next.Stores) == 0 {
		return adminapi.Policy{}, fmt.Errorf("%w: %s", federation.ErrPolicyChange, SharedStoreMsg)
	}
	active, _ := pm.node.State().Policy()
	if req.BaseVersion != active.Version {
		return adminapi.Policy{}, fmt.Errorf("%w: the active policy is version %d, not version %d that the change was prepared against; run `fedgate policy diff` again",
			regionstate.ErrStalePolicy, active.Version, req.BaseVersion)
	}
	pm.mu.Lock()
	defer pm.mu.Unlock()
	stores, def, err := pm.openStores(ctx, next)
	if err != nil {
		return adminapi.Policy{}, fmt.Errorf("%w: %v", federation.ErrPolicyChange, err)
	}
	for _, b := range pm.node.State().Buckets() {
		if _, ok := stores[b.Store]; !ok {
			return adminapi.Policy{}, fmt.Errorf("%w: bucket %q (created through S3) lives on store %q, which the new policy does not declare",
				federation.ErrPolicyChange, b.Name, b.Store)
		}
	}
	if err := pm.ns.CheckPolicyChange(next, stores, def); err != nil {
		return adminapi.Policy{}, err
	}
	old, _ := pm.ns.Policy()
	version := active.Version + 1
	if err := pm.node.Apply(ctx, regionstate.SetPolicy{YAML: []byte(req.YAML), Version: version}); err != nil {
		return adminapi.Policy{}, err
	}
	if err := pm.install(next, stores, def, version); err != nil {
		return adminapi.Policy{}, err
	}
	changes := policies.Diff(old, next)
	changes = append(changes, pm.preloadOnApply(ctx, old, next)...)
	return adminapi.Policy{Version: version, YAML: req.YAML, Changes: changes}, nil
}

// preloadOnApply starts a preload job for every bucket of next whose
// cache.prefetch is on-apply and that old did not already preload (new, or
// changed), and reports them.
func (pm *policyManager) preloadOnApply(ctx context.Context, old, next *policies.Policy) []string {
	var out []string
	for _, b := range next.Buckets {
		if b.Cache.Prefetch != policies.PrefetchOnApply {
			continue
		}
		if old != nil {
			if ob, ok := old.Bucket(b.Name); ok && reflect.DeepEqual(ob, b) {
				continue
			}
		}
		job, err := pm.ns.StartPreload(context.WithoutCancel(ctx), b.Name, "", b.Cache.Pin)
		if err != nil {
			pm.log.Warn("prefetch on-apply: preload not started", "bucket", b.Name, "error", err)
			out = append(out, fmt.Sprintf("! preload of bucket %s not started: %v", b.Name, err))
			continue
		}
		out = append(out, fmt.Sprintf("> preload job %s started for bucket %s (prefetch: on-apply)", job.ID, b.Name))
	}
	return out
}
