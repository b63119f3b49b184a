package federation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Preload jobs and pins. A preload job (Raft state) asks every node of the
// region to warm the chunks of Bucket/Prefix that the ring gives it; each
// node lists the prefix in key order, warms its own chunks, and records how
// far it got (the last key it finished), so a restarted node resumes there.
// A job is complete when every current member has recorded Done. A pin
// (Raft state too) keeps a bucket's chunks under a prefix from eviction on
// every node; the namespace's OnApply hook re-pins when pins change.

// Errors of preload jobs and pins besides ErrNoSuchBucket.
var (
	ErrNoSuchJob = backend.ErrNoSuchJob
	ErrNoSuchPin = backend.ErrNoSuchPin
	// ErrInvalidPrefix: a key prefix longer than 1024 bytes or with NUL.
	ErrInvalidPrefix = backend.ErrInvalidPrefix
)

// Preloader tuning.
const (
	// preloadInFlight bounds the chunk warms one node runs at once, over
	// all its jobs.
	preloadInFlight = 4
	// preloadPoll is how often the preloader looks for new, canceled or
	// deleted jobs.
	preloadPoll = 500 * time.Millisecond
	// preloadReport is how often a node records its progress on a job.
	preloadReport = time.Second
	// preloadListTries is how many times a failing listing is retried
	// (each resuming where it stopped) before the node gives up on a job.
	preloadListTries = 5
	// preloadRetry is how long a job whose run ended without recording
	// Done (a Raft write failed) waits before this node tries it again.
	preloadRetry = 10 * time.Second
)

// PreloadStatus is a preload job with its progress summed over the region.
type PreloadStatus struct {
	regionstate.PreloadJob
	// Objects is how many objects every current member has finished (the
	// least over the members: each lists every object of the prefix).
	Objects int64
	// Bytes is the bytes of the chunks warmed, summed over the nodes (each
	// warms the chunks it owns); it reaches TotalBytes when done.
	Bytes int64
	// Errors is the chunks that could not be warmed (store errors, or no
	// room under the bucket's quota), summed over the nodes.
	Errors int64
	// Done: every current member has finished its share.
	Done bool
	// Pending names the current members that have not finished yet.
	Pending []string
	// Uncached: the bucket's store is a local directory, which is read
	// directly and never cached: the job has nothing to do and is done at
	// once.
	Uncached bool
}

// State is "canceled", "done" or "running".
func (s PreloadStatus) State() string {
	switch {
	case s.Canceled:
		return "canceled"
	case s.Done:
		return "done"
	}
	return "running"
}

func validPrefix(prefix string) error {
	if len(prefix) > 1024 || strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("%w: %q (at most 1024 bytes, no NUL)", ErrInvalidPrefix, prefix)
	}
	return nil
}

// cachedBucket reports whether b's reads go through the region's cache.
func (n *Namespace) cachedBucket(b *Bucket) bool { return b.cache.Chunked && n.cache != nil }

// StartPreload creates a job that warms the region's cache with the
// objects of bucket under prefix (relative to the bucket; "" for all of
// it). With pin, the prefix is pinned first, so what the job warms is never
// evicted. The preloaders of the region's nodes (RunPreloader) do the work.
// A bucket whose store is a local directory is never cached: its job is
// done at once. It returns ErrNoSuchBucket or ErrInvalidPrefix.
func (n *Namespace) StartPreload(ctx context.Context, bucket, prefix string, pin bool) (regionstate.PreloadJob, error) {
	if err := validPrefix(prefix); err != nil {
		return regionstate.PreloadJob{}, err
	}
	b, err := n.Bucket(bucket)
	if err != nil {
		return regionstate.PreloadJob{}, err
	}
	if pin {
		if err := n.rs.Apply(ctx, regionstate.SetPin{Pin: regionstate.Pin{Bucket: b.Name, Prefix: prefix, Created: n.now().UTC()}}); err != nil {
			return regionstate.PreloadJob{}, err
		}
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	now := n.now().UTC()
	job := regionstate.PreloadJob{ID: hex.EncodeToString(id[:]), Bucket: b.Name, Prefix: prefix, Pin: pin, Created: now}
	if !n.cachedBucket(b) {
		job.Nodes = map[string]regionstate.JobProgress{}
		for _, m := range n.region.Members() {
			job.Nodes[m] = regionstate.JobProgress{Done: true, Updated: now}
		}
	}
	if err := n.rs.Apply(ctx, regionstate.PutJob{Job: job}); err != nil {
		return regionstate.PreloadJob{}, err
	}
	return job, nil
}

// CancelPreload stops a running job: the nodes stop warming, and it stays
// listed as canceled (a pin it made stays; Unpin removes it). A job that
// is already done or canceled is forgotten instead (removed from the
// list); removed says which happened. It returns ErrNoSuchJob.
func (n *Namespace) CancelPreload(ctx context.Context, id string) (removed bool, err error) {
	j, ok := n.rs.State().Job(id)
	if !ok && n.catchUp() {
		j, ok = n.rs.State().Job(id)
	}
	if !ok {
		return false, ErrNoSuchJob
	}
	if j.Canceled || n.status(j).Done {
		err := n.rs.Apply(ctx, regionstate.DeleteJob{ID: id})
		if errors.Is(err, regionstate.ErrNoSuchJob) {
			return false, ErrNoSuchJob
		}
		return err == nil, err
	}
	j.Canceled = true
	return false, n.rs.Apply(ctx, regionstate.PutJob{Job: j})
}

// Jobs returns the region's preload jobs, oldest first.
func (n *Namespace) Jobs() []PreloadStatus {
	jobs := n.rs.State().Jobs()
	out := make([]PreloadStatus, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, n.status(j))
	}
	return out
}

// Job returns one preload job, or ErrNoSuchJob.
func (n *Namespace) Job(id string) (PreloadStatus, error) {
	j, ok := n.rs.State().Job(id)
	if !ok && n.catchUp() {
		j, ok = n.rs.State().Job(id)
	}
	if !ok {
		return PreloadStatus{}, ErrNoSuchJob
	}
	return n.status(j), nil
}

// status sums a job's progress over the region's current members.
func (n *Namespace) status(j regionstate.PreloadJob) PreloadStatus {
	s := PreloadStatus{PreloadJob: j, Done: true}
	for _, p := range j.Nodes {
		s.Bytes += p.Bytes
		s.Errors += p.Errors
	}
	for i, m := range n.region.Members() {
		p, ok := j.Nodes[m]
		if !ok || !p.Done {
			s.Done = false
			s.Pending = append(s.Pending, m)
		}
		if i == 0 || p.Objects < s.Objects {
			s.Objects = p.Objects
		}
	}
	if b := n.lookupBucket(j.Bucket); b != nil {
		s.Uncached = !n.cachedBucket(b)
	}
	return s
}

// lookupBucket is Bucket without waiting for the region (nil: this node
// does not know the bucket); the cache's pin check calls it under the
// cache's lock.
func (n *Namespace) lookupBucket(name string) *Bucket {
	if b, ok := n.v().global[name]; ok {
		return b
	}
	rec, ok := n.rs.State().Bucket(name)
	if !ok {
		return nil
	}
	b, err := n.fromRecord(rec)
	if err != nil {
		return nil
	}
	return b
}

// Pin keeps the chunks of bucket's objects under prefix in the region's
// cache: they are never evicted (they still count against the bucket's
// quota). Pinning does not fetch anything; StartPreload with pin does. It
// returns ErrNoSuchBucket or ErrInvalidPrefix.
func (n *Namespace) Pin(ctx context.Context, bucket, prefix string) (regionstate.Pin, error) {
	if err := validPrefix(prefix); err != nil {
		return regionstate.Pin{}, err
	}
	b, err := n.Bucket(bucket)
	if err != nil {
		return regionstate.Pin{}, err
	}
	p := regionstate.Pin{Bucket: b.Name, Prefix: prefix, Created: n.now().UTC()}
	for _, old := range n.rs.State().Pins() {
		if old.Bucket == p.Bucket && old.Prefix == p.Prefix {
			p.Created = old.Created // pinning again keeps the pin as it was
		}
	}
	if err := n.rs.Apply(ctx, regionstate.SetPin{Pin: p}); err != nil {
		return regionstate.Pin{}, err
	}
	return p, nil
}

// Unpin removes the pin of bucket/prefix (exactly as pinned); its chunks
// become evictable again. It returns ErrNoSuchPin, or ErrNoSuchBucket when
// neither the pin nor the bucket exists.
func (n *Namespace) Unpin(ctx context.Context, bucket, prefix string) error {
	found := func() bool {
		for _, p := range n.rs.State().Pins() {
			if p.Bucket == bucket && p.Prefix == prefix {
				return true
			}
		}
		return false
	}
	if !found() && (!n.catchUp() || !found()) {
		if _, err := n.Bucket(bucket); err != nil {
			return err
		}
		return fmt.Errorf("%w: bucket %q, prefix %q", ErrNoSuchPin, bucket, prefix)
	}
	return n.rs.Apply(ctx, regionstate.SetPin{Pin: regionstate.Pin{Bucket: bucket, Prefix: prefix}, Delete: true})
}

// Pins returns the region's pins, sorted by bucket, then prefix.
func (n *Namespace) Pins() []regionstate.Pin { return n.rs.State().Pins() }

// RunPreloader runs this node's share of the region's preload jobs until
// ctx ends. Call it once per node. Jobs run side by side, sharing a few
// chunk warms in flight; a job canceled or deleted elsewhere stops here
// within a poll.
func (n *Namespace) RunPreloader(ctx context.Context) {
	sem := make(chan struct{}, preloadInFlight)
	var (
		mu       sync.Mutex
		active   = map[string]context.CancelFunc{}
		finished = map[string]bool{}      // done here (Done may not be applied locally yet)
		retryAt  = map[string]time.Time{} // runs that ended without recording Done
		wg       sync.WaitGroup
	)
	defer wg.Wait()
	t := time.NewTicker(preloadPoll)
	defer t.Stop()
	for {
		self := n.region.Self()
		jobs := n.rs.State().Jobs()
		live := make(map[string]regionstate.PreloadJob, len(jobs))
		for _, j := range jobs {
			live[j.ID] = j
		}
		now := time.Now()
		mu.Lock()
		for id, cancel := range active {
			if j, ok := live[id]; !ok || j.Canceled {
				cancel()
			}
		}
		for id := range finished {
			if _, ok := live[id]; !ok {
				delete(finished, id)
			}
		}
		for id, at := range retryAt {
			if _, ok := live[id]; !ok || now.After(at) {
				delete(retryAt, id)
			}
		}
		for _, j := range jobs {
			_, running := active[j.ID]
			_, waiting := retryAt[j.ID]
			if j.Canceled || j.Nodes[self].Done || finished[j.ID] || running || waiting {
				continue
			}
			jctx, cancel := context.WithCancel(ctx)
			active[j.ID] = cancel
			ended := n.preloads.start(j.ID)
			wg.Go(func() {
				ok := n.runPreload(jctx, j, sem)
				cancel()
				ended()
				mu.Lock()
				delete(active, j.ID)
				if ok {
					finished[j.ID] = true
				} else if ctx.Err() == nil {
					retryAt[j.ID] = time.Now().Add(preloadRetry)
				}
				mu.Unlock()
			})
		}
		mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// preloadRuns are the runs of preload jobs in progress on this node, each
// with a channel closed when it ends.
type preloadRuns struct {
	mu   sync.Mutex
	ends map[string]chan struct{} // job id -> closed when its run ends
}

// start records a run of job id; the returned func records its end.
func (p *preloadRuns) start(id string) (ended func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	if p.ends == nil {
		p.ends = map[string]chan struct{}{}
	}
	p.ends[id] = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.ends[id] == ch {
			delete(p.ends, id)
		}
		p.mu.Unlock()
		close(ch)
	}
}

// PreloadRunEnded returns a channel that is closed when the run of job id
// in progress on this node ends (a cancel, a delete, a stop or Done); it
// is closed already when none is in progress.
func (n *Namespace) PreloadRunEnded(id string) <-chan struct{} {
	p := &n.preloads
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.ends[id]; ok {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// preloadRun is one node's run of one job.
type preloadRun struct {
	n    *Namespace
	job  regionstate.PreloadJob
	self string
	b    *Bucket
	sem  chan struct{}
	stop context.CancelFunc // ends the run (the job was deleted)

	// fetching is the bytes fetched so far by the chunk warms in flight
	// (they count in the recorded Bytes at once, so progress moves with
	// the bytes fetched, not by whole chunks); reported is its value at
	// the last report.
	fetching, reported atomic.Int64

	mu    sync.Mutex
	p     regionstate.JobProgress // what to record next
	dirty bool
	queue []*preloadObject // listed and not finished, in key order
	// counted is the totals from a listing of the whole prefix (0: not yet).
	countedObjects, countedBytes int64
	logged                       bool // the first chunk error was logged
}

// countingReadCloser counts the bytes read through it.
type countingReadCloser struct {
	io.ReadCloser
	count func(int64)
}

func (c *countingReadCloser) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.count(int64(n))
	}
	return n, err
}

// preloadObject is an object whose own chunks are being warmed.
type preloadObject struct {
	key     string
	pending int   // chunk warms not finished, plus one while listing it
	aborted bool  // a warm ended with the run: never finished by this run
	bytes   int64 // of its chunks warmed so far
}

// runPreload runs this node's share of job; it reports whether the node
// recorded Done.
func (n *Namespace) runPreload(ctx context.Context, job regionstate.PreloadJob, sem chan struct{}) bool {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	r := &preloadRun{n: n, job: job, self: n.region.Self(), sem: sem, stop: stop, p: job.Nodes[n.region.Self()]}
	// The objects past After are warmed again (their cached chunks count
	// at once): only the bytes up to After carry over. (A record without
	// AfterBytes, from an older build, keeps its count.)
	if r.p.AfterBytes > 0 || r.p.Objects == 0 {
		r.p.Bytes = r.p.AfterBytes
	}
	r.p.Done = false
	b, err := n.Bucket(job.Bucket)
	if err != nil {
		n.log.Warn("preload: the bucket is not readable here; giving up on the job", "job", job.ID, "bucket", job.Bucket, "error", err)
		r.p.Errors++
		return r.finish(ctx, 0, 0)
	}
	r.b = b
	if !n.cachedBucket(b) {
		return r.finish(ctx, 0, 0) // read directly, never cached: nothing to do
	}
	if job.TotalObjects == 0 && job.TotalBytes == 0 {
		go r.count(ctx)
	}
	reporterDone := make(chan struct{})
	reportCtx, stopReporter := context.WithCancel(ctx)
	go func() {
		defer close(reporterDone)
		r.reportLoop(reportCtx)
	}()
	var listedObjects, listedBytes int64
	var complete bool
	for failures := 0; ; {
		start := r.progress().After
		objects, bytes, err := r.walk(ctx, start)
		if err == nil {
			listedObjects, listedBytes, complete = objects, bytes, start == ""
			break
		}
		if ctx.Err() != nil {
			break
		}
		if r.progress().After != start {
			failures = 0 // it got somewhere: a fresh budget
		}
		failures++
		n.log.Warn("preload: listing failed", "job", job.ID, "bucket", job.Bucket, "prefix", job.Prefix, "attempt", failures, "error", err)
		if failures >= preloadListTries {
			r.mu.Lock()
			r.p.Errors++
			r.mu.Unlock()
			break
		}
		if readBackoff.Sleep(ctx, failures+4) != nil { // 0.8 s and up, jittered
			break
		}
	}
	stopReporter()
	<-reporterDone
	if ctx.Err() != nil {
		// Stopped (shutdown, cancel, delete): record how far it got, so a
		// restart resumes there.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.report(rctx, false)
		return false
	}
	if !complete {
		listedObjects, listedBytes = 0, 0
	}
	r.mu.Lock()
	if !complete && r.countedObjects+r.countedBytes > 0 {
		listedObjects, listedBytes = r.countedObjects, r.countedBytes
	}
	r.mu.Unlock()
	return r.finish(ctx, listedObjects, listedBytes)
}

func (r *preloadRun) progress() regionstate.JobProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// finish records Done (and the totals when known), retrying briefly.
func (r *preloadRun) finish(ctx context.Context, totalObjects, totalBytes int64) bool {
	r.mu.Lock()
	r.p.Done = true
	r.countedObjects, r.countedBytes = totalObjects, totalBytes
	r.dirty = true
	r.mu.Unlock()
	for attempt := 1; ; attempt++ {
		err := r.report(ctx, true)
		if err == nil || errors.Is(err, regionstate.ErrNoSuchJob) {
			return true
		}
		if attempt >= readAttempts {
			r.n.log.Warn("preload: cannot record the job's progress", "job", r.job.ID, "error", err)
			return false
		}
		if readBackoff.Sleep(ctx, attempt+4) != nil {
			return false
		}
	}
}

// reportLoop records progress every preloadReport while it changes.
func (r *preloadRun) reportLoop(ctx context.Context) {
	t := time.NewTicker(preloadReport)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.report(ctx, false); errors.Is(err, regionstate.ErrNoSuchJob) {
			r.stop() // the job was deleted
			return
		} else if err != nil && ctx.Err() == nil {
			r.n.log.Debug("preload: recording progress failed", "job", r.job.ID, "error", err)
		}
	}
}

// report records the progress if it changed since the last report (always
// when force).
func (r *preloadRun) report(ctx context.Context, force bool) error {
	r.mu.Lock()
	fetching := r.fetching.Load()
	if !r.dirty && !force && fetching == r.reported.Load() {
		r.mu.Unlock()
		return nil
	}
	r.reported.Store(fetching)
	p := r.p
	p.Bytes += max(fetching, 0)
	p.Updated = time.Time{} // the FSM stamps it
	cmd := regionstate.JobProgressUpdate{ID: r.job.ID, Node: r.self, Progress: p, TotalObjects: r.countedObjects, TotalBytes: r.countedBytes}
	r.dirty = false
	r.mu.Unlock()
	err := r.n.rs.Apply(ctx, cmd)
	if err != nil {
		r.mu.Lock()
		r.dirty = true
		r.mu.Unlock()
	}
	return err
}

// count lists the whole prefix for the job's totals, so progress can show
// how much is left before the walk ends.
func (r *preloadRun) count(ctx context.Context) {
	var objects, bytes int64
	for e, err := range r.b.List(ctx, store.ListOptions{Prefix: r.job.Prefix}) {
		if err != nil {
			return // the walk's totals will do
		}
		if !e.IsPrefix {
			objects++
			bytes += e.Info.Size
		}
	}
	r.mu.Lock()
	if !r.p.Done && objects+bytes > 0 {
		r.countedObjects, r.countedBytes = objects, bytes
		r.dirty = true
	}
	r.mu.Unlock()
}

// walk lists the prefix after start and warms this node's chunks of every
// object, at most cap(sem) at once (with other jobs). It returns what it
// listed, once every warm it started has ended.
func (r *preloadRun) walk(ctx context.Context, start string) (objects, bytes int64, _ error) {
	n := r.n
	var wg sync.WaitGroup
	defer wg.Wait()
	r.mu.Lock()
	r.queue = nil
	r.mu.Unlock()
	opts := n.readOptions(r.b)
	for e, lerr := range r.b.List(ctx, store.ListOptions{Prefix: r.job.Prefix, StartAfter: start}) {
		if lerr != nil {
			return objects, bytes, lerr
		}
		if e.IsPrefix {
			continue
		}
		objects++
		bytes += e.Info.Size
		info := e.Info
		obj := &preloadObject{key: e.Key, pending: 1}
		r.mu.Lock()
		r.queue = append(r.queue, obj)
		r.mu.Unlock()
		if strings.HasPrefix(string(info.Validator), stagedPrefix) || info.Size == 0 {
			r.settle(obj, 0, nil) // staged (not in the store yet) or empty: nothing to cache
			continue
		}
		if info.Validator == "" {
			var serr error
			if info, serr = r.b.Stat(ctx, e.Key); serr != nil {
				r.settle(obj, 0, serr)
				if ctx.Err() != nil {
					return objects, bytes, ctx.Err()
				}
				continue
			}
		}
		skey := r.b.prefix + e.Key
		id := cachetier.ObjectID{Store: r.b.store.Name(), Key: skey, Validator: info.Validator, Size: info.Size}
		fetch := n.fetcher(egressTag{bucket: r.b.Name, key: e.Key, preload: true}, r.b.store, skey, info.Validator)
		for idx := range n.cache.NumChunks(info.Size) {
			if _, local := n.cache.Owner(cachetier.ChunkKey{ObjectID: id, Index: idx}); !local {
				continue
			}
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				r.settle(obj, 0, ctx.Err())
				return objects, bytes, ctx.Err()
			}
			r.mu.Lock()
			obj.pending++
			r.mu.Unlock()
			length := min(n.cache.ChunkSize(), info.Size-idx*n.cache.ChunkSize())
			wg.Go(func() {
				defer func() { <-r.sem }()
				var got atomic.Int64
				counted := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
					rc, err := fetch(ctx, off, n)
					if err != nil {
						return nil, err
					}
					return &countingReadCloser{ReadCloser: rc, count: func(k int64) { got.Add(k); r.fetching.Add(k) }}, nil
				}
				err := n.cache.Warm(ctx, id, idx, counted, opts)
				r.fetching.Add(-got.Load())
				r.settle(obj, length, err)
			})
		}
		r.settle(obj, 0, nil) // listed: the guard goes
	}
	return objects, bytes, nil
}

// settle ends one warm of obj (or its listing guard): it counts the bytes
// or the error, and when the oldest objects are finished moves After past
// them.
func (r *preloadRun) settle(obj *preloadObject, length int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.p.Bytes += length
		obj.bytes += length
	case errors.Is(err, store.ErrNotFound):
		// Deleted since it was listed: nothing to cache.
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cachetier.ErrClosed):
		obj.aborted = true // not finished: a resume does it again
	default:
		r.p.Errors++
		if !r.logged {
			r.logged = true
			r.n.log.Warn("preload: a chunk could not be cached (further errors are only counted)", "job", r.job.ID,
				"bucket", r.job.Bucket, "key", obj.key, "error", err)
		}
	}
	obj.pending--
	r.dirty = true
	for len(r.queue) > 0 && r.queue[0].pending == 0 && !r.queue[0].aborted {
		r.p.After = r.queue[0].key
		r.p.AfterBytes += r.queue[0].bytes
		r.p.Objects++
		r.queue = r.queue[1:]
	}
}
