package regionstate

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// lockFSM applies commands to an FSM at chosen entry times.
type lockFSM struct {
	t     *testing.T
	f     *fsm
	index uint64
}

func (l *lockFSM) at(when time.Time, cmd Command) error {
	l.t.Helper()
	data, err := Encode(cmd)
	if err != nil {
		l.t.Fatal(err)
	}
	l.index++
	resp := l.f.ApplyBatch([]*raft.Log{{Index: l.index, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: when}})
	if err, ok := resp[0].(error); ok {
		return err
	}
	return nil
}

func (l *lockFSM) must(when time.Time, cmd Command) {
	l.t.Helper()
	if err := l.at(when, cmd); err != nil {
		l.t.Fatalf("%T: %v", cmd, err)
	}
}

func (l *lockFSM) refused(when time.Time, cmd Command, want error) {
	l.t.Helper()
	if err := l.at(when, cmd); !errors.Is(err, want) {
		l.t.Fatalf("%T %+v at %s: %v, want %v", cmd, cmd, when.Format(time.RFC3339), err, want)
	}
}

func (l *lockFSM) lock(key, id string) *VersionLock {
	for _, v := range l.f.state.Versions("b", key) {
		if v.ID == id {
			return v.Lock
		}
	}
	l.t.Fatalf("%s@%s is gone", key, id)
	return nil
}

func newLockFSM(t *testing.T) *lockFSM {
	l := &lockFSM{t: t, f: newTestFSM(t, t.TempDir())}
	l.must(t0, CreateBucket{Bucket: Bucket{Name: "b", Owner: "alice"}})
	return l
}

func lockedVersion(key, id string, lock *VersionLock) PutVersion {
	return PutVersion{Version: ObjectVersion{Bucket: "b", Key: key, ID: id, Store: "s", StoreKey: "v/" + id, Size: 1, Lock: lock}}
}

// TestObjectLockCompliance: a compliance retention keeps its version until
// its date, whoever asks (bypass included), and can only be extended; the
// FSM decides with the entry's time, not the node's clock.
func TestObjectLockCompliance(t *testing.T) {
	l := newLockFSM(t)
	until := t0.Add(24 * time.Hour)
	l.must(t0, lockedVersion("k", "c1", &VersionLock{Mode: LockCompliance, RetainUntil: until}))
	day := t0.Add(time.Hour)
	l.refused(day, DeleteVersion{Bucket: "b", Key: "k", ID: "c1"}, ErrObjectLocked)
	l.refused(day, DeleteVersion{Bucket: "b", Key: "k", ID: "c1", BypassGovernance: true}, ErrObjectLocked)
	// Shortened, turned into governance, removed: refused, bypass or not.
	l.refused(day, SetVersionLock{Bucket: "b", Key: "k", ID: "c1", Retention: true, Mode: LockCompliance, RetainUntil: until.Add(-time.Minute), BypassGovernance: true}, ErrObjectLocked)
	l.refused(day, SetVersionLock{Bucket: "b", Key: "k", ID: "c1", Retention: true, Mode: LockGovernance, RetainUntil: until.Add(time.Hour), BypassGovernance: true}, ErrObjectLocked)
	l.refused(day, SetVersionLock{Bucket: "b", Key: "k", ID: "c1", Retention: true, BypassGovernance: true}, ErrObjectLocked)
	if got := l.lock("k", "c1"); got.Mode != LockCompliance || !got.RetainUntil.Equal(until) {
		t.Fatalf("lock after refused changes: %+v", got)
	}
	// Extended: allowed, and binding.
	later := until.Add(24 * time.Hour)
	l.must(day, SetVersionLock{Bucket: "b", Key: "k", ID: "c1", Retention: true, Mode: LockCompliance, RetainUntil: later})
	l.refused(until.Add(time.Hour), DeleteVersion{Bucket: "b", Key: "k", ID: "c1"}, ErrObjectLocked)
	// A retain-until date in the past (at the entry's time) is invalid.
	l.refused(day, SetVersionLock{Bucket: "b", Key: "k", ID: "c1", Retention: true, Mode: LockCompliance, RetainUntil: t0}, ErrInvalid)
	// Once the date passes (by the entry's time), the version goes.
	l.must(later.Add(time.Second), DeleteVersion{Bucket: "b", Key: "k", ID: "c1"})
	if vs := l.f.state.Versions("b", "k"); len(vs) != 0 {
		t.Fatalf("versions after the retention ended: %+v", vs)
	}
}

// TestObjectLockGovernance: governance yields only to a bypass; extending
// in governance mode needs none.
func TestObjectLockGovernance(t *testing.T) {
	l := newLockFSM(t)
	until := t0.Add(24 * time.Hour)
	l.must(t0, lockedVersion("k", "g1", &VersionLock{Mode: LockGovernance, RetainUntil: until}))
	now := t0.Add(time.Minute)
	l.refused(now, DeleteVersion{Bucket: "b", Key: "k", ID: "g1"}, ErrObjectLocked)
	l.refused(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g1", Retention: true, Mode: LockGovernance, RetainUntil: until.Add(-time.Hour)}, ErrObjectLocked)
	l.refused(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g1", Retention: true}, ErrObjectLocked)
	l.refused(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g1", Retention: true, Mode: LockCompliance, RetainUntil: until.Add(time.Hour)}, ErrObjectLocked)
	l.must(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g1", Retention: true, Mode: LockGovernance, RetainUntil: until.Add(time.Hour)})
	l.must(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g1", Retention: true, Mode: LockGovernance, RetainUntil: until, BypassGovernance: true})
	if got := l.lock("k", "g1"); !got.RetainUntil.Equal(until) {
		t.Fatalf("shortened with bypass: %+v", got)
	}
	l.must(now, DeleteVersion{Bucket: "b", Key: "k", ID: "g1", BypassGovernance: true})

	// Removing a governance retention with bypass leaves the version
	// unprotected.
	l.must(now, lockedVersion("k", "g2", &VersionLock{Mode: LockGovernance, RetainUntil: until}))
	l.must(now, SetVersionLock{Bucket: "b", Key: "k", ID: "g2", Retention: true, BypassGovernance: true})
	if got := l.lock("k", "g2"); got != nil {
		t.Fatalf("lock after removal: %+v", got)
	}
	l.must(now, DeleteVersion{Bucket: "b", Key: "k", ID: "g2"})
}

// TestObjectLockLegalHold: a legal hold blocks deletion, bypass included,
// until it is removed; a locked null version is not replaced.
func TestObjectLockLegalHold(t *testing.T) {
	l := newLockFSM(t)
	l.must(t0, lockedVersion("k", "h1", nil))
	l.must(t0, SetVersionLock{Bucket: "b", Key: "k", ID: "h1", SetLegalHold: true, LegalHold: true})
	far := t0.Add(100 * 365 * 24 * time.Hour)
	l.refused(far, DeleteVersion{Bucket: "b", Key: "k", ID: "h1", BypassGovernance: true}, ErrObjectLocked)
	l.must(far, SetVersionLock{Bucket: "b", Key: "k", ID: "h1", SetLegalHold: true, LegalHold: false})
	if got := l.lock("k", "h1"); got != nil {
		t.Fatalf("lock after the hold was removed: %+v", got)
	}
	l.must(far, DeleteVersion{Bucket: "b", Key: "k", ID: "h1"})

	l.must(t0, lockedVersion("n", NullVersionID, &VersionLock{LegalHold: true}))
	l.refused(t0, PutVersion{Version: ObjectVersion{Bucket: "b", Key: "n", ID: NullVersionID, Store: "s", StoreKey: "v/other", Size: 2}}, ErrObjectLocked)
	l.refused(t0, SetVersionLock{Bucket: "b", Key: "n", ID: "nope", SetLegalHold: true}, ErrNoSuchVersion)
	l.refused(t0, lockedVersion("k", "bad", &VersionLock{Mode: "FOREVER", RetainUntil: far}), ErrInvalid)
}

// TestObjectLockBucketConfig: object lock needs versioning Enabled, is
// never removed, and keeps versioning from being suspended.
func TestObjectLockBucketConfig(t *testing.T) {
	l := newLockFSM(t)
	conf := func(kind, value string, del bool) SetBucketConfig {
		return SetBucketConfig{Bucket: "b", Kind: kind, Value: value, Delete: del}
	}
	l.refused(t0, conf(BucketConfObjectLock, "<ObjectLockConfiguration/>", false), ErrBucketState)
	l.must(t0, conf(BucketConfVersioning, "Suspended", false))
	l.refused(t0, conf(BucketConfObjectLock, "<ObjectLockConfiguration/>", false), ErrBucketState)
	l.must(t0, conf(BucketConfVersioning, "Enabled", false))
	l.must(t0, conf(BucketConfObjectLock, "<ObjectLockConfiguration/>", false))
	l.refused(t0, conf(BucketConfVersioning, "Suspended", false), ErrBucketState)
	l.refused(t0, conf(BucketConfVersioning, "", true), ErrBucketState)
	l.refused(t0, conf(BucketConfObjectLock, "", true), ErrBucketState)
	if got := ErrorFromCode(ErrorCode(ErrObjectLocked), "x"); !errors.Is(got, ErrObjectLocked) {
		t.Fatalf("ErrObjectLocked does not cross the wire: %v", got)
	}
}
