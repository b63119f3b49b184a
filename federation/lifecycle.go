package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/lifecycle"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// The lifecycle runner (docs/lifecycle.md): the region's leader applies
// every bucket's lifecycle rules (the policy file's buckets[].lifecycle,
// else the bucket's S3 configuration) once per LifecycleConfig.Every:
// Expiration deletes matching current objects whose time has come,
// AbortIncompleteMultipartUpload aborts stale uploads. Each node runs the
// loop; only the leader's passes do anything, and a pass stops when its
// node loses leadership. The last pass is recorded in Raft (a region
// setting), so a new leader knows when the next one is due and picks up a
// pass the old leader did not finish (a pass is idempotent).

// Lifecycle runner defaults.
const (
	DefaultLifecycleEvery = time.Hour
	DefaultLifecycleRate  = 50 // deletions and aborts per second
	// lifecyclePoll is how often the loop looks whether a pass is due and
	// whether this node leads.
	lifecyclePoll = 10 * time.Second
	// lifecycleSetting is the region setting holding the last pass.
	lifecycleSetting = "lifecycle-last-run"
)

// LifecycleConfig configures the lifecycle runner.
type LifecycleConfig struct {
	// Every is the time between passes (default DefaultLifecycleEvery).
	Every time.Duration
	// Rate bounds the object deletions and upload aborts per second of a
	// pass, each with its re-check (default DefaultLifecycleRate; negative:
	// no bound), so a pass does not starve serving.
	Rate float64
	// IsLeader reports whether this node leads the region (nil: a one-node
	// region, always).
	IsLeader func() bool
}

// LifecycleRun is one pass's counts.
type LifecycleRun struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	Node    string    `json:"node"`
	Scanned int64     `json:"scanned"` // objects looked at
	Expired int64     `json:"expired"` // objects deleted
	Aborted int64     `json:"aborted"` // multipart uploads aborted
	// Skipped: objects that changed (overwritten) between the look and the
	// deletion, so were kept; the next pass looks at them again.
	Skipped int64 `json:"skipped"`
	Errors  int64 `json:"errors"`
}

// LifecycleStatus is the runner's state as Raft records it: the last
// finished pass and when the next one is due.
type LifecycleStatus struct {
	Last  LifecycleRun  `json:"last"`
	Next  time.Time     `json:"next"`
	Every time.Duration `json:"every"`
}

type lifecycleMetrics struct {
	expired, aborted, skipped, errors *prometheus.CounterVec
	scanned, runs                     prometheus.Counter
}

func newLifecycleMetrics() *lifecycleMetrics {
	cv := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"bucket"})
	}
	return &lifecycleMetrics{
		expired: cv("fedgate_lifecycle_expired_objects_total", "Objects this node deleted by a lifecycle Expiration rule (as the region's leader)."),
		aborted: cv("fedgate_lifecycle_aborted_uploads_total", "Multipart uploads this node aborted by a lifecycle AbortIncompleteMultipartUpload rule."),
		skipped: cv("fedgate_lifecycle_skipped_objects_total", "Expired objects kept because they changed between the look and the deletion, or because their object lock protects them."),
		errors:  cv("fedgate_lifecycle_errors_total", "Lifecycle deletions, aborts and listings that failed (tried again next pass)."),
		scanned: prometheus.NewCounter(prometheus.CounterOpts{Name: "fedgate_lifecycle_scanned_objects_total", Help: "Objects the lifecycle runner looked at."}),
		runs:    prometheus.NewCounter(prometheus.CounterOpts{Name: "fedgate_lifecycle_runs_total", Help: "Lifecycle passes this node finished."}),
	}
}

// touch creates a bucket's counters at zero, so that a rate over them
// (errors above all) exists before the first event.
func (m *lifecycleMetrics) touch(bucket string) {
	for _, c := range []*prometheus.CounterVec{m.expired, m.aborted, m.skipped, m.errors} {
		c.WithLabelValues(bucket)
	}
}

func (m *lifecycleMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.expired, m.aborted, m.skipped, m.errors, m.scanned, m.runs}
}

// lifecycleGauges are the region-wide gauges from the recorded pass.
func (n *Namespace) lifecycleGauges() []prometheus.Collector {
	g := func(name, help string, f func(LifecycleStatus) time.Time) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			t := f(n.LifecycleStatus())
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		})
	}
	return []prometheus.Collector{
		g("fedgate_lifecycle_last_run_timestamp_seconds", "When the region's last finished lifecycle pass ended (0: none yet).", func(s LifecycleStatus) time.Time { return s.Last.End }),
		g("fedgate_lifecycle_next_run_timestamp_seconds", "When the next lifecycle pass is due.", func(s LifecycleStatus) time.Time { return s.Next }),
	}
}

// LifecycleStatus returns the region's last recorded pass and the next
// one's due time.
func (n *Namespace) LifecycleStatus() LifecycleStatus {
	st := LifecycleStatus{Every: n.lc.Every}
	if v, ok := n.rs.State().Setting(lifecycleSetting); ok {
		_ = json.Unmarshal([]byte(v), &st.Last)
	}
	if st.Last.Start.IsZero() {
		st.Next = n.created.Add(lifecyclePoll)
	} else {
		st.Next = st.Last.Start.Add(n.lc.Every)
	}
	return st
}

func (n *Namespace) isLeader() bool { return n.lc.IsLeader == nil || n.lc.IsLeader() }

// WakeLifecycle makes RunLifecycle look at once whether a pass is due.
func (n *Namespace) WakeLifecycle() {
	select {
	case n.lcWake <- struct{}{}:
	default:
	}
}

// RunLifecycle runs lifecycle passes while this node leads the region,
// one every LifecycleConfig.Every, until ctx ends. Call it once per node.
func (n *Namespace) RunLifecycle(ctx context.Context) {
	t := time.NewTicker(min(lifecyclePoll, n.lc.Every))
	defer t.Stop()
	for {
		if n.isLeader() && !n.now().Before(n.LifecycleStatus().Next) {
			if _, err := n.leaderPass(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("lifecycle pass ended early", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.lcWake:
		}
	}
}

// leaderPass is RunLifecyclePass, stopped when this node stops leading.
func (n *Namespace) leaderPass(ctx context.Context) (LifecycleRun, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !n.isLeader() {
					cancel()
					return
				}
			}
		}
	}()
	return n.RunLifecyclePass(pctx)
}

// RunLifecyclePass runs one pass now, whatever the schedule, and records
// it in Raft when it finishes. Passes do not overlap.
func (n *Namespace) RunLifecyclePass(ctx context.Context) (LifecycleRun, error) {
	n.lcMu.Lock()
	defer n.lcMu.Unlock()
	run := LifecycleRun{Start: n.now().UTC(), Node: n.region.Self()}
	p := newPacer(n.lc.Rate)
	for _, b := range n.allBuckets() {
		if err := ctx.Err(); err != nil {
			return run, err
		}
		rules := enabled(b.LifecycleRules())
		if len(rules) == 0 {
			continue
		}
		n.lcMetrics.touch(b.Name)
		// An origin's objects are not fedgate's to expire (rules saying
		// so are refused; one stored before that is not applied).
		if b.origin {
			rules = abortRules(rules)
		}
		if err := n.expireObjects(ctx, b, rules, run.Start, p, &run); err != nil && ctx.Err() != nil {
			return run, err
		}
		if b.versioned() {
			if err := n.expireVersions(ctx, b, rules, run.Start, p, &run); err != nil && ctx.Err() != nil {
				return run, err
			}
		}
		if err := n.abortUploads(ctx, b, rules, run.Start, p, &run); err != nil {
			return run, err
		}
	}
	run.End = n.now().UTC()
	n.lcMetrics.runs.Inc()
	doc, _ := json.Marshal(run)
	if err := n.rs.Apply(ctx, regionstate.SetSetting{Key: lifecycleSetting, Value: string(doc)}); err != nil {
		return run, fmt.Errorf("record the lifecycle pass: %w", RegionError(err))
	}
	return run, nil
}

// allBuckets are the policy file's buckets and those created through S3,
// by name.
func (n *Namespace) allBuckets() []*Bucket {
	v := n.v()
	var out []*Bucket
	for _, b := range v.global {
		out = append(out, b)
	}
	for _, rec := range n.rs.State().Buckets() {
		if _, dup := v.global[rec.Name]; dup {
			continue
		}
		if b, err := n.fromRecord(rec); err == nil {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func enabled(rules []lifecycle.Rule) []lifecycle.Rule {
	var out []lifecycle.Rule
	for _, r := range rules {
		if r.Enabled {
			out = append(out, r)
		}
	}
	return out
}

// abortRules keeps only the rules' AbortIncompleteMultipartUpload actions.
func abortRules(rules []lifecycle.Rule) []lifecycle.Rule {
	var out []lifecycle.Rule
	for _, r := range rules {
		if r.AbortIncompleteMultipartUploadDays > 0 {
			out = append(out, lifecycle.Rule{ID: r.ID, Enabled: r.Enabled, Filter: r.Filter, AbortIncompleteMultipartUploadDays: r.AbortIncompleteMultipartUploadDays})
		}
	}
	return out
}

// LifecycleRules are the rules in force for the bucket: the policy
// file's when it declares some (FileLifecycle), else the bucket's S3
// configuration's.
func (b *Bucket) LifecycleRules() []lifecycle.Rule {
	if b.lifecycle != nil {
		return b.lifecycle
	}
	doc, ok := b.ns.rs.State().BucketConfig(b.Name, regionstate.BucketConfLifecycle)
	if !ok {
		return nil
	}
	return b.ns.lcParsed.get(doc)
}

// FileLifecycle reports whether the policy file sets the bucket's
// lifecycle rules (its S3 configuration is then not used, and may not be
// set).
func (b *Bucket) FileLifecycle() bool { return b.lifecycle != nil }

// lifecycleDoc is the bucket's lifecycle configuration as S3 returns it:
// the file's rules encoded, else the stored S3 configuration.
func (b *Bucket) lifecycleDoc() (string, bool) {
	if b.lifecycle == nil {
		return b.ns.rs.State().BucketConfig(b.Name, regionstate.BucketConfLifecycle)
	}
	doc, err := lifecycle.Configuration{Rules: b.lifecycle}.XML("")
	if err != nil {
		return "", false
	}
	return string(doc), true
}

// setLifecycle stores an S3 lifecycle configuration, refused on a bucket
// whose lifecycle the policy file sets.
func (b *Bucket) setLifecycle(ctx context.Context, value string) error {
	if b.lifecycle != nil {
		return fmt.Errorf("%w: the lifecycle rules of bucket %q are set by the policy file (buckets[].lifecycle); change them there", backend.ErrPolicyBucket, b.Name)
	}
	if b.origin && value != "" {
		cfg, err := lifecycle.ParseXML([]byte(value))
		if err != nil {
			return err
		}
		for _, r := range cfg.Rules {
			if r.Expiration != nil || r.NoncurrentVersionExpiration != nil {
				return fmt.Errorf("%w (rule %q)", backend.ErrLifecycleAtOrigin, r.ID)
			}
		}
	}
	return b.ns.rs.Apply(ctx, regionstate.SetBucketConfig{Bucket: b.Name, Kind: regionstate.BucketConfLifecycle, Value: value, Delete: value == ""})
}

// lifecycleCache holds parsed S3 lifecycle configurations by their text.
type lifecycleCache struct {
	mu sync.Mutex
	m  map[string][]lifecycle.Rule
}

func (c *lifecycleCache) get(doc string) []lifecycle.Rule {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[doc]; ok {
		return r
	}
	cfg, err := lifecycle.ParseXML([]byte(doc))
	if err != nil {
		// Validated when put; one this build cannot read (a newer node's)
		// applies nothing.
		cfg = lifecycle.Configuration{}
	}
	if c.m == nil || len(c.m) >= 256 {
		c.m = map[string][]lifecycle.Rule{}
	}
	c.m[doc] = cfg.Rules
	return cfg.Rules
}

// expireObjects streams the bucket's listing (under the rules' common
// prefix) and deletes the current objects an Expiration rule has come
// for.
func (n *Namespace) expireObjects(ctx context.Context, b *Bucket, rules []lifecycle.Rule, now time.Time, p *pacer, run *LifecycleRun) error {
	var exp []lifecycle.Rule
	for _, r := range rules {
		if r.Expiration != nil && (r.Expiration.Days > 0 || !r.Expiration.Date.IsZero()) {
			exp = append(exp, r)
		}
	}
	if len(exp) == 0 {
		return nil
	}
	prefix := exp[0].Filter.Prefix
	for _, r := range exp[1:] {
		prefix = commonPrefix(prefix, r.Filter.Prefix)
	}
	m := n.lcMetrics
	for e, err := range b.List(ctx, store.ListOptions{Prefix: prefix}) {
		if err != nil {
			run.Errors++
			m.errors.WithLabelValues(b.Name).Inc()
			n.log.Warn("lifecycle: listing failed; the rest of the bucket waits for the next pass", "bucket", b.Name, "error", err)
			return err
		}
		if e.IsPrefix {
			continue
		}
		run.Scanned++
		m.scanned.Inc()
		if !dueFor(exp, e.Key, e.Info.Size, nil, e.Info.ModTime, now, false) {
			continue
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
		// Look again: the listing may be old, and it has no tags.
		info, err := b.Stat(ctx, e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err == nil && !dueFor(exp, e.Key, info.Size, lifecycle.ObjectTags(info.User), info.ModTime, now, true) {
			continue
		}
		if err == nil {
			if h := n.lcHook; h != nil {
				h(b.Name, e.Key)
			}
			var deleted bool
			deleted, err = b.deleteIfUnchanged(ctx, e.Key, info)
			switch {
			case err == nil && deleted:
				run.Expired++
				m.expired.WithLabelValues(b.Name).Inc()
			case err == nil:
				run.Skipped++
				m.skipped.WithLabelValues(b.Name).Inc()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			run.Errors++
			m.errors.WithLabelValues(b.Name).Inc()
			n.log.Warn("lifecycle: expiring an object failed; next pass tries again", "bucket", b.Name, "key", e.Key, "error", err)
		}
	}
	return nil
}

// dueFor reports whether a rule of rules expires the object now; with
// withTags false, tag filters are taken as met (the listing has no tags).
func dueFor(rules []lifecycle.Rule, key string, size int64, tags map[string]string, mod, now time.Time, withTags bool) bool {
	for _, r := range rules {
		f := r.Filter
		if !withTags {
			f.Tags = nil
		}
		if f.Matches(key, size, tags) && r.Expires(mod, now) {
			return true
		}
	}
	return false
}

func commonPrefix(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return a[:i]
}

// abortUploads aborts the bucket's multipart uploads an
// AbortIncompleteMultipartUpload rule has come for; their parts leave the
// store.
func (n *Namespace) abortUploads(ctx context.Context, b *Bucket, rules []lifecycle.Rule, now time.Time, p *pacer, run *LifecycleRun) error {
	var ab []lifecycle.Rule
	for _, r := range rules {
		if r.AbortIncompleteMultipartUploadDays > 0 {
			ab = append(ab, r)
		}
	}
	if len(ab) == 0 {
		return nil
	}
	m := n.lcMetrics
	for _, up := range n.rs.State().Uploads(b.Name, "") {
		due := false
		for _, r := range ab {
			due = due || r.AbortsUpload(up.Key, up.Created, now)
		}
		if !due {
			continue
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
		err := n.AbortUpload(ctx, b, up)
		switch {
		case err == nil:
			run.Aborted++
			m.aborted.WithLabelValues(b.Name).Inc()
		case errors.Is(err, ErrNoSuchUpload):
			// Completed or aborted meanwhile.
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			run.Errors++
			m.errors.WithLabelValues(b.Name).Inc()
			n.log.Warn("lifecycle: aborting an upload failed; next pass tries again", "bucket", b.Name, "key", up.Key, "upload", up.ID, "error", err)
		}
	}
	return nil
}

// deleteIfUnchanged deletes key if it is still the version seen (same
// validator and modification time); deleted is false when it changed or
// is gone. In a write-back bucket the check and the tombstone are one
// step (the journal entry is conditional on the log index the check saw).
// A write-through bucket's stores have no conditional delete: the object
// is looked up in its store just before the delete, which leaves a window
// of one store round trip in which an overwrite can still be lost.
func (b *Bucket) deleteIfUnchanged(ctx context.Context, key string, seen store.ObjectInfo) (bool, error) {
	if b.versioned() {
		return b.markIfUnchanged(ctx, key, seen)
	}
	if _, wb := b.path.(writeBackPath); wb {
		for try := 0; try < conditionRetries; try++ {
			idx := max(b.ns.rs.State().AppliedIndex(), 1)
			cur, err := b.Stat(ctx, key)
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if cur.Validator != seen.Validator {
				return false, nil
			}
			e := regionstate.JournalEntry{Bucket: b.Name, Key: key, Tombstone: true, Store: b.store.Name(),
				StoreKey: b.prefix + key, Created: b.ns.now().UTC()}
			err = b.ns.rs.Apply(ctx, regionstate.StageObject{Entry: e, IfUnchangedSince: idx})
			if errors.Is(err, regionstate.ErrChanged) {
				continue
			}
			if err != nil {
				return false, err
			}
			b.invalidate(key)
			b.ns.wakeDrainer()
			return true, nil
		}
		return false, nil
	}
	if err := b.ns.writeBarrier(ctx); err != nil {
		return false, err
	}
	cur, err := b.store.Stat(ctx, b.prefix+key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if cur.Validator != seen.Validator || !cur.ModTime.Equal(seen.ModTime) {
		return false, nil
	}
	defer b.invalidate(key)
	if err := b.store.Delete(withEgressTag(ctx, egressTag{bucket: b.Name, key: key}), b.prefix+key); err != nil {
		return false, err
	}
	return true, b.touch(ctx, key)
}

// pacer spaces out a pass's deletions and aborts.
type pacer struct {
	gap  time.Duration
	next time.Time
}

func newPacer(rate float64) *pacer {
	if rate < 0 {
		return &pacer{}
	}
	if rate == 0 {
		rate = DefaultLifecycleRate
	}
	return &pacer{gap: time.Duration(float64(time.Second) / rate)}
}

func (p *pacer) wait(ctx context.Context) error {
	if p.gap <= 0 {
		return ctx.Err()
	}
	now := time.Now()
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = p.next
	}
	p.next = now.Add(p.gap)
	return ctx.Err()
}

// markIfUnchanged expires the current version of a versioned bucket's key
// (a delete marker, as S3 does) if it is still the version seen.
func (b *Bucket) markIfUnchanged(ctx context.Context, key string, seen store.ObjectInfo) (bool, error) {
	if err := b.ns.writeBarrier(ctx); err != nil {
		return false, err
	}
	if err := b.adoptPlain(ctx, key); err != nil {
		return false, err
	}
	latest, ok, err := b.latestVersion(ctx, key)
	if err != nil || !ok || latest.DeleteMarker || latest.ID != seen.VersionID || latest.ETag != seen.ETag {
		return false, err
	}
	id := newVersionID()
	if b.indexVersioning() == VersioningSuspended {
		id = regionstate.NullVersionID
	}
	marker := regionstate.ObjectVersion{Bucket: b.Name, Key: key, ID: id, DeleteMarker: true}
	err = b.ns.rs.Apply(ctx, regionstate.PutVersion{Version: marker, Conditional: true, IfLatest: latest.Seq})
	if errors.Is(err, regionstate.ErrChanged) {
		return false, nil
	}
	return err == nil, err
}

// expireVersions applies NoncurrentVersionExpiration and the removal of
// expired delete markers to a versioned bucket: it walks the version index
// key by key and removes, for good, what the rules say is due.
func (n *Namespace) expireVersions(ctx context.Context, b *Bucket, rules []lifecycle.Rule, now time.Time, p *pacer, run *LifecycleRun) error {
	var vr []lifecycle.Rule
	for _, r := range rules {
		if r.NoncurrentVersionExpiration != nil || r.RemovesExpiredMarker() {
			vr = append(vr, r)
		}
	}
	if len(vr) == 0 {
		return nil
	}
	m := n.lcMetrics
	var due []regionstate.ObjectVersion
	var key []regionstate.ObjectVersion // one key's versions, newest first
	flush := func() {
		for i, v := range key {
			tags := lifecycle.ObjectTags(v.Meta.User)
			for _, r := range vr {
				if !r.Filter.Matches(v.Key, v.Size, tags) {
					continue
				}
				if i == 0 {
					if len(key) == 1 && v.DeleteMarker && r.RemovesExpiredMarker() {
						due = append(due, v)
						break
					}
					continue
				}
				// Version i stopped being current when version i-1 was
				// written; i-1 noncurrent versions are newer than it.
				if r.ExpiresNoncurrent(key[i-1].Created, i-1, now) {
					if v.Lock.Protects(now, false) {
						run.Skipped++ // kept by its object lock; a pass after it ends expires it
						m.skipped.WithLabelValues(b.Name).Inc()
						break
					}
					due = append(due, v)
					break
				}
			}
		}
		key = key[:0]
	}
	n.rs.State().ListVersions(b.Name, "", "", 0, func(v regionstate.ObjectVersion) bool {
		if len(key) > 0 && key[0].Key != v.Key {
			flush()
		}
		key = append(key, v)
		run.Scanned++
		m.scanned.Inc()
		return len(due) < 10000 // the rest waits for the next pass
	})
	flush()
	for _, v := range due {
		if err := p.wait(ctx); err != nil {
			return err
		}
		if h := n.lcHook; h != nil {
			h(b.Name, v.Key)
		}
		err := n.rs.Apply(ctx, regionstate.DeleteVersion{Bucket: b.Name, Key: v.Key, ID: v.ID})
		switch {
		case err == nil:
			run.Expired++
			m.expired.WithLabelValues(b.Name).Inc()
		case errors.Is(err, regionstate.ErrNoSuchVersion), errors.Is(err, regionstate.ErrObjectLocked), errors.Is(err, backend.ErrObjectLocked):
			// Gone meanwhile, or kept by its object lock (a retention or
			// legal hold): skipped and counted, tried again next pass.
			run.Skipped++
			m.skipped.WithLabelValues(b.Name).Inc()
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			run.Errors++
			m.errors.WithLabelValues(b.Name).Inc()
			n.log.Warn("lifecycle: removing a version failed; next pass tries again", "bucket", b.Name, "key", v.Key, "version", v.ID, "error", err)
		}
	}
	return nil
}
