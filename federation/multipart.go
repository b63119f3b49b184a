package federation

import (
	"context"
	"fmt"
	"io"
	"iter"
	"sort"
	"strings"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// MinPartSize is the smallest part S3 accepts, except for the last one.
const MinPartSize = 5 << 20

// ErrEntityTooSmall: a part other than the last is under MinPartSize.
var ErrEntityTooSmall = backend.ErrEntityTooSmall

// ErrInvalidPartOrder: parts of a completion are not in ascending order.
var ErrInvalidPartOrder = backend.ErrInvalidPartOrder

// Upload is a multipart upload in progress (a copy of Raft state).
type Upload = regionstate.MultipartUpload

func (b *Bucket) multiparter() (store.Multiparter, error) {
	mp, ok := b.store.(store.Multiparter)
	if !ok {
		return nil, fmt.Errorf("store %q has no multipart upload: %w", b.store.Name(), store.ErrNotSupported)
	}
	return mp, nil
}

// CreateUpload starts a multipart upload of key and records it in Raft.
func (n *Namespace) CreateUpload(ctx context.Context, u User, b *Bucket, key string, meta store.Metadata, checksumAlg string) (Upload, error) {
	return b.path.createUpload(ctx, u, key, meta, checksumAlg)
}

// Upload returns the upload id of bucket b for key, or ErrNoSuchUpload.
func (n *Namespace) Upload(b *Bucket, id, key string) (Upload, error) {
	// Parts may have been recorded through other nodes a moment ago: see
	// every one acknowledged so far.
	if len(n.region.Members()) > 1 {
		n.catchUp()
	}
	up, ok := n.rs.State().Upload(id)
	if !ok || up.Bucket != b.Name || up.Key != key {
		return Upload{}, ErrNoSuchUpload
	}
	return up, nil
}

// Uploads lists a bucket's uploads in progress whose key has prefix, by key
// then initiation time, after the markers (see backend.Bucket.Uploads), in
// chunks read from the region state as the caller goes on.
func (n *Namespace) Uploads(b *Bucket, prefix, keyMarker, idMarker string) iter.Seq[Upload] {
	return func(yield func(Upload) bool) {
		if len(n.region.Members()) > 1 {
			n.catchUp()
		}
		const chunk = 1000
		key, id := keyMarker, idMarker
		for {
			ups := n.rs.State().UploadsAfter(b.Name, prefix, key, id, chunk)
			for _, up := range ups {
				if !yield(up) {
					return
				}
			}
			if len(ups) < chunk {
				return
			}
			key, id = ups[len(ups)-1].Key, ups[len(ups)-1].ID
		}
	}
}

// UploadPart streams one part into the store's staging area and records it.
func (n *Namespace) UploadPart(ctx context.Context, b *Bucket, up Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error) {
	return b.uploadPath(up).uploadPart(ctx, up, number, body, size, checksums)
}

// PartRef is one entry of a CompleteMultipartUpload request.
type PartRef = backend.PartRef

// CompleteUpload joins the parts into the object. ErrInvalidPartOrder,
// store.ErrInvalidPart (unknown part or ETag mismatch), ErrEntityTooSmall,
// store.ErrPreconditionFailed with ifNoneMatch when the key exists.
func (n *Namespace) CompleteUpload(ctx context.Context, b *Bucket, up Upload, refs []PartRef, ifNoneMatch bool) (store.ObjectInfo, error) {
	parts, err := checkCompletion(up, refs)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return b.uploadPath(up).complete(ctx, up, parts, refs, ifNoneMatch)
}

// checkCompletion checks a completion's part list against the session and
// returns the parts in order.
func checkCompletion(up Upload, refs []PartRef) ([]store.PartInfo, error) {
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: a completion needs at least one part", store.ErrInvalidPart)
	}
	for i := 1; i < len(refs); i++ {
		if refs[i].Number <= refs[i-1].Number {
			return nil, ErrInvalidPartOrder
		}
	}
	parts := make([]store.PartInfo, 0, len(refs))
	for i, ref := range refs {
		p, ok := up.Parts[ref.Number]
		if !ok || strings.Trim(ref.ETag, `"`) != p.ETag {
			return nil, fmt.Errorf("%w: part %d", store.ErrInvalidPart, ref.Number)
		}
		if i < len(refs)-1 && p.Size < MinPartSize {
			return nil, fmt.Errorf("%w: part %d is %d bytes", ErrEntityTooSmall, p.Number, p.Size)
		}
		parts = append(parts, store.PartInfo{Number: p.Number, Size: p.Size, ETag: p.ETag, Checksums: p.Checksums, ModTime: p.Modified})
	}
	return parts, nil
}

// AbortUpload discards an upload's parts and its session.
func (n *Namespace) AbortUpload(ctx context.Context, b *Bucket, up Upload) error {
	return b.uploadPath(up).abort(ctx, up)
}

// SortedParts returns an upload's parts by number.
func SortedParts(up Upload) []regionstate.Part {
	out := make([]regionstate.Part, 0, len(up.Parts))
	for _, p := range up.Parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

func toRaftMeta(m store.Metadata, checksumAlg string) regionstate.ObjectMeta {
	return regionstate.ObjectMeta{ContentType: m.ContentType, CacheControl: m.CacheControl,
		ContentDisposition: m.ContentDisposition, ContentEncoding: m.ContentEncoding,
		ContentLanguage: m.ContentLanguage, Expires: m.Expires, User: m.User, ChecksumAlgorithm: checksumAlg}
}

func fromRaftMeta(m regionstate.ObjectMeta) store.Metadata {
	return store.Metadata{ContentType: m.ContentType, CacheControl: m.CacheControl,
		ContentDisposition: m.ContentDisposition, ContentEncoding: m.ContentEncoding,
		ContentLanguage: m.ContentLanguage, Expires: m.Expires, User: m.User}
}
