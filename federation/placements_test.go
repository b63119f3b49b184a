package federation

import (
	"slices"
	"testing"

	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/posix"
)

func TestPlacementRanks(t *testing.T) {
	if got := explicitRank([]string{"a", "b", "c", "d"}, []string{"c", "a"}); !slices.Equal(got, []int{2, 0, 1, 3}) {
		t.Fatalf("explicitRank = %v", got)
	}
	mk := func(name, loc string) store.Store {
		l, err := policies.ParseLocation(loc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := posix.New(name, l, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	members := []store.Store{mk("far", "azure:japaneast"), mk("cloud", "gcp:europe-west4"), mk("continent", "aws:us-east-1"), mk("here", "gcp:us-central1"), mk("samecloud", "gcp:us-east4")}
	n := &Namespace{egress: &egressRecorder{region: "gcp:us-central1"}}
	if got := n.rankByDistance(members); !slices.Equal(got, []int{3, 1, 4, 2, 0}) {
		t.Fatalf("rankByDistance = %v, want here, same cloud (in listed order), then the rest", got)
	}
	// Cheapest from gcp:us-central1: its own region is free, then GCP inter-region,
	// then other clouds' internet egress.
	if got := n.rankByPrice(nil, members); got[0] != 3 {
		t.Fatalf("rankByPrice = %v, want the region's own store first", got)
	}
}
