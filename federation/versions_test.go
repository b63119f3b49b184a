package federation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
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

// Repair rebuilds the copies of old versions too: each version's bytes are
// an object of their own on every member of a replicated bucket.
func TestRepairRestoresVersions(t *testing.T) {
	ctx := context.Background()
	pol, err := policies.Parse("policy.yaml", []byte(`
stores:
  - {name: a, kind: posix, location: onprem:lab, path: /unused/a}
  - {name: b, kind: posix, location: onprem:lab, path: /unused/b}
buckets:
  - {name: ckpt, placement: {replicate: [a, b]}}
`), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := posixStore(t, "a", testLoc), posixStore(t, "b", testLoc)
	ns, err := federation.New(federation.Config{State: openState(t), Stores: map[string]store.Store{"a": sa, "b": sb},
		DefaultStore: "a", Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ns.Bucket("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetVersioning(ctx, federation.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	var infos []store.ObjectInfo
	for i := range 2 {
		body := strings.Repeat("x", 10+i)
		info, err := b.Put(ctx, "latest.pt", strings.NewReader(body), int64(len(body)), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	// Member b loses the old version's copy.
	if err := sb.Delete(ctx, infos[0].StoreKey); err != nil {
		t.Fatal(err)
	}
	st, err := ns.Repair(ctx, "ckpt", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copies != 1 {
		t.Fatalf("repair re-created %d copies, want 1 (the old version's): %+v", st.Copies, st)
	}
	if _, err := sb.Stat(ctx, infos[0].StoreKey); err != nil {
		t.Fatalf("the old version's copy on b after repair: %v", err)
	}
}
