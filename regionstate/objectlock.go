package regionstate

import (
	"errors"
	"time"
)

// Object Lock (docs/versioning.md, Object Lock). A version of a bucket
// with object lock may carry a lock: a retention (a mode and a date until
// which it is kept) and a legal hold. The lock is part of the version's
// record, written with the version (PutVersion) and changed only by
// SetVersionLock; the FSM enforces it, deciding with the entry's time
// (b.now), so every node refuses the same deletes.

// Retention modes.
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// ErrObjectLocked: the command would delete, replace or unprotect a version
// its lock protects (a retention not yet expired, or a legal hold).
var ErrObjectLocked = errors.New("raft: the object version is protected by object lock")

// ErrBucketState: a bucket configuration change object lock forbids
// (object lock on a bucket whose versioning is not Enabled, suspending
// versioning while object lock is enabled, removing object lock).
var ErrBucketState = errors.New("raft: the bucket's state does not allow this change")

// VersionLock is a version's object lock. A zero RetainUntil (or Mode "")
// means no retention.
type VersionLock struct {
	Mode        string    `json:",omitempty"`
	RetainUntil time.Time `json:",omitzero"`
	LegalHold   bool      `json:",omitempty"`
}

// Retained reports whether the retention is in force at now.
func (l *VersionLock) Retained(now time.Time) bool {
	return l != nil && l.Mode != "" && l.RetainUntil.After(now)
}

// Protects reports whether the lock forbids deleting (or replacing) the
// version at now; bypass is a governance bypass by a caller allowed it.
func (l *VersionLock) Protects(now time.Time, bypass bool) bool {
	switch {
	case l == nil:
		return false
	case l.LegalHold:
		return true
	case !l.Retained(now):
		return false
	}
	return l.Mode == LockCompliance || !bypass
}

func (l *VersionLock) clone() *VersionLock {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

func (l *VersionLock) empty() bool { return l == nil || l.Mode == "" && !l.LegalHold }

func validLock(l *VersionLock) error {
	if l == nil {
		return nil
	}
	switch l.Mode {
	case "":
		if !l.RetainUntil.IsZero() {
			return invalid("a retain-until date without a retention mode")
		}
	case LockGovernance, LockCompliance:
		if l.RetainUntil.IsZero() {
			return invalid("retention mode %s without a retain-until date", l.Mode)
		}
	default:
		return invalid("unknown retention mode %q", l.Mode)
	}
	return nil
}

// SetVersionLock changes the lock of an existing version (not a delete
// marker): its retention when Retention is set (Mode "" removes it) and its
// legal hold when SetLegalHold is set. The FSM applies S3's rules at the
// entry's time: a new retention date must be in the future; a compliance
// retention in force can only be extended (same mode, a date no earlier);
// a governance retention in force can be extended in governance mode by
// anyone allowed the call, and shortened, removed or turned into
// compliance only with BypassGovernance. A refused change fails with
// ErrObjectLocked; a missing version with ErrNoSuchVersion.
type SetVersionLock struct {
	Bucket           string
	Key              string
	ID               string
	Retention        bool      `json:",omitempty"`
	Mode             string    `json:",omitempty"`
	RetainUntil      time.Time `json:",omitzero"`
	BypassGovernance bool      `json:",omitempty"`
	SetLegalHold     bool      `json:",omitempty"`
	LegalHold        bool      `json:",omitempty"`
}

func (SetVersionLock) Type() CommandType { return TypeSetVersionLock }

func (c *SetVersionLock) apply(b *batch) error {
	if c.Retention {
		if err := validLock(&VersionLock{Mode: c.Mode, RetainUntil: c.RetainUntil}); err != nil {
			return err
		}
		if c.Mode != "" && !c.RetainUntil.After(b.now) {
			return invalid("the retain-until date %s is not in the future", c.RetainUntil.UTC().Format(time.RFC3339))
		}
	}
	t := b.cat.versions
	t.mu.Lock()
	defer t.mu.Unlock()
	_, vk, err := t.keyLocked(c.Bucket, c.Key)
	if err != nil {
		return err
	}
	for i, v := range vk.versions {
		if v.ID != c.ID {
			continue
		}
		if v.DeleteMarker {
			return invalid("version %q of %q is a delete marker", c.ID, c.Key)
		}
		old := v.Lock
		next := old.clone()
		if next == nil {
			next = &VersionLock{}
		}
		if c.Retention {
			if old.Retained(b.now) {
				extends := c.Mode == old.Mode && !c.RetainUntil.Before(old.RetainUntil)
				switch {
				case old.Mode == LockCompliance && !extends:
					return ErrObjectLocked
				case old.Mode == LockGovernance && !extends && !c.BypassGovernance:
					return ErrObjectLocked
				}
			}
			next.Mode, next.RetainUntil = c.Mode, c.RetainUntil.UTC().Round(0)
		}
		if c.SetLegalHold {
			next.LegalHold = c.LegalHold
		}
		if next.empty() {
			next = nil
		}
		v = v.clone()
		v.Lock = next
		vk.versions[i] = v
		b.put(tVersion, versionRecordKey(v.Bucket, v.Key, v.Seq), mustJSON(v))
		return nil
	}
	return ErrNoSuchVersion
}
