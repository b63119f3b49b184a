// Package faulty wraps a store.Store and injects the faults of real cloud
// connections: latency, failed calls (throttling), per-stream bandwidth caps
// and connection resets in the middle of a body. Tests and benchmarks use it;
// with a zero Config it is transparent and passes the conformance suite.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Config says which faults to inject.
type Config struct {
	// Seed makes the fault sequence repeatable.
	Seed uint64
	// Latency is added before every call.
	Latency time.Duration
	// ErrorRate is the fraction of calls (Stat, ReadRange, Put, Delete,
	// List, multipart and version calls) that fail with ErrInjected (a
	// throttling error, what a cloud's 503 SlowDown maps to).
	ErrorRate float64
	// ResetRate is the fraction of ReadRange and ReadVersionRange bodies
	// that fail part-way with ErrReset, as a connection reset would.
	ResetRate float64
	// BandwidthPerStream caps each body (read or written) at this many bytes
	// per second; 0 means no cap.
	BandwidthPerStream int64
	// Retried marks the injected call failures store.Retried, as a cloud
	// store returns a failure after its SDK has retried it: callers must
	// not retry them again.
	Retried bool
}

// Injected errors. ErrInjected wraps store.ErrThrottled.
var (
	ErrInjected = fmt.Errorf("faulty: injected failure: %w", store.ErrThrottled)
	ErrReset    = fmt.Errorf("faulty: injected connection reset: %w", syscall.ECONNRESET)
)

// Counters count what went through the wrapper.
type Counters struct {
	Calls, Failed, Resets, ReadCalls atomic.Int64
	BytesRead, BytesWritten          atomic.Int64
}

// Store is a store.Store with faults. It keeps the inner store's
// Multiparter and Versioner abilities (with faults too) and hides
// LocalFiler, so reads go through ReadRange. Over a store without them
// the multipart and version calls fail with store.ErrNotSupported, except
// NativeVersioning, which says "" (a store that keeps no versions of its
// own never had versioning enabled).
type Store struct {
	inner store.Store
	mu    sync.Mutex
	cfg   Config
	rng   *rand.Rand
	Count Counters
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Multiparter = (*Store)(nil)
	_ store.Versioner   = (*Store)(nil)
)

// Wrap returns s with the faults of cfg.
func Wrap(s store.Store, cfg Config) *Store {
	return &Store{inner: s, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
}

// SetConfig changes the faults from now on.
func (f *Store) SetConfig(cfg Config) {
	f.mu.Lock()
	f.cfg = cfg
	f.mu.Unlock()
}

func (f *Store) config() Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg
}

func (f *Store) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < p
}

// before runs at the start of every call: latency, then maybe a failure.
func (f *Store) before(ctx context.Context) error {
	f.Count.Calls.Add(1)
	cfg := f.config()
	if cfg.Latency > 0 {
		t := time.NewTimer(cfg.Latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if f.chance(cfg.ErrorRate) {
		f.Count.Failed.Add(1)
		if cfg.Retried {
			return store.Retried(ErrInjected)
		}
		return ErrInjected
	}
	return nil
}

func (f *Store) Name() string                { return f.inner.Name() }
func (f *Store) Location() policies.Location { return f.inner.Location() }

func (f *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if err := f.before(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	return f.inner.Stat(ctx, key)
}

func (f *Store) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	f.Count.ReadCalls.Add(1)
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	rc, err := f.inner.ReadRange(ctx, key, offset, length, ifMatch)
	if err != nil {
		return nil, err
	}
	return f.readBody(ctx, rc, length), nil
}

// readBody wraps a read body of length bytes (< 0: open) with the
// bandwidth cap and, by chance, a reset part-way.
func (f *Store) readBody(ctx context.Context, rc io.ReadCloser, length int64) io.ReadCloser {
	cfg := f.config()
	b := &body{ReadCloser: rc, ctx: ctx, rate: cfg.BandwidthPerStream, start: time.Now(), count: &f.Count.BytesRead}
	if f.chance(cfg.ResetRate) {
		// Cut somewhere in the first part of the range (or of 1 MiB when the
		// length is open).
		span := length
		if span <= 0 {
			span = 1 << 20
		}
		f.mu.Lock()
		b.resetAt = 1 + f.rng.Int64N(max(span-1, 1))
		f.mu.Unlock()
		b.resets = &f.Count.Resets
	}
	return b
}

func (f *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := f.before(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	b := &body{ReadCloser: io.NopCloser(r), ctx: ctx, rate: f.config().BandwidthPerStream, start: time.Now(), count: &f.Count.BytesWritten}
	return f.inner.Put(ctx, key, b, size, opts)
}

func (f *Store) Delete(ctx context.Context, key string) error {
	if err := f.before(ctx); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

func (f *Store) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if err := f.before(ctx); err != nil {
			yield(store.Entry{}, err)
			return
		}
		for e, err := range f.inner.List(ctx, opts) {
			if !yield(e, err) {
				return
			}
		}
	}
}

func (f *Store) multiparter() (store.Multiparter, error) {
	mp, ok := f.inner.(store.Multiparter)
	if !ok {
		return nil, fmt.Errorf("faulty: %s has no multipart upload: %w", f.inner.Name(), store.ErrNotSupported)
	}
	return mp, nil
}

func (f *Store) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	mp, err := f.multiparter()
	if err != nil {
		return "", err
	}
	if err := f.before(ctx); err != nil {
		return "", err
	}
	return mp.CreateMultipart(ctx, key, opts)
}

func (f *Store) UploadPart(ctx context.Context, key, uploadID string, number int, r io.Reader, size int64) (store.PartInfo, error) {
	mp, err := f.multiparter()
	if err != nil {
		return store.PartInfo{}, err
	}
	if err := f.before(ctx); err != nil {
		return store.PartInfo{}, err
	}
	b := &body{ReadCloser: io.NopCloser(r), ctx: ctx, rate: f.config().BandwidthPerStream, start: time.Now(), count: &f.Count.BytesWritten}
	return mp.UploadPart(ctx, key, uploadID, number, b, size)
}

func (f *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	mp, err := f.multiparter()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := f.before(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	return mp.CompleteMultipart(ctx, key, uploadID, parts, opts)
}

func (f *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	mp, err := f.multiparter()
	if err != nil {
		return err
	}
	if err := f.before(ctx); err != nil {
		return err
	}
	return mp.AbortMultipart(ctx, key, uploadID)
}

func (f *Store) versioner() (store.Versioner, error) {
	v, ok := f.inner.(store.Versioner)
	if !ok {
		return nil, fmt.Errorf("faulty: %s keeps no versions of its own: %w", f.inner.Name(), store.ErrNotSupported)
	}
	return v, nil
}

func (f *Store) NativeVersioning(ctx context.Context) (string, error) {
	v, ok := f.inner.(store.Versioner)
	if !ok {
		return "", nil
	}
	if err := f.before(ctx); err != nil {
		return "", err
	}
	return v.NativeVersioning(ctx)
}

func (f *Store) ListVersions(ctx context.Context, opts store.VersionListOptions) iter.Seq2[store.VersionEntry, error] {
	return func(yield func(store.VersionEntry, error) bool) {
		v, err := f.versioner()
		if err == nil {
			err = f.before(ctx)
		}
		if err != nil {
			yield(store.VersionEntry{}, err)
			return
		}
		for e, err := range v.ListVersions(ctx, opts) {
			if !yield(e, err) {
				return
			}
		}
	}
}

func (f *Store) StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error) {
	v, err := f.versioner()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := f.before(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	return v.StatVersion(ctx, key, id)
}

func (f *Store) ReadVersionRange(ctx context.Context, key, id string, offset, length int64) (io.ReadCloser, error) {
	v, err := f.versioner()
	if err != nil {
		return nil, err
	}
	f.Count.ReadCalls.Add(1)
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	rc, err := v.ReadVersionRange(ctx, key, id, offset, length)
	if err != nil {
		return nil, err
	}
	return f.readBody(ctx, rc, length), nil
}

func (f *Store) DeleteVersion(ctx context.Context, key, id string) error {
	v, err := f.versioner()
	if err != nil {
		return err
	}
	if err := f.before(ctx); err != nil {
		return err
	}
	return v.DeleteVersion(ctx, key, id)
}

func (f *Store) DeleteCurrent(ctx context.Context, key string) (string, error) {
	v, err := f.versioner()
	if err != nil {
		return "", err
	}
	if err := f.before(ctx); err != nil {
		return "", err
	}
	return v.DeleteCurrent(ctx, key)
}

// body throttles a stream to rate bytes/s and cuts it at resetAt bytes.
type body struct {
	io.ReadCloser
	ctx     context.Context
	rate    int64
	start   time.Time
	n       int64
	resetAt int64 // 0: never
	resets  *atomic.Int64
	count   *atomic.Int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.resetAt > 0 {
		if b.n >= b.resetAt {
			b.resets.Add(1)
			return 0, ErrReset
		}
		p = p[:min(int64(len(p)), b.resetAt-b.n)]
	}
	if b.rate > 0 {
		// At most a tenth of a second's worth per read keeps the rate smooth.
		p = p[:min(int64(len(p)), max(b.rate/10, 1))]
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	b.count.Add(int64(n))
	if b.rate > 0 && n > 0 {
		due := b.start.Add(time.Duration(float64(b.n) / float64(b.rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-b.ctx.Done():
				t.Stop()
				return n, b.ctx.Err()
			case <-t.C:
			}
		}
	}
	return n, err
}

// IsInjected reports whether err is a fault this package injected.
func IsInjected(err error) bool { return errors.Is(err, ErrInjected) || errors.Is(err, ErrReset) }
