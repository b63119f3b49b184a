package egress

import (
	"strings"
	"testing"
)

// A storage price a user sets on the command line, and the mistakes one
// makes typing it.
func TestParseStoragePrice(t *testing.T) {
	p, err := ParseStoragePrice("onprem=0.004")
	if err != nil || p.Location.Cloud != OnPrem || p.MicrosPerUnitMonth != 4000 || p.Unit != GB {
		t.Fatalf("onprem=0.004: %+v, %v", p, err)
	}
	p, err = ParseStoragePrice("aws:eu-west-1=0.024")
	if err != nil || p.Location.Region != "eu-west-1" || p.MicrosPerUnitMonth != 24000 {
		t.Fatalf("aws:eu-west-1=0.024: %+v, %v", p, err)
	}
	tab := NewStorageTable(p)
	if got, _ := tab.Lookup(p.Location); got.MicrosPerUnitMonth != 24000 {
		t.Errorf("the user's price does not win over the built-in one: %+v", got)
	}
	for in, want := range map[string]string{
		"onprem":           "want CLOUD[:REGION]=USD_PER_GB_MONTH",
		"ibm=0.01":         `cloud "ibm"`,
		"onprem=-1":        "not a price",
		"onprem=cheap":     "not a price",
		"onprem=0.0000001": "6 decimal places",
	} {
		if _, err := ParseStoragePrice(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseStoragePrice(%q) = %v, want an error with %q", in, err, want)
		}
	}
	if strings.Contains(BuiltinStoragePrices()[3].Name, "AdviseOptions") {
		t.Error("the on-prem price still names a Go field no CLI user can set")
	}
}
