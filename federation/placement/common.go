package placement

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Errors of this package, besides the store sentinels.
var (
	// ErrUnrecoverable: fewer than K intact shards of an erasure-coded
	// segment could be read, so its bytes cannot be rebuilt.
	ErrUnrecoverable = errors.New("placement: too few intact shards to rebuild the data")
	// ErrCorrupt: a manifest could not be parsed or failed its checks.
	ErrCorrupt = errors.New("placement: corrupt manifest")
)

// Option adjusts a Replicated or Erasure placement.
type Option func(*options)

type options struct {
	rank        func() []int
	costs       func() []float64
	cooldown    time.Duration
	segmentSize int64
	blockSize   int64
	inlineLimit int64
	now         func() time.Time
	degraded    func(ctx context.Context, key string, stores []string)
}

func defaultOptions() options {
	return options{
		cooldown:    10 * time.Second,
		segmentSize: DefaultSegmentSize,
		blockSize:   DefaultBlockSize,
		inlineLimit: DefaultInlineLimit,
		now:         time.Now,
	}
}

// Defaults of the erasure-coding sizes.
const (
	DefaultSegmentSize = 32 << 20
	DefaultBlockSize   = 1 << 20
	DefaultInlineLimit = 4 << 10
)

// WithRank sets the read order: rank returns indexes into the stores given
// to the constructor, cheapest or nearest first. It is called once per
// operation, so it may change as prices or measurements do. Indexes it
// leaves out are tried after the ones it names, in listed order; invalid
// or repeated ones are ignored. Default: the listed order. Stores that
// failed within the cooldown (WithCooldown) go last whatever their rank.
func WithRank(rank func() []int) Option { return func(o *options) { o.rank = rank } }

// WithCosts sets what reading from each store costs, for an Erasure
// placement's choice of shards: costs()[i] is the relative price per byte
// of reading from stores[i] (the index as given to the constructor), say
// its egress price to this region. It is called once per read, so it may
// change as prices do. For each stripe a read needs, the placement reads
// the data shards that hold the bytes directly, unless reading that
// stripe from the K cheapest shards and decoding costs strictly less (see
// the package documentation). An entry that is missing, negative or NaN
// counts as the dearest valid one. Default: every store costs the same,
// so healthy reads take the data shards. A Replicated placement ignores
// it (its read order is WithRank's).
func WithCosts(costs func() []float64) Option { return func(o *options) { o.costs = costs } }

// WithCooldown sets how long a store that failed a call (an error other
// than not-found, a precondition or an invalid key) is tried only after
// every healthy one. Default 10s; 0 turns the demotion off.
func WithCooldown(d time.Duration) Option { return func(o *options) { o.cooldown = d } }

// WithSegmentSize sets the erasure segment: the most object bytes encoded
// at once, and so the memory bound of one write (segment × (K+M)/K).
// Default DefaultSegmentSize (32 MiB).
func WithSegmentSize(n int64) Option { return func(o *options) { o.segmentSize = n } }

// WithBlockSize sets the erasure block: segments are striped over the
// data shards in blocks of this size (a stripe is one block of each
// shard), and each shard carries one CRC32C per block, so a ranged read
// reads, verifies and, when it must, decodes whole blocks of the stripes
// that hold it only; a reader holds at most K+M blocks. Default
// DefaultBlockSize (1 MiB).
func WithBlockSize(n int64) Option { return func(o *options) { o.blockSize = n } }

// WithInlineLimit sets the size up to which an erasure-coded object's bytes
// live inside its manifest (one copy per store) instead of in shards: a
// small object then costs N small writes instead of K+M shards plus N
// manifests. Default DefaultInlineLimit (4 KiB); 0 turns inlining off.
func WithInlineLimit(n int64) Option { return func(o *options) { o.inlineLimit = n } }

// WithClock sets the clock (version ids, modification times, health).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithDegraded sets a function told of every read that was served
// without some member stores: a replicated read that failed over past
// stores lacking or failing to give their copy, an erasure-coded read that
// rebuilt or worked around shards (or a manifest) that were missing,
// unreadable or corrupt. stores names those members (their Name); key is
// the placement's key. It is called once per read, after its data came,
// on the reading goroutine; it must be quick.
func WithDegraded(f func(ctx context.Context, key string, stores []string)) Option {
	return func(o *options) { o.degraded = f }
}

// reportDegraded tells WithDegraded's function that a read of key did
// without the stores at indexes idx (nothing when idx is empty).
func (b *base) reportDegraded(ctx context.Context, key string, idx []int) {
	if b.opts.degraded == nil || len(idx) == 0 {
		return
	}
	b.opts.degraded(ctx, key, b.names(idx))
}

// base is what both placements share: their stores, read order and health.
type base struct {
	kind   string // "replicated" or "erasure", for messages
	name   string
	loc    policies.Location
	stores []store.Store
	opts   options
	health []atomic.Int64 // per store: unix nanos until which it is demoted
}

func newBase(kind, name string, loc policies.Location, stores []store.Store, opts []Option) (base, error) {
	b := base{kind: kind, name: name, loc: loc, stores: slices.Clone(stores), opts: defaultOptions()}
	for _, o := range opts {
		o(&b.opts)
	}
	switch {
	case name == "":
		return b, fmt.Errorf("placement: %s placement without a name", kind)
	case len(stores) == 0:
		return b, fmt.Errorf("placement %s: no stores", name)
	case b.opts.now == nil:
		return b, fmt.Errorf("placement %s: nil clock", name)
	}
	seen := map[string]bool{}
	for i, s := range stores {
		if s == nil {
			return b, fmt.Errorf("placement %s: store %d is nil", name, i)
		}
		if seen[s.Name()] {
			return b, fmt.Errorf("placement %s: store name %q appears twice", name, s.Name())
		}
		seen[s.Name()] = true
	}
	b.health = make([]atomic.Int64, len(stores))
	return b, nil
}

// Name is the placement's name.
func (b *base) Name() string { return b.name }

// Location is where the placement is reached from for routing and egress
// accounting; its bytes live in the stores' locations.
func (b *base) Location() policies.Location { return b.loc }

// Stores returns the placement's stores in listed order.
func (b *base) Stores() []store.Store { return slices.Clone(b.stores) }

// observe records the outcome of a call to store i: a failure demotes it
// for the cooldown, a success restores it.
func (b *base) observe(i int, err error) {
	switch {
	case err == nil:
		if b.health[i].Load() != 0 {
			b.health[i].Store(0)
		}
	case isFailure(err) && b.opts.cooldown > 0:
		b.health[i].Store(b.opts.now().Add(b.opts.cooldown).UnixNano())
	}
}

// healthy reports whether store i has not failed within the cooldown.
func (b *base) healthy(i int) bool {
	u := b.health[i].Load()
	return u == 0 || b.opts.now().UnixNano() >= u
}

// isFailure reports whether err says something about the store's health
// (rather than about the key or the caller).
func isFailure(err error) bool {
	return err != nil &&
		!errors.Is(err, store.ErrNotFound) &&
		!errors.Is(err, store.ErrPreconditionFailed) &&
		!errors.Is(err, store.ErrInvalidKey) &&
		!errors.Is(err, store.ErrNoSuchUpload) &&
		!errors.Is(err, store.ErrInvalidPart) &&
		!errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded)
}

// order is the read order: the rank's order (listed order by default),
// with stores demoted by a recent failure moved to the end.
func (b *base) order() []int {
	n := len(b.stores)
	seen := make([]bool, n)
	out := make([]int, 0, n)
	if b.opts.rank != nil {
		for _, i := range b.opts.rank() {
			if i >= 0 && i < n && !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	for i := range n {
		if !seen[i] {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, c int) int {
		ha, hc := b.healthy(a), b.healthy(c)
		switch {
		case ha == hc:
			return 0
		case ha:
			return -1
		}
		return 1
	})
	return out
}

// storeErr names the store an error came from.
func (b *base) storeErr(i int, err error) error {
	return fmt.Errorf("store %s: %w", b.stores[i].Name(), err)
}

func quote(key string) string {
	if len(key) > 80 {
		return strconv.Quote(key[:60]) + "..."
	}
	return strconv.Quote(key)
}

// checkKey refuses keys no store holds. Stores refuse what else they
// cannot hold (longer keys, dot segments) with ErrInvalidKey themselves.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key holds a NUL byte", store.ErrInvalidKey)
	}
	return nil
}

// Version ids: 16 hex digits of Unix nanoseconds, then 16 random ones. They
// sort by time as strings, and two writers never make the same one.
const versionLen = 32

// newVersion returns a version id later than after (when after is one).
func newVersion(now time.Time, after string) string {
	t := now.UnixNano()
	if p, ok := versionNanos(after); ok && p >= t {
		t = p + 1
	}
	var r [8]byte
	rand.Read(r[:])
	return fmt.Sprintf("%016x%016x", uint64(t), binary.BigEndian.Uint64(r[:]))
}

func versionNanos(v string) (int64, bool) {
	if !validID(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:16], 16, 64)
	return int64(n), err == nil
}

// validID reports whether s has the form of a version id (also used for
// shard sets and upload ids).
func validID(s string) bool {
	if len(s) != versionLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parallel runs f(0..n-1) with at most limit at once and returns their
// errors by index.
func parallel(n, limit int, f func(i int) error) []error {
	errs := make([]error, n)
	if n == 0 {
		return errs
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	return errs
}

// cleanupContext is for work that must finish after the caller's ctx is
// canceled (removing what a failed write left), bounded in time.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
}

// lateOnce calls a PutOptions.LateChecksums at most once, however many
// stores ask for it, and remembers the answer.
type lateOnce struct {
	once sync.Once
	f    func() map[string]string
	sums map[string]string
}

func (l *lateOnce) get() map[string]string {
	l.once.Do(func() {
		if l.f != nil {
			l.sums = l.f()
		}
	})
	return l.sums
}

// fn is the function to hand to the stores: nil when there is none.
func (l *lateOnce) fn() func() map[string]string {
	if l.f == nil {
		return nil
	}
	return l.get
}

// listFailover lists the stores' entries through list, trying the stores
// in read order: when one fails, the listing resumes on the next store
// after the last entry yielded. Errors that name one object (Entry.Key
// set) are passed on and the listing goes on.
func (b *base) listFailover(ctx context.Context, opts store.ListOptions,
	list func(ctx context.Context, i int, opts store.ListOptions) iter.Seq2[store.Entry, error],
) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		var errs []error
		o := opts
		for _, i := range b.order() {
			failed := false
			for e, err := range list(ctx, i, o) {
				if err != nil {
					if e.Key != "" && !errors.Is(err, ctx.Err()) {
						if !yield(e, err) {
							return
						}
						continue
					}
					b.observe(i, err)
					errs = append(errs, b.storeErr(i, err))
					failed = true
					break
				}
				if !yield(e, nil) {
					return
				}
				if e.Key > o.StartAfter {
					o.StartAfter = e.Key
				}
			}
			if !failed {
				return
			}
			if ctx.Err() != nil {
				break
			}
		}
		yield(store.Entry{}, fmt.Errorf("placement %s: list: %w", b.name, errors.Join(errs...)))
	}
}

// mergeKeys yields, in byte order and once each, the object keys of
// several listings; a listing that fails is reported once and dropped.
func mergeKeys(lists []iter.Seq2[store.Entry, error]) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		type head struct {
			next func() (store.Entry, error, bool)
			stop func()
			key  string
			ok   bool
		}
		heads := make([]*head, len(lists))
		defer func() {
			for _, h := range heads {
				if h != nil {
					h.stop()
				}
			}
		}()
		advance := func(h *head) error {
			for {
				e, err, ok := h.next()
				switch {
				case !ok:
					h.ok = false
					return nil
				case err != nil:
					h.ok = false
					return err
				case e.IsPrefix:
					continue
				}
				h.key, h.ok = e.Key, true
				return nil
			}
		}
		for i, l := range lists {
			next, stop := iter.Pull2(l)
			heads[i] = &head{next: next, stop: stop}
			if err := advance(heads[i]); err != nil && !yield("", err) {
				return
			}
		}
		for {
			least := ""
			found := false
			for _, h := range heads {
				if h.ok && (!found || h.key < least) {
					least, found = h.key, true
				}
			}
			if !found {
				return
			}
			if !yield(least, nil) {
				return
			}
			for _, h := range heads {
				if h.ok && h.key == least {
					if err := advance(h); err != nil && !yield("", err) {
						return
					}
				}
			}
		}
	}
}

// RepairStats counts what a Repair did.
type RepairStats struct {
	Objects int64 // objects examined
	Healthy int64 // objects that needed nothing
	// Repaired: objects that needed something and got all of it.
	Repaired int64
	// Failed: objects that could not be fully repaired (a store still down,
	// too few intact shards); the error returned names them.
	Failed    int64
	Shards    int64 // shards re-created (erasure)
	Manifests int64 // manifests re-created or brought up to date (erasure)
	Copies    int64 // copies re-created or brought up to date (replicated)
	// OldVersions: superseded versions whose shards were removed (erasure).
	OldVersions int64
	BytesRead   int64 // bytes read from stores to check and rebuild
}

type dryRunKey struct{}

// DryRun returns a context under which Repair only checks: it writes and
// removes nothing, its RepairStats count what it would rebuild (an object
// that needs something counts as Repaired), and found, when set, is
// called with each such object and the member stores that lack its copy,
// shards or manifest, or hold them damaged or outdated.
func DryRun(ctx context.Context, found func(key string, stores []string)) context.Context {
	if found == nil {
		found = func(string, []string) {}
	}
	return context.WithValue(ctx, dryRunKey{}, found)
}

// DryRunFunc returns the function DryRun put in ctx, or nil for a real
// repair.
func DryRunFunc(ctx context.Context) func(key string, stores []string) { return dryRun(ctx) }

// dryRun returns DryRun's function, or nil for a real repair.
func dryRun(ctx context.Context) func(key string, stores []string) {
	f, _ := ctx.Value(dryRunKey{}).(func(string, []string))
	return f
}

// names returns the names of the stores at indexes idx, sorted and once.
func (b *base) names(idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, b.stores[i].Name())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// RepairProgress is how far a Repair is: objects done of Total (counted by
// a first listing pass) and the bytes read so far to check and rebuild.
type RepairProgress struct {
	Objects, Total, BytesRead int64
}

// repairErrors collects per-object repair errors, keeping the first few.
type repairErrors struct {
	mu    sync.Mutex
	errs  []error
	extra int
}

func (r *repairErrors) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 10 {
		r.errs = append(r.errs, err)
	} else {
		r.extra++
	}
}

func (r *repairErrors) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	if r.extra > 0 {
		r.errs = append(r.errs, fmt.Errorf("and %d more", r.extra))
	}
	return errors.Join(r.errs...)
}
