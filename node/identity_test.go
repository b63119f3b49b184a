package node

import (
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/azure"
	"github.com/fedgate/fedgate/store/gcs"
)

// A region whose default store is a GCS bucket or an Azure container
// claims it like a posix store (the marker's key used to be one both
// stores reserve, so such a region could not start), and a region of
// another id is refused there.
func TestClaimCloudDefaultStores(t *testing.T) {
	fg := testenv.FakeGCS(t)
	gs, err := gcs.New(t.Context(), gcs.Config{Name: "gcs", Location: policies.Location{Cloud: "gcp", Region: "us-central1"},
		Bucket: fg.NewBucket(t), Endpoint: fg.Endpoint, WithoutAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	az := testenv.Azurite(t)
	as, err := azure.New(t.Context(), azure.Config{Name: "az", Location: policies.Location{Cloud: "azure", Region: "eastus"},
		Account: az.Account, AccountKey: az.AccountKey, Endpoint: az.Endpoint, Container: az.NewContainer(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []store.Store{gs, as} {
		mine := regionMarker{RegionID: "r-1", Region: "lab", Node: "n1", Created: time.Now().UTC()}
		for range 2 { // a restart claims it again
			if err := claimStore(t.Context(), st, "/data", mine); err != nil {
				t.Fatalf("%s: claim: %v", st.Name(), err)
			}
		}
		other := mine
		other.RegionID, other.Node = "r-2", "n9"
		if err := claimStore(t.Context(), st, "/data", other); err == nil || !strings.Contains(err.Error(), "belongs to another region") {
			t.Fatalf("%s: a second region's claim = %v, want a refusal", st.Name(), err)
		}
	}
}
