// Package backend is the contract between the S3 layer (package gateway)
// and the region's namespace behind it (package federation): the
// interfaces the gateway calls, the value types that cross them and the
// sentinel errors the gateway maps to S3 answers.
//
// It imports only leaf packages (store for object types,
// egress, federation/placement and policies for admin answers),
// never the region's replicated state, so the gateway can be built and its
// handlers tested against a fake without a Raft node. federation.Namespace
// satisfies Backend and Admin through Namespace.Backend.
package backend

import (
	"context"
	"io"
	"iter"
	"os"
	"time"

	"github.com/fedgate/fedgate/egress"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
)

// Backend is one region's namespace as the S3 handlers use it. Every
// method is safe for concurrent use. Errors are the sentinels of this
// package or of store (compare with errors.Is).
type Backend interface {
	// Ready reports whether the node can serve (nil) or why not.
	Ready(ctx context.Context) error
	// AwaitAcked returns once this node has applied every write it
	// acknowledged before applying it (a follower's multipart session
	// writes: regionstate.Node.ApplyAcked), so a request served after it
	// reads the writes its client saw acknowledged (read-your-writes on
	// followers). The gateway calls it before every S3 and batch request;
	// it costs an atomic load when the node has caught up. ErrBehind when
	// the node could not catch up in time, or another region error.
	AwaitAcked(ctx context.Context) error
	// Users holds access keys, users and grants.
	Users() Users
	// Bucket returns the named bucket, or ErrNoSuchBucket.
	Bucket(name string) (Bucket, error)
	// ListBuckets returns the buckets u may read, sorted by name.
	ListBuckets(u User) []Bucket
	// ListBucketsPage returns, sorted by name, at most limit (all if
	// limit < 0) of the buckets u may read whose name starts with prefix
	// and comes after after ("": from the first); more reports that more
	// follow. A page costs what it returns, not the number of buckets
	// (the gateway's paged ListBuckets).
	ListBucketsPage(u User, prefix, after string, limit int) (page []Bucket, more bool)
	// CreateBucket creates a bucket owned by u. It returns
	// ErrInvalidBucketName, a *BucketExistsError, or a region error.
	CreateBucket(ctx context.Context, u User, name string) error
	// DeleteBucket removes an empty bucket: ErrNoSuchBucket,
	// ErrBucketNotEmpty, or ErrPolicyBucket for a bucket the policy file
	// declares.
	DeleteBucket(ctx context.Context, name string) error
	// PublicAccessDefault is the region-wide Block Public Access setting
	// of the policy file (zero: none).
	PublicAccessDefault() policies.PublicAccessBlock
}

// Bucket configuration kinds (Bucket.Config). The values are the documents
// the gateway validated and stores as they are.
const (
	ConfPolicy       = "policy"
	ConfACL          = "acl"
	ConfPublicAccess = "public-access-block"
	ConfTagging      = "tagging"
	ConfCORS         = "cors"
	ConfLifecycle    = "lifecycle"
)

// MaxConfigSize bounds one configuration document (the region state's
// limit, regionstate.MaxBucketConfig).
const MaxConfigSize = 64 << 10

// Bucket is one bucket of the namespace. Keys are relative to the bucket.
type Bucket interface {
	Name() string
	Owner() string
	Created() time.Time
	// Authorize returns nil when u may read (write=false) or write the
	// bucket, else ErrAccessDenied.
	Authorize(u User, write bool) error
	// Config returns one of the bucket's S3 configurations (Conf*).
	Config(kind string) (string, bool)
	// SetConfig replaces a configuration; value "" removes it.
	SetConfig(ctx context.Context, kind, value string) error

	// Stat returns the object's current info, or store.ErrNotFound.
	Stat(ctx context.Context, key string) (store.ObjectInfo, error)
	// Open streams n bytes from off of the object info describes; it
	// returns store.ErrPreconditionFailed when the object changed since.
	Open(ctx context.Context, info store.ObjectInfo, off, n int64) (io.ReadCloser, error)
	// Forget drops what the node remembers of key (after a failed Open).
	Forget(key string)
	// LocalExtents is a short-circuit read of [off, off+n) of the object
	// info describes: it makes those bytes present in files on this node
	// (its cache's chunk files, filled as a GET fills them, or a local
	// store's file) and returns the extents that hold them, in order, and
	// the function that lets go of them. The files are read-only, private
	// descriptors; their bytes are never rewritten in place. ErrNotLocal
	// when the bytes cannot be handed over as files here.
	LocalExtents(ctx context.Context, info store.ObjectInfo, off, n int64) ([]Extent, func(), error)
	// Put writes an object (size -1: unknown).
	Put(ctx context.Context, key string, body io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error)
	// Delete removes an object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteLatest is Delete that answers, in a versioned bucket, the id of
	// the delete marker it added ("" in an unversioned bucket).
	DeleteLatest(ctx context.Context, key string) (markerID string, err error)

	// Versioning returns "", "Enabled" or "Suspended".
	Versioning() string
	// SetVersioning enables or suspends versioning: ErrVersioningAtOrigin,
	// ErrVersioningNotSupported, ErrInvalidArgument.
	SetVersioning(ctx context.Context, status string) error
	// StatVersion returns one version of key: ErrNoSuchVersion, or a
	// *DeleteMarkerError for a delete marker.
	StatVersion(ctx context.Context, key, id string) (store.ObjectInfo, error)
	// DeleteVersion removes one version for good; deleting one that does
	// not exist is not an error. marker: it was a delete marker.
	// ErrObjectLocked when the version's lock protects it (a governance
	// retention yields to a ctx marked WithBypassGovernance).
	DeleteVersion(ctx context.Context, key, id string) (marker bool, err error)
	// SetObjectLock changes the lock of version id of key (id "": the
	// key's current version): ErrObjectLocked (a change the lock
	// forbids), ErrNoSuchVersion, a *DeleteMarkerError,
	// ErrObjectLockNotSupported.
	SetObjectLock(ctx context.Context, key, id string, change LockChange) error
	// ListVersions lists versions in S3's order (keys ascending, newest
	// version first), with common prefixes.
	ListVersions(ctx context.Context, opts VersionListOptions) iter.Seq2[VersionEntry, error]
	// List lists the bucket's objects in key order.
	List(ctx context.Context, opts store.ListOptions) iter.Seq2[store.Entry, error]
	// LocalFiler returns the store's local-file ability and the key prefix
	// to apply, or nil when the bucket must not be read from local files.
	LocalFiler() (store.LocalFiler, string)
	// LocalRead accounts for a read served from LocalFiler's file of the
	// object version info describes (info.Key the bucket's key): it refuses
	// it (ErrEgressBudget) or returns the function that counts the bytes
	// sent.
	LocalRead(ctx context.Context, info store.ObjectInfo) (sent func(n int64), err error)

	// CreateUpload starts a multipart upload of key.
	CreateUpload(ctx context.Context, u User, key string, meta store.Metadata, checksumAlg string) (Upload, error)
	// Upload returns the upload id of key, or ErrNoSuchUpload.
	Upload(id, key string) (Upload, error)
	// Uploads lists the uploads in progress whose keys start with prefix,
	// by key then creation, resuming after ListMultipartUploads' markers:
	// keyMarker "" starts at the first; idMarker "" starts after every
	// upload of keyMarker; idMarker an upload of keyMarker starts after it;
	// another idMarker starts at keyMarker's first upload. The caller may
	// stop early: the cost is in proportion to what it reads, not to the
	// number of uploads.
	Uploads(prefix, keyMarker, idMarker string) iter.Seq[Upload]
	// UploadPart stores part number of up.
	UploadPart(ctx context.Context, up Upload, number int, body io.Reader, size int64, checksums func() map[string]string) (store.PartInfo, error)
	// CompleteUpload joins the parts: ErrInvalidPartOrder,
	// store.ErrInvalidPart, ErrEntityTooSmall, or
	// store.ErrPreconditionFailed with ifNoneMatch when the key exists.
	CompleteUpload(ctx context.Context, up Upload, refs []PartRef, ifNoneMatch bool) (store.ObjectInfo, error)
	// AbortUpload drops the upload and its parts.
	AbortUpload(ctx context.Context, up Upload) error
}

// Users holds the region's users, their access keys and bucket grants.
type Users interface {
	// SecretFor returns the secret key of accessKey (SigV4 verification).
	SecretFor(accessKey string) (string, bool)
	ByAccessKey(accessKey string) (User, bool)
	List() []UserInfo
	// Add creates a user; empty credentials are generated. ErrUserExists,
	// ErrAccessKeyInUse.
	Add(ctx context.Context, name string, c Credentials) (Credentials, error)
	// Remove deletes a user: ErrNoSuchUser.
	Remove(ctx context.Context, name string) error
	// Grant gives user name read or write on bucket: ErrNoSuchUser,
	// ErrNoSuchBucket, ErrAccessDenied (caller may not grant).
	Grant(ctx context.Context, caller User, name, bucket, perm string) error
	Revoke(ctx context.Context, caller User, name, bucket string) error
}

// Admin is what the /_fedgate/admin/ routes need beyond Backend: cache pins
// and preloads, the egress ledger and repair.
type Admin interface {
	Pins() []Pin
	// Pin keeps bucket/prefix in the region's cache: ErrNoSuchBucket,
	// ErrInvalidPrefix.
	Pin(ctx context.Context, bucket, prefix string) (Pin, error)
	// Unpin: ErrNoSuchPin.
	Unpin(ctx context.Context, bucket, prefix string) error
	// StartPreload starts warming the cache with bucket/prefix.
	StartPreload(ctx context.Context, bucket, prefix string, pin bool) (PreloadStatus, error)
	Jobs() []PreloadStatus
	// Job returns a preload job's status: ErrNoSuchJob.
	Job(id string) (PreloadStatus, error)
	// CancelPreload stops a job (removed: it had finished and is dropped).
	CancelPreload(ctx context.Context, id string) (removed bool, err error)

	// EgressLedger returns the region's ledger rows in [since, until).
	EgressLedger(ctx context.Context, since, until time.Time) ([]egress.Row, error)
	// RegionLocation is the region's "cloud:region" ("" when unknown).
	RegionLocation() string
	// HasPolicy reports whether a policy file is in force.
	HasPolicy() bool
	// Repair restores the copies or shards of bucket/prefix:
	// ErrNothingToRepair for a single-store bucket. With found not nil it
	// is a dry run: nothing is written, and found is called with each
	// object that needs repair and the stores lacking its copy, shards or
	// manifest.
	Repair(ctx context.Context, bucket, prefix string, progress func(RepairProgress), found func(key string, stores []string)) (RepairStats, error)
	// Degraded reports this node's store health checks and the data it
	// read degraded.
	Degraded(ctx context.Context) (Degraded, error)
}

type readIntentKey struct{}

// WithReadIntent marks ctx: its caller reads the object it Stats from the
// first byte on next. A bucket may then fetch a small object's bytes with
// its metadata, in one request to its store (federation: primeMax). The
// batch GET marks the entries it reads from their start.
func WithReadIntent(ctx context.Context) context.Context {
	return context.WithValue(ctx, readIntentKey{}, true)
}

// ReadIntent reports whether ctx carries WithReadIntent.
func ReadIntent(ctx context.Context) bool {
	v, _ := ctx.Value(readIntentKey{}).(bool)
	return v
}

// Extent is a run of an object's bytes in a file: Length bytes at
// FileOffset of File are the object's bytes at ObjectOffset.
type Extent struct {
	File                             *os.File
	FileOffset, Length, ObjectOffset int64
}

// RepairProgress is how far a repair is: objects examined of Total, and
// the bytes read from stores so far.
type RepairProgress struct {
	Objects, Total, BytesRead int64
}

// RepairStats is what a repair did (placement.RepairStats, field for
// field; the admin API sends it as JSON with these names).
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
