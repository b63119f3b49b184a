package gcs

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

// GCS has no delete markers and does not make an older generation live
// again when the live one is deleted.
var gcsVersionCaps = storetest.VersionCapabilities{}

func enableVersioning(t *testing.T, s store.Store) {
	t.Helper()
	if _, err := s.(*Store).bkt.Update(t.Context(), storage.BucketAttrsToUpdate{VersioningEnabled: true}); err != nil {
		t.Fatalf("enable versioning: %v", err)
	}
}

func TestVersions(t *testing.T) {
	storetest.RunVersions(t, func(t *testing.T) store.Store {
		s := newTestStore(t)
		t.Cleanup(func() { checkNoVersionLeftovers(t, s) })
		return s
	}, enableVersioning, gcsVersionCaps)
}

// TestVersionsSmallPages runs the suite with listings fetched 3 entries at
// a time, so that a key's generations straddle pages. fake-gcs-server's
// page token is the name of the next page's first object, and the next
// page starts at that name: generations already listed come again (which
// ListVersions drops), and a name with more generations than a page would
// be listed forever. 3 is the most generations the suite gives a key, so
// the pages always move on; real GCS continues after the last object
// listed.
func TestVersionsSmallPages(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.RunVersions(t, func(t *testing.T) store.Store {
		s := newTestStore(t)
		s.listPage = 3
		return s
	}, enableVersioning, gcsVersionCaps)
}

// rawGenerations lists every generation in the bucket as "name#n" (n
// counting a name's generations), the reserved prefix included, bypassing
// ListVersions.
func rawGenerations(t *testing.T, s *Store) []string {
	t.Helper()
	count := map[string]int{}
	it := s.bkt.Objects(context.Background(), &storage.Query{Versions: true})
	seen := map[string]bool{}
	for {
		a, err := it.Next()
		if err != nil {
			break
		}
		id := fmt.Sprintf("%s@%d", a.Name, a.Generation)
		if seen[id] { // fake-gcs-server lists some twice, see TestVersionsSmallPages
			continue
		}
		seen[id] = true
		count[a.Name]++
	}
	var out []string
	for name, n := range count {
		for i := range n {
			out = append(out, fmt.Sprintf("%s#%d", name, i+1))
		}
	}
	slices.Sort(out)
	return out
}

// checkNoVersionLeftovers: no generation under the reserved prefix is
// left behind by a write, in a bucket with versioning or without (the
// suite leaves no upload open).
func checkNoVersionLeftovers(t *testing.T, s *Store) {
	for _, g := range rawGenerations(t, s) {
		if strings.HasPrefix(g, reservedPrefix) {
			t.Errorf("leftover generation %s", g)
		}
	}
}

// TestVersionedWritesLeaveOneGeneration: in a bucket with versioning each
// write leaves one generation of its key and none under the reserved
// prefix: staged Puts (temporary object, then compose), a multipart upload
// with a part uploaded twice and a compose tree, and an aborted upload.
func TestVersionedWritesLeaveOneGeneration(t *testing.T) {
	s := newTestStore(t)
	s.fanIn = 2 // three parts take a tree of composes
	enableVersioning(t, s)
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*testChunk/16)
	for range 2 {
		if _, err := s.Put(ctx, "staged", bytes.NewReader(big), int64(len(big)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "staged-unknown", bytes.NewReader(big), -1, store.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	id, err := s.CreateMultipart(ctx, "mp", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []store.PartInfo
	for n, b := range [][]byte{[]byte("one"), []byte("first two"), []byte("two"), []byte("three")} {
		num := min(n+1, 2) + max(n-2, 0)
		p, err := s.UploadPart(ctx, "mp", id, num, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 { // part 2 is uploaded twice; the second counts
			parts = append(parts, p)
		}
	}
	if _, err := s.CompleteMultipart(ctx, "mp", id, parts, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "mp"); string(got) != "onetwothree" {
		t.Errorf("mp = %q", got)
	}
	id2, err := s.CreateMultipart(ctx, "aborted", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.UploadPart(ctx, "aborted", id2, 1, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AbortMultipart(ctx, "aborted", id2); err != nil {
		t.Fatal(err)
	}
	want := []string{"mp#1", "staged#1", "staged#2", "staged-unknown#1"}
	if got := rawGenerations(t, s); !slices.Equal(got, want) {
		t.Errorf("generations in the bucket:\n got %q\nwant %q", got, want)
	}
}
