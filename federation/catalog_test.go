package federation

import (
	"testing"

	"github.com/fedgate/fedgate/policies"
)

// cheaperDirect is ChooseRoute for a store open here and a home reached.
func cheaperDirect(price func(src, dst policies.Location) float64, store, home, here policies.Location) bool {
	return ChooseRoute(price, RouteOptions{Here: here, Home: home, Store: store, StoreOpen: true, HomeReachable: true}) == RouteStore
}

// A region reads another region's bucket straight from its store when
// that is no dearer than through the home region's gateway, by the price
// table and the policy's overrides.
func TestCheaperDirect(t *testing.T) {
	loc := func(s string) policies.Location {
		l, err := policies.ParseLocation(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	pol := &policies.Policy{}
	price := priceScore(pol)
	tests := []struct {
		name              string
		store, home, here string
		direct            bool
	}{
		// The store is in the reader's own cloud region: free straight,
		// paid through a home in another cloud.
		{"store beside the reader", "aws:us-east-1", "gcp:us-central1", "aws:us-east-1", true},
		// The home region sits beside the reader (its cache is free to
		// read from there); the store is in another cloud.
		{"home beside the reader", "azure:eastus", "aws:us-east-1", "aws:us-east-1", false},
		// Store and home in one place: the same price, read straight (the
		// home region's gateway is not loaded for nothing).
		{"store at home", "gcp:us-central1", "gcp:us-central1", "aws:us-east-1", true},
	}
	for _, tc := range tests {
		if got := cheaperDirect(price, loc(tc.store), loc(tc.home), loc(tc.here)); got != tc.direct {
			t.Errorf("%s: direct = %v (store %s %.3g/GB, through home %s %.3g/GB)", tc.name, got,
				tc.store, price(loc(tc.store), loc(tc.here))*1e9, tc.home, price(loc(tc.home), loc(tc.here))*1e9)
		}
	}
	// By the built-in table an aws store read into gcp (0.09 USD/GB) is
	// dearer than through a home in azure (0.087); a policy price of 0.01
	// (a private interconnect) makes it the cheaper route.
	if cheaperDirect(price, loc("aws:us-east-1"), loc("azure:eastus"), loc("gcp:us-central1")) {
		t.Error("by the built-in prices, reading the aws store straight into gcp was chosen over an azure home")
	}
	over, err := policies.Parse("p.yaml", []byte("regions: []\negress:\n  prices:\n    \"aws:us-east-1\": {\"gcp:us-central1\": 0.01USD}\n"), policies.AllFeatures())
	if err != nil {
		t.Fatal(err)
	}
	if !cheaperDirect(priceScore(over), loc("aws:us-east-1"), loc("azure:eastus"), loc("gcp:us-central1")) {
		t.Error("with aws->gcp at 0.01 USD/GB, the azure home's gateway was chosen over reading the aws store straight")
	}
}

// A store not open here, or bytes right only at home, go through the home
// region; a home cut off sends reads to the store when it is open here,
// whatever it costs.
func TestChooseRouteReachability(t *testing.T) {
	price := priceScore(&policies.Policy{})
	aws, gcp := policies.Location{Cloud: "aws", Region: "us-east-1"}, policies.Location{Cloud: "gcp", Region: "us-central1"}
	base := RouteOptions{Here: aws, Home: aws, Store: gcp, StoreOpen: true, HomeReachable: true}
	if ChooseRoute(price, base) != RouteGateway {
		t.Error("home beside the reader, store in another cloud: not through home")
	}
	cut := base
	cut.HomeReachable = false
	if ChooseRoute(price, cut) != RouteStore {
		t.Error("home cut off, store open here: not the store")
	}
	cut.OnlyAtHome = true
	if ChooseRoute(price, cut) != RouteGateway {
		t.Error("write-back bytes only at home were read from the store")
	}
	closed := base
	closed.Home, closed.Store, closed.StoreOpen = gcp, aws, false
	if ChooseRoute(price, closed) != RouteGateway {
		t.Error("a store not open here was chosen")
	}
}
