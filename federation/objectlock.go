package federation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
)

// Object Lock (docs/versioning.md). A version's lock is part of its record
// in the region state (regionstate.VersionLock): the gateway hands a new
// version's lock in the reserved metadata entry backend.MetaObjectLock,
// which takeLock moves into the record written by the version's
// PutVersion, and versionInfo hands back the same way. The FSM enforces
// it (DeleteVersion, the replacement of a null version, SetVersionLock).

// takeLock removes the reserved lock entry from meta (a copy) and returns
// the lock it held (nil: none).
func takeLock(meta regionstate.ObjectMeta) (regionstate.ObjectMeta, *regionstate.VersionLock) {
	s, ok := meta.User[backend.MetaObjectLock]
	if !ok {
		return meta, nil
	}
	meta.User = maps.Clone(meta.User)
	delete(meta.User, backend.MetaObjectLock)
	if len(meta.User) == 0 {
		meta.User = nil
	}
	l, err := backend.ParseObjectLock(s)
	if err != nil || l.IsZero() {
		return meta, nil // the gateway wrote it: not reached
	}
	return meta, &regionstate.VersionLock{Mode: l.Mode, RetainUntil: l.RetainUntil, LegalHold: l.LegalHold}
}

// lockEntry returns meta's user metadata with the version's lock in its
// reserved entry (and no stale one from the store's copy).
func lockEntry(user map[string]string, l *regionstate.VersionLock) map[string]string {
	_, had := user[backend.MetaObjectLock]
	if l == nil && !had {
		return user
	}
	user = maps.Clone(user)
	delete(user, backend.MetaObjectLock)
	if l != nil {
		if user == nil {
			user = map[string]string{}
		}
		user[backend.MetaObjectLock] = backend.EncodeObjectLock(backend.ObjectLock{Mode: l.Mode, RetainUntil: l.RetainUntil, LegalHold: l.LegalHold})
	}
	if len(user) == 0 {
		return nil
	}
	return user
}

// lockable reports whether the bucket's versions are in the region state,
// where their locks are kept.
func (b *Bucket) lockable() error {
	if b.origin || b.remote != "" {
		return backend.ErrObjectLockNotSupported
	}
	return nil
}

// SetObjectLock changes the lock of version id of key (id "": the key's
// current version).
func (b *Bucket) SetObjectLock(ctx context.Context, key, id string, c backend.LockChange) error {
	if err := b.lockable(); err != nil {
		return err
	}
	if _, ok := b.ns.rs.State().BucketConfig(b.Name, regionstate.BucketConfObjectLock); !ok {
		return fmt.Errorf("%w: the bucket has no object lock configuration", backend.ErrInvalidBucketState)
	}
	if err := b.ns.writeBarrier(ctx); err != nil {
		return err
	}
	if err := b.adoptPlain(ctx, key); err != nil { // an object from before versioning is its null version
		return err
	}
	vs := b.ns.rs.State().Versions(b.Name, key)
	if id == "" {
		if len(vs) == 0 {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		if vs[0].DeleteMarker {
			return &DeleteMarkerError{Key: key, VersionID: vs[0].ID, Latest: true}
		}
		id = vs[0].ID
	}
	found := false
	for i, v := range vs {
		if v.ID == id {
			if v.DeleteMarker {
				return &DeleteMarkerError{Key: key, VersionID: v.ID, Latest: i == 0}
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: %s version %s", ErrNoSuchVersion, key, id)
	}
	cmd := regionstate.SetVersionLock{Bucket: b.Name, Key: key, ID: id, Retention: c.Retention, Mode: c.Mode,
		BypassGovernance: c.BypassGovernance, SetLegalHold: c.SetLegalHold, LegalHold: c.LegalHold}
	if c.Mode != "" {
		cmd.RetainUntil = c.RetainUntil.UTC().Round(0)
	}
	err := b.ns.rs.Apply(ctx, cmd)
	switch {
	case errors.Is(err, regionstate.ErrNoSuchVersion):
		return fmt.Errorf("%w: %s version %s", ErrNoSuchVersion, key, id)
	case errors.Is(err, regionstate.ErrInvalid) && c.Mode != "" && !c.RetainUntil.After(time.Now()):
		return fmt.Errorf("%w: the retain-until date must be in the future", ErrInvalidArgument)
	}
	return err
}

// setObjectLockConfig enables object lock on the bucket (or changes its
// default retention): only while its versioning is Enabled (the FSM
// checks it again), and only where its versions are in the region state.
func (b *Bucket) setObjectLockConfig(ctx context.Context, value string) error {
	if err := b.lockable(); err != nil {
		return err
	}
	if value == "" {
		return fmt.Errorf("%w: object lock cannot be disabled", backend.ErrInvalidBucketState)
	}
	if b.indexVersioning() != VersioningEnabled {
		return fmt.Errorf("%w: versioning must be Enabled on the bucket to enable object lock", backend.ErrInvalidBucketState)
	}
	return b.ns.rs.Apply(ctx, regionstate.SetBucketConfig{Bucket: b.Name, Kind: regionstate.BucketConfObjectLock, Value: value})
}
