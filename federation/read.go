package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/internal/backoff"
	"github.com/fedgate/fedgate/store"
)

// CacheRules is how a bucket's reads use the region's cache.
type CacheRules struct {
	// Chunked: reads go through the chunk cache (stores that need no cache,
	// such as a local posix directory, are read directly).
	Chunked bool
	// TTL is how long object metadata is trusted before it is revalidated
	// against the store (0: on every open).
	TTL time.Duration
	// Quota bounds the bucket's share of the cache (0: no bucket limit).
	Quota int64
	// Pin: the policy pins the whole bucket (cache.pin); its chunks are never
	// evicted.
	Pin bool
	// Priority is the bucket's eviction class in the cache (cache.priority).
	Priority cachetier.Priority
	// ReadAhead is how many chunks a sequential reader prefetches (0: none);
	// with prefetch "sequential" it is the fill concurrency, so one reader
	// keeps that many ranged reads of the store in flight.
	ReadAhead int
}

// Retry budget of one read from a store: attempts, and the backoff
// between them (50 ms doubling up to 2 s, full jitter).
//
// Which layer retries what (docs/stores.md, "Retries"): exactly one layer
// retries a given failure, else the attempts multiply (6 here around an
// SDK's 5 to 8 were up to 48 requests per range read).
//
//	store kind  requests (Stat, ReadRange's open)     a body that breaks mid-read
//	s3          aws-sdk-go-v2 retryer, 5 attempts     here (the SDK does not resume bodies)
//	gcs         storage retryer, 8 attempts           the SDK (it reopens where it stopped)
//	azure       azcore retry policy, 5 retries        the SDK (RetryReader, 3 resumes)
//	posix       here                                  here
//
// The cloud stores mark each error they give up on store.Retried, and
// retryable refuses those; everything unmarked (posix, a broken S3 body)
// gets readAttempts here. A composite placement (replicated, erasure) has
// already tried each member once, failing over: its error joins the
// members' errors, and it is not retried here when any of them is marked
// (an SDK behind it has retried), else it gets readAttempts too.
const readAttempts = 6

var readBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full}

// retryable reports whether a store error may go away on its own and no
// layer below has retried it yet (store.WasRetried: the cloud stores' SDKs
// retry their requests themselves, see store/retry.go).
func retryable(err error) bool {
	switch {
	case err == nil, store.WasRetried(err), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrPreconditionFailed),
		errors.Is(err, store.ErrAccessDenied), errors.Is(err, store.ErrInvalidKey),
		errors.Is(err, store.ErrNotSupported), errors.Is(err, ErrEgressBudget):
		return false
	}
	return true
}

// unanswered reports an error that is not the store's answer about the
// object (not found, changed, refused, ...): the store could not be asked.
func unanswered(err error) bool {
	var dm *DeleteMarkerError
	switch {
	case err == nil, errors.As(err, &dm), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrPreconditionFailed),
		errors.Is(err, store.ErrAccessDenied), errors.Is(err, store.ErrInvalidKey), errors.Is(err, store.ErrNotSupported),
		errors.Is(err, ErrEgressBudget):
		return false
	}
	return true
}

// resumingReader reads [off, off+left) of one object version, reopening
// the range where it stopped when the store fails or a body breaks, within
// a retry budget. A changed object (ErrPreconditionFailed) is not retried.
type resumingReader struct {
	ctx      context.Context
	st       store.Store
	key      string
	v        store.Validator
	off      int64
	left     int64
	rc       io.ReadCloser
	failures int
}

func openResuming(ctx context.Context, st store.Store, key string, v store.Validator, off, n int64) (io.ReadCloser, error) {
	r := &resumingReader{ctx: ctx, st: st, key: key, v: v, off: off, left: n}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *resumingReader) open() error {
	for {
		rc, err := readRange(r.ctx, r.st, r.key, r.v, r.off, r.left)
		if err == nil {
			r.rc = rc
			return nil
		}
		if err := r.fail(err); err != nil {
			return err
		}
	}
}

// fail counts a failure and waits, or returns err when it is final.
func (r *resumingReader) fail(err error) error {
	r.failures++
	err = budgetError(r.ctx, err)
	if !retryable(err) || r.failures >= readAttempts {
		return err
	}
	return readBackoff.Sleep(r.ctx, r.failures)
}

func (r *resumingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	for {
		if r.rc == nil {
			if err := r.open(); err != nil {
				return 0, err
			}
		}
		n, err := r.rc.Read(p[:min(int64(len(p)), r.left)])
		r.off += int64(n)
		r.left -= int64(n)
		if err == nil || n > 0 && errors.Is(err, io.EOF) && r.left == 0 {
			return n, nil
		}
		if errors.Is(err, io.EOF) {
			if r.left == 0 {
				return n, io.EOF
			}
			err = io.ErrUnexpectedEOF // the store ended the range early
		}
		r.rc.Close()
		r.rc = nil
		if ferr := r.fail(err); ferr != nil {
			return n, ferr
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (r *resumingReader) Close() error {
	if r.rc != nil {
		return r.rc.Close()
	}
	return nil
}

// statCache keeps object metadata for buckets whose TTL is above zero.
type statCache struct {
	mu sync.Mutex
	m  map[statKey]statEntry
	// epoch counts invalidations; a lookup that raced one is not cached,
	// so a write's invalidation can never be undone by an older Stat.
	epoch uint64
}

type statKey struct{ store, key string }

type statEntry struct {
	info    store.ObjectInfo
	expires time.Time
}

const statCacheMax = 100_000

func (c *statCache) get(k statKey, now time.Time) (store.ObjectInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || (!e.expires.IsZero() && now.After(e.expires)) {
		return store.ObjectInfo{}, false
	}
	return e.info, true
}

// begin returns the epoch a lookup starts in.
func (c *statCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// put caches info unless an invalidation happened since epoch.
func (c *statCache) put(k statKey, info store.ObjectInfo, expires time.Time, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if c.m == nil || len(c.m) >= statCacheMax {
		c.m = map[statKey]statEntry{}
	}
	c.m[k] = statEntry{info: info, expires: expires}
}

func (c *statCache) dropAll() {
	c.mu.Lock()
	c.m = nil
	c.epoch++
	c.mu.Unlock()
}

func (c *statCache) drop(k statKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.epoch++
	c.mu.Unlock()
}

// Stat returns an object's info, from the metadata cache while the bucket's
// TTL allows, else from the store (with the read retry budget).
func (b *Bucket) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if b.versioned() {
		return b.statVersioned(ctx, key)
	}
	if info, known, err := b.path.lookup(ctx, key); err != nil || known {
		return info, err
	}
	k := statKey{b.store.Name(), b.prefix + key}
	if b.cache.TTL > 0 && len(b.ns.region.Members()) > 1 {
		// A write through another node was acknowledged after its Touch
		// committed; applying everything committed so far drops what this
		// node cached about the key.
		if err := b.ns.readBarrier(ctx); err != nil {
			return store.ObjectInfo{}, err
		}
	}
	if b.cache.TTL > 0 {
		if info, ok := b.ns.stats.get(k, b.ns.now()); ok {
			return info, nil
		}
	}
	epoch := b.ns.stats.begin()
	var info store.ObjectInfo
	var err error
	for attempt := 1; ; attempt++ {
		info, err = b.statStore(ctx, key, k.key)
		if !retryable(err) || attempt >= readAttempts {
			break
		}
		if werr := readBackoff.Sleep(ctx, attempt); werr != nil {
			return store.ObjectInfo{}, werr
		}
	}
	info.Key = key
	info.VersionID = b.storeVersionID(ctx, info.VersionID)
	if dm, ok := store.IsDeleteMarker(err); ok {
		// The origin's current version is a delete marker (S3 answers 404
		// with its headers).
		err = &DeleteMarkerError{Key: key, VersionID: dm.VersionID, Latest: true}
	}
	if err == nil && b.cache.TTL > 0 {
		b.ns.stats.put(k, info, b.ns.now().Add(b.cache.TTL), epoch)
	}
	if b.remote != "" {
		// A bucket of another region: what its home last said of the key
		// answers while the home region cannot be reached, so this
		// region's cached copy keeps serving (docs/regions.md).
		switch {
		case err == nil:
			b.ns.lastSeen.put(k, info, time.Time{}, b.ns.lastSeen.begin())
		case unanswered(err) && ctx.Err() == nil:
			if seen, ok := b.ns.lastSeen.get(k, time.Time{}); ok {
				b.ns.log.Warn("home region unreachable: serving the last version it reported", "bucket", b.Name, "key", key,
					"home", b.remote, "error", err)
				return seen, nil
			}
		}
		err = b.remoteError(ctx, err)
	}
	return info, err
}

// remoteError is err of a call through the gateway of the home region of
// b, a bucket of another region: a *backend.RegionUnreachableError naming
// the region when the home region did not answer (a 503 for clients, not
// a 500), else err.
func (b *Bucket) remoteError(ctx context.Context, err error) error {
	if b.remote == "" || err == nil || !unanswered(err) || ctx.Err() != nil || errors.Is(err, store.ErrThrottled) {
		return err
	}
	return &backend.RegionUnreachableError{Bucket: b.Name, Region: b.remote, Err: err}
}

// primeMax bounds the objects whose bytes a Stat with read intent
// (backend.WithReadIntent) fetches with their metadata, in one request
// (store.FirstReader), on a bucket whose reads go through the chunk
// cache: they fill the cache, and the read that follows joins that fill
// instead of asking the store again. At most a chunk.
const primeMax = 256 << 10

// statStore asks the store for skey's info: a Stat, or, for a caller with
// read intent (backend.WithReadIntent), the metadata with the first bytes,
// which start the chunk fill of a small object (see primeMax).
func (b *Bucket) statStore(ctx context.Context, key, skey string) (store.ObjectInfo, error) {
	t := egressTag{bucket: b.Name, key: key}
	fr, ok := b.store.(store.FirstReader)
	cache := b.ns.cache
	opts := b.ns.readOptions(b)
	if !ok || !backend.ReadIntent(ctx) || !b.cache.Chunked || cache == nil || b.ns.checkColdRead(ctx, b.Name, b.store) != nil ||
		(!cache.Alone() && !opts.Local) {
		// In a region of several nodes, the chunk mostly belongs to a
		// peer, which fills it from the origin itself: bytes brought
		// along here would be thrown away (and paid for).
		return b.store.Stat(withEgressTag(ctx, t), skey)
	}
	n := min(primeMax, cache.ChunkSize())
	info, rc, err := fr.ReadFirst(withEgressTag(ctx, t), skey, n)
	if err != nil {
		return info, err
	}
	if info.Size == 0 || info.Size > n || info.Validator == "" {
		rc.Close() // a larger object: read as usual, chunk by chunk
		return info, nil
	}
	id := cachetier.ObjectID{Store: b.store.Name(), Key: skey, Validator: info.Validator, Size: info.Size}
	v, size := info.Validator, info.Size
	fetch := func(fctx context.Context, off, length int64) (io.ReadCloser, error) {
		if off != 0 || length != size {
			rc.Close()
			return nil, fmt.Errorf("federation: primed fetch of %d bytes at %d of a %d-byte object", length, off, size)
		}
		ft := t
		ft.blocked = &blockedRead{}
		// The body is resumed, as any fill's, if it breaks.
		r := &resumingReader{ctx: withEgressTag(fctx, ft), st: b.store, key: skey, v: v, left: size, rc: rc}
		return b.ns.countRead(r, ft, b.store, noReuse), nil
	}
	if !cache.Prime(id, 0, fetch, opts) {
		rc.Close() // cached or being filled already
	}
	return info, nil
}

// Forget drops what this node knows of a key (cached metadata and chunks):
// after a write through fedgate, before it is acknowledged, or when the key
// turned out to have changed in its store.
func (b *Bucket) Forget(key string) { b.invalidate(key) }

func (b *Bucket) invalidate(key string) {
	b.ns.stats.drop(statKey{b.store.Name(), b.prefix + key})
	if b.ns.cache != nil {
		b.ns.cache.Invalidate(b.store.Name(), b.prefix+key)
	}
}

// Open streams [off, off+n) of the object version info describes: through
// the chunk cache for buckets that use it, else straight from the store;
// either way store failures are retried within a budget. Each Open is one
// read of the object for its reuse distance (readReuse).
func (b *Bucket) Open(ctx context.Context, info store.ObjectInfo, off, n int64) (io.ReadCloser, error) {
	if strings.HasPrefix(string(info.Validator), stagedPrefix) {
		return b.openStaged(ctx, info, off, n)
	}
	skey := b.prefix + info.Key
	if info.StoreKey != "" {
		skey = info.StoreKey // a version's own key
	}
	tag := egressTag{bucket: b.Name, key: info.Key}
	if !b.cache.Chunked || b.ns.cache == nil {
		if err := b.ns.checkColdRead(ctx, b.Name, b.store); err != nil {
			return nil, err
		}
		t := tag
		t.blocked = &blockedRead{}
		rc, err := openResuming(withEgressTag(ctx, t), b.store, skey, info.Validator, off, n)
		if err != nil {
			return nil, err
		}
		return b.ns.countRead(rc, tag, b.store, b.ns.readReuse(b.Name, info, b.store)), nil
	}
	id := cachetier.ObjectID{Store: b.store.Name(), Key: skey, Validator: info.Validator, Size: info.Size}
	rc, err := b.ns.cache.NewReader(ctx, id, b.ns.fetcher(tag, b.store, skey, info.Validator), off, n, cachetier.ReadOptions{
		Group: b.Name, GroupQuota: b.cache.Quota, GroupPriority: b.cache.Priority, ReadAhead: b.cache.ReadAhead, Concurrency: b.ns.fill})
	if err != nil {
		return nil, err
	}
	return b.ns.countServed(rc, tag, b.store, b.ns.readReuse(b.Name, info, b.store)), nil
}
