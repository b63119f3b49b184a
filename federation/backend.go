package federation

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/federation/placement"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Backend returns the namespace as the gateway uses it: the returned value
// implements backend.Backend and backend.Admin. It converts between the
// region's records and the backend types and nothing more.
func (n *Namespace) Backend() *NamespaceBackend { return &NamespaceBackend{n: n} }

// NamespaceBackend is a Namespace seen through the backend contract.
type NamespaceBackend struct{ n *Namespace }

// AwaitAcked is Namespace.AwaitAcked (backend.Backend): the gateway calls
// it before serving a request.
func (nb *NamespaceBackend) AwaitAcked(ctx context.Context) error { return nb.n.AwaitAcked(ctx) }

var (
	_ backend.Backend = (*NamespaceBackend)(nil)
	_ backend.Admin   = (*NamespaceBackend)(nil)
	_ backend.Bucket  = bucketHandle{}
	_ backend.Users   = usersHandle{}
)

func (nb *NamespaceBackend) Ready(ctx context.Context) error { return nb.n.Ready(ctx) }

func (nb *NamespaceBackend) Users() backend.Users { return usersHandle{nb.n.users, nb.n} }

func (nb *NamespaceBackend) Bucket(name string) (backend.Bucket, error) {
	b, err := nb.n.Bucket(name)
	if err != nil {
		return nil, err
	}
	return bucketHandle{b}, nil
}

func (nb *NamespaceBackend) ListBuckets(u backend.User) []backend.Bucket {
	bs := nb.n.ListBuckets(u)
	out := make([]backend.Bucket, len(bs))
	for i, b := range bs {
		out[i] = bucketHandle{b}
	}
	return out
}

func (nb *NamespaceBackend) ListBucketsPage(u backend.User, prefix, after string, limit int) ([]backend.Bucket, bool) {
	bs, more := nb.n.ListBucketsPage(u, prefix, after, limit)
	out := make([]backend.Bucket, len(bs))
	for i, b := range bs {
		out[i] = bucketHandle{b}
	}
	return out, more
}

func (nb *NamespaceBackend) CreateBucket(ctx context.Context, u backend.User, name string) error {
	return nb.n.CreateBucket(ctx, u, name)
}

func (nb *NamespaceBackend) DeleteBucket(ctx context.Context, name string) error {
	b, err := nb.n.Bucket(name)
	if err != nil {
		return err
	}
	return nb.n.DeleteBucket(ctx, b)
}

func (nb *NamespaceBackend) PublicAccessDefault() policies.PublicAccessBlock {
	if p, _ := nb.n.Policy(); p != nil && p.Defaults.PublicAccessBlock != nil {
		return *p.Defaults.PublicAccessBlock
	}
	return policies.PublicAccessBlock{}
}

func (nb *NamespaceBackend) Pins() []backend.Pin {
	ps := nb.n.Pins()
	out := make([]backend.Pin, len(ps))
	for i, p := range ps {
		out[i] = backend.Pin(p)
	}
	return out
}

func (nb *NamespaceBackend) Pin(ctx context.Context, bucket, prefix string) (backend.Pin, error) {
	p, err := nb.n.Pin(ctx, bucket, prefix)
	return backend.Pin(p), err
}

func (nb *NamespaceBackend) Unpin(ctx context.Context, bucket, prefix string) error {
	return nb.n.Unpin(ctx, bucket, prefix)
}

func (nb *NamespaceBackend) StartPreload(ctx context.Context, bucket, prefix string, pin bool) (backend.PreloadStatus, error) {
	job, err := nb.n.StartPreload(ctx, bucket, prefix, pin)
	if err != nil {
		return backend.PreloadStatus{}, err
	}
	st, err := nb.n.Job(job.ID)
	if err != nil { // applied through another node and not here yet
		st = PreloadStatus{PreloadJob: job}
	}
	return toPreloadStatus(st), nil
}

func (nb *NamespaceBackend) Jobs() []backend.PreloadStatus {
	js := nb.n.Jobs()
	out := make([]backend.PreloadStatus, len(js))
	for i, j := range js {
		out[i] = toPreloadStatus(j)
	}
	return out
}

func (nb *NamespaceBackend) Job(id string) (backend.PreloadStatus, error) {
	st, err := nb.n.Job(id)
	return toPreloadStatus(st), err
}

func (nb *NamespaceBackend) CancelPreload(ctx context.Context, id string) (bool, error) {
	return nb.n.CancelPreload(ctx, id)
}

func (nb *NamespaceBackend) EgressLedger(ctx context.Context, since, until time.Time) ([]egress.Row, error) {
	return nb.n.EgressLedger(ctx, since, until)
}

func (nb *NamespaceBackend) RegionLocation() string { return nb.n.RegionLocation() }

func (nb *NamespaceBackend) HasPolicy() bool {
	p, _ := nb.n.Policy()
	return p != nil
}

func (nb *NamespaceBackend) Degraded(ctx context.Context) (backend.Degraded, error) {
	return nb.n.Degraded(ctx)
}

func (nb *NamespaceBackend) Repair(ctx context.Context, bucket, prefix string, progress func(backend.RepairProgress), found func(key string, stores []string)) (backend.RepairStats, error) {
	if found != nil {
		ctx = placement.DryRun(ctx, found)
	}
	var p func(placement.RepairProgress)
	if progress != nil {
		p = func(rp placement.RepairProgress) { progress(backend.RepairProgress(rp)) }
	}
	st, err := nb.n.Repair(ctx, bucket, prefix, p)
	return backend.RepairStats(st), err
}

func toPreloadStatus(st PreloadStatus) backend.PreloadStatus {
	out := backend.PreloadStatus{ID: st.ID, Bucket: st.Bucket, Prefix: st.Prefix, Pin: st.Pin, Created: st.Created,
		Canceled: st.Canceled, TotalObjects: st.TotalObjects, TotalBytes: st.TotalBytes, Objects: st.Objects,
		Bytes: st.Bytes, Errors: st.Errors, Done: st.Done, Pending: st.Pending, Uncached: st.Uncached}
	if len(st.Nodes) > 0 {
		out.Nodes = make(map[string]backend.JobProgress, len(st.Nodes))
		for id, p := range st.Nodes {
			out.Nodes[id] = backend.JobProgress{After: p.After, Objects: p.Objects, Bytes: p.Bytes, Errors: p.Errors, Done: p.Done, Updated: p.Updated}
		}
	}
	return out
}

// bucketHandle is a *Bucket seen through backend.Bucket.
type bucketHandle struct{ *Bucket }

func (h bucketHandle) Name() string       { return h.Bucket.Name }
func (h bucketHandle) Owner() string      { return h.Bucket.Owner }
func (h bucketHandle) Created() time.Time { return h.Bucket.Created }

func (h bucketHandle) Authorize(u backend.User, write bool) error {
	return h.ns.Authorize(u, h.Bucket, write)
}

func (h bucketHandle) Config(kind string) (string, bool) {
	if h.remote != "" {
		// Another region's bucket: its policy, ACL, ... as its home region
		// set them. Its lifecycle runs there.
		if kind == backend.ConfLifecycle {
			return "", false
		}
		return h.ns.catalogConfig(h.Bucket, kind)
	}
	if kind == backend.ConfLifecycle {
		return h.lifecycleDoc()
	}
	return h.ns.rs.State().BucketConfig(h.Bucket.Name, kind)
}

func (h bucketHandle) SetConfig(ctx context.Context, kind, value string) error {
	if h.remote != "" {
		return fmt.Errorf("%w (%s): change its configuration there", ErrNotHomeRegion, h.remote)
	}
	if h.travels() && kind != backend.ConfLifecycle {
		// Every region authorizes the bucket by these documents: the
		// catalog takes the change first, so no region is left with an
		// older one the home region replaced.
		if err := h.ns.catalog.SetConfig(ctx, h.Bucket.Name, kind, value); err != nil {
			return err
		}
	}
	if kind == backend.ConfLifecycle {
		return h.setLifecycle(ctx, value)
	}
	if kind == backend.ConfObjectLock {
		return h.setObjectLockConfig(ctx, value)
	}
	return h.ns.rs.Apply(ctx, regionstate.SetBucketConfig{Bucket: h.Bucket.Name, Kind: kind, Value: value, Delete: value == ""})
}

func (h bucketHandle) CreateUpload(ctx context.Context, u backend.User, key string, meta store.Metadata, checksumAlg string) (backend.Upload, error) {
	up, err := h.ns.CreateUpload(ctx, u, h.Bucket, key, meta, checksumAlg)
	return toUpload(up), err
}

func (h bucketHandle) Upload(id, key string) (backend.Upload, error) {
	up, err := h.ns.Upload(h.Bucket, id, key)
	return toUpload(up), err
}

func (h bucketHandle) Uploads(prefix, keyMarker, idMarker string) iter.Seq[backend.Upload] {
	return func(yield func(backend.Upload) bool) {
		for up := range h.ns.Uploads(h.Bucket, prefix, keyMarker, idMarker) {
			if !yield(toUpload(up)) {
				return
			}
		}
	}
}

// record returns the region's record of an upload the gateway looked up
// with Upload a moment ago.
func (h bucketHandle) record(up backend.Upload) (Upload, error) {
	rec, ok := h.ns.rs.State().Upload(up.ID)
	if !ok || rec.Bucket != h.Bucket.Name || rec.Key != up.Key {
		return Upload{}, ErrNoSuchUpload
	}
	return rec, nil
}

func (h bucketHandle) UploadPart(ctx context.Context, up backend.Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error) {
	rec, err := h.record(up)
	if err != nil {
		return store.PartInfo{}, err
	}
	return h.ns.UploadPart(ctx, h.Bucket, rec, number, body, size, checksums)
}

func (h bucketHandle) CompleteUpload(ctx context.Context, up backend.Upload, refs []backend.PartRef, ifNoneMatch bool) (store.ObjectInfo, error) {
	rec, err := h.record(up)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return h.ns.CompleteUpload(ctx, h.Bucket, rec, refs, ifNoneMatch)
}

func (h bucketHandle) AbortUpload(ctx context.Context, up backend.Upload) error {
	rec, err := h.record(up)
	if err != nil {
		return err
	}
	return h.ns.AbortUpload(ctx, h.Bucket, rec)
}

func toUpload(up Upload) backend.Upload {
	if up.ID == "" {
		return backend.Upload{}
	}
	out := backend.Upload{ID: up.ID, Bucket: up.Bucket, Key: up.Key, Initiator: up.Initiator, Created: up.Created}
	for _, p := range SortedParts(up) {
		out.Parts = append(out.Parts, backend.Part{Number: p.Number, Size: p.Size, ETag: p.ETag, Checksums: p.Checksums, Modified: p.Modified})
	}
	return out
}

// usersHandle is *Users seen through backend.Users: grants name their
// bucket, which it looks up.
type usersHandle struct {
	*Users
	n *Namespace
}

func (u usersHandle) Grant(ctx context.Context, caller backend.User, name, bucket, perm string) error {
	b, err := u.n.Bucket(bucket)
	if err != nil {
		return err
	}
	return u.Users.Grant(ctx, caller, name, b, perm)
}

func (u usersHandle) Revoke(ctx context.Context, caller backend.User, name, bucket string) error {
	b, err := u.n.Bucket(bucket)
	if err != nil {
		return err
	}
	return u.Users.Revoke(ctx, caller, name, b)
}
