package egress

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/fedgate/fedgate/policies"
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

// Request prices a user sets, the built-in ones they override, and what a
// number of requests costs.
func TestRequestPrices(t *testing.T) {
	p, err := ParseRequestPrice("onprem=0.0001/0.002")
	if err != nil || p.Location.Cloud != OnPrem || p.GetMicrosPer1000 != 100 || p.PutMicrosPer1000 != 2000 {
		t.Fatalf("onprem=0.0001/0.002: %+v, %v", p, err)
	}
	tab := NewRequestTable(p)
	got, _ := tab.Lookup(policies.Location{Cloud: OnPrem, Region: "lga1"})
	if got.GetMicrosPer1000 != 100 {
		t.Errorf("the user's price does not win: %+v", got)
	}
	aws, _ := tab.Lookup(policies.Location{Cloud: AWS, Region: "eu-west-1"})
	if !aws.Approx || aws.GetMicrosPer1000 != 400 || aws.PutMicrosPer1000 != 5000 {
		t.Errorf("built-in AWS request price = %+v", aws)
	}
	// 2,500 GETs and 1,000 PUTs on S3: 2.5 × 0.0004 + 1 × 0.005 = 0.006.
	if c := aws.Cost(2500, 1000); c.Cmp(Dollars(6, 1000)) != 0 {
		t.Errorf("cost = %s, want exactly 0.006", c.Rat().FloatString(6))
	}
	for in, want := range map[string]string{
		"aws":              "want CLOUD[:REGION]=GET/PUT",
		"aws=0.0004":       "want CLOUD[:REGION]=GET/PUT",
		"ibm=0.1/0.1":      `cloud "ibm"`,
		"aws=x/0.005":      `GET price "x"`,
		"aws=0.0004/-1":    `PUT price "-1"`,
		"aws=0.0000001/0":  "6 decimal places",
		"aws:nowhere=1/1x": `PUT price "1x"`,
	} {
		if _, err := ParseRequestPrice(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRequestPrice(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

// The per-byte figures the simulator and LearnKeep weigh: a schedule's
// first paid rate (past AWS's free 100 GB) and storage per byte-hour.
func TestPaidRateAndStoragePerHour(t *testing.T) {
	s := DefaultTable().Schedule(policies.Location{Cloud: AWS, Region: "us-east-1"}, policies.Location{Cloud: GCP, Region: "us-central1"})
	if got, want := s.PaidRate(), big.NewRat(90_000, GB*1e6); got.Cmp(want) != 0 {
		t.Errorf("AWS internet paid rate = %s, want %s (0.09 USD/GB)", got, want)
	}
	same := DefaultTable().Schedule(policies.Location{Cloud: AWS, Region: "us-east-1"}, policies.Location{Cloud: AWS, Region: "us-east-1"})
	if same.PaidRate().Sign() != 0 {
		t.Errorf("same-region paid rate = %s, want 0", same.PaidRate())
	}
	sp, _ := NewStorageTable().Lookup(policies.Location{Cloud: GCP, Region: "us-central1"})
	// 0.02 USD per GiB-month of 730 hours.
	if got, want := sp.PerByteHour(), big.NewRat(20_000, GiB*1e6*HoursPerMonth); got.Cmp(want) != 0 {
		t.Errorf("GCS per byte-hour = %s, want %s", got, want)
	}
	// T_even: 0.09 USD/GB fetched over 0.02 USD/GiB-month kept.
	if h := BreakEvenHours(s.PaidRate(), sp.PerByteHour()); math.Abs(h-0.09/(0.02/1.073741824/730)) > 1e-6 {
		t.Errorf("T_even = %v h", h)
	}
}
