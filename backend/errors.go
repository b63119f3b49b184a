package backend

import (
	"errors"
	"fmt"

	"github.com/fedgate/fedgate/store"
)

// Errors of the namespace (federation re-exports them under the same
// names). Their texts are kept from before this package existed: logs and
// admin answers show them.
var (
	ErrNoSuchBucket       = errors.New("federation: no such bucket")
	ErrBucketNotEmpty     = errors.New("federation: bucket not empty")
	ErrNoSuchUpload       = errors.New("federation: no such multipart upload")
	ErrPolicyBucket       = errors.New("federation: bucket is declared in the policy file")
	ErrInvalidBucketName  = errors.New("federation: invalid bucket name")
	ErrAccessDenied       = errors.New("federation: access denied")
	ErrNoSuchUser         = errors.New("federation: no such user")
	ErrUserExists         = errors.New("federation: user exists")
	ErrAccessKeyInUse     = errors.New("federation: access key in use")
	ErrUserOwnsBuckets    = errors.New("federation: user owns buckets")
	ErrEntityTooSmall     = errors.New("federation: part smaller than the 5 MiB minimum")
	ErrInvalidPartOrder   = errors.New("federation: parts not in ascending order")
	ErrStagingUnavailable = errors.New("federation: write-back staging unavailable")
	ErrEgressBudget       = errors.New("egress budget spent")
	ErrNoSuchJob          = errors.New("federation: no such preload job")
	ErrNoSuchPin          = errors.New("federation: no such pin")
	ErrInvalidPrefix      = errors.New("federation: invalid key prefix")
	ErrPolicyChange       = errors.New("federation: policy change refused")
	// ErrCatalogUnavailable: a bucket could not be created or deleted
	// because the global bucket catalog has no majority of regions.
	ErrCatalogUnavailable = errors.New("the global bucket catalog cannot reach a majority of regions; buckets cannot be created or deleted now (existing buckets work as before); retry later")
	// ErrNotHomeRegion: a bucket deleted through a region that is not its
	// home.
	ErrNotHomeRegion   = errors.New("the bucket's home is another region: delete it through that region's endpoint")
	ErrNothingToRepair = errors.New("federation: the bucket's placement keeps one copy in one store: nothing to repair")
	// ErrRegionUnreachable: a bucket at home in another region could not
	// be listed or read because that region's gateway did not answer
	// (a *RegionUnreachableError says which).
	ErrRegionUnreachable = errors.New("the bucket's home region cannot be reached")
	// ErrLengthRequired: the write must say its length in advance (a
	// write-back bucket reserves staging room for it).
	ErrLengthRequired = errors.New("federation: the write needs its length in advance")
	// ErrNoSuchVersion: a version id the key does not have.
	ErrNoSuchVersion = errors.New("federation: no such object version")
	// ErrVersioningAtOrigin: a bucket mounted from an origin has the
	// origin's versioning, not fedgate's.
	ErrVersioningAtOrigin = errors.New("federation: the bucket is mounted from an origin; its versioning is managed at the origin")
	// ErrVersioningNotSupported: a bucket kind fedgate cannot version yet.
	ErrVersioningNotSupported = errors.New("federation: versioning is not supported for this bucket yet")
	// ErrLifecycleAtOrigin: an expiration rule on a bucket mounted from an
	// origin, whose objects fedgate does not expire.
	ErrLifecycleAtOrigin = errors.New("federation: the bucket is mounted from an origin; its objects' expiration is managed at the origin")
	// ErrInvalidArgument: a malformed request argument.
	ErrInvalidArgument = errors.New("federation: invalid argument")
	// ErrNotLocal: an object's bytes cannot be handed over as files on this
	// node (a short-circuit read); the client reads them over HTTP.
	ErrNotLocal = errors.New("federation: the object cannot be read from this node's files")
)

// DeleteMarkerError is a read of a key whose newest version is a delete
// marker, or of a delete marker by its id. It matches store.ErrNotFound
// (errors.Is) so that every reader treats the key as missing. It is the
// store's type: an origin's own delete markers reach the gateway as is.
type DeleteMarkerError = store.DeleteMarker

// Errors of the region's replicated state, as the namespace reports them
// (federation translates its Raft node's errors into these). The gateway
// answers each one the same way on every route.
var (
	// ErrNoLeader: the region has no leader to take the write (an election
	// is in progress, or this node is cut off from the majority). The write
	// was not applied; retrying is safe.
	ErrNoLeader = errors.New("region: no leader")
	// ErrOutcomeUnknown: the leader lost its leadership while the write was
	// in flight; it may or may not have been applied.
	ErrOutcomeUnknown = errors.New("region: leadership lost, outcome unknown")
	// ErrClosed: this node is shutting down.
	ErrClosed = errors.New("region: node closed")
	// ErrBehind: this node could not apply the region's log up to the
	// leader's commit index in time (a slow or full disk, or catching up
	// after a restart), so it cannot answer consistently. Nothing was
	// changed; retrying, here or through another node, is safe.
	ErrBehind = errors.New("region: this node is behind the region's log")
	// ErrStalePolicy: a policy version is not newer than the active one.
	ErrStalePolicy = errors.New("region: policy version is not newer than the active one")
)

// BucketExistsError answers CreateBucket on a name that is taken.
type BucketExistsError struct {
	Bucket        string
	OwnedByCaller bool
}

func (e *BucketExistsError) Error() string {
	return fmt.Sprintf("federation: bucket %q already exists", e.Bucket)
}

// RegionUnreachableError says that bucket, at home in region Region,
// could not be listed or read (what this region has not cached) because
// that region's gateway did not answer; Err is why.
type RegionUnreachableError struct {
	Bucket, Region string
	Err            error
}

func (e *RegionUnreachableError) Error() string {
	return fmt.Sprintf("bucket %s is at home in region %s, which cannot be reached now: %v", e.Bucket, e.Region, e.Err)
}

// Is makes errors.Is(err, ErrRegionUnreachable) hold.
func (e *RegionUnreachableError) Is(target error) bool { return target == ErrRegionUnreachable }

func (e *RegionUnreachableError) Unwrap() error { return e.Err }
