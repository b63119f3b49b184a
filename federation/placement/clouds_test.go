package placement

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/azure"
	"github.com/fedgate/fedgate/store/faulty"
	"github.com/fedgate/fedgate/store/gcs"
	"github.com/fedgate/fedgate/store/posix"
	"github.com/fedgate/fedgate/store/s3"
)

// cloudStores returns stand-ins for the four clouds: MinIO (aws), fake-gcs
// server (gcp), Azurite (azure) and a posix directory (onprem), each on a
// fresh bucket. The servers' helpers skip the test where they are not
// installed, and fail it when CI is set.
func cloudStores(t *testing.T) []store.Store {
	t.Helper()
	ctx := t.Context()
	minio := testenv.MinIO(t)
	fake := testenv.FakeGCS(t)
	az := testenv.Azurite(t)
	aws, err := s3.New(ctx, s3.Config{
		Name: "aws", Location: testLocs[0], Bucket: minio.NewBucket(t),
		Region: minio.Region, Endpoint: minio.Endpoint, PathStyle: true,
		AccessKey: minio.AccessKey, SecretKey: minio.SecretKey, MinIOKeyRules: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	gcp, err := gcs.New(ctx, gcs.Config{
		Name: "gcp", Location: testLocs[1], Bucket: fake.NewBucket(t),
		Endpoint: fake.Endpoint, WithoutAuthentication: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcp.Close() })
	azs, err := azure.New(ctx, azure.Config{
		Name: "azure", Location: testLocs[2], Container: az.NewContainer(t), ConnectionString: az.ConnectionString,
	})
	if err != nil {
		t.Fatal(err)
	}
	onprem, err := posix.New("onprem", testLocs[3], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { onprem.Close() })
	return []store.Store{aws, gcp, azs, onprem}
}

// TestErasureAcrossClouds: erasure 4+2 over the four clouds' stand-ins.
// Each store in turn becomes unavailable (a fault wrapper fails every call:
// the shared servers cannot be stopped): every object still reads back
// byte-identical, writes fail naming the store; when it is back, Repair
// finds everything in place. Then one store comes back empty, as a
// fake-gcs-server with its memory backend does after a restart: Repair
// re-creates all its shards and manifests.
func TestErasureAcrossClouds(t *testing.T) {
	inner := cloudStores(t)
	fs := make([]*faulty.Store, len(inner))
	wrapped := make([]store.Store, len(inner))
	for i, s := range inner {
		fs[i] = faulty.Wrap(s, faulty.Config{})
		wrapped[i] = fs[i]
	}
	e, err := NewErasure("ckpt", placementLoc, wrapped, 4, 2,
		WithSegmentSize(1<<20), WithBlockSize(128<<10), WithCooldown(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	objs := []testObject{
		{key: "run-1/step-100/model.pt", data: testData(1, 3<<20+12345)},
		{key: "run-1/step-100/optim.pt", data: testData(2, 1<<20)},
		{key: "run-1/step-100/meta.json", data: testData(3, 700)},
		{key: "run-1/step-200/model.pt", data: testData(4, 2<<20+99), parts: 2},
		{key: "run-1/log", data: testData(5, 200_000), unknown: true},
	}
	putObjects(t, e, objs)
	keys := objectKeys(objs)
	checkAllShards(t, e, keys)
	for down := range inner {
		t.Run("down-"+inner[down].Name(), func(t *testing.T) {
			fs[down].SetConfig(faulty.Config{ErrorRate: 1})
			checkObjects(t, e, objs)
			if got := listKeys(t, e, store.ListOptions{Prefix: "run-1/", Delimiter: "/"}); fmt.Sprint(got) != "[run-1/log P:run-1/step-100/ P:run-1/step-200/]" {
				t.Errorf("List = %q", got)
			}
			_, err := e.Put(t.Context(), "run-1/new", bytes.NewReader(testData(6, 300_000)), 300_000, store.PutOptions{})
			if !errors.Is(err, faulty.ErrInjected) {
				t.Errorf("Put with %s down: %v, want the injected failure", inner[down].Name(), err)
			}
			fs[down].SetConfig(faulty.Config{}) // "restart"
			st, err := e.Repair(t.Context(), "run-1/", nil)
			if err != nil || st.Healthy != int64(len(objs)) {
				t.Errorf("Repair after the outage = %+v, %v; want every object healthy", st, err)
			}
		})
	}
	t.Run("gcp-comes-back-empty", func(t *testing.T) {
		gcp := inner[1]
		lost := 0
		for _, prefix := range []string{"run-1/", reservedPrefix} {
			var names []string
			for ent, err := range gcp.List(t.Context(), store.ListOptions{Prefix: prefix}) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, ent.Key)
			}
			for _, k := range names {
				if err := gcp.Delete(t.Context(), k); err != nil {
					t.Fatal(err)
				}
				lost++
			}
		}
		if lost < len(objs) {
			t.Fatalf("the gcp store held %d objects", lost)
		}
		checkObjects(t, e, objs)
		var last int64
		st, err := e.Repair(t.Context(), "", func(p RepairProgress) { last = p.Total })
		if err != nil || st.Manifests != int64(len(objs)) || st.Shards+st.Manifests != int64(lost) || last != int64(len(objs)) {
			t.Errorf("Repair = %+v, %v (progress total %d); want %d shards and manifests re-created", st, err, last, lost)
		}
		checkAllShards(t, e, keys)
		checkObjects(t, e, objs)
	})
}
