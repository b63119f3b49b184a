package placement

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
	"github.com/fedgate/fedgate/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

var testLocs = []policies.Location{
	{Cloud: "aws", Region: "us-east-1"},
	{Cloud: "gcp", Region: "us-central1"},
	{Cloud: "azure", Region: "eastus"},
	{Cloud: "onprem", Region: "lga1"},
}

var placementLoc = policies.Location{Cloud: "onprem", Region: "lga1"}

// posixStores makes n posix stores in fresh temp dirs, returning them and
// their directories.
func posixStores(t testing.TB, n int) ([]store.Store, []string) {
	t.Helper()
	stores := make([]store.Store, n)
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = t.TempDir()
		s, err := posix.New(fmt.Sprintf("posix%d", i), testLocs[i%len(testLocs)], dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	return stores, dirs
}

// conformanceCaps: the composites over posix stores hold what posix holds.
// Every write makes a new version id, so no ContentValidator; the
// composites check read preconditions themselves. Short keeps the package
// under a minute on two cores; the full sizes pass too (about 75 s).
var conformanceCaps = storetest.Capabilities{MaxKeyLen: posix.MaxKeyLen, Short: true}

func TestReplicatedConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		stores, _ := posixStores(t, 4)
		r, err := NewReplicated("rep", placementLoc, stores)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, conformanceCaps)
}

// TestErasureConformance runs the suite with small segments and blocks, so
// its objects span many segments and ranges cross segment, shard and block
// boundaries.
func TestErasureConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		stores, _ := posixStores(t, 4)
		e, err := NewErasure("ec", placementLoc, stores, 4, 2,
			WithSegmentSize(256<<10+8), WithBlockSize(16<<10), WithInlineLimit(1000))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}, conformanceCaps)
}

// testData returns n deterministic pseudo-random bytes.
func testData(seed uint64, n int) []byte {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func mustPut(t testing.TB, s store.Store, key string, b []byte) store.ObjectInfo {
	t.Helper()
	info, err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), store.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", key, len(b), err)
	}
	return info
}

func readAll(t testing.TB, s store.Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.ReadRange(t.Context(), key, off, n, "")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// checkBytes asserts that key reads back as want, whole and in ranges.
func checkBytes(t testing.TB, s store.Store, key string, want []byte) {
	t.Helper()
	size := int64(len(want))
	ranges := [][2]int64{{0, -1}, {0, 1}, {size / 3, size / 3}, {size - 1, -1}, {size / 2, -1}, {1, size - 2}}
	for _, r := range ranges {
		if r[0] < 0 || r[0] > size || (r[1] > 0 && r[0]+r[1] > size) || (size == 0 && r[0] > 0) {
			continue
		}
		got, err := readAll(t, s, key, r[0], r[1])
		end := size
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		if err != nil {
			t.Errorf("ReadRange(%s, %d, %d): %v", key, r[0], r[1], err)
			continue
		}
		if !bytes.Equal(got, want[r[0]:end]) {
			t.Errorf("ReadRange(%s, %d, %d): %d bytes differ from the %d written", key, r[0], r[1], len(got), end-r[0])
		}
	}
}
