package catalog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/policies"
)

// wan is the simulated network between regions: a one-way delay per pair
// (half the round trip) and links that can be cut.
type wan struct {
	mu    sync.Mutex
	delay map[[2]string]time.Duration
	cut   map[[2]string]bool
}

func (w *wan) link(a, b string) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delay[[2]string{a, b}], !w.cut[[2]string{a, b}]
}

// partition cuts every link between side and the other regions.
func (w *wan) partition(side, all []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range side {
		for _, b := range all {
			if !slices.Contains(side, b) {
				w.cut[[2]string{a, b}], w.cut[[2]string{b, a}] = true, true
			}
		}
	}
}

func (w *wan) heal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.cut)
}

var errCut = errors.New("sim: link cut")

// wanTransport is a region's Raft transport over the simulated WAN: each
// RPC waits the link's one-way delay and fails on a cut link.
type wanTransport struct {
	*raft.InmemTransport
	region string
	w      *wan
}

func (t *wanTransport) hop(target raft.ServerAddress) error {
	d, ok := t.w.link(t.region, string(target))
	if !ok {
		return errCut
	}
	time.Sleep(d) // pacing: the simulated WAN link's one-way delay
	return nil
}

func (t *wanTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *wanTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, a *raft.AppendEntriesRequest, r *raft.AppendEntriesResponse) error {
	if err := t.hop(target); err != nil {
		return err
	}
	return t.InmemTransport.AppendEntries(id, target, a, r)
}

func (t *wanTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, a *raft.RequestVoteRequest, r *raft.RequestVoteResponse) error {
	if err := t.hop(target); err != nil {
		return err
	}
	return t.InmemTransport.RequestVote(id, target, a, r)
}

func (t *wanTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, a *raft.InstallSnapshotRequest, r *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.hop(target); err != nil {
		return err
	}
	return t.InmemTransport.InstallSnapshot(id, target, a, r, data)
}

func (t *wanTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, a *raft.TimeoutNowRequest, r *raft.TimeoutNowResponse) error {
	if err := t.hop(target); err != nil {
		return err
	}
	return t.InmemTransport.TimeoutNow(id, target, a, r)
}

// sim is a catalog of n regions on one WAN.
type sim struct {
	names []string
	nodes map[string]*Node
	w     *wan
}

func newSim(t *testing.T, n int, minRTT, maxRTT time.Duration) *sim {
	t.Helper()
	s := &sim{nodes: map[string]*Node{}, w: &wan{delay: map[[2]string]time.Duration{}, cut: map[[2]string]bool{}}}
	for i := range n {
		s.names = append(s.names, fmt.Sprintf("r%d", i))
	}
	// Round trips spread evenly over [minRTT, maxRTT] by distance in the
	// list, as regions far apart on a map.
	for i, a := range s.names {
		for j, b := range s.names {
			if i != j {
				dist := min(abs(i-j), n-abs(i-j))
				rtt := minRTT + (maxRTT-minRTT)*time.Duration(dist)/time.Duration(n/2)
				s.w.delay[[2]string{a, b}] = rtt / 2
			}
		}
	}
	trans := map[string]*raft.InmemTransport{}
	for _, r := range s.names {
		_, tr := raft.NewInmemTransportWithTimeout(raft.ServerAddress(r), 2*time.Second)
		trans[r] = tr
	}
	for _, a := range s.names {
		for _, b := range s.names {
			if a != b {
				trans[a].Connect(raft.ServerAddress(b), trans[b])
			}
		}
	}
	for _, r := range s.names {
		store := raft.NewInmemStore()
		node, err := Open(Config{Region: r, Transport: &wanTransport{InmemTransport: trans[r], region: r, w: s.w},
			Logs: store, Stable: store, Snapshots: raft.NewInmemSnapshotStore(), RTT: maxRTT, Forward: s.forward(r)})
		if err != nil {
			t.Fatal(err)
		}
		s.nodes[r] = node
	}
	t.Cleanup(func() { // all at once: a member stopping waits on RPCs to those already stopped
		var wg sync.WaitGroup
		for _, n := range s.nodes {
			wg.Go(func() { n.Close() })
		}
		wg.Wait()
	})
	members := map[string]raft.ServerAddress{}
	for _, r := range s.names {
		members[r] = raft.ServerAddress(r)
	}
	if err := s.nodes[s.names[0]].Bootstrap(members); err != nil {
		t.Fatal(err)
	}
	return s
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// forward is region from's path to the leader's member: a request and an
// answer over the WAN.
func (s *sim) forward(from string) Forward {
	return func(ctx context.Context, leader string, data []byte) (uint64, error) {
		d, ok := s.w.link(from, leader)
		if !ok {
			return 0, fmt.Errorf("%w: %v", ErrNoMajority, errCut)
		}
		time.Sleep(d) // pacing: the simulated WAN link's delay, there
		idx, err := s.nodes[leader].ApplyLocal(ctx, data)
		time.Sleep(d) // pacing: and back
		return idx, err
	}
}

func (s *sim) waitLeader(t *testing.T, among []string) string {
	t.Helper()
	var leader string
	wait.For(t, 30*time.Second, fmt.Sprintf("a leader among %v", among), func() bool {
		for _, r := range among {
			if l := s.nodes[r].Leader(); l != "" && slices.Contains(among, l) && s.nodes[l].raft.State() == raft.Leader {
				leader = l
				return true
			}
		}
		return false
	})
	return leader
}

// converged reports whether every region in rs holds the same buckets.
func (s *sim) converged(rs []string) bool {
	want := s.nodes[rs[0]].State().Buckets()
	for _, r := range rs[1:] {
		if !reflect.DeepEqual(s.nodes[r].State().Buckets(), want) {
			return false
		}
	}
	return true
}

func (s *sim) waitConverged(t *testing.T, rs []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	wait.For(t, timeout, fmt.Sprintf("regions %v to converge", rs), func() bool { return s.converged(rs) })
	return time.Since(start)
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestSimulation is the catalog across 10 regions 50-200 ms apart: names
// stay unique when every region races to create the same ones; a cut-off
// minority cannot create buckets but keeps reading the catalog it has,
// while the majority goes on; after the partition heals every region
// converges. It logs the commit latency and the convergence time
// (docs/benchmarks.md).
func TestSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("the WAN simulation takes ~30s")
	}
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	s := newSim(t, 10, 50*time.Millisecond, 200*time.Millisecond)
	s.waitLeader(t, s.names)
	phase("leader elected")

	// Every region races to create the same 8 names.
	const names = 8
	var mu sync.Mutex
	won := map[string][]string{}
	var lat []time.Duration
	var wg sync.WaitGroup
	for _, r := range s.names {
		for i := range names {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				name := fmt.Sprintf("shared-%d", i)
				start := time.Now()
				err := s.nodes[r].Create(ctx, Bucket{Name: name, Owner: "u-" + r, Home: r, Store: "s", Created: time.Unix(1, 0)})
				var exists *BucketExistsError
				switch {
				case err == nil:
					mu.Lock()
					won[name] = append(won[name], r)
					lat = append(lat, time.Since(start))
					mu.Unlock()
				case errors.As(err, &exists):
					if exists.Existing.Name != name {
						t.Errorf("%s: exists error names %q", name, exists.Existing.Name)
					}
				default:
					t.Errorf("%s creating %s: %v", r, name, err)
				}
			})
		}
	}
	wg.Wait()
	phase("racing creates done")
	for i := range names {
		name := fmt.Sprintf("shared-%d", i)
		if len(won[name]) != 1 {
			t.Fatalf("%s created by %v, want exactly one region", name, won[name])
		}
	}
	s.waitConverged(t, s.names, 10*time.Second)
	for _, r := range s.names {
		for name, w := range won {
			if b, ok := s.nodes[r].State().Bucket(name); !ok || b.Home != w[0] {
				t.Fatalf("%s sees %s as %+v, created by %s", r, name, b, w[0])
			}
		}
	}

	// Sequential creates from every region: the commit latency a user sees.
	var seq []time.Duration
	for _, r := range s.names {
		for i := range 3 {
			start := time.Now()
			if err := s.nodes[r].Create(context.Background(), Bucket{Name: fmt.Sprintf("%s-own-%d", r, i), Owner: "u", Home: r}); err != nil {
				t.Fatal(err)
			}
			seq = append(seq, time.Since(start))
		}
	}

	phase("sequential creates done")
	// Cut off the leader and two regions beside it: the other seven elect
	// a leader and go on; the three cannot create, but read what they have.
	leader := s.waitLeader(t, s.names)
	li := slices.Index(s.names, leader)
	minority := []string{leader, s.names[(li+1)%10], s.names[(li+2)%10]}
	var majority []string
	for _, r := range s.names {
		if !slices.Contains(minority, r) {
			majority = append(majority, r)
		}
	}
	s.w.partition(minority, s.names)
	cutAt := time.Now()
	newLeader := s.waitLeader(t, majority)
	failover := time.Since(cutAt)
	for _, r := range majority[:3] {
		if err := s.nodes[r].Create(context.Background(), Bucket{Name: "during-" + r, Owner: "u", Home: r}); err != nil {
			t.Fatalf("%s in the majority: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := s.nodes[minority[1]].Create(ctx, Bucket{Name: "from-the-minority", Owner: "u", Home: minority[1]})
	cancel()
	if !errors.Is(err, ErrNoMajority) {
		t.Fatalf("a create in the cut-off minority: %v, want ErrNoMajority", err)
	}
	for _, r := range minority {
		if _, ok := s.nodes[r].State().Bucket("shared-0"); !ok {
			t.Fatalf("%s, cut off, no longer reads the catalog it had", r)
		}
	}

	routes := s.checkRoutes(t)
	phase("partition checks done")
	s.w.heal()
	healedAt := time.Now()
	conv := s.waitConverged(t, s.names, 30*time.Second)
	if _, ok := s.nodes[minority[0]].State().Bucket("from-the-minority"); ok {
		t.Fatal("the minority's refused create appeared after the heal")
	}
	for _, r := range s.names {
		if _, ok := s.nodes[r].State().Bucket("during-" + majority[0]); !ok {
			t.Fatalf("%s lacks a bucket created during the partition", r)
		}
	}
	phase("converged")
	t.Logf("10 regions, RTT 50-200ms: racing creates p50 %v p90 %v; sequential creates p50 %v p90 %v max %v; "+
		"leader %s cut off with 2 others: new leader %s after %v; convergence after the heal %v (measured from %s); reads during the partition: %s",
		pct(lat, .5).Round(time.Millisecond), pct(lat, .9).Round(time.Millisecond),
		pct(seq, .5).Round(time.Millisecond), pct(seq, .9).Round(time.Millisecond), pct(seq, 1).Round(time.Millisecond),
		leader, newLeader, failover.Round(time.Millisecond), conv.Round(time.Millisecond), healedAt.Format("15:04:05.000"), routes)
}

// simClouds are the regions' and stores' locations, round robin.
var simClouds = []policies.Location{
	{Cloud: "aws", Region: "us-east-1"}, {Cloud: "gcp", Region: "us-central1"}, {Cloud: "azure", Region: "eastus"},
	{Cloud: "aws", Region: "eu-west-1"}, {Cloud: "gcp", Region: "europe-west4"}, {Cloud: "aws", Region: "ap-northeast-1"},
	{Cloud: "azure", Region: "westeurope"}, {Cloud: "gcp", Region: "asia-east1"}, {Cloud: "aws", Region: "us-west-2"},
	{Cloud: "azure", Region: "southeastasia"},
}

// checkRoutes routes a read of every bucket from every region that is not
// its home, as the gateway does (federation.ChooseRoute) with the
// simulated WAN's reachability: regions sit at simClouds; a bucket's store
// is a cloud store somewhere (open in every region) or, one in four, a
// posix store at its home (open only there); one in five is write-back.
// Every read must take a reachable route when one exists, and no
// reachable route may be cheaper. It returns the routes' counts.
func (s *sim) checkRoutes(t *testing.T) string {
	t.Helper()
	table := egress.DefaultTable()
	price := func(src, dst policies.Location) float64 {
		sc := table.Schedule(src, dst)
		if sc == nil || sc.Unit <= 0 {
			return 0
		}
		return float64(sc.RateAt(1<<40)) / float64(sc.Unit)
	}
	loc := map[string]policies.Location{}
	for i, r := range s.names {
		loc[r] = simClouds[i%len(simClouds)]
	}
	var store, gateway, cached int
	for _, r := range s.names {
		for _, b := range s.nodes[r].State().Buckets() {
			if b.Home == r {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(b.Name))
			n := h.Sum32()
			_, reachable := s.w.link(r, b.Home)
			o := federation.RouteOptions{Here: loc[r], Home: loc[b.Home], Store: simClouds[n%uint32(len(simClouds))],
				StoreOpen: n%4 != 0, OnlyAtHome: n%5 == 0, HomeReachable: reachable}
			direct := o.StoreOpen && !o.OnlyAtHome
			switch route := federation.ChooseRoute(price, o); {
			case route == federation.RouteStore && !direct:
				t.Fatalf("%s reads %s from a store it cannot use (%+v)", r, b.Name, o)
			case route == federation.RouteStore && reachable && price(o.Store, o.Here) > price(o.Home, o.Here):
				t.Fatalf("%s reads %s from its store at %.4g/GB while home %s reached costs %.4g/GB", r, b.Name,
					price(o.Store, o.Here)*1e9, b.Home, price(o.Home, o.Here)*1e9)
			case route == federation.RouteGateway && !reachable && direct:
				t.Fatalf("%s reads %s through cut-off %s while its store is open here", r, b.Name, b.Home)
			case route == federation.RouteGateway && reachable && direct && price(o.Store, o.Here) <= price(o.Home, o.Here):
				t.Fatalf("%s reads %s through %s at %.4g/GB while its store costs %.4g/GB", r, b.Name, b.Home,
					price(o.Home, o.Here)*1e9, price(o.Store, o.Here)*1e9)
			case route == federation.RouteStore:
				store++
			case reachable:
				gateway++
			default:
				cached++ // home cut off, no store to use: the reader's cache serves what it holds
			}
		}
	}
	if store == 0 || gateway == 0 || cached == 0 {
		t.Fatalf("routes not exercised: %d store, %d gateway, %d cache-only", store, gateway, cached)
	}
	return fmt.Sprintf("%d straight from a store, %d through the home region, %d home cut off and only the cache to serve", store, gateway, cached)
}
