package federation_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/fedgate/fedgate/cachetier"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/regionstate"
	"github.com/fedgate/fedgate/store/posix"
)

// Test helpers shared by the federation tests.

const testChunk = 64 << 10

// region is a fake federation.Region of fixed members.
type region struct {
	self    string
	members []string
}

func (r region) Self() string                      { return r.self }
func (r region) Members() []string                 { return r.members }
func (r region) ReadBarrier(context.Context) error { return nil }
func (r region) StageTo(context.Context, string, string, io.Reader, int64) error {
	return errors.New("no staging in this test")
}
func (r region) ReadStaged(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("no staging in this test")
}
func (r region) HoldStaged(context.Context, string, []string, time.Duration) error { return nil }

// noPeers fails every peer read (the preloader never reads from peers).
type noPeers struct{}

func (noPeers) ReadChunk(context.Context, string, cachetier.ChunkKey, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("no peers in this test")
}

// openState opens a one-node region state in a temporary directory,
// closed when the test ends.
func openState(t testing.TB) *regionstate.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := regionstate.Open(ctx, regionstate.Config{NodeID: "n1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	return node
}

// posixStore is a posix store named name in a temporary directory.
func posixStore(t *testing.T, name string, loc policies.Location) *posix.Store {
	t.Helper()
	st, err := posix.New(name, loc, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// testLoc is where the tests' on-prem stores are.
var testLoc = policies.Location{Cloud: "onprem", Region: "test"}
