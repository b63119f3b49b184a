package azure

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

// Azurite (3.35) keeps no blob versions: writes get no version id,
// listings with include=versions list the blobs alone, and versionid on a
// read or a delete is ignored (the current blob answers, or is deleted).
// So the store's versions are tested here only as far as Azurite goes:
// the unversioned suite (every blob is its "null" version), ids the
// container does not have (which must not reach the current blob),
// NativeVersioning's probe, and the listing's paging. Versioned
// containers (several versions of a key, deleting one, the current one, a
// deleted blob's versions with none latest) are not tested against any
// server.

func TestVersions(t *testing.T) {
	storetest.RunVersions(t, func(t *testing.T) store.Store { return newStore(t, nil) }, nil, storetest.VersionCapabilities{})
}

// TestVersionsSmallPages runs the suite with listings of 3 entries a page,
// so that paging resumes from the cached Azure marker.
func TestVersionsSmallPages(t *testing.T) {
	storetest.RunVersions(t, func(t *testing.T) store.Store {
		s := newStore(t, nil)
		s.pageSize = 3
		return s
	}, nil, storetest.VersionCapabilities{})
}

// countRequests counts the requests of each method (and list requests as
// "LIST").
type countRequests struct{ counts *sync.Map }

func (c countRequests) Do(req *policy.Request) (*http.Response, error) {
	m := req.Raw().Method
	if req.Raw().URL.Query().Get("comp") == "list" {
		m = "LIST"
	}
	n, _ := c.counts.LoadOrStore(m, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	return req.Next()
}

func total(m *sync.Map) int64 {
	var n int64
	m.Range(func(_, v any) bool { n += v.(*atomic.Int64).Load(); return true })
	return n
}

// rawNames lists every blob name in the container, versions and reserved
// names included, bypassing List.
func rawNames(t *testing.T, s *Store) []string {
	t.Helper()
	var names []string
	p := s.cont.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Versions: true}})
	for p.More() {
		resp, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range resp.Segment.BlobItems {
			names = append(names, *it.Name)
		}
	}
	return names
}

// TestNativeVersioningProbe: on Azurite, which gives writes no version id,
// an empty container's listing shows nothing, so a probe is written: it
// says "" and leaves no blob behind; its answer is cached for probeTTL
// (past versioningTTL), then asked again.
func TestNativeVersioningProbe(t *testing.T) {
	var counts sync.Map
	s := newStore(t, func(c *Config) { c.policies = []policy.Policy{countRequests{&counts}} })
	now := time.Now()
	s.now = func() time.Time { return now }
	for i := range 3 {
		st, err := s.NativeVersioning(t.Context())
		if err != nil || st != "" {
			t.Fatalf("NativeVersioning() = %q, %v; want \"\" (Azurite keeps no versions)", st, err)
		}
		if n := total(&counts); n != 3 {
			t.Errorf("call %d: %d requests so far, want 3 (the listing, the probe's write and delete, then the cached answer)", i, n)
		}
	}
	now = now.Add(versioningTTL + time.Second)
	if _, err := s.NativeVersioning(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := total(&counts); n != 3 {
		t.Errorf("%d requests once versioningTTL passed, want 3 (a probe's answer holds for probeTTL)", n)
	}
	now = now.Add(probeTTL)
	if _, err := s.NativeVersioning(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := total(&counts); n != 6 {
		t.Errorf("%d requests after probeTTL, want 6 (asked again)", n)
	}
	if names := rawNames(t, s); len(names) != 0 {
		t.Errorf("the probe left %q", names)
	}
}

// TestNativeVersioningReadOnly: with a credential that may read and list
// but not write, NativeVersioning asks the listing instead of failing.
func TestNativeVersioningReadOnly(t *testing.T) {
	cfg := testConfig(t, nil)
	rw := newStoreFrom(t, cfg)
	if _, err := rw.Put(t.Context(), "k", strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	az := testenv.Azurite(t)
	key, err := container.NewSharedKeyCredential(az.Account, az.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := container.NewClientWithSharedKeyCredential(rw.cont.URL(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := owner.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, token, _ := strings.Cut(u, "?")
	ro := newStoreFrom(t, Config{
		Name: "ro", Location: testLoc, Container: cfg.Container, SASToken: token,
		Endpoint: strings.TrimSuffix(endpoint, "/"+cfg.Container),
	})
	if _, err := ro.Put(t.Context(), "w", strings.NewReader("x"), 1, store.PutOptions{}); err == nil {
		t.Fatal("a write with the read-only SAS succeeded")
	}
	st, err := ro.NativeVersioning(t.Context())
	if err != nil || st != "" {
		t.Errorf("NativeVersioning() with a read-only SAS = %q, %v; want \"\"", st, err)
	}
	if names := rawNames(t, rw); !slices.Equal(names, []string{"k"}) {
		t.Errorf("blobs %q, want [k]", names)
	}
}

// TestVersionIDNotIgnored: Azurite ignores versionid; an id the blob does
// not have must neither read the current blob nor delete it.
func TestVersionIDNotIgnored(t *testing.T) {
	s := newStore(t, nil)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("live"), 4, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	const id = "2026-01-02T03:04:05.1234567Z" // well-formed, and not k's
	if _, err := s.StatVersion(t.Context(), "k", id); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Errorf("StatVersion(k, %s) = %v, want ErrNoSuchVersion", id, err)
	}
	if _, err := s.ReadVersionRange(t.Context(), "k", id, 0, -1); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Errorf("ReadVersionRange(k, %s) = %v, want ErrNoSuchVersion", id, err)
	}
	if err := s.DeleteVersion(t.Context(), "k", id); err != nil {
		t.Errorf("DeleteVersion(k, %s) = %v", id, err)
	}
	if _, err := s.Stat(t.Context(), "k"); err != nil {
		t.Errorf("after DeleteVersion of another id: Stat(k) = %v; the blob must stay", err)
	}
}

// TestListVersionsResumes: paging as the gateway does continues from the
// cached Azure marker instead of listing from the prefix again.
func TestListVersionsResumes(t *testing.T) {
	var n atomic.Int64
	s := newStore(t, func(c *Config) { c.policies = []policy.Policy{countLists{&n}} })
	s.pageSize = 5
	var keys []string
	for i := range 80 {
		keys = append(keys, fmt.Sprintf("%s/%c-%02d", strings.Repeat("k", 1+i%3), 'a'+i%26, i))
	}
	putAll(t, s, keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	n.Store(0)
	var got []string
	opts := store.VersionListOptions{}
	pages := 0
	for {
		var page []store.VersionEntry
		for e, err := range s.ListVersions(t.Context(), opts) {
			if err != nil {
				t.Fatal(err)
			}
			page = append(page, e)
			if len(page) == 8 { // 7 and one more, as the gateway does
				break
			}
		}
		pages++
		if len(page) < 8 {
			for _, e := range page {
				got = append(got, e.Key)
			}
			break
		}
		for _, e := range page[:7] {
			got = append(got, e.Key)
		}
		opts.KeyMarker, opts.VersionIDMarker = page[6].Key, page[6].Info.VersionID
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("paged listing:\n got %q\nwant %q", got, keys)
	}
	// A page of 7 rows, and the one more that ends its last key, starts on
	// the Azure page holding the resume point and takes at most two more
	// of 5 entries; listing from the prefix every time would take about
	// pages^2/1.4 (some 100 here).
	if max := int64(3*pages + 1); n.Load() > max {
		t.Errorf("%d pages took %d Azure list requests, want <= %d", pages, n.Load(), max)
	}
	t.Logf("%d pages of 7 rows, %d Azure list requests of 5 entries", pages, n.Load())
}
