package federation_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/store"
)

// Lifecycle and Object Lock: NoncurrentVersionExpiration skips a version
// its retention or legal hold protects, counts it as skipped and does not
// even try to delete it (the lifecycle hook, called before each delete,
// never sees it), pass after pass; Expiration puts a delete marker over a
// locked current version (as S3 does) and keeps the version. Once the
// retention has passed and the hold is off, the next pass deletes them.
func TestLifecycleSkipsLockedVersions(t *testing.T) {
	ctx := context.Background()
	ns, b, clock, _ := lifecycleNamespace(t, `
buckets:
  - name: ckpt
    lifecycle:
      - id: noncurrent
        noncurrent_version_expiration: {noncurrent_days: 1}
      - id: current
        filter: {prefix: cur/}
        expiration: {days: 1}
`)
	if err := b.SetVersioning(ctx, federation.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	h, err := ns.Backend().Bucket("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(ctx, backend.ConfObjectLock, `<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string, l backend.ObjectLock) store.ObjectInfo {
		t.Helper()
		var meta store.Metadata
		if !l.IsZero() {
			meta.User = map[string]string{backend.MetaObjectLock: backend.EncodeObjectLock(l)}
		}
		info, err := b.Put(ctx, key, strings.NewReader(body), int64(len(body)), store.PutOptions{Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	// The clock goes 50 hours on; a retention past that protects the
	// version both for the runner's look (the namespace clock) and for the
	// region state (the entry's time).
	far := time.Now().Add(100 * time.Hour)
	retained := put("ret.pt", "old", backend.ObjectLock{Mode: backend.LockGovernance, RetainUntil: far})
	put("ret.pt", "new", backend.ObjectLock{})
	held := put("hold.pt", "old", backend.ObjectLock{LegalHold: true})
	put("hold.pt", "new", backend.ObjectLock{})
	free := put("free.pt", "old", backend.ObjectLock{})
	put("free.pt", "new", backend.ObjectLock{})
	cur := put("cur/locked.pt", "current", backend.ObjectLock{Mode: backend.LockCompliance, RetainUntil: far})

	var mu sync.Mutex
	tried := map[string]int{}
	ns.SetLifecycleHook(func(bucket, key string) { mu.Lock(); tried[key]++; mu.Unlock() })
	exists := func(key, id string) bool {
		_, err := b.StatVersion(ctx, key, id)
		return err == nil
	}

	clock.set(clock.now().Add(50 * time.Hour))
	for pass := range 2 {
		run, err := ns.RunLifecyclePass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Pass 0: free.pt's old version expires, cur/locked.pt gets a
		// delete marker; both passes skip the two locked versions and
		// cur/locked.pt's, noncurrent under its marker (written at the
		// real time, 50 hours before the clock's).
		wantExpired := int64(0)
		if pass == 0 {
			wantExpired = 2
		}
		if run.Expired != wantExpired || run.Skipped != 3 || run.Errors != 0 {
			t.Fatalf("pass %d: %+v, want %d expired, 3 skipped, no errors", pass, run, wantExpired)
		}
	}
	mu.Lock()
	if tried["ret.pt"] != 0 || tried["hold.pt"] != 0 || tried["cur/locked.pt"] != 1 {
		t.Fatalf("the runner tried to delete locked versions: %v", tried)
	}
	mu.Unlock()
	if !exists("ret.pt", retained.VersionID) || !exists("hold.pt", held.VersionID) || exists("free.pt", free.VersionID) {
		t.Fatal("after the passes: locked versions must stay, the unlocked noncurrent one go")
	}
	if _, err := b.Stat(ctx, "cur/locked.pt"); err == nil || !exists("cur/locked.pt", cur.VersionID) {
		t.Fatalf("Expiration of a locked current version: stat %v, want a delete marker over the kept version", err)
	}

	// The retention shortened to a few seconds (governance, bypassed) and
	// the hold removed: once the retention has passed, the next pass
	// deletes both.
	soon := time.Now().Add(2 * time.Second)
	if err := b.SetObjectLock(ctx, "ret.pt", retained.VersionID, backend.LockChange{Retention: true, Mode: backend.LockGovernance,
		RetainUntil: soon, BypassGovernance: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetObjectLock(ctx, "hold.pt", held.VersionID, backend.LockChange{SetLegalHold: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(soon) + 100*time.Millisecond)
	run, err := ns.RunLifecyclePass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exists("ret.pt", retained.VersionID) || exists("hold.pt", held.VersionID) || run.Skipped != 1 {
		t.Fatalf("after the locks ended: %+v (ret.pt kept %v, hold.pt kept %v); want both gone, the compliance version skipped",
			run, exists("ret.pt", retained.VersionID), exists("hold.pt", held.VersionID))
	}
}
