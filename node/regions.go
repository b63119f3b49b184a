package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/catalog"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/raft/rmetrics"
	"github.com/fedgate/fedgate/raft/transport"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// regionCatalog is a peered region's side of the global bucket catalog
// (docs/regions.md): the node's catalog.Member as federation.Catalog,
// and the stores through which it reaches other regions' buckets.
type regionCatalog struct {
	region  string
	signing string // the S3 signing region every region's gateway uses
	pol     *policies.Policy
	ak, sk  string
	client  *http.Client // for https endpoints signed by peering.ca_file
	log     *slog.Logger

	mu     sync.Mutex
	m      *catalog.Member // nil until opened
	stores map[string]store.Store
	// down holds the regions whose endpoint did not answer the last probe
	// (probeEvery); reads of their buckets go to a store open here when
	// there is one (federation.ChooseRoute).
	down map[string]string
	stop chan struct{}
	wg   sync.WaitGroup
}

// probeEvery is how often a node checks the other regions' endpoints.
const probeEvery = 5 * time.Second

// newRegionCatalog prepares the catalog of a peered policy (nil when the
// policy does not peer regions).
func newRegionCatalog(pol *policies.Policy, region string, cfg *Config, log *slog.Logger) (*regionCatalog, error) {
	if pol == nil || !pol.Peered() {
		return nil, nil
	}
	rc := &regionCatalog{region: region, signing: cfg.SigningRegion, pol: pol, stores: map[string]store.Store{}, log: log,
		down: map[string]string{}, stop: make(chan struct{})}
	if pol.Peering.CAFile != "" {
		pem, err := os.ReadFile(pol.Peering.CAFile)
		if err != nil {
			return nil, fmt.Errorf("peering.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peering.ca_file: no PEM certificate in %s", pol.Peering.CAFile)
		}
		rc.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	return rc, nil
}

// resolveCredential sets the peering credential: peering.credentials
// (read once at start), or the node's root credentials.
func (rc *regionCatalog) resolveCredential(cfg *Config, root federation.Credentials) error {
	c := rc.pol.Peering.Credentials
	if c.AccessKeyEnv == "" && c.AccessKeyFile == "" {
		rc.ak, rc.sk = root.AccessKey, root.SecretKey
		return nil
	}
	read := func(file, name string) (string, error) {
		if file != "" {
			return newSecretFile(file).get()
		}
		return env(cfg.LookupEnv, name)
	}
	var err error
	if rc.ak, err = read(c.AccessKeyFile, c.AccessKeyEnv); err != nil {
		return fmt.Errorf("peering.credentials: %w", err)
	}
	if rc.sk, err = read(c.SecretKeyFile, c.SecretKeyEnv); err != nil {
		return fmt.Errorf("peering.credentials: %w", err)
	}
	return nil
}

// open starts this node's catalog member on --catalog-addr.
func (rc *regionCatalog) open(cfg *Config) error {
	if cfg.CatalogAddr == "" {
		return fmt.Errorf("the policy peers regions (regions[].catalog): start every node with --catalog-addr HOST:PORT (the region's voter is the node at %s)", rc.voters()[rc.region])
	}
	var tlsCfg *tls.Config
	if p := rc.pol.Peering; p.CertFile != "" {
		var err error
		if tlsCfg, err = transport.PeerTLSConfig(p.CertFile, p.KeyFile, p.CAFile, ""); err != nil {
			return fmt.Errorf("peering: %w", err)
		}
	}
	m, err := catalog.OpenMember(catalog.MemberConfig{Region: rc.region, NodeID: cfg.NodeID, Bind: cfg.CatalogAddr,
		Advertise: cfg.CatalogAdvertise, Voters: rc.voters(), Dir: filepath.Join(cfg.DataDir, "catalog"), TLS: tlsCfg,
		Secret: []byte(rc.sk), RTT: cfg.CatalogRTT, Dial: cfg.Dial, LogStore: cfg.RaftLogStore, Logger: rc.log})
	if err != nil {
		return err
	}
	rc.mu.Lock()
	rc.m = m
	rc.mu.Unlock()
	rc.wg.Add(1)
	go rc.probeLoop()
	rc.log.Info("catalog member started", "id", m.ID(), "voter", m.Voter(), "addr", cfg.CatalogAddr)
	return nil
}

// metrics are the gauges of this node's catalog member
// (fedgate_catalog_*; all 0 until the member opens).
func (rc *regionCatalog) metrics() []prometheus.Collector {
	return rmetrics.Gauges("fedgate_catalog", "catalog", func() rmetrics.View {
		if m := rc.member(); m != nil {
			return m.RaftView()
		}
		return rmetrics.View{}
	})
}

func (rc *regionCatalog) voters() map[string]string {
	out := map[string]string{}
	for _, r := range rc.pol.Regions {
		out[r.Name] = r.Catalog
	}
	return out
}

func (rc *regionCatalog) member() *catalog.Member {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.m
}

func (rc *regionCatalog) close() {
	close(rc.stop)
	rc.wg.Wait()
	if m := rc.member(); m != nil {
		_ = m.Close()
	}
}

// probeLoop checks every other region's endpoint every probeEvery.
func (rc *regionCatalog) probeLoop() {
	defer rc.wg.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		for _, r := range rc.pol.Regions {
			if r.Name == rc.region {
				continue
			}
			_, problem := rc.probe(context.Background(), r.Endpoint)
			rc.mu.Lock()
			was, wasDown := rc.down[r.Name]
			if problem == "" {
				delete(rc.down, r.Name)
			} else {
				rc.down[r.Name] = problem
			}
			rc.mu.Unlock()
			switch {
			case problem != "" && !wasDown:
				rc.log.Warn("region unreachable: its buckets are read from a store open here where there is one, else from this region's cache", "region", r.Name, "problem", problem)
			case problem == "" && wasDown:
				rc.log.Info("region reachable again", "region", r.Name, "was", was)
			}
		}
		select {
		case <-rc.stop:
			return
		case <-t.C:
		}
	}
}

// Reachable implements federation.Catalog.
func (rc *regionCatalog) Reachable(region string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	_, down := rc.down[region]
	return !down
}

// Region implements federation.Catalog.
func (rc *regionCatalog) Region() string { return rc.region }

func fromCatalog(b catalog.Bucket) federation.CatalogBucket {
	return federation.CatalogBucket{Name: b.Name, Owner: b.Owner, Home: b.Home, Store: b.Store, Prefix: b.Prefix, Created: b.Created, Configs: b.Configs}
}

// Bucket implements federation.Catalog.
func (rc *regionCatalog) Bucket(name string) (federation.CatalogBucket, bool) {
	m := rc.member()
	if m == nil {
		return federation.CatalogBucket{}, false
	}
	b, ok := m.State().Bucket(name)
	return fromCatalog(b), ok
}

// Buckets implements federation.Catalog.
func (rc *regionCatalog) Buckets() []federation.CatalogBucket {
	m := rc.member()
	if m == nil {
		return nil
	}
	var out []federation.CatalogBucket
	for _, b := range m.State().Buckets() {
		out = append(out, fromCatalog(b))
	}
	return out
}

// catalogWait bounds how long a create or delete waits for a majority.
const catalogWait = 10 * time.Second

func catalogErr(err error, region string) error {
	var ex *catalog.BucketExistsError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ex):
		// A name at home in another region is that region's bucket, not
		// one the caller has here: BucketAlreadyExists whoever owns it.
		return &federation.BucketExistsError{Bucket: ex.Existing.Name, OwnedByCaller: ex.OwnedByCaller && ex.Existing.Home == region}
	case errors.Is(err, catalog.ErrNoMajority):
		return fmt.Errorf("%w (%v)", federation.ErrCatalogUnavailable, err)
	case errors.Is(err, catalog.ErrKeyInUse):
		return fmt.Errorf("%w (%v)", federation.ErrAccessKeyInUse, err)
	case errors.Is(err, catalog.ErrNotHome) && strings.Contains(err.Error(), "user "):
		return fmt.Errorf("%w: %v", federation.ErrUserExists, err)
	case errors.Is(err, catalog.ErrNotHome):
		return fmt.Errorf("%w (%v)", federation.ErrNotHomeRegion, err)
	}
	return err
}

// Create implements federation.Catalog.
func (rc *regionCatalog) Create(ctx context.Context, b federation.CatalogBucket) error {
	return rc.change(ctx, func(ctx context.Context, m *catalog.Member) error {
		return m.Create(ctx, catalog.Bucket{Name: b.Name, Owner: b.Owner, Home: b.Home, Store: b.Store, Prefix: b.Prefix, Created: b.Created})
	})
}

// change commits a change through the member, waiting at most
// catalogWait, with the catalog's errors as federation's.
func (rc *regionCatalog) change(ctx context.Context, f func(context.Context, *catalog.Member) error) error {
	m := rc.member()
	if m == nil {
		return federation.ErrCatalogUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, catalogWait)
	defer cancel()
	return catalogErr(f(ctx, m), rc.region)
}

// Delete implements federation.Catalog.
func (rc *regionCatalog) Delete(ctx context.Context, name string) error {
	return rc.change(ctx, func(ctx context.Context, m *catalog.Member) error { return m.Delete(ctx, name) })
}

func fromCatalogUser(u catalog.User) federation.CatalogUser {
	return federation.CatalogUser{Name: u.Name, AccessKey: u.AccessKey, SecretKey: u.SecretKey, Home: u.Home, Created: u.Created}
}

// UserByKey implements federation.Catalog.
func (rc *regionCatalog) UserByKey(ak string) (federation.CatalogUser, bool) {
	m := rc.member()
	if m == nil {
		return federation.CatalogUser{}, false
	}
	u, ok := m.State().User(ak)
	return fromCatalogUser(u), ok
}

// UserNamed implements federation.Catalog.
func (rc *regionCatalog) UserNamed(name string) (federation.CatalogUser, bool) {
	m := rc.member()
	if m == nil {
		return federation.CatalogUser{}, false
	}
	u, ok := m.State().UserNamed(name)
	return fromCatalogUser(u), ok
}

// Users implements federation.Catalog.
func (rc *regionCatalog) Users() []federation.CatalogUser {
	m := rc.member()
	if m == nil {
		return nil
	}
	var out []federation.CatalogUser
	for _, u := range m.State().Users() {
		out = append(out, fromCatalogUser(u))
	}
	return out
}

// PutUser implements federation.Catalog.
func (rc *regionCatalog) PutUser(ctx context.Context, u federation.CatalogUser) error {
	return rc.change(ctx, func(ctx context.Context, m *catalog.Member) error {
		return m.PutUser(ctx, catalog.User{Name: u.Name, AccessKey: u.AccessKey, SecretKey: u.SecretKey, Created: u.Created})
	})
}

// DeleteUser implements federation.Catalog.
func (rc *regionCatalog) DeleteUser(ctx context.Context, name string) error {
	return rc.change(ctx, func(ctx context.Context, m *catalog.Member) error { return m.DeleteUser(ctx, name) })
}

// SetConfig implements federation.Catalog.
func (rc *regionCatalog) SetConfig(ctx context.Context, bucket, kind, value string) error {
	return rc.change(ctx, func(ctx context.Context, m *catalog.Member) error { return m.SetConfig(ctx, bucket, kind, value) })
}

// RemoteStore implements federation.Catalog: the home region's S3
// endpoint as an s3 store of the bucket, signed with the peering
// credential, located where the home region is (so the egress ledger
// counts its bytes as crossing from there).
func (rc *regionCatalog) RemoteStore(home, bucket string) (store.Store, error) {
	key := home + "/" + bucket
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if st, ok := rc.stores[key]; ok {
		return st, nil
	}
	r, err := rc.pol.Region(home)
	if err != nil {
		return nil, err
	}
	st, err := s3store.New(context.Background(), s3store.Config{Name: "region:" + key, Location: r.Location, Bucket: bucket,
		Region: rc.signing, Endpoint: r.Endpoint, PathStyle: true, AccessKey: rc.ak, SecretKey: rc.sk, HTTPClient: rc.client})
	if err != nil {
		return nil, err
	}
	rc.stores[key] = st
	return st, nil
}

// regionStatus answers `fedgate region status` (gateway.Regions).
type regionStatus struct {
	rc *regionCatalog
	ns *federation.Namespace
}

// RegionStatus implements gateway.Regions: every region of the policy,
// whether its endpoint answers, the catalog as this node sees it, and the
// bytes this region read through each other region's gateway this month.
func (s regionStatus) RegionStatus(ctx context.Context) (adminapi.Regions, error) {
	rc := s.rc
	out := adminapi.Regions{Region: rc.region, Peered: true}
	m := rc.member()
	home := map[string]int{}
	if m != nil {
		st := m.Status()
		out.Catalog = adminapi.Catalog{Member: st.ID, Voter: st.Voter, Leader: st.Leader, Applied: st.Applied, Lag: st.Lag,
			LastContactSeconds: st.LastContact.Seconds()}
		if st.LastContact < 0 {
			out.Catalog.LastContactSeconds = -1
		}
		for _, b := range m.State().Buckets() {
			home[b.Home]++
			out.Catalog.Buckets++
		}
	}
	now := time.Now().UTC()
	from := map[string][2]int64{}
	if rows, err := s.ns.EgressLedger(ctx, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), now); err == nil {
		for _, r := range rows {
			if name, ok := strings.CutPrefix(r.Store, "region:"); ok && r.Direction == egress.Read {
				region, _, _ := strings.Cut(name, "/")
				c := from[region]
				c[0] += r.Bytes
				c[1] += r.AvoidedBytes
				from[region] = c
			}
		}
	}
	out.Regions = make([]adminapi.Region, len(rc.pol.Regions))
	var wg sync.WaitGroup
	for i, r := range rc.pol.Regions {
		ar := adminapi.Region{Name: r.Name, Location: r.Location.String(), Endpoint: r.Endpoint, Self: r.Name == rc.region,
			Buckets: home[r.Name], BytesFrom: from[r.Name][0], AvoidedBytes: from[r.Name][1]}
		out.Regions[i] = ar
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Regions[i].RTTMillis, out.Regions[i].Problem = rc.probe(ctx, r.Endpoint)
			out.Regions[i].Reachable = out.Regions[i].Problem == ""
		}()
	}
	wg.Wait()
	return out, nil
}

// probe checks a region's endpoint: its readyz within 3 s.
func (rc *regionCatalog) probe(ctx context.Context, endpoint string) (float64, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+adminapi.ReservedPrefix+"readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	c := rc.client
	if c == nil {
		c = http.DefaultClient
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	rtt := float64(time.Since(start).Microseconds()) / 1000
	if resp.StatusCode != http.StatusOK {
		return rtt, "readyz: " + resp.Status
	}
	return rtt, ""
}

func regionsOf(rc *regionCatalog, ns *federation.Namespace) gateway.Regions {
	if rc == nil {
		return nil
	}
	return regionStatus{rc: rc, ns: ns}
}

// registerExisting puts the region's buckets created through S3 and its
// users into the catalog when the region is first peered (and whenever a
// start finds one missing), so that peering hides nothing the region had:
// the catalog decides which buckets and keys exist in a peered region. A
// name another region registered first stays that region's; the
// conflict is logged (the bucket's objects stay in its store, unserved,
// until one of the two is renamed with a copy). It retries until the
// catalog has a majority, in the background, once per node: a marker in
// the catalog's data dir says it was done, so that a later start does not
// bring back a bucket or user the catalog has since deleted (whose local
// record a failed delete left behind, or a copy made for grants).
func (rc *regionCatalog) registerExisting(st *regionstate.State, dir string) {
	marker := filepath.Join(dir, "registered")
	if _, err := os.Stat(marker); err == nil {
		return
	}
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
			if rc.registerOnce(st) {
				if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o640); err != nil {
					rc.log.Warn("recording that existing buckets were registered", "error", err)
				}
				return
			}
			select {
			case <-rc.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// registerOnce registers what is missing; true when nothing is left to do.
func (rc *regionCatalog) registerOnce(st *regionstate.State) bool {
	m := rc.member()
	if m == nil || m.Leader() == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := true
	confs := st.BucketConfigs()
	for _, b := range st.Buckets() {
		if cb, ok := m.State().Bucket(b.Name); ok {
			if cb.Home != rc.region || cb.Prefix != b.Prefix {
				rc.log.Debug("bucket already in the catalog", "bucket", b.Name, "home", cb.Home)
			}
			continue
		}
		err := m.Create(ctx, catalog.Bucket{Name: b.Name, Owner: b.Owner, Home: rc.region, Store: b.Store, Prefix: b.Prefix,
			Created: b.Created, Configs: confs[b.Name]})
		var ex *catalog.BucketExistsError
		switch {
		case err == nil:
			rc.log.Info("bucket registered in the global catalog", "bucket", b.Name)
		case errors.As(err, &ex) && ex.Existing.Home != rc.region:
			rc.log.Error("bucket name taken in another region: this region's bucket of that name is no longer served; copy its objects to a bucket of another name",
				"bucket", b.Name, "home", ex.Existing.Home, "store", b.Store, "prefix", b.Prefix)
		case errors.As(err, &ex):
		default:
			rc.log.Warn("registering bucket in the global catalog", "bucket", b.Name, "error", err)
			done = false
		}
	}
	for _, u := range st.Users() {
		if u.Root {
			continue
		}
		if _, ok := m.State().UserNamed(u.Name); ok {
			continue
		}
		err := m.PutUser(ctx, catalog.User{Name: u.Name, AccessKey: u.AccessKey, SecretKey: u.SecretKey, Created: u.Created})
		switch {
		case err == nil:
			rc.log.Info("user registered in the global catalog", "user", u.Name)
		case errors.Is(err, catalog.ErrNotHome), errors.Is(err, catalog.ErrKeyInUse):
			rc.log.Error("user name or access key taken in another region: this region's user is no longer accepted", "user", u.Name, "error", err)
		default:
			rc.log.Warn("registering user in the global catalog", "user", u.Name, "error", err)
			done = false
		}
	}
	return done
}
