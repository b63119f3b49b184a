package federation_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/lifecycle"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

// testClock is a settable clock for the namespace (Config.Now).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// lifecycleNamespace is a one-store namespace with the policy yaml, a
// settable clock and an unpaced lifecycle runner; it returns the bucket
// "ckpt" of the policy.
func lifecycleNamespace(t *testing.T, yaml string) (*federation.Namespace, *federation.Bucket, *testClock, *posix.Store) {
	t.Helper()
	pol, err := policies.Parse("policy.yaml", []byte(yaml), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Now()}
	local := posixStore(t, "local", testLoc)
	ns, err := federation.New(federation.Config{State: openState(t), Stores: map[string]store.Store{"local": local},
		DefaultStore: "local", Policy: pol, Now: clock.now, Lifecycle: federation.LifecycleConfig{Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ns.Bucket("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	return ns, b, clock, local
}

func TestLifecycleRunner(t *testing.T) {
	ctx := context.Background()
	ns, b, clock, local := lifecycleNamespace(t, `
buckets:
  - name: ckpt
    lifecycle:
      - id: old-runs
        filter: {prefix: runs/}
        expiration: {days: 7}
      - id: tmp-tagged
        filter: {prefix: tmp/, tags: {keep: "no"}, object_size_greater_than: 2}
        expiration: {days: 1}
      - id: logs-later
        filter: {prefix: logs/}
        expiration: {days: 30}
      - id: stale-uploads
        abort_incomplete_multipart_upload: {days_after_initiation: 2}
`)
	put := func(key, body, tags string) {
		t.Helper()
		meta := store.Metadata{}
		if tags != "" {
			meta.User = map[string]string{lifecycle.TaggingMetaKey: tags}
		}
		if _, err := b.Put(ctx, key, strings.NewReader(body), int64(len(body)), store.PutOptions{Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	put("runs/1/model.pt", "old", "")
	put("runs/2/model.pt", "old", "")
	put("tmp/a", "tagged", "keep=no")
	put("tmp/b", "tagged", "keep=yes")
	put("tmp/c", "x", "keep=no") // too small for the size filter
	put("logs/today", "young", "")
	put("other/x", "no rule", "")
	up, err := ns.CreateUpload(ctx, federation.User{Name: federation.RootUser, Root: true}, b, "runs/3/big", store.Metadata{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.UploadPart(ctx, b, up, 1, strings.NewReader("part"), 4, nil); err != nil {
		t.Fatal(err)
	}

	// Nothing is due yet.
	run, err := ns.RunLifecyclePass(ctx)
	if err != nil || run.Expired != 0 || run.Aborted != 0 {
		t.Fatalf("first pass: %+v %v", run, err)
	}

	// Eight days on: runs/ and the tagged tmp/a expire; an object
	// overwritten between the runner's look and its delete stays.
	clock.set(clock.now().Add(8 * 24 * time.Hour))
	overwritten := false
	ns.SetLifecycleHook(func(bucket, key string) {
		if key == "runs/2/model.pt" {
			// A new validator: another size ("old" was 3 bytes), and the
			// posix store stamps each commit with a fresh nanosecond mtime.
			put(key, "new bytes", "")
			overwritten = true
		}
	})
	run, err = ns.RunLifecyclePass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !overwritten || run.Expired != 2 || run.Skipped != 1 || run.Aborted != 1 || run.Errors != 0 {
		t.Errorf("pass: %+v", run)
	}
	for key, want := range map[string]bool{"runs/1/model.pt": false, "runs/2/model.pt": true, "tmp/a": false, "tmp/b": true,
		"tmp/c": true, "logs/today": true, "other/x": true} {
		_, err := b.Stat(ctx, key)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v (%v)", key, got, want, err)
		}
	}
	// The stale upload is gone, in Raft and in the store.
	if _, err := ns.Upload(b, up.ID, up.Key); !errors.Is(err, federation.ErrNoSuchUpload) {
		t.Errorf("upload after the pass: %v", err)
	}
	if _, err := local.UploadPart(ctx, "ckpt/"+up.Key, up.StoreUploadID, 2, strings.NewReader("x"), 1); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("the store still has the upload: %v", err)
	}
	st := ns.LifecycleStatus()
	if st.Last.Expired != 2 || st.Last.End.IsZero() || !st.Next.Equal(st.Last.Start.Add(federation.DefaultLifecycleEvery)) {
		t.Errorf("status %+v", st)
	}

	// The policy file's rules win: the bucket's S3 configuration cannot be
	// set, and GetBucketLifecycleConfiguration returns the file's.
	h, err := ns.Backend().Bucket("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(ctx, backend.ConfLifecycle, "<LifecycleConfiguration/>"); !errors.Is(err, backend.ErrPolicyBucket) {
		t.Errorf("SetConfig on a file bucket: %v", err)
	}
	doc, ok := h.Config(backend.ConfLifecycle)
	if cfg, err := lifecycle.ParseXML([]byte(doc)); !ok || err != nil || len(cfg.Rules) != 4 || cfg.Rules[0].ID != "old-runs" {
		t.Errorf("Config = %v %q %v", ok, doc, err)
	}
}

// TestLifecycleS3Configuration: a bucket created through S3 follows the
// configuration put on it.
func TestLifecycleS3Configuration(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: time.Now()}
	ns, err := federation.New(federation.Config{State: openState(t), Stores: map[string]store.Store{"local": posixStore(t, "local", testLoc)},
		DefaultStore: "local", Now: clock.now, Lifecycle: federation.LifecycleConfig{Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	root := federation.User{Name: federation.RootUser, Root: true}
	if err := ns.CreateBucket(ctx, root, "scratch"); err != nil {
		t.Fatal(err)
	}
	h, err := ns.Backend().Bucket("scratch")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := h.Put(ctx, k, strings.NewReader(k), 1, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	date := clock.now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 2)
	cfg := lifecycle.Configuration{Rules: []lifecycle.Rule{{ID: "all", Enabled: true, Filter: lifecycle.Filter{Prefix: "a"},
		Expiration: &lifecycle.Expiration{Date: date}}}}
	doc, _ := cfg.XML("")
	if err := h.SetConfig(ctx, backend.ConfLifecycle, string(doc)); err != nil {
		t.Fatal(err)
	}
	if run, err := ns.RunLifecyclePass(ctx); err != nil || run.Expired != 0 {
		t.Fatalf("before the date: %+v %v", run, err)
	}
	clock.set(date)
	if run, err := ns.RunLifecyclePass(ctx); err != nil || run.Expired != 1 || run.Scanned != 1 {
		t.Fatalf("on the date: %+v %v", run, err)
	}
	if _, err := h.Stat(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a: %v", err)
	}
	if _, err := h.Stat(ctx, "b"); err != nil {
		t.Errorf("b: %v", err)
	}
}
