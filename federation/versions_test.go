package federation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/federation/store"
)

// Issue 12's lifecycle story: NoncurrentVersionExpiration 1 day with 2
// newer noncurrent versions kept leaves the latest and two noncurrent
// versions, and the others' bytes leave the store; an expired delete
// marker goes too. The clock is advanced, not slept.
func TestLifecycleNoncurrentVersions(t *testing.T) {
	ctx := context.Background()
	ns, b, clock, local := lifecycleNamespace(t, `
buckets:
  - name: ckpt
    lifecycle:
      - id: keep-two
        noncurrent_version_expiration: {noncurrent_days: 1, newer_noncurrent_versions: 2}
      - id: markers
        expiration: {expired_object_delete_marker: true}
`)
	if err := b.SetVersioning(ctx, federation.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	var infos []store.ObjectInfo
	for i := range 5 {
		body := strings.Repeat("v", i+1)
		info, err := b.Put(ctx, "latest.pt", strings.NewReader(body), int64(len(body)), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if _, err := b.Put(ctx, "gone.pt", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "gone.pt"); err != nil {
		t.Fatal(err)
	}
	versionsOf := func(key string) []string {
		var out []string
		for e, err := range b.ListVersions(ctx, federation.VersionListOptions{Prefix: key}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Info.VersionID)
		}
		return out
	}

	run, err := ns.RunLifecyclePass(ctx)
	if err != nil || run.Expired != 0 {
		t.Fatalf("pass on the same day: %+v %v", run, err)
	}
	clock.set(clock.now().Add(50 * time.Hour))
	run, err = ns.RunLifecyclePass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := versionsOf("latest.pt")
	want := []string{infos[4].VersionID, infos[3].VersionID, infos[2].VersionID}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the pass latest.pt has %v, want the newest three %v (run %+v)", got, want, run)
	}
	// gone.pt: its one noncurrent version is within the two kept, and its
	// delete marker is not its only version: both stay.
	if v := versionsOf("gone.pt"); len(v) != 2 {
		t.Fatalf("gone.pt versions %v", v)
	}
	// The expired versions' bytes leave the store once collected.
	if n := ns.CollectVersionGarbage(ctx); n != 2 {
		t.Fatalf("collected %d version files, want 2", n)
	}
	for _, old := range infos[:2] {
		if _, err := local.Stat(ctx, old.StoreKey); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the bytes of expired version %s are still in the store: %v", old.VersionID, err)
		}
	}
	for _, kept := range infos[2:] {
		if _, err := local.Stat(ctx, kept.StoreKey); err != nil {
			t.Fatalf("the bytes of kept version %s: %v", kept.VersionID, err)
		}
	}
	// Removing gone.pt's object version leaves its marker alone: the next
	// pass removes that expired marker.
	vs := versionsOf("gone.pt")
	if _, err := b.DeleteVersion(ctx, "gone.pt", vs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.RunLifecyclePass(ctx); err != nil {
		t.Fatal(err)
	}
	if v := versionsOf("gone.pt"); len(v) != 0 {
		t.Fatalf("the expired delete marker was not removed: %v", v)
	}
}
