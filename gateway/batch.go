package gateway

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/s3err"
	"github.com/fedgate/fedgate/gateway/sigv4"
	"github.com/fedgate/fedgate/shard"
	"github.com/fedgate/fedgate/store"
)

// BatchPath is the batch GET endpoint: POST a JSON list of objects (or
// members of tar/zip shards), get one tar stream of them in request order
// (docs/training.md).
const BatchPath = adminapi.ReservedPrefix + "v1/batch"

// BatchErrorsDir is the folder of the tar entries that stand for failed
// entries: __errors__/<bucket>/<key>[/<archpath>] holds the S3 error XML.
const BatchErrorsDir = "__errors__"

// BatchConfig tunes the batch endpoint. Zero values take the defaults.
type BatchConfig struct {
	// MaxEntries bounds the entries of one batch (default 10000).
	MaxEntries int
	// MaxBytes bounds the entry bytes one batch sends (default 16 GiB).
	MaxBytes int64
	// Prefetch is how many entries are fetched ahead of the one being
	// sent, in parallel (default 32).
	Prefetch int
	// PrefetchBytes is how many bytes of each entry fetched ahead are
	// read into memory before it is its turn (default 256 KiB); the rest
	// of a larger entry streams when it is sent. A batch holds at most
	// Prefetch x PrefetchBytes.
	PrefetchBytes int64
	// IndexCacheBytes bounds the shard member indexes kept in memory
	// (default 256 MiB).
	IndexCacheBytes int64
}

// Batch defaults (docs/server-config.md).
const (
	DefaultBatchMaxEntries      = 10000
	DefaultBatchMaxBytes        = 16 << 30
	DefaultBatchPrefetch        = 32
	DefaultBatchPrefetchBytes   = 256 << 10
	DefaultBatchIndexCacheBytes = 256 << 20
)

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxEntries <= 0 {
		c.MaxEntries = DefaultBatchMaxEntries
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultBatchMaxBytes
	}
	if c.Prefetch <= 0 {
		c.Prefetch = DefaultBatchPrefetch
	}
	if c.PrefetchBytes <= 0 {
		c.PrefetchBytes = DefaultBatchPrefetchBytes
	}
	if c.IndexCacheBytes <= 0 {
		c.IndexCacheBytes = DefaultBatchIndexCacheBytes
	}
	return c
}

// BatchRequest is the body of POST /_fedgate/v1/batch.
type BatchRequest struct {
	Entries []BatchEntry `json:"entries"`
	// ContinueOnError: a failed entry becomes an __errors__/ entry and
	// the stream goes on; otherwise the batch stops at it.
	ContinueOnError bool `json:"continue_on_error"`
}

// BatchEntry names one object (bucket, key), optionally a byte range of
// it and/or a member of it when it is a tar, tar.gz or zip shard.
type BatchEntry struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Range is an HTTP byte range ("bytes=0-99", "bytes=100-",
	// "bytes=-100") of the object, or of the member with ArchPath.
	Range string `json:"range,omitempty"`
	// ArchPath names a member of the object, a tar/tar.gz/zip shard.
	ArchPath string `json:"archpath,omitempty"`
}

// batchWriteBuf is the size of the writes a batch answer is sent in.
const batchWriteBuf = 256 << 10

// maxArchPath bounds an archpath (tar and zip names are shorter).
const maxArchPath = 4096

// batchRequestLimit bounds the JSON body for maxEntries entries: a full
// key and 1 KiB more (bucket, range, a short archpath, the JSON) each.
func batchRequestLimit(maxEntries int) int64 {
	return 64<<10 + int64(maxEntries)*(store.MaxKeyLen+1024)
}

// dotSegment reports a "." or ".." segment in a slash-separated path.
func dotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

var errBatchBody = func(format string, args ...any) error {
	return s3err.Newf(s3err.CodeInvalidRequest, "The batch request is not valid: "+format, args...)
}

// ParseBatchRequest decodes and checks a batch body: JSON with no unknown
// fields and nothing after it, at least one entry and at most maxEntries,
// each with a bucket and a key, a range of the bytes=... forms, and an
// archpath without NUL or "."/".." segments (after a leading "./") of at
// most 4096 bytes. Errors are S3 errors
// (InvalidRequest, BatchTooLarge); what a GET of an entry would refuse
// (a bad key, a missing bucket) is the entry's error, found later.
func ParseBatchRequest(body []byte, maxEntries int) (BatchRequest, error) {
	var req BatchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, errBatchBody("%v; want {\"entries\": [{\"bucket\": ..., \"key\": ..., \"range\"?: ..., \"archpath\"?: ...}, ...], \"continue_on_error\"?: true|false}", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errBatchBody("data after the JSON object")
	}
	if len(req.Entries) == 0 {
		return req, errBatchBody("no entries")
	}
	if len(req.Entries) > maxEntries {
		return req, s3err.Newf(s3err.CodeBatchTooLarge, "The batch has %d entries; this server takes at most %d per batch (--batch-max-entries). Split it.", len(req.Entries), maxEntries)
	}
	for i, e := range req.Entries {
		switch {
		case e.Bucket == "":
			return req, errBatchBody("entry %d has no bucket", i)
		case e.Key == "":
			return req, errBatchBody("entry %d has no key", i)
		case !utf8.ValidString(e.Bucket) || !utf8.ValidString(e.Key) || !utf8.ValidString(e.ArchPath):
			return req, errBatchBody("entry %d is not valid UTF-8", i)
		case len(e.ArchPath) > maxArchPath:
			return req, errBatchBody("entry %d: archpath is longer than %d bytes", i, maxArchPath)
		case strings.IndexByte(e.ArchPath, 0) >= 0:
			return req, errBatchBody("entry %d: archpath contains a NUL byte", i)
		case e.ArchPath != "" && shard.NormalizeName(e.ArchPath) == "":
			return req, errBatchBody("entry %d: archpath %q names no member", i, e.ArchPath)
		case dotSegment(shard.NormalizeName(e.ArchPath)):
			// The entry's name in the answer includes it: a ".." would
			// let an extracted answer write outside its folder.
			return req, errBatchBody("entry %d: archpath %q has a '.' or '..' segment", i, e.ArchPath)
		}
		if e.Range != "" {
			if _, err := parseRangeSpec(e.Range, 1<<62); errors.Is(err, errRangeSyntax) {
				return req, s3err.Newf(s3err.CodeInvalidArgument, "Batch entry %d: range %q is not one of bytes=FIRST-LAST, bytes=FIRST- or bytes=-SUFFIX.", i, e.Range)
			}
		}
	}
	return req, nil
}

// batchItem is one entry on its way: what preparing it found (its
// bucket, object, byte range, shard member), then the bytes fetched
// ahead.
type batchItem struct {
	idx      int
	e        BatchEntry
	prepared bool
	err      error
	b        backend.Bucket
	info     store.ObjectInfo
	ix       *shard.Index
	member   shard.Member
	start, n int64 // of the object, or of the member

	ready chan struct{}
	head  []byte        // the first bytes, fetched ahead
	buf   *[]byte       // head's pooled buffer
	rest  io.ReadCloser // the bytes after head (nil: head is all)
}

func (it *batchItem) name() string { return BatchEntryName(it.e) }

// BatchEntryName is the tar name of an entry's answer (after
// BatchErrorsDir+"/" for a failed entry): bucket/key, plus /archpath
// without a leading "./" or "/". Requested names are never written so that
// they climb out of the folder an answer is extracted into: a "." or ".."
// segment (between "/" or "\\" separators) is written with each dot as
// "%2E", a NUL as "%00", and a leading "/" as "%2F". fedgate stores no key
// with a "."/".." segment and refuses such archpaths, so only the names of
// failed entries (a key or bucket that was refused) and keys with
// backslash-separated dot segments change; any other name is as asked.
func BatchEntryName(e BatchEntry) string {
	n := e.Bucket + "/" + e.Key
	if e.ArchPath != "" {
		n += "/" + shard.NormalizeName(e.ArchPath)
	}
	return batchTarName(n)
}

// batchTarName escapes what would let the name n climb (BatchEntryName).
func batchTarName(n string) string {
	if !strings.HasPrefix(n, "/") && strings.IndexByte(n, 0) < 0 && !hasDotSegment(n) {
		return n
	}
	var b strings.Builder
	b.Grow(len(n) + 8)
	start := 0
	for i := 0; i <= len(n); i++ {
		if i < len(n) && n[i] != '/' && n[i] != '\\' {
			continue
		}
		switch seg := n[start:i]; seg {
		case ".":
			b.WriteString("%2E")
		case "..":
			b.WriteString("%2E%2E")
		default:
			b.WriteString(strings.ReplaceAll(seg, "\x00", "%00"))
		}
		if i < len(n) {
			if i == 0 && n[0] == '/' {
				b.WriteString("%2F")
			} else {
				b.WriteByte(n[i])
			}
		}
		start = i + 1
	}
	return b.String()
}

// hasDotSegment reports a "." or ".." segment of n, with "/" and "\\" both
// separators (as Windows extracts a tar).
func hasDotSegment(n string) bool {
	sep := func(i int) bool { return i < 0 || i >= len(n) || n[i] == '/' || n[i] == '\\' }
	for i := strings.IndexByte(n, '.'); i >= 0 && i < len(n); {
		if sep(i - 1) {
			if sep(i+1) || (n[i+1] == '.' && sep(i+2)) {
				return true
			}
		}
		j := strings.IndexByte(n[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func (it *batchItem) resource() string {
	r := "/" + it.e.Bucket + "/" + it.e.Key
	if it.e.ArchPath != "" {
		r += "/" + shard.NormalizeName(it.e.ArchPath)
	}
	return r
}

// release gives back what the item holds.
func (it *batchItem) release(pool *sync.Pool) {
	if it.rest != nil {
		it.rest.Close()
		it.rest = nil
	}
	if it.buf != nil {
		pool.Put(it.buf)
		it.buf, it.head = nil, nil
	}
}

// batcher serves batches for one Server.
type batcher struct {
	cfg     BatchConfig
	indexes *shard.Cache
	pool    sync.Pool // *[]byte of PrefetchBytes
	workers workers   // the fetches of every batch
	m       *batchMetrics
}

// workers runs functions on goroutines that stay for the next one:
// a fetch goes deep (authorization, the metadata cache, the chunk
// cache), and a goroutine started per entry spent more time growing its
// stack (runtime.copystack, ~11 % of a warm batch's CPU) than reading a
// 16 KiB sample. goRun never waits: with no idle worker it starts one,
// so a batch's fetches run as much in parallel as they would on
// goroutines of their own. Idle workers wait on their own channel (no
// select with a timer: that cost 5 % of a warm batch's CPU), the most
// recently used first; a sweep ends those idle for workerIdle.
type workers struct {
	idleFor  time.Duration // workerIdle; shorter in tests
	mu       sync.Mutex
	ready    []*worker // idle, the longest idle first
	sweeping bool
}

type worker struct {
	work chan func() // one at a time; nil ends the worker
	last time.Time   // when it last became idle
}

const workerIdle = 10 * time.Second

func (w *workers) goRun(f func()) {
	w.mu.Lock()
	if n := len(w.ready); n > 0 {
		wk := w.ready[n-1]
		w.ready[n-1] = nil
		w.ready = w.ready[:n-1]
		w.mu.Unlock()
		wk.work <- f // buffered: an idle worker's channel is empty
		return
	}
	w.mu.Unlock()
	go w.loop(&worker{work: make(chan func(), 1)}, f)
}

func (w *workers) loop(wk *worker, f func()) {
	for f != nil {
		f()
		f = nil // an idle worker keeps nothing of the batch it served
		now := time.Now()
		w.mu.Lock()
		wk.last = now
		w.ready = append(w.ready, wk)
		if !w.sweeping {
			w.sweeping = true
			go w.sweep()
		}
		w.mu.Unlock()
		f = <-wk.work
	}
}

// sweep ends the workers idle for idleFor, every idleFor, until none
// is left.
func (w *workers) sweep() {
	idle := cmp.Or(w.idleFor, workerIdle)
	for {
		time.Sleep(idle)
		cutoff := time.Now().Add(-idle)
		w.mu.Lock()
		i := 0
		for i < len(w.ready) && w.ready[i].last.Before(cutoff) {
			i++
		}
		stale := append([]*worker(nil), w.ready[:i]...)
		n := copy(w.ready, w.ready[i:])
		clear(w.ready[n:])
		w.ready = w.ready[:n]
		done := n == 0
		if done {
			w.sweeping = false
		}
		w.mu.Unlock()
		for _, wk := range stale {
			wk.work <- nil
		}
		if done {
			return
		}
	}
}

type batchMetrics struct {
	requests *prometheus.CounterVec
	entries  *prometheus.CounterVec
	errors   *prometheus.CounterVec
	bytes    prometheus.Counter
	buffered prometheus.Gauge
	first    prometheus.Histogram
}

func newBatcher(cfg BatchConfig, reg prometheus.Registerer) (*batcher, error) {
	cfg = cfg.withDefaults()
	bt := &batcher{cfg: cfg, indexes: shard.NewCache(cfg.IndexCacheBytes)}
	size := cfg.PrefetchBytes
	bt.pool.New = func() any { b := make([]byte, size); return &b }
	m := &batchMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_batch_requests_total",
			Help: "Batch GET requests by result: ok (every entry sent), errors (continue_on_error, some entries sent as __errors__/), refused (an S3 error before the stream), stopped (the stream ended early: an error trailer or a cut connection).",
		}, []string{"result"}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_batch_entries_total",
			Help: "Batch GET entries by result: ok (sent), error (sent as __errors__/ or ended the batch).",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fedgate_batch_entry_errors_total",
			Help: "Failed batch GET entries by S3 error code.",
		}, []string{"code"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fedgate_batch_bytes_total",
			Help: "Entry bytes batch GETs sent (object and member bytes, without the tar framing).",
		}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fedgate_batch_prefetch_bytes",
			Help: "Bytes of entries fetched ahead and held in memory by batch GETs now.",
		}),
		first: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fedgate_batch_first_byte_seconds",
			Help:    "Time from a batch GET's arrival to its first entry's header being sent.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	ix := bt.indexes
	stat := func(f func(shard.CacheStats) float64) func() float64 {
		return func() float64 { return f(ix.Stats()) }
	}
	cs := []prometheus.Collector{m.requests, m.entries, m.errors, m.bytes, m.buffered, m.first,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_batch_shard_index_hits_total",
			Help: "Shard member index look-ups answered from memory."}, stat(func(s shard.CacheStats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_batch_shard_index_builds_total",
			Help: "Shard member indexes built (a shard version read for the first time, or again after eviction)."}, stat(func(s shard.CacheStats) float64 { return float64(s.Builds) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fedgate_batch_shard_index_evictions_total",
			Help: "Shard member indexes dropped to stay within --batch-index-cache."}, stat(func(s shard.CacheStats) float64 { return float64(s.Evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedgate_batch_shard_index_bytes",
			Help: "Estimated memory of the shard member indexes kept."}, stat(func(s shard.CacheStats) float64 { return float64(s.Bytes) })),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	bt.m = m
	return bt, nil
}

// batchGet serves POST /_fedgate/v1/batch.
func (s *Server) batchGet(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	ri := infoFrom(r.Context())
	ri.op = "BatchGet"
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	bt := s.batch
	refuse := func(err error) {
		ri.cause = err
		bt.m.requests.WithLabelValues("refused").Inc()
		writeError(w, r, err)
	}
	user, body, err := s.signedPayloadRequest(w, r, "a batch GET")
	if err != nil {
		refuse(err)
		return
	}
	limit := batchRequestLimit(bt.cfg.MaxEntries)
	raw, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		refuse(err)
		return
	}
	if int64(len(raw)) > limit {
		refuse(s3err.Newf(s3err.CodeBatchTooLarge, "The batch request body is larger than %d bytes, the most %d entries (--batch-max-entries) need.", limit, bt.cfg.MaxEntries))
		return
	}
	req, err := ParseBatchRequest(raw, bt.cfg.MaxEntries)
	if err != nil {
		refuse(err)
		return
	}
	q := &request{w: w, r: r, query: url.Values{}, user: user, action: "s3:GetObject", body: http.NoBody}
	q.conditionKeys() // built once, before the entries are authorized in parallel
	run := &batchRun{s: s, bt: bt, q: q, req: req, arrived: arrived, log: s.log.With("request_id", ri.id, "user", user.Name)}
	run.serve()
}

// batchRun is one batch being served.
type batchRun struct {
	s       *Server
	bt      *batcher
	q       *request
	req     BatchRequest
	items   []*batchItem
	arrived time.Time

	sentOK, failed int
	bytes          int64
	firstByte      time.Duration
	log            *slog.Logger
	flushTimer     *time.Timer // await's, made at its first use
}

func (run *batchRun) serve() {
	ctx, cancel := context.WithCancel(run.q.r.Context())
	defer cancel()
	w, r, bt := run.q.w, run.q.r, run.bt
	ri := infoFrom(r.Context())
	run.items = make([]*batchItem, len(run.req.Entries))
	for i, e := range run.req.Entries {
		run.items[i] = &batchItem{idx: i, e: e, ready: make(chan struct{})}
	}
	if !run.req.ContinueOnError {
		// Everything that can fail before the first byte does: each
		// entry is authorized, looked up, its range resolved and its
		// member found, so a refusal is a plain S3 error answer.
		if err := run.prepareAll(ctx); err != nil {
			ri.cause = err
			bt.m.requests.WithLabelValues("refused").Inc()
			bt.m.entries.WithLabelValues("error").Inc()
			bt.m.errors.WithLabelValues(toS3(err).Code).Inc()
			writeError(w, r, err)
			run.logDone("refused", err)
			return
		}
		var total int64
		for _, it := range run.items {
			total += it.n
		}
		if total > bt.cfg.MaxBytes {
			err := s3err.Newf(s3err.CodeBatchTooLarge, "The batch would send %d bytes; this server sends at most %d per batch (--batch-max-bytes). Split it.", total, bt.cfg.MaxBytes)
			ri.cause = err
			bt.m.requests.WithLabelValues("refused").Inc()
			writeError(w, r, err)
			run.logDone("refused", err)
			return
		}
	}

	// The fetchers: Prefetch slots; an entry's fetch starts when a slot
	// frees (the writer finished an entry Prefetch places before it).
	slots := make(chan struct{}, bt.cfg.Prefetch)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, it := range run.items {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			bt.workers.goRun(func() {
				defer wg.Done()
				run.fetch(ctx, it)
			})
		}
	})
	pos := 0
	defer func() {
		cancel()
		wg.Wait()
		for _, it := range run.items[min(pos, len(run.items)):] {
			if it.buf != nil {
				bt.m.buffered.Sub(float64(len(it.head)))
			}
			it.release(&bt.pool)
		}
	}()

	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("x-fedgate-batch-entries", strconv.Itoa(len(run.items)))
	w.WriteHeader(http.StatusOK)
	// Small entries are gathered into large writes (one syscall per
	// batchWriteBuf, not per entry); whatever is gathered goes out
	// whenever the next entry is not ready yet, and at the end.
	out := bufio.NewWriterSize(w, batchWriteBuf)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		_ = out.Flush()
		if flusher != nil {
			flusher.Flush()
		}
	}
	defer flush()
	tw := tar.NewWriter(out)
	result := "ok"
	for ; pos < len(run.items); pos++ {
		it := run.items[pos]
		if !run.await(ctx, it, flush) {
			run.logDone("stopped", ctx.Err())
			bt.m.requests.WithLabelValues("stopped").Inc()
			return
		}
		err := it.err
		if err == nil && run.req.ContinueOnError && run.bytes+it.n > bt.cfg.MaxBytes {
			err = s3err.Newf(s3err.CodeBatchTooLarge, "This entry would take the batch past %d bytes (--batch-max-bytes); it is not sent. Split the batch.", bt.cfg.MaxBytes)
		}
		if err != nil {
			run.failed++
			bt.m.entries.WithLabelValues("error").Inc()
			bt.m.errors.WithLabelValues(toS3(err).Code).Inc()
			if it.buf != nil {
				bt.m.buffered.Sub(float64(len(it.head)))
			}
			it.release(&bt.pool)
			<-slots
			if werr := run.writeErrorEntry(tw, it, err); werr != nil {
				run.logDone("stopped", werr)
				bt.m.requests.WithLabelValues("stopped").Inc()
				return
			}
			if run.req.ContinueOnError {
				result = "errors"
				continue
			}
			// Without continue_on_error the batch ends here: the error
			// entry is its last, then the end of the archive.
			ri.cause = err
			ri.errCode = toS3(err).Code
			_ = tw.Close()
			pos++
			run.logDone("stopped", err)
			bt.m.requests.WithLabelValues("stopped").Inc()
			return
		}
		werr := run.writeEntry(tw, it)
		if it.buf != nil {
			bt.m.buffered.Sub(float64(len(it.head)))
		}
		it.release(&bt.pool)
		<-slots
		if werr != nil {
			// Part of the entry is sent and its header promised more:
			// cut the connection, so the client sees a truncated
			// transfer, never a short entry.
			_ = out.Flush()
			ri.cause = werr
			pos++
			cancel()
			wg.Wait()
			run.logDone("stopped", werr)
			bt.m.requests.WithLabelValues("stopped").Inc()
			panic(http.ErrAbortHandler)
		}
	}
	if err := tw.Close(); err != nil {
		run.logDone("stopped", err)
		bt.m.requests.WithLabelValues("stopped").Inc()
		return
	}
	bt.m.requests.WithLabelValues(result).Inc()
	run.logDone(result, nil)
}

func (run *batchRun) logDone(result string, err error) {
	attrs := []any{"result", result, "entries", len(run.items), "sent", run.sentOK, "failed", run.failed,
		"bytes", run.bytes, "continue_on_error", run.req.ContinueOnError,
		"duration_ms", float64(time.Since(run.arrived).Microseconds()) / 1000}
	if run.firstByte > 0 {
		attrs = append(attrs, "first_byte_ms", float64(run.firstByte.Microseconds())/1000)
	}
	level := slog.LevelInfo
	if err != nil {
		attrs = append(attrs, "error", err.Error())
		if result == "stopped" {
			level = slog.LevelWarn
		}
	}
	run.log.Log(context.Background(), level, "batch", attrs...)
}

// prepareAll prepares every entry, 4 x Prefetch at a time (at least 64),
// and returns the error of the first entry (in request order) that fails.
// A prepare is a metadata round trip to a store or peer at worst (with read
// intent a small entry's bytes come with it, into the cache, not memory),
// so many in flight hide a far origin's latency at little cost.
func (run *batchRun) prepareAll(ctx context.Context) error {
	conc := max(4*run.bt.cfg.Prefetch, 64)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for _, it := range run.items {
		sem <- struct{}{}
		wg.Add(1)
		run.bt.workers.goRun(func() {
			defer func() { <-sem; wg.Done() }()
			run.prepare(ctx, it)
		})
	}
	wg.Wait()
	for _, it := range run.items {
		if it.err != nil {
			se := toS3(it.err)
			return &s3err.Error{Code: se.Code, Status: se.Status,
				Message: fmt.Sprintf("%s (batch entry %d: %s)", strings.TrimSuffix(se.Message, "."), it.idx, it.name())}
		}
	}
	return nil
}

// prepare does for one entry what a GET does before its first byte: the
// bucket, its authorization (bucket policy, grants, ACLs; the object's
// ACL once it is looked up), the Stat, a missing key hidden from a caller
// who may not list the bucket; then the range, and for an archpath the
// shard's member index and the member.
func (run *batchRun) prepare(ctx context.Context, it *batchItem) {
	if it.prepared {
		return
	}
	it.prepared = true
	s, q := run.s, run.q
	if err := checkKey(it.e.Key); err != nil {
		it.err = err
		return
	}
	b, check, err := s.objectNamed(q, it.e.Bucket, it.e.Key, "s3:GetObject")
	if err != nil {
		it.err = err
		return
	}
	sctx := ctx
	if it.e.ArchPath == "" && (it.e.Range == "" || strings.HasPrefix(it.e.Range, "bytes=0-")) {
		sctx = backend.WithReadIntent(ctx) // its bytes may come with its metadata
	}
	info, err := b.Stat(sctx, it.e.Key)
	if check != nil {
		if cerr := check(info, err); cerr != nil {
			it.err = cerr
			return
		}
	}
	if err != nil {
		it.err = s.hideMissing(q, b, err)
		return
	}
	it.b, it.info = b, info
	size := info.Size
	if it.e.ArchPath != "" {
		if it.ix, err = run.index(ctx, b, info); err != nil {
			it.err = err
			return
		}
		m, err := it.ix.Lookup(it.e.ArchPath)
		if err != nil {
			it.err = memberError(it, err)
			return
		}
		it.member, size = m, m.Size
	}
	rng, err := parseRange(it.e.Range, size)
	if err != nil {
		it.err = err
		return
	}
	it.start, it.n = 0, size
	if rng != nil {
		it.start, it.n = rng.Start, rng.Length
	}
}

// memberError is the S3 answer for a member that cannot be read.
func memberError(it *batchItem, err error) error {
	switch {
	case errors.Is(err, shard.ErrNoMember):
		return s3err.Newf(s3err.CodeNoSuchKey, "The shard %s/%s has no member %q.", it.e.Bucket, it.e.Key, it.e.ArchPath)
	case errors.Is(err, shard.ErrUnsupported):
		return s3err.Newf(s3err.CodeNotImplemented, "Member %q of the shard %s/%s cannot be read: %v.", it.e.ArchPath, it.e.Bucket, it.e.Key, err)
	}
	return err
}

// shardError maps what building an index or reading a member fails with.
func shardError(bucket, key string, err error) error {
	if errors.Is(err, shard.ErrFormat) {
		return s3err.Newf(s3err.CodeInvalidRequest, "The object %s/%s is not a readable tar, tar.gz or zip shard (%v); archpath reads members of such shards.", bucket, key, err)
	}
	if errors.Is(err, store.ErrPreconditionFailed) {
		return errObjectChanged
	}
	return err
}

// index returns the member index of the shard version info describes,
// from memory or built through the bucket's read path.
func (run *batchRun) index(ctx context.Context, b backend.Bucket, info store.ObjectInfo) (*shard.Index, error) {
	rr := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		if n < 0 || off+n > info.Size {
			n = info.Size - off
		}
		if n <= 0 {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return b.Open(ctx, info, off, n)
	}
	key := b.Name() + "\x00" + info.Key + "\x00" + info.ETag + "\x00" + string(info.Validator) + "\x00" + strconv.FormatInt(info.Size, 10)
	ix, err := run.bt.indexes.Get(ctx, key, func(ctx context.Context) (*shard.Index, error) {
		f := shard.FormatOf(info.Key)
		if f == shard.Unknown {
			head := make([]byte, min(info.Size, shard.SniffLen))
			rc, err := rr(ctx, 0, int64(len(head)))
			if err != nil {
				return nil, err
			}
			_, err = io.ReadFull(rc, head)
			rc.Close()
			if err != nil {
				return nil, err
			}
			if f = shard.Sniff(head); f == shard.Unknown {
				return nil, fmt.Errorf("%w: neither its name (.tar, .tar.gz, .tgz, .zip) nor its first bytes show an archive", shard.ErrFormat)
			}
		}
		start := time.Now()
		ix, err := shard.Build(ctx, f, info.Size, rr)
		if err == nil {
			run.log.Debug("shard indexed", "bucket", b.Name(), "key", info.Key, "format", f.String(), "members", ix.Len(),
				"size", info.Size, "duration_ms", float64(time.Since(start).Microseconds())/1000)
		}
		return ix, err
	})
	if err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			b.Forget(info.Key)
		}
		return nil, shardError(b.Name(), info.Key, err)
	}
	return ix, nil
}

// open opens the entry's bytes through the bucket's read path.
func (run *batchRun) open(ctx context.Context, it *batchItem) (io.ReadCloser, error) {
	var rc io.ReadCloser
	var err error
	if it.ix != nil {
		rr := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			if n < 0 || off+n > it.info.Size {
				n = it.info.Size - off
			}
			return it.b.Open(ctx, it.info, off, n)
		}
		rc, err = it.ix.Open(ctx, it.member, rr, it.start, it.n)
		if err != nil {
			err = shardError(it.e.Bucket, it.e.Key, err)
		}
	} else {
		rc, err = it.b.Open(ctx, it.info, it.start, it.n)
	}
	if errors.Is(err, store.ErrPreconditionFailed) {
		it.b.Forget(it.e.Key) // the next request looks the object up afresh
		err = errObjectChanged
	}
	return rc, err
}

// batchFlushDelay is how long the batch writer waits for the next entry
// before it sends what it gathered: a warm entry is ready within
// microseconds, and sending at every wait made a warm 16 KiB batch write
// ~28 KB per system call (one per 1.7 entries) instead of batchWriteBuf;
// a cold entry from an origin takes milliseconds or more, and what is
// gathered goes out after this delay.
const batchFlushDelay = 500 * time.Microsecond

// await waits until it is fetched (false when ctx ends first). Once it
// has waited batchFlushDelay, it sends what was written before: the
// answer's header before the first entry, then whatever the previous
// entries left in the write buffers (ours, and net/http's behind it,
// which holds up to a few KiB even right after ours was written out).
func (run *batchRun) await(ctx context.Context, it *batchItem, flush func()) bool {
	select {
	case <-it.ready:
		return true
	default:
	}
	if run.flushTimer == nil {
		run.flushTimer = time.NewTimer(batchFlushDelay)
	} else {
		run.flushTimer.Reset(batchFlushDelay)
	}
	select {
	case <-it.ready:
		run.flushTimer.Stop()
		return true
	case <-run.flushTimer.C:
	case <-ctx.Done():
		run.flushTimer.Stop()
		return false
	}
	flush()
	select {
	case <-it.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetch prepares an entry (unless done up front) and reads its first
// PrefetchBytes, keeping the rest open.
func (run *batchRun) fetch(ctx context.Context, it *batchItem) {
	defer close(it.ready)
	run.prepare(ctx, it)
	if it.err != nil || it.n == 0 {
		return
	}
	rc, err := run.open(ctx, it)
	if err != nil {
		it.err = err
		return
	}
	bt := run.bt
	buf := bt.pool.Get().(*[]byte)
	head := (*buf)[:min(it.n, int64(len(*buf)))]
	k, err := io.ReadFull(rc, head)
	if err != nil {
		rc.Close()
		bt.pool.Put(buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%s ended after %d of %d bytes: %w", it.name(), k, len(head), io.ErrUnexpectedEOF)
		}
		it.err = shardError(it.e.Bucket, it.e.Key, err)
		if errors.Is(err, store.ErrPreconditionFailed) {
			it.b.Forget(it.e.Key)
		}
		return
	}
	it.buf, it.head = buf, head
	bt.m.buffered.Add(float64(len(head)))
	if int64(len(head)) == it.n {
		rc.Close()
	} else {
		it.rest = rc
	}
}

// writeEntry sends one entry: its header, the bytes fetched ahead, then
// the rest as it streams.
func (run *batchRun) writeEntry(tw *tar.Writer, it *batchItem) error {
	mod := it.info.ModTime.Truncate(time.Second)
	if mod.IsZero() || mod.Before(time.Unix(0, 0)) {
		mod = time.Unix(0, 0)
	}
	hdr := &tar.Header{Name: it.name(), Typeflag: tar.TypeReg, Mode: 0o644, Size: it.n, ModTime: mod}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if run.firstByte == 0 {
		run.firstByte = time.Since(run.arrived)
		run.bt.m.first.Observe(run.firstByte.Seconds())
	}
	if len(it.head) > 0 {
		if _, err := tw.Write(it.head); err != nil {
			return err
		}
	}
	sent := int64(len(it.head))
	if it.rest != nil {
		n, err := io.Copy(tw, it.rest)
		sent += n
		if err == nil && sent < it.n {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			run.bt.m.bytes.Add(float64(sent))
			return fmt.Errorf("%s: after %d of %d bytes: %w", it.name(), sent, it.n, err)
		}
	}
	run.bytes += sent
	run.sentOK++
	run.bt.m.bytes.Add(float64(sent))
	run.bt.m.entries.WithLabelValues("ok").Inc()
	return nil
}

// writeErrorEntry sends __errors__/<name> holding err's S3 error XML.
func (run *batchRun) writeErrorEntry(tw *tar.Writer, it *batchItem, err error) error {
	se := toS3(err)
	reqID := run.q.w.Header().Get("x-amz-request-id")
	var doc bytes.Buffer
	doc.WriteString(xml.Header)
	_ = xml.NewEncoder(&doc).Encode(errorResponse{Code: se.Code, Message: se.Message, Resource: it.resource(), RequestID: reqID, HostID: reqID})
	hdr := &tar.Header{Name: BatchErrorsDir + "/" + it.name(), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(doc.Len()),
		ModTime: time.Unix(run.arrived.Unix(), 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if run.firstByte == 0 {
		run.firstByte = time.Since(run.arrived)
		run.bt.m.first.Observe(run.firstByte.Seconds())
	}
	_, err = tw.Write(doc.Bytes())
	return err
}

// signedPayloadRequest authenticates one of fedgate's own POST endpoints
// (batch GET, short-circuit read), whose body says what is done: it must be
// SigV4-signed with a known access key (what, e.g. "a batch GET", names it
// in a refusal), and the signature must also cover the body, a
// signed hex x-amz-content-sha256 or a signed aws-chunked body. A request
// signed over UNSIGNED-PAYLOAD, and a presigned URL whose signature does not
// name the body's hash, could be replayed with any body by whoever holds
// it; they are refused before the body is read.
func (s *Server) signedPayloadRequest(w http.ResponseWriter, r *http.Request, what string) (backend.User, io.Reader, error) {
	user, res, err := s.verifySigned(w, r, what)
	if err != nil {
		return backend.User{}, nil, err
	}
	if !res.PayloadSigned {
		return backend.User{}, nil, s3err.Newf(s3err.CodeAccessDenied, "Access Denied: %s must sign its body: x-amz-content-sha256 must be the body's hex SHA-256, signed with the request (a presigned URL must name it among X-Amz-SignedHeaders), or a signed aws-chunked body (%s); %s is refused", what, sigv4.StreamingPayload, payloadDescription(r))
	}
	return user, resBody(res), nil
}

// payloadDescription names what a request sent as its payload hash, for a
// refusal.
func payloadDescription(r *http.Request) string {
	if p := r.URL.Query().Get("X-Amz-Content-Sha256"); p != "" {
		return strconv.Quote(p)
	}
	if p := r.Header.Get("X-Amz-Content-Sha256"); p != "" {
		return strconv.Quote(p)
	}
	if r.URL.Query().Has("X-Amz-Signature") || r.URL.Query().Has("Signature") {
		return "a presigned URL without a signed payload hash"
	}
	return "an unsigned payload"
}

func resBody(res sigv4.Result) io.Reader {
	if res.Body != nil {
		return res.Body
	}
	return http.NoBody
}

// verifySigned verifies r's signature and looks its user up; an anonymous
// request is refused.
func (s *Server) verifySigned(w http.ResponseWriter, r *http.Request, what string) (backend.User, sigv4.Result, error) {
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
		return backend.User{}, sigv4.Result{}, errServiceUnavail
	}
	res, err := s.verifier.Verify(r)
	if err != nil {
		return backend.User{}, sigv4.Result{}, err
	}
	if res.Anonymous {
		return backend.User{}, sigv4.Result{}, s3err.Newf(s3err.CodeAccessDenied, "Access Denied: %s must be signed (SigV4, service s3) with an access key", what)
	}
	user, ok := s.be.Users().ByAccessKey(res.AccessKey)
	if !ok {
		return backend.User{}, sigv4.Result{}, s3err.New(s3err.CodeInvalidAccessKeyID, "")
	}
	if ri := infoFrom(r.Context()); ri != nil {
		ri.setUser(user.Name)
	}
	return user, res, nil
}
