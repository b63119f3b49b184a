package backend

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// Object Lock (docs/versioning.md, Object Lock). A version's lock crosses
// the contract in the reserved user-metadata entry MetaObjectLock: the
// gateway sets it on a PUT (the version's initial lock: its
// x-amz-object-lock-* headers or the bucket's default retention), and
// Stat/StatVersion of a bucket with versions in the region state return it
// from the version's record. The namespace moves it out of the metadata
// into the version's record, written in the same step as the version.

// MetaObjectLock is the reserved user-metadata entry of a version's lock
// (EncodeObjectLock). Clients can neither set nor see it as x-amz-meta-*.
const MetaObjectLock = "fedgate-object-lock"

// ConfObjectLock is the bucket's ObjectLockConfiguration XML (object lock
// enabled, with its default retention, if any).
const ConfObjectLock = "object-lock"

// Retention modes.
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// Object lock errors.
var (
	// ErrObjectLocked: the version's retention or legal hold forbids the
	// delete, overwrite or change.
	ErrObjectLocked = errors.New("federation: the object version is protected by object lock")
	// ErrInvalidBucketState: object lock on a bucket whose versioning is
	// not Enabled, versioning suspended while object lock is enabled.
	ErrInvalidBucketState = errors.New("federation: the bucket's state does not allow this")
	// ErrObjectLockNotSupported: a bucket whose versions fedgate does not
	// keep (mounted from an origin, or another region's).
	ErrObjectLockNotSupported = errors.New("federation: object lock is not supported for this bucket: its versions are not kept in the region state (a bucket mounted from an origin, or another region's)")
)

// ObjectLock is a version's lock: a retention (Mode "" none) and a legal
// hold.
type ObjectLock struct {
	Mode        string
	RetainUntil time.Time
	LegalHold   bool
}

// IsZero reports a lock that holds nothing.
func (l ObjectLock) IsZero() bool { return l.Mode == "" && !l.LegalHold }

// EncodeObjectLock is the MetaObjectLock value of l ("" for none).
func EncodeObjectLock(l ObjectLock) string {
	if l.IsZero() {
		return ""
	}
	v := url.Values{}
	if l.Mode != "" {
		v.Set("mode", l.Mode)
		v.Set("until", l.RetainUntil.UTC().Format(time.RFC3339Nano))
	}
	if l.LegalHold {
		v.Set("hold", "ON")
	}
	return v.Encode()
}

// ParseObjectLock reads a MetaObjectLock value.
func ParseObjectLock(s string) (ObjectLock, error) {
	if s == "" {
		return ObjectLock{}, nil
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return ObjectLock{}, err
	}
	l := ObjectLock{Mode: v.Get("mode"), LegalHold: v.Get("hold") == "ON"}
	if l.Mode != "" {
		if l.RetainUntil, err = time.Parse(time.RFC3339Nano, v.Get("until")); err != nil {
			return ObjectLock{}, err
		}
	}
	return l, nil
}

// LockChange is a change of an existing version's lock
// (Bucket.SetObjectLock): its retention when Retention is set (Mode ""
// removes it), its legal hold when SetLegalHold is set. BypassGovernance:
// the caller sent x-amz-bypass-governance-retention and may bypass.
type LockChange struct {
	Retention        bool
	Mode             string
	RetainUntil      time.Time
	BypassGovernance bool
	SetLegalHold     bool
	LegalHold        bool
}

type bypassKey struct{}

// WithBypassGovernance marks ctx: its caller may bypass governance-mode
// retention, and asked to (Bucket.DeleteVersion).
func WithBypassGovernance(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassKey{}, true)
}

// BypassGovernance reports whether ctx carries WithBypassGovernance.
func BypassGovernance(ctx context.Context) bool {
	v, _ := ctx.Value(bypassKey{}).(bool)
	return v
}
