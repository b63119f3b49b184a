package regionstate

import (
	"errors"
	"fmt"
)

// Domain errors returned by Node.Apply (compare with errors.Is).
var (
	ErrBucketExists   = errors.New("raft: bucket already exists")
	ErrNoSuchBucket   = errors.New("raft: no such bucket")
	ErrUserExists     = errors.New("raft: user already exists")
	ErrNoSuchUser     = errors.New("raft: no such user")
	ErrAccessKeyInUse = errors.New("raft: access key in use by another user")
	ErrRootUser       = errors.New("raft: root user cannot be deleted without Force")
	ErrUploadExists   = errors.New("raft: upload id already exists")
	ErrNoSuchUpload   = errors.New("raft: no such upload")
	// ErrUploadClaimed: a completion or abort of the upload is under way.
	ErrUploadClaimed = errors.New("raft: the upload is being completed or aborted")
	ErrStalePolicy   = errors.New("raft: policy version is not newer than the active one")
	// ErrInvalid is wrapped by errors that reject a malformed command.
	ErrInvalid = errors.New("raft: invalid command")
	// ErrUnknownCommand is returned for a command type this node does not
	// know and that is not marked IgnoreUnknown.
	ErrUnknownCommand = errors.New("raft: unknown command type")
)

// Errors about the node rather than the command.
var (
	// ErrNotLeader: this node cannot accept writes now. A rejected write
	// is a *NotLeaderError (the write was not appended; it names the
	// leader, if known); ErrLeadershipLost also matches it.
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrLeadershipLost: the leader lost its leadership while the write was
	// in flight; it may or may not be applied. It matches ErrNotLeader.
	ErrLeadershipLost = fmt.Errorf("%w: leadership lost, outcome unknown", ErrNotLeader)
	// ErrNoLeader: no leader was known within the forwarding wait
	// (Config.LeaderWait or ctx), for example in a partitioned minority.
	ErrNoLeader = errors.New("raft: no leader")
	// ErrClosed: the node has been closed.
	ErrClosed = errors.New("raft: node closed")
)

// NotLeaderError is returned for a write (or a membership change) that
// this node rejected because it is not the leader; the write was not
// appended, so retrying it on the leader is safe. LeaderID and LeaderAddr
// name the leader this node knows of (empty when none). It matches
// ErrNotLeader.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "raft: not the leader (no leader known)"
	}
	return fmt.Sprintf("raft: not the leader (leader %s at %s)", e.LeaderID, e.LeaderAddr)
}

// Is reports whether target is ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// BucketExistsError is returned by CreateBucket when the name is taken. It
// matches ErrBucketExists and names the current owner, so the gateway can
// answer BucketAlreadyOwnedByYou or BucketAlreadyExists.
type BucketExistsError struct {
	Bucket string
	Owner  string
}

func (e *BucketExistsError) Error() string {
	return fmt.Sprintf("raft: bucket %q already exists (owner %q)", e.Bucket, e.Owner)
}

// Is reports whether target is ErrBucketExists.
func (e *BucketExistsError) Is(target error) bool { return target == ErrBucketExists }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
