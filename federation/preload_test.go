package federation_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/internal/wait"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
)

// fixture is one region sharing one Raft node: a bucket "data" mounted from
// a (faulty-wrapped, so cached) origin and a bucket "local" on a posix
// store (read directly, never cached).
type fixture struct {
	t      *testing.T
	node   *regionstate.Node
	origin *faulty.Store
	inner  store.Store
	ns     []*federation.Namespace
	caches []*cachetier.Cache
}

func newFixture(t *testing.T, members ...string) *fixture {
	t.Helper()
	f := &fixture{t: t}
	node := openState(t)
	f.node = node
	loc := testLoc
	inner := posixStore(t, "origin", loc)
	f.inner = inner
	f.origin = faulty.Wrap(inner, faulty.Config{})
	local := posixStore(t, "local", loc)
	pol := &policies.Policy{Buckets: []policies.Bucket{
		{Name: "data", Origin: &policies.Origin{Store: "origin", Prefix: "ds/"}},
		{Name: "local", Origin: &policies.Origin{Store: "local"}},
	}}
	if len(members) == 0 {
		members = []string{"solo"}
	}
	for _, m := range members {
		cfg := cachetier.Config{Dir: t.TempDir(), Capacity: 1 << 30, ChunkSize: testChunk, NoSync: true}
		if len(members) > 1 {
			cfg.Self, cfg.Peers = m, noPeers{}
		}
		c, err := cachetier.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if len(members) > 1 {
			c.SetMembers(members)
		}
		ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"origin": f.origin, "local": local},
			DefaultStore: "local", Policy: pol, Cache: c, Region: region{self: m, members: members}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Subscribe(ns.OnApply))
		ns.StartPins()
		f.ns = append(f.ns, ns)
		f.caches = append(f.caches, c)
	}
	return f
}

// put writes objects of size bytes under ds/<prefix> in the origin and
// returns their total size.
func (f *fixture) put(prefix string, count int, size int) int64 {
	f.t.Helper()
	for i := range count {
		data := bytes.Repeat([]byte{byte(i + 1)}, size)
		if _, err := f.inner.Put(context.Background(), fmt.Sprintf("ds/%sobj-%03d", prefix, i), bytes.NewReader(data), int64(size), store.PutOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
	return int64(count * size)
}

// run starts every namespace's preloader until the returned func is called.
func (f *fixture) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(f.ns))
	for _, ns := range f.ns {
		go func() { ns.RunPreloader(ctx); done <- struct{}{} }()
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range f.ns {
			<-done
		}
	}
	f.t.Cleanup(stop)
	return stop
}

func (f *fixture) waitJob(id string, cond func(federation.PreloadStatus) bool) federation.PreloadStatus {
	f.t.Helper()
	var st federation.PreloadStatus
	wait.For(f.t, 30*time.Second, "job "+id, func() bool {
		var err error
		if st, err = f.ns[0].Job(id); err != nil {
			f.t.Fatal(err)
		}
		return cond(st)
	})
	return st
}

func done(st federation.PreloadStatus) bool { return st.Done }

func TestPreloadSingleNodePinned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	total := f.put("train/", 5, 2*testChunk+1000)
	f.put("val/", 2, 1000) // outside the prefix
	f.run()
	job, err := f.ns[0].StartPreload(ctx, "data", "train/", true)
	if err != nil {
		t.Fatal(err)
	}
	st := f.waitJob(job.ID, done)
	if st.Objects != 5 || st.TotalObjects != 5 || st.Bytes != total || st.TotalBytes != total || st.Errors != 0 || st.State() != "done" {
		t.Fatalf("job: %+v", st)
	}
	if got := f.origin.Count.BytesRead.Load(); got != total {
		t.Fatalf("read %d bytes from the origin, want %d", got, total)
	}
	cs := f.caches[0].Stats()
	if cs.Used != total || cs.PinnedBytes != total {
		t.Fatalf("cache holds %d bytes, %d pinned; want %d", cs.Used, cs.PinnedBytes, total)
	}
	if pins := f.ns[0].Pins(); len(pins) != 1 || pins[0].Bucket != "data" || pins[0].Prefix != "train/" {
		t.Fatalf("pins: %+v", pins)
	}
	// A second preload of what is cached reads nothing from the origin.
	job2, err := f.ns[0].StartPreload(ctx, "data", "train/", false)
	if err != nil {
		t.Fatal(err)
	}
	f.waitJob(job2.ID, done)
	if got := f.origin.Count.BytesRead.Load(); got != total {
		t.Fatalf("the second preload read %d bytes from the origin", got-total)
	}
	if err := f.ns[0].Unpin(ctx, "data", "train/"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the unpinned chunks to be unpinned", func() bool { return f.caches[0].Stats().PinnedBytes == 0 })
	if len(f.ns[0].Pins()) != 0 {
		t.Fatal("the pin is still listed")
	}
	// Jobs are listed oldest first; cancelling a done job forgets it.
	if jobs := f.ns[0].Jobs(); len(jobs) != 2 || jobs[0].ID != job.ID {
		t.Fatalf("jobs: %+v", jobs)
	}
	if removed, err := f.ns[0].CancelPreload(ctx, job.ID); err != nil || !removed {
		t.Fatalf("cancel a done job: removed %v, %v", removed, err)
	}
	if _, err := f.ns[0].Job(job.ID); !errors.Is(err, federation.ErrNoSuchJob) {
		t.Fatalf("a forgotten job: %v", err)
	}
}

func TestPreloadErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.ns[0].StartPreload(ctx, "nope", "", false); !errors.Is(err, federation.ErrNoSuchBucket) {
		t.Fatalf("preload of a missing bucket: %v", err)
	}
	if _, err := f.ns[0].StartPreload(ctx, "data", "a\x00b", false); !errors.Is(err, federation.ErrInvalidPrefix) {
		t.Fatalf("preload with a NUL prefix: %v", err)
	}
	if _, err := f.ns[0].Pin(ctx, "nope", ""); !errors.Is(err, federation.ErrNoSuchBucket) {
		t.Fatalf("pin of a missing bucket: %v", err)
	}
	if err := f.ns[0].Unpin(ctx, "data", "x/"); !errors.Is(err, federation.ErrNoSuchPin) {
		t.Fatalf("unpin of a missing pin: %v", err)
	}
	if err := f.ns[0].Unpin(ctx, "nope", "x/"); !errors.Is(err, federation.ErrNoSuchBucket) {
		t.Fatalf("unpin in a missing bucket: %v", err)
	}
	if _, err := f.ns[0].Job("nope"); !errors.Is(err, federation.ErrNoSuchJob) {
		t.Fatalf("a missing job: %v", err)
	}
	if _, err := f.ns[0].CancelPreload(ctx, "nope"); !errors.Is(err, federation.ErrNoSuchJob) {
		t.Fatalf("cancel a missing job: %v", err)
	}
	// A local directory is never cached: its job is done at once, even
	// with no preloader running.
	job, err := f.ns[0].StartPreload(ctx, "local", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.ns[0].Job(job.ID); err != nil || !st.Done || !st.Uncached {
		t.Fatalf("preload of an uncached bucket: %+v %v", st, err)
	}
}

func TestPreloadSplitAcrossNodes(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	total := f.put("", 8, 3*testChunk+5)
	f.run()
	job, err := f.ns[1].StartPreload(context.Background(), "data", "", true)
	if err != nil {
		t.Fatal(err)
	}
	st := f.waitJob(job.ID, done)
	if st.Objects != 8 || st.Bytes != total || st.TotalBytes != total || len(st.Nodes) != 3 {
		t.Fatalf("job: %+v", st)
	}
	var sum int64
	for i, c := range f.caches {
		cs := c.Stats()
		if cs.Used == 0 || cs.PinnedBytes != cs.Used {
			t.Errorf("node %d: %d bytes cached, %d pinned", i, cs.Used, cs.PinnedBytes)
		}
		if p := st.Nodes[[]string{"a", "b", "c"}[i]]; p.Bytes != cs.Used || !p.Done || p.Objects != 8 {
			t.Errorf("node %d: progress %+v, cache %d bytes", i, p, cs.Used)
		}
		sum += cs.Used
	}
	if sum != total {
		t.Fatalf("the region cached %d bytes, want %d (each chunk once)", sum, total)
	}
	if got := f.origin.Count.BytesRead.Load(); got != total {
		t.Fatalf("read %d bytes from the origin, want %d", got, total)
	}
}

func TestPreloadResumesAndCancels(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const count = 12
	total := f.put("", count, 2*testChunk)
	// 4 chunks in flight at 64 KiB/s each: about 2 objects a second.
	f.origin.SetConfig(faulty.Config{BandwidthPerStream: 64 << 10})
	stop := f.run()
	job, err := f.ns[0].StartPreload(ctx, "data", "", false)
	if err != nil {
		t.Fatal(err)
	}
	st := f.waitJob(job.ID, func(st federation.PreloadStatus) bool { return st.Nodes["solo"].Objects >= 2 })
	stop() // a node stopping (or dying) mid-job
	st, _ = f.ns[0].Job(job.ID)
	p := st.Nodes["solo"]
	if p.Done || p.After == "" || p.Objects >= count {
		t.Fatalf("progress after the stop: %+v", p)
	}
	// Resumes after After: each object is counted once.
	f.origin.SetConfig(faulty.Config{})
	stop = f.run()
	st = f.waitJob(job.ID, done)
	if st.Objects != count || st.Bytes != total || st.Errors != 0 {
		t.Fatalf("resumed job: %+v", st)
	}

	// Cancel: the preloader stops, the job stays listed as canceled; a
	// second cancel forgets it.
	f.put("more/", count, 2*testChunk)
	f.origin.SetConfig(faulty.Config{BandwidthPerStream: 64 << 10})
	job2, err := f.ns[0].StartPreload(ctx, "data", "more/", false)
	if err != nil {
		t.Fatal(err)
	}
	f.waitJob(job2.ID, func(st federation.PreloadStatus) bool { return st.Nodes["solo"].Objects >= 1 })
	if removed, err := f.ns[0].CancelPreload(ctx, job2.ID); err != nil || removed {
		t.Fatalf("cancel a running job: removed %v, %v", removed, err)
	}
	// The cancel ends this node's run (the job was running: it had warmed
	// an object and was not done)...
	select {
	case <-f.ns[0].PreloadRunEnded(job2.ID):
	case <-time.After(30 * time.Second):
		t.Fatal("the canceled job's run did not end")
	}
	// ...and the preloader does not start it again: stopping the preloader
	// waits for every run it started.
	before := f.origin.Count.BytesRead.Load()
	stop()
	if after := f.origin.Count.BytesRead.Load(); after != before {
		t.Fatalf("a canceled job read %d more bytes", after-before)
	}
	st, _ = f.ns[0].Job(job2.ID)
	if st.State() != "canceled" || st.Done {
		t.Fatalf("canceled job: %+v", st)
	}
	if removed, err := f.ns[0].CancelPreload(ctx, job2.ID); err != nil || !removed {
		t.Fatalf("cancel a canceled job: removed %v, %v", removed, err)
	}
}

// A run stopped while an object is half warmed resumes from the last
// finished object: the half object's chunks are warmed (found cached)
// again, and counted once.
func TestPreloadResumeCountsBytesOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// 3 chunks an object, 4 warms in flight at 64 KiB/s each: the first
	// second finishes object 0 and one chunk of object 1.
	total := f.put("", 4, 3*testChunk)
	f.origin.SetConfig(faulty.Config{BandwidthPerStream: 64 << 10})
	stop := f.run()
	job, err := f.ns[0].StartPreload(ctx, "data", "", false)
	if err != nil {
		t.Fatal(err)
	}
	f.waitJob(job.ID, func(st federation.PreloadStatus) bool { return st.Nodes["solo"].Objects >= 1 })
	stop()
	f.origin.SetConfig(faulty.Config{})
	f.run()
	st := f.waitJob(job.ID, done)
	if st.Objects != 4 || st.Bytes != total {
		t.Fatalf("resumed job: %d objects, %d bytes; want 4 and %d", st.Objects, st.Bytes, total)
	}
}
