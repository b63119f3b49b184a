package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// cleanupTimeout bounds the removal of a target's objects.
const cleanupTimeout = 10 * time.Minute

// interruptGrace is how long requests in flight when the run is stopped
// may take to finish before they are cancelled: a PUT cancelled while the
// server commits it can leave an object the cleanup has already listed.
const interruptGrace = 10 * time.Second

// target is one Target while it is loaded.
type target struct {
	Target
	s3            *s3.Client
	batch         *BatchClient
	createdBucket bool
	wrote         atomic.Bool // a PUT was sent: there may be objects to remove
	pool          pool
	seq           atomic.Int64
	stats         map[Op]*opStats // over every round
	rounds        []RoundReport
	seconds       float64
	prepare       *PrepareReport
	cleanup       CleanupReport
}

type engine struct {
	cfg    Config
	prefix string // the run's unique prefix
	seed   uint64
}

// Run runs cfg: it makes sure every target's bucket exists, prepares the
// objects to read, runs the rounds, and removes what it created (unless
// Keep), also when ctx ends early: a Ctrl-C stops the load, and Run still
// cleans up (under its own deadline) and reports what it measured with
// Interrupted set. The error is about the setup (a bucket that cannot be
// created, objects that cannot be written, a server without batch GET);
// failed operations during the rounds are counted in the report instead.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.check(); err != nil {
		return Report{}, err
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	e := &engine{
		cfg:    cfg,
		prefix: cfg.Prefix + "fedgate-bench-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(rb[:]) + "/",
		seed:   mrand.Uint64(),
	}
	var targets []*target
	for _, tc := range cfg.Targets {
		creds := tc.Credentials
		if _, ok := creds.(*aws.CredentialsCache); !ok {
			creds = aws.NewCredentialsCache(creds)
		}
		hc := newHTTPClient(cfg.Concurrency, tc.TLS)
		t := &target{Target: tc, s3: newS3Client(tc, creds, hc), stats: map[Op]*opStats{}}
		if cfg.Mode == ModeBatch {
			t.batch = NewBatchClient(tc.Endpoint, tc.Region, creds, hc)
		}
		targets = append(targets, t)
	}
	// ctx stops the load; requests run under reqCtx, which ends
	// interruptGrace after ctx, so that what is in flight when ctx ends
	// finishes and the cleanup finds every object that was written.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(interruptGrace, cancelReqs) })
	defer stopGrace()
	rep, err := e.run(ctx, reqCtx, targets)
	for _, t := range targets {
		t.cleanup = e.clean(ctx, t)
	}
	rep.Targets = nil
	for _, t := range targets {
		rep.Targets = append(rep.Targets, t.report())
	}
	if len(rep.Targets) == 2 {
		rep.Ratios = ratios(rep.Targets[0], rep.Targets[1])
	}
	return rep, err
}

func (e *engine) run(ctx, reqCtx context.Context, targets []*target) (Report, error) {
	c := e.cfg
	rep := Report{
		Mode: c.Mode,
		Workload: Workload{
			Sizes: c.Sizes.String(), Concurrency: c.Concurrency, DurationSeconds: c.Duration.Seconds(),
			Rounds: c.Rounds, Prefix: e.prefix,
		},
	}
	if c.Mode != ModePut {
		rep.Workload.Objects = c.Objects
	}
	if c.Mode == ModeMixed {
		rep.Workload.Mix = c.Mix.String()
	}
	if c.Mode == ModeBatch {
		rep.Workload.BatchSize = c.BatchSize
	}
	interrupted := func() (Report, error) {
		rep.Interrupted = true
		return rep, nil
	}
	// Each step runs on every target before the next; a setup error ends
	// the run (what was written is removed all the same).
	step := func(f func(*target) error) error {
		for _, t := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := f(t); err != nil {
				return err
			}
		}
		return nil
	}
	err := step(func(t *target) error { return e.ensureBucket(reqCtx, t) })
	if err == nil && c.Mode == ModeBatch {
		// Before writing anything: does the server have batch GET at all?
		err = step(func(t *target) error { return e.probeBatchRoute(reqCtx, t) })
	}
	if err == nil && c.Mode != ModePut {
		// Every target gets objects of the same sizes.
		r := mrand.New(mrand.NewPCG(e.seed, 0))
		sizes := make([]int64, c.Objects)
		for i := range sizes {
			sizes[i] = c.Sizes.Pick(r)
		}
		err = step(func(t *target) error { return e.prepareObjects(ctx, reqCtx, t, sizes) })
	}
	if err == nil && c.Mode == ModeBatch {
		err = step(func(t *target) error { return e.probeBatch(reqCtx, t) })
	}
	switch {
	case ctx.Err() != nil:
		return interrupted()
	case err != nil:
		return rep, err
	}
	for round := 1; round <= c.Rounds; round++ {
		for _, t := range targets {
			e.runRound(ctx, reqCtx, t, round)
			if ctx.Err() != nil {
				return interrupted()
			}
		}
	}
	return rep, nil
}

// ensureBucket creates the target's bucket when it does not exist.
func (e *engine) ensureBucket(ctx context.Context, t *target) error {
	_, err := t.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(t.Bucket)})
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	var re *awshttp.ResponseError
	switch {
	case errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchBucket"):
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden:
		// HEAD answers carry no error code: say what 403 means.
		return fmt.Errorf("%s: bucket %s: HEAD bucket answered 403 Forbidden: the credentials are not valid there, or may not use that bucket", t.Name, t.Bucket)
	default:
		return fmt.Errorf("%s: bucket %s: %w", t.Name, t.Bucket, shortError("HEAD bucket", err))
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(t.Bucket)}
	if t.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(t.Region)}
	}
	_, err = t.s3.CreateBucket(ctx, in)
	if err != nil && !(errors.As(err, &ae) && ae.ErrorCode() == "BucketAlreadyOwnedByYou") {
		return fmt.Errorf("%s: bucket %s does not exist and could not be created: %w", t.Name, t.Bucket, shortError("CREATE bucket", err))
	}
	t.createdBucket = err == nil
	return nil
}

// watch calls Progress every ProgressEvery with snap(false) until the
// returned stop, which calls it once more with snap(true).
func (e *engine) watch(snap func(final bool) Snapshot) (stop func()) {
	if e.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(e.cfg.ProgressEvery)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				e.cfg.Progress(snap(false))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		e.cfg.Progress(snap(true))
	}
}

// prepareObjects writes the objects that get, mixed and batch read; it
// stops handing out objects when ctx ends.
func (e *engine) prepareObjects(ctx, reqCtx context.Context, t *target, sizes []int64) error {
	pctx, cancel := context.WithCancelCause(reqCtx)
	defer cancel(nil)
	start := time.Now()
	var done, bytes atomic.Int64
	stop := e.watch(func(final bool) Snapshot {
		return Snapshot{Target: t.Name, Phase: PhasePrepare, Elapsed: time.Since(start), Done: done.Load(), Total: int64(len(sizes)), Bytes: bytes.Load(), Final: final}
	})
	objs := make([]*object, len(sizes))
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range sizes {
			select {
			case next <- i:
			case <-pctx.Done():
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range min(e.cfg.Concurrency, len(sizes)) {
		wg.Go(func() {
			for i := range next {
				o := &object{key: fmt.Sprintf("%sobj/%07d", e.prefix, i), size: sizes[i]}
				t.wrote.Store(true)
				_, err := t.s3.PutObject(pctx, &s3.PutObjectInput{
					Bucket: aws.String(t.Bucket), Key: aws.String(o.key),
					Body: newBody(o.size, e.seed+uint64(i)*7919+uint64(w)), ContentLength: aws.Int64(o.size),
				})
				if err != nil {
					cancel(fmt.Errorf("%s: preparing the objects to read: %w", t.Name, shortError("PUT", err)))
					return
				}
				objs[i] = o
				done.Add(1)
				bytes.Add(o.size)
			}
		})
	}
	wg.Wait()
	stop()
	if err := context.Cause(pctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.pool.objs = objs
	t.pool.floor = (len(objs) + 1) / 2
	t.prepare = &PrepareReport{Objects: done.Load(), Bytes: bytes.Load(), Seconds: time.Since(start).Seconds()}
	return nil
}

// probeBatchRoute asks the server for an object that does not exist, with
// continue_on_error: a server with batch GET answers a tar holding an
// __errors__ entry (or refuses the key with NoSuchKey); any other answer
// means it has no batch GET, and the run stops before writing anything.
func (e *engine) probeBatchRoute(ctx context.Context, t *target) error {
	req := BatchRequest{ContinueOnError: true, Entries: []BatchEntry{{Bucket: t.Bucket, Key: e.prefix + "probe-absent"}}}
	_, err := t.batch.Get(ctx, req)
	var he *BatchHTTPError
	if err == nil || errors.As(err, &he) && he.Code == "NoSuchKey" {
		return nil
	}
	return unsupportedBatch(t.Name, err)
}

// probeBatch sends one small batch of objects written, so that a server without batch GET
// fails the run with a clear message instead of counting errors.
func (e *engine) probeBatch(ctx context.Context, t *target) error {
	req := BatchRequest{ContinueOnError: e.cfg.ContinueOnError}
	for _, o := range t.pool.objs[:min(2, len(t.pool.objs))] {
		req.Entries = append(req.Entries, BatchEntry{Bucket: t.Bucket, Key: o.key})
	}
	res, err := t.batch.Get(ctx, req)
	if err != nil {
		return unsupportedBatch(t.Name, err)
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%s: the first batch GET answered %s for %s", t.Name, res.Errors[0].Error(), res.Errors[0].Name)
	}
	return nil
}

// runRound loads t for the configured duration, or until ctx ends.
// Requests in flight at the deadline finish and count; the round's time
// runs until they have.
func (e *engine) runRound(ctx, reqCtx context.Context, t *target, round int) {
	c := e.cfg
	stats := map[Op]*opStats{}
	for _, op := range e.ops() {
		stats[op] = newOpStats()
	}
	var lv live
	start := time.Now()
	deadline := start.Add(c.Duration)
	stop := e.watch(func(final bool) Snapshot {
		return Snapshot{Target: t.Name, Phase: PhaseRun, Round: round, Rounds: c.Rounds, Elapsed: time.Since(start), Duration: c.Duration,
			Ops: lv.ops.Load(), Objects: lv.objects.Load(), Bytes: lv.bytes.Load(), Errors: lv.errors.Load(), Final: final}
	})
	var wg sync.WaitGroup
	for w := range c.Concurrency {
		wg.Go(func() {
			r := mrand.New(mrand.NewPCG(e.seed, uint64(round)<<32|uint64(w)+1))
			for ctx.Err() == nil && time.Now().Before(deadline) {
				op, res := e.do(reqCtx, t, r, w)
				if res.err != nil && reqCtx.Err() != nil {
					return // cancelled, not failed
				}
				stats[op].add(res)
				lv.add(res)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	rr := RoundReport{Round: round, Seconds: elapsed.Seconds()}
	var objects, bytes int64
	for op, s := range stats {
		if t.stats[op] == nil {
			t.stats[op] = newOpStats()
		}
		t.stats[op].merge(s)
		rr.Ops += s.count
		rr.Errors += s.errors
		objects += s.objects
		bytes += s.bytes
	}
	rr.OpsPerSec = float64(rr.Ops) / elapsed.Seconds()
	rr.ObjectsPerSec = float64(objects) / elapsed.Seconds()
	rr.BytesPerSec = float64(bytes) / elapsed.Seconds()
	t.rounds = append(t.rounds, rr)
	t.seconds += elapsed.Seconds()
}

// ops are the operations the mode measures.
func (e *engine) ops() []Op {
	switch e.cfg.Mode {
	case ModeGet:
		return []Op{OpGet}
	case ModePut:
		return []Op{OpPut}
	case ModeBatch:
		return []Op{OpBatch}
	}
	return []Op{OpGet, OpPut, OpStat, OpDelete}
}

// do runs one operation of the mode.
func (e *engine) do(ctx context.Context, t *target, r *mrand.Rand, worker int) (Op, result) {
	switch e.cfg.Mode {
	case ModeGet:
		return OpGet, e.get(ctx, t, r)
	case ModePut:
		return OpPut, e.put(ctx, t, r, worker)
	case ModeBatch:
		return OpBatch, e.batchGet(ctx, t, r)
	}
	switch op := e.cfg.Mix.pick(r); op {
	case OpGet:
		return op, e.get(ctx, t, r)
	case OpStat:
		return op, e.stat(ctx, t, r)
	case OpDelete:
		if o := t.pool.take(r); o != nil {
			return op, e.del(ctx, t, o)
		}
		// The pool is down to its floor: write instead.
		return OpPut, e.put(ctx, t, r, worker)
	default:
		return OpPut, e.put(ctx, t, r, worker)
	}
}

func (e *engine) get(ctx context.Context, t *target, r *mrand.Rand) result {
	o := t.pool.acquire(r)
	defer t.pool.release(o)
	start := time.Now()
	out, err := t.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(o.key)})
	if err != nil {
		return result{err: shortError("GET", err)}
	}
	ttfb := time.Since(start)
	n, err := io.Copy(io.Discard, out.Body)
	out.Body.Close()
	lat := time.Since(start)
	if err != nil {
		return result{err: shortError("GET", err)}
	}
	if n != o.size {
		return result{err: fmt.Errorf("GET: read %d bytes of an object of %d", n, o.size)}
	}
	return result{lat: lat, ttfb: ttfb, objects: 1, bytes: n}
}

func (e *engine) put(ctx context.Context, t *target, r *mrand.Rand, worker int) result {
	o := &object{key: fmt.Sprintf("%sput/w%03d-%09d", e.prefix, worker, t.seq.Add(1)), size: e.cfg.Sizes.Pick(r)}
	t.wrote.Store(true)
	start := time.Now()
	_, err := t.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.Bucket), Key: aws.String(o.key),
		Body: newBody(o.size, r.Uint64()), ContentLength: aws.Int64(o.size),
	})
	lat := time.Since(start)
	if err != nil {
		return result{err: shortError("PUT", err)}
	}
	if e.cfg.Mode == ModeMixed {
		t.pool.add(o)
	}
	return result{lat: lat, objects: 1, bytes: o.size}
}

func (e *engine) stat(ctx context.Context, t *target, r *mrand.Rand) result {
	o := t.pool.acquire(r)
	defer t.pool.release(o)
	start := time.Now()
	out, err := t.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(o.key)})
	lat := time.Since(start)
	if err != nil {
		return result{err: shortError("HEAD", err)}
	}
	if n := aws.ToInt64(out.ContentLength); n != o.size {
		return result{err: fmt.Errorf("HEAD: Content-Length %d for an object of %d", n, o.size)}
	}
	return result{lat: lat, objects: 1}
}

func (e *engine) del(ctx context.Context, t *target, o *object) result {
	start := time.Now()
	_, err := t.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(o.key)})
	lat := time.Since(start)
	if err != nil {
		t.pool.add(o) // it may still be there
		return result{err: shortError("DELETE", err)}
	}
	return result{lat: lat, objects: 1}
}

func (e *engine) batchGet(ctx context.Context, t *target, r *mrand.Rand) result {
	req := BatchRequest{ContinueOnError: e.cfg.ContinueOnError, Entries: make([]BatchEntry, e.cfg.BatchSize)}
	for i := range req.Entries {
		o := t.pool.objs[r.IntN(len(t.pool.objs))] // batch mode never deletes
		req.Entries[i] = BatchEntry{Bucket: t.Bucket, Key: o.key}
	}
	start := time.Now()
	res, err := t.batch.Get(ctx, req)
	lat := time.Since(start)
	if err != nil {
		return result{err: batchError(err)}
	}
	out := result{lat: lat, ttfb: res.FirstEntry, objects: int64(res.Objects), bytes: res.Bytes}
	for _, ee := range res.Errors {
		out.entryErrs = append(out.entryErrs, "BATCH entry: "+ee.Error())
	}
	return out
}

func batchError(err error) error {
	var he *BatchHTTPError
	if errors.As(err, &he) {
		return fmt.Errorf("BATCH: %v", he)
	}
	return shortError("BATCH", err)
}

// clean removes the run's objects from t (and the bucket, when the run
// created it), unless Keep. It runs after ctx ended too, under its own
// deadline.
func (e *engine) clean(ctx context.Context, t *target) CleanupReport {
	if e.cfg.Keep {
		return CleanupReport{Kept: true}
	}
	if !t.wrote.Load() && !t.createdBucket {
		return CleanupReport{} // nothing was written
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	start := time.Now()
	var removed atomic.Int64
	stop := e.watch(func(final bool) Snapshot {
		return Snapshot{Target: t.Name, Phase: PhaseCleanup, Elapsed: time.Since(start), Done: removed.Load(), Total: -1, Final: final}
	})
	defer stop()
	var rep CleanupReport
	err := e.removePrefix(ctx, t, &removed)
	rep.Removed = removed.Load()
	if err != nil {
		rep.Error = err.Error()
		e.cfg.Log.Warn("bench: cleanup failed", "endpoint", t.Name, "bucket", t.Bucket, "prefix", e.prefix, "removed", rep.Removed, "err", err)
		return rep
	}
	if t.createdBucket {
		if _, err := t.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(t.Bucket)}); err != nil {
			rep.Error = fmt.Sprintf("removing the bucket %s the run created: %v", t.Bucket, shortError("DELETE bucket", err))
			e.cfg.Log.Warn("bench: cleanup failed", "endpoint", t.Name, "bucket", t.Bucket, "err", err)
			return rep
		}
		rep.BucketRemoved = true
	}
	return rep
}

// removePrefix deletes every object under the run's prefix, then lists
// it again, in case a request cancelled in flight was committed by the
// server after the first listing.
func (e *engine) removePrefix(ctx context.Context, t *target, removed *atomic.Int64) error {
	for pass := range 4 {
		before := removed.Load()
		if err := e.removeListed(ctx, t, removed); err != nil {
			return err
		}
		if pass > 0 && removed.Load() == before {
			return nil
		}
		if pass > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// removeListed deletes the objects a listing of the run's prefix shows, a
// page of 1000 at a time with DeleteObjects (one DeleteObject per key
// where the server has no DeleteObjects).
func (e *engine) removeListed(ctx context.Context, t *target, removed *atomic.Int64) error {
	perKey := false
	pages := s3.NewListObjectsV2Paginator(t.s3, &s3.ListObjectsV2Input{Bucket: aws.String(t.Bucket), Prefix: aws.String(e.prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return shortError("LIST", err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		if !perKey {
			ids := make([]types.ObjectIdentifier, len(page.Contents))
			for i, o := range page.Contents {
				ids[i] = types.ObjectIdentifier{Key: o.Key}
			}
			out, err := t.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: aws.String(t.Bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			})
			var ae smithy.APIError
			switch {
			case err == nil && len(out.Errors) > 0:
				removed.Add(int64(len(ids) - len(out.Errors)))
				x := out.Errors[0]
				return fmt.Errorf("DeleteObjects: %d keys not deleted, first %s: %s %s", len(out.Errors), aws.ToString(x.Key), aws.ToString(x.Code), aws.ToString(x.Message))
			case err == nil:
				removed.Add(int64(len(ids)))
				continue
			case errors.As(err, &ae) && (ae.ErrorCode() == "NotImplemented" || ae.ErrorCode() == "MethodNotAllowed"):
				perKey = true
			default:
				return shortError("DeleteObjects", err)
			}
		}
		if err := e.deleteEach(ctx, t, page.Contents, removed); err != nil {
			return err
		}
	}
	return nil
}

func (e *engine) deleteEach(ctx context.Context, t *target, objs []types.Object, removed *atomic.Int64) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan string)
	)
	for range min(e.cfg.Concurrency, 32) {
		wg.Go(func() {
			for key := range next {
				_, err := t.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)})
				if err != nil {
					mu.Lock()
					if first == nil {
						first = shortError("DELETE", err)
					}
					mu.Unlock()
					continue
				}
				removed.Add(1)
			}
		})
	}
	for _, o := range objs {
		next <- aws.ToString(o.Key)
	}
	close(next)
	wg.Wait()
	return first
}

// report is t's part of the report.
func (t *target) report() TargetReport {
	tr := TargetReport{Name: t.Name, Endpoint: t.Endpoint, Bucket: t.Bucket, Seconds: t.seconds, Rounds: t.rounds,
		Prepare: t.prepare, Cleanup: t.cleanup}
	total := newOpStats()
	kinds := 0
	for _, op := range opOrder {
		s := t.stats[op]
		if s == nil {
			continue
		}
		if s.count == 0 && s.errors == 0 && op != OpGet && op != OpPut && op != OpBatch {
			continue // a mix weight of 0
		}
		kinds++
		total.merge(s)
		tr.Ops = append(tr.Ops, s.report(op, t.seconds))
	}
	if kinds > 1 {
		tot := total.report(OpTotal, t.seconds)
		tot.ErrorSamples = nil // listed under each operation
		tot.FirstByte = nil
		tr.Ops = append(tr.Ops, tot)
	}
	if tr.Rounds == nil {
		tr.Rounds = []RoundReport{}
	}
	if tr.Ops == nil {
		tr.Ops = []OpReport{}
	}
	return tr
}

// object is one object of a target's pool.
type object struct {
	key     string
	size    int64
	readers int
}

// pool is the objects that can be read. A DELETE takes only an object no
// one is reading, and removes it from the pool before it sends the
// request, so no read of a deleted object is counted as an error. The
// pool never shrinks below floor (half the prepared objects).
type pool struct {
	mu    sync.Mutex
	objs  []*object
	floor int
}

func (p *pool) acquire(r *mrand.Rand) *object {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.objs[r.IntN(len(p.objs))]
	o.readers++
	return o
}

func (p *pool) release(o *object) {
	p.mu.Lock()
	o.readers--
	p.mu.Unlock()
}

func (p *pool) add(o *object) {
	p.mu.Lock()
	p.objs = append(p.objs, o)
	p.mu.Unlock()
}

// take removes an object no one reads from the pool, or returns nil when
// the pool is at its floor or it found none in a few tries.
func (p *pool) take(r *mrand.Rand) *object {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.objs) <= p.floor {
		return nil
	}
	for range 8 {
		i := r.IntN(len(p.objs))
		if o := p.objs[i]; o.readers == 0 {
			last := len(p.objs) - 1
			p.objs[i] = p.objs[last]
			p.objs = p.objs[:last]
			return o
		}
	}
	return nil
}
