package regionstate

import (
	"context"
	"errors"
)

// Error codes let an error cross the wire (a forwarded write answered by
// the leader) and come back matching the same sentinel with errors.Is.
// Codes are stable: never rename or reuse one.
const (
	CodeBucketExists     = "bucket_exists"
	CodeNoSuchBucket     = "no_such_bucket"
	CodeUserExists       = "user_exists"
	CodeNoSuchUser       = "no_such_user"
	CodeAccessKeyInUse   = "access_key_in_use"
	CodeRootUser         = "root_user"
	CodeUploadExists     = "upload_exists"
	CodeNoSuchUpload     = "no_such_upload"
	CodeStalePolicy      = "stale_policy"
	CodeSuperseded       = "superseded"
	CodeDrainClaimed     = "drain_claimed"
	CodeChanged          = "changed"
	CodeRegionIDSet      = "region_id_set"
	CodeNoSuchJob        = "no_such_job"
	CodeInvalid          = "invalid"
	CodeUnknownCommand   = "unknown_command"
	CodeLeadershipLost   = "leadership_lost"
	CodeNotLeader        = "not_leader"
	CodeNoLeader         = "no_leader"
	CodeClosed           = "closed"
	CodeCanceled         = "canceled"
	CodeDeadlineExceeded = "deadline_exceeded"
	CodeNoSuchVersion    = "no_such_version"
	CodeObjectLocked     = "object_locked"
	CodeBucketState      = "bucket_state"
	// CodeInternal is any other error (a disk or network failure).
	CodeInternal = "internal"
)

// codes is checked in order: a more specific error comes before one it
// matches (ErrLeadershipLost matches ErrNotLeader; ErrNoLeader is often
// joined with ctx's error).
var codes = []struct {
	code string
	err  error
}{
	{CodeBucketExists, ErrBucketExists},
	{CodeNoSuchBucket, ErrNoSuchBucket},
	{CodeUserExists, ErrUserExists},
	{CodeNoSuchUser, ErrNoSuchUser},
	{CodeAccessKeyInUse, ErrAccessKeyInUse},
	{CodeRootUser, ErrRootUser},
	{CodeUploadExists, ErrUploadExists},
	{CodeNoSuchUpload, ErrNoSuchUpload},
	{CodeNoSuchVersion, ErrNoSuchVersion},
	{CodeObjectLocked, ErrObjectLocked},
	{CodeBucketState, ErrBucketState},
	{CodeStalePolicy, ErrStalePolicy},
	{CodeSuperseded, ErrSuperseded},
	{CodeDrainClaimed, ErrDrainClaimed},
	{CodeChanged, ErrChanged},
	{CodeRegionIDSet, ErrRegionIDSet},
	{CodeNoSuchJob, ErrNoSuchJob},
	{CodeInvalid, ErrInvalid},
	{CodeUnknownCommand, ErrUnknownCommand},
	{CodeLeadershipLost, ErrLeadershipLost},
	{CodeNotLeader, ErrNotLeader},
	{CodeNoLeader, ErrNoLeader},
	{CodeClosed, ErrClosed},
	{CodeCanceled, context.Canceled},
	{CodeDeadlineExceeded, context.DeadlineExceeded},
}

// ErrorCode returns err's stable code: "" for nil, CodeInternal for an
// error this package does not know.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// ErrorFromCode rebuilds an error from its code and message: it matches
// the code's sentinel (errors.Is) and its Error() is msg (the sentinel's
// own text when msg is empty). CodeNotLeader gives a *NotLeaderError, so
// a caller still knows the write was not appended; an unknown code gives
// a plain error. Use WireError to keep a bucket's owner or a leader hint.
func ErrorFromCode(code, msg string) error {
	if code == "" {
		return nil
	}
	if code == CodeNotLeader {
		return &NotLeaderError{}
	}
	for _, c := range codes {
		if c.code == code {
			if msg == "" {
				return c.err
			}
			return &remoteError{msg: msg, err: c.err}
		}
	}
	if msg == "" {
		msg = "raft: remote error " + code
	}
	return errors.New(msg)
}

type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

// WireError is an error as the HTTP layer sends it (JSON). ToWire and Err
// are inverse up to the error's text: codes, a bucket's owner and the
// leader hint survive the trip.
type WireError struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Bucket     string `json:"bucket,omitempty"`
	Owner      string `json:"owner,omitempty"`
	LeaderID   string `json:"leader_id,omitempty"`
	LeaderAddr string `json:"leader_addr,omitempty"`
}

// ToWire describes err for the wire; nil for nil.
func ToWire(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Code: ErrorCode(err), Message: err.Error()}
	if be := (*BucketExistsError)(nil); errors.As(err, &be) {
		w.Bucket, w.Owner = be.Bucket, be.Owner
	}
	if nl := (*NotLeaderError)(nil); errors.As(err, &nl) {
		w.LeaderID, w.LeaderAddr = nl.LeaderID, nl.LeaderAddr
	}
	return w
}

// Err rebuilds the error (nil for a nil WireError or an empty Code).
func (w *WireError) Err() error {
	if w == nil || w.Code == "" {
		return nil
	}
	switch w.Code {
	case CodeBucketExists:
		if w.Bucket != "" {
			return &BucketExistsError{Bucket: w.Bucket, Owner: w.Owner}
		}
	case CodeNotLeader:
		return &NotLeaderError{LeaderID: w.LeaderID, LeaderAddr: w.LeaderAddr}
	}
	return ErrorFromCode(w.Code, w.Message)
}
