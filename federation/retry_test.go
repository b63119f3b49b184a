package federation_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedgate/fedgate/federation"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/faulty"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// readAttempts is federation's budget for one read (federation/read.go).
const readAttempts = 6

// retryFixture is a region without a cache whose bucket "b" reads origin
// directly, so every read is one store call (plus federation's retries).
func retryFixture(t *testing.T, origin store.Store) *federation.Bucket {
	t.Helper()
	node := openState(t)
	pol := &policies.Policy{Buckets: []policies.Bucket{{Name: "b", Origin: &policies.Origin{Store: "origin"}}}}
	ns, err := federation.New(federation.Config{State: node, Stores: map[string]store.Store{"origin": origin},
		DefaultStore: "origin", Policy: pol, Region: region{self: "solo", members: []string{"solo"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ns.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadRetriesOneLayer: federation retries a failure no layer below
// has retried (posix, here behind the fault wrapper) readAttempts times,
// and a failure the store marks store.Retried (what the cloud stores
// return after their SDK's retries) once.
func TestReadRetriesOneLayer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retried bool
		want    int64
	}{
		{"unretried failures: federation retries", false, readAttempts},
		{"failures the store retried: no second layer", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			inner := posixStore(t, "origin", testLoc)
			data := []byte("0123456789")
			if _, err := inner.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			origin := faulty.Wrap(inner, faulty.Config{})
			b := retryFixture(t, origin)
			info, err := b.Stat(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			b.Forget("k")
			origin.SetConfig(faulty.Config{ErrorRate: 1, Retried: tc.retried})

			before := origin.Count.Failed.Load()
			if _, err := b.Stat(ctx, "k"); !errors.Is(err, store.ErrThrottled) {
				t.Fatalf("Stat = %v, want ErrThrottled", err)
			}
			if got := origin.Count.Failed.Load() - before; got != tc.want {
				t.Errorf("Stat: %d store calls, want %d", got, tc.want)
			}

			before = origin.Count.Failed.Load()
			if rc, err := b.Open(ctx, info, 0, info.Size); !errors.Is(err, store.ErrThrottled) {
				if err == nil {
					rc.Close()
				}
				t.Fatalf("Open = %v, want ErrThrottled", err)
			}
			if got := origin.Count.Failed.Load() - before; got != tc.want {
				t.Errorf("Open: %d ReadRange calls, want %d", got, tc.want)
			}
		})
	}
}

// TestReadRetriesS3SDKOnly drives the real S3 store (aws-sdk-go-v2)
// against a server that throttles every GET: one range read through
// federation costs the SDK's attempts only (MaxRetries), not
// MaxRetries x readAttempts.
func TestReadRetriesS3SDKOnly(t *testing.T) {
	const sdkAttempts = 3
	var heads, gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			heads.Add(1)
			w.Header().Set("Content-Length", "10")
			w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
			w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusOK)
			return
		}
		gets.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>fake</Message><RequestId>r1</RequestId></Error>`)
	}))
	t.Cleanup(srv.Close)
	s3, err := s3store.New(t.Context(), s3store.Config{
		Name: "origin", Location: policies.Location{Cloud: "aws", Region: "us-east-1"}, Bucket: "b", Region: "us-east-1",
		Endpoint: srv.URL, PathStyle: true, AccessKey: "AKIDFAKE", SecretKey: "fake-secret", MaxRetries: sdkAttempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := retryFixture(t, s3)
	info, err := b.Stat(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := b.Open(t.Context(), info, 0, info.Size)
	if err == nil {
		rc.Close()
		t.Fatal("Open succeeded against a server that throttles every GET")
	}
	if !errors.Is(err, store.ErrThrottled) || !store.WasRetried(err) {
		t.Errorf("Open = %v; want ErrThrottled marked store.Retried", err)
	}
	if got := gets.Load(); got != sdkAttempts {
		t.Errorf("one range read made %d GETs, want %d (the SDK's attempts only)", got, sdkAttempts)
	}
}
