package federation

import (
	"context"
	"io"
	"iter"

	"github.com/fedgate/fedgate/federation/placement"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Composite placements read and write several stores in several clouds for
// one object: a replicated PUT sends a copy to each, an erasure-coded GET
// reads K shards wherever they are cheapest. Each member store of a
// composite is wrapped in a meteredStore, which counts the bytes it moves
// at its own location, for the bucket and object the context's egressTag
// names; the composite itself counts only logical bytes (for the cache's
// avoided egress).

// isComposite reports whether st is a composite placement, whose members
// count their own bytes.
func isComposite(st store.Store) bool {
	switch st.(type) {
	case *placement.Replicated, *placement.Erasure:
		return true
	}
	return false
}

// meter wraps a member store of a composite placement (as is without
// egress accounting), keeping its multipart ability.
func (n *Namespace) meter(st store.Store) store.Store {
	if n.egress == nil {
		return st
	}
	m := &meteredStore{inner: st, rec: n.egress, ns: n}
	if mp, ok := st.(store.Multiparter); ok {
		return &meteredMultiparter{meteredStore: m, mp: mp}
	}
	return m
}

type meteredStore struct {
	inner store.Store
	rec   *egressRecorder
	ns    *Namespace
}

func (m *meteredStore) Name() string                { return m.inner.Name() }
func (m *meteredStore) Location() policies.Location { return m.inner.Location() }

func (m *meteredStore) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	return m.inner.Stat(ctx, key)
}

// ReadRange refuses a read of a bucket's object whose path from this
// member is under a spent block-cold-reads budget (the placement then
// reads other members, or fails), and counts the bytes read.
func (m *meteredStore) ReadRange(ctx context.Context, key string, offset, length int64, ifMatch store.Validator) (io.ReadCloser, error) {
	t := egressTagOf(ctx)
	if t.bucket != "" {
		if err := m.ns.checkColdRead(ctx, t.bucket, m.inner); err != nil {
			t.blocked.set(err)
			return nil, err
		}
	}
	rc, err := m.inner.ReadRange(ctx, key, offset, length, ifMatch)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, rec: m.rec, tag: t, st: m.inner, dir: "read", kind: countBytes}, nil
}

func (m *meteredStore) Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	cr := &countingBody{r: body}
	info, err := m.inner.Put(ctx, key, cr, size, opts)
	m.wrote(ctx, cr.n)
	return info, err
}

// wrote counts n bytes sent to the store (sent even when the write then
// failed: the cloud bills them).
func (m *meteredStore) wrote(ctx context.Context, n int64) {
	t := egressTagOf(ctx)
	m.rec.add(egressTag{bucket: t.bucket}, m.inner, "write", countBytes, n)
}

func (m *meteredStore) Delete(ctx context.Context, key string) error { return m.inner.Delete(ctx, key) }

func (m *meteredStore) List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error] {
	return m.inner.List(ctx, opts)
}

type meteredMultiparter struct {
	*meteredStore
	mp store.Multiparter
}

func (m *meteredMultiparter) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	return m.mp.CreateMultipart(ctx, key, opts)
}

func (m *meteredMultiparter) UploadPart(ctx context.Context, key, uploadID string, number int, body io.Reader, size int64) (store.PartInfo, error) {
	cr := &countingBody{r: body}
	pi, err := m.mp.UploadPart(ctx, key, uploadID, number, cr, size)
	m.wrote(ctx, cr.n)
	return pi, err
}

func (m *meteredMultiparter) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.PartInfo, opts store.PutOptions) (store.ObjectInfo, error) {
	return m.mp.CompleteMultipart(ctx, key, uploadID, parts, opts)
}

func (m *meteredMultiparter) AbortMultipart(ctx context.Context, key, uploadID string) error {
	return m.mp.AbortMultipart(ctx, key, uploadID)
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
