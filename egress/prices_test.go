package egress

import (
	"encoding/json"
	"testing"

	"github.com/fedgate/fedgate/policies"
)

func loc(t testing.TB, s string) policies.Location {
	t.Helper()
	l, err := policies.ParseLocationOrCloud(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestUSDRounding(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0", "0.00"},
		{"0.125", "0.12"}, // half to even: down to 12
		{"0.135", "0.14"}, // up to 14
		{"0.1251", "0.13"},
		{"0.085", "0.08"},
		{"-0.125", "-0.12"},
		{"-0.126", "-0.13"},
		{"0.005", "0.00"},
		{"0.015", "0.02"},
		{"0.0186264514923095703125", "0.02"},
		{"1071.1936264514923095703125", "1071.19"},
		{"123456789.995", "123456790.00"},
	} {
		u := usd(t, c.in)
		if got := u.String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.in, got, c.want)
		}
		if b, _ := json.Marshal(u); string(b) != c.want {
			t.Errorf("%s: JSON %s, want %s", c.in, b, c.want)
		}
	}
	if got := usd(t, "0.0000005").Micros(); got != 0 {
		t.Errorf("Micros half-even: %d", got)
	}
	if got := usd(t, "0.0000015").Micros(); got != 2 {
		t.Errorf("Micros half-even: %d", got)
	}
	var zero USD
	if zero.String() != "0.00" || !zero.Add(MicroUSD(10_000)).Sub(Dollars(1, 100)).IsZero() {
		t.Error("zero value arithmetic")
	}
	if _, err := FromMoney(policies.Money{Micros: 1, Currency: "EUR"}); err == nil {
		t.Error("EUR accepted")
	}
}

func TestContinents(t *testing.T) {
	for s, want := range map[string]Continent{
		"aws:us-east-1":            NorthAmerica,
		"aws:us-gov-west-1":        NorthAmerica,
		"aws:ca-central-1":         NorthAmerica,
		"aws:sa-east-1":            SouthAmerica,
		"aws:eu-west-1":            Europe,
		"aws:ap-northeast-1":       Asia,
		"aws:ap-southeast-2":       Oceania,
		"aws:me-central-1":         MiddleEast,
		"aws:il-central-1":         MiddleEast,
		"aws:af-south-1":           Africa,
		"aws:cn-north-1":           Asia,
		"gcp:us-central1":          NorthAmerica,
		"gcp:northamerica-ne1":     NorthAmerica,
		"gcp:southamerica-e1":      SouthAmerica,
		"gcp:europe-west4":         Europe,
		"gcp:asia-east1":           Asia,
		"gcp:australia-se1":        Oceania,
		"gcp:me-west1":             MiddleEast,
		"gcp:africa-south1":        Africa,
		"azure:eastus":             NorthAmerica,
		"azure:westus3":            NorthAmerica,
		"azure:southcentralus":     NorthAmerica,
		"azure:canadacentral":      NorthAmerica,
		"azure:brazilsouth":        SouthAmerica,
		"azure:westeurope":         Europe,
		"azure:northeurope":        Europe,
		"azure:uksouth":            Europe,
		"azure:germanywestcentral": Europe,
		"azure:japaneast":          Asia,
		"azure:southeastasia":      Asia,
		"azure:centralindia":       Asia,
		"azure:australiaeast":      Oceania,
		"azure:uaenorth":           MiddleEast,
		"azure:southafricanorth":   Africa,
		"azure:chinaeast2":         Asia,
		"onprem:lga1":              Unknown,
		"gcp:mars-north1":          Unknown,
	} {
		if got := ContinentOf(loc(t, s)); got != want {
			t.Errorf("%s: %s, want %s", s, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		src, dst string
		want     Class
	}{
		{"aws:us-east-1", "aws:us-east-1", SameRegion},
		{"aws:us-east-1", "aws:eu-west-1", InterRegion},
		{"aws:us-east-1", "gcp:us-east1", Internet},
		{"gcp:us-central1", "onprem:lga1", Internet},
		{"onprem:lga1", "aws:us-east-1", FromOnPrem},
		{"onprem:lga1", "onprem:lga1", FromOnPrem},
	} {
		if got := Classify(loc(t, c.src), loc(t, c.dst)); got != c.want {
			t.Errorf("%s -> %s: %s, want %s", c.src, c.dst, got, c.want)
		}
	}
}

// The built-in table: one row per path of PRICES.md, with the first-tier
// rate and the unit.
func TestBuiltinRates(t *testing.T) {
	tab := DefaultTable()
	for _, c := range []struct {
		src, dst string
		micros   int64 // rate after any free tier
		unit     int64
		approx   bool
	}{
		{"aws:us-east-1", "gcp:us-central1", 90_000, GB, false},
		{"aws:me-central-1", "azure:eastus", 110_000, GB, true},
		{"aws:eu-west-1", "onprem:lga1", 90_000, GB, true},
		{"aws:us-east-1", "aws:eu-west-1", 20_000, GB, false},
		{"aws:us-east-1", "aws:us-east-2", 10_000, GB, false},
		{"aws:ap-southeast-2", "aws:us-east-1", 98_000, GB, false},
		{"aws:sa-east-1", "aws:us-east-1", 138_000, GB, false},
		{"aws:us-east-1", "aws:us-east-1", 0, GB, false},
		{"gcp:us-central1", "aws:us-east-1", 120_000, GiB, false},
		{"gcp:us-central1", "aws:cn-north-1", 230_000, GiB, false},
		{"gcp:us-central1", "azure:australiaeast", 190_000, GiB, false},
		{"gcp:us-central1", "gcp:us-east4", 20_000, GiB, false},
		{"gcp:europe-west4", "gcp:europe-west1", 20_000, GiB, false},
		{"gcp:asia-east1", "gcp:asia-south1", 80_000, GiB, false},
		{"gcp:us-central1", "gcp:europe-west4", 80_000, GiB, true},
		{"gcp:us-central1", "gcp:australia-southeast1", 100_000, GiB, false},
		{"gcp:southamerica-east1", "gcp:southamerica-west1", 140_000, GiB, false},
		{"gcp:us-central1", "gcp:us-central1", 0, GiB, false},
		{"azure:eastus", "gcp:us-central1", 87_000, GB, true},
		{"azure:eastus", "azure:westus2", 20_000, GB, false},
		{"azure:westeurope", "azure:northeurope", 20_000, GB, false},
		{"azure:japaneast", "azure:southeastasia", 80_000, GB, false},
		{"azure:brazilsouth", "azure:chilecentral", 160_000, GB, false},
		{"azure:eastus", "azure:westeurope", 50_000, GB, false},
		{"azure:japaneast", "azure:eastus", 80_000, GB, true},
		{"azure:eastus", "azure:eastus", 0, GB, false},
		{"onprem:lga1", "aws:us-east-1", 0, GB, false},
	} {
		s := tab.Schedule(loc(t, c.src), loc(t, c.dst))
		got := s.RateAt(100 * GB) // past the free tiers, inside the first paid tier
		if got != c.micros || s.Unit != c.unit || s.Approx != c.approx {
			t.Errorf("%s -> %s: %q %d micros per %d bytes approx %v, want %d per %d approx %v",
				c.src, c.dst, s.Name, got, s.Unit, s.Approx, c.micros, c.unit, c.approx)
		}
		if s.Source == "" || (!s.Override && s.AsOf == "" && s.Class != FromOnPrem) {
			t.Errorf("%s -> %s: no source or date", c.src, c.dst)
		}
	}
}

func TestScheduleUnitsAndTiers(t *testing.T) {
	tab := DefaultTable()
	gcp := tab.Schedule(loc(t, "gcp:us-central1"), loc(t, "aws:us-east-1"))
	// 1 TiB at 0.12 per GiB: 1024 × 0.12 = 122.88 (per GB it would be
	// 1099.511627776 × 0.12 = 131.94...).
	if got := gcp.Cost(0, TiB); got.Cmp(usd(t, "122.88")) != 0 {
		t.Errorf("GCP 1 TiB: %s", got.Rat().FloatString(10))
	}
	// 10 TiB + 1 GiB: 1024 × 0.12 + 9216 × 0.11 + 1 × 0.08 = 122.88 +
	// 1013.76 + 0.08.
	if got := gcp.Cost(0, 10*TiB+GiB); got.Cmp(usd(t, "1136.72")) != 0 {
		t.Errorf("GCP 10 TiB + 1 GiB: %s", got.Rat().FloatString(10))
	}
	aws := tab.Schedule(loc(t, "aws:us-east-1"), loc(t, "gcp:us-central1"))
	// 0 to 200 TB: 100 GB free, 9900 GB × 0.09 = 891, 40000 × 0.085 =
	// 3400, 100000 × 0.07 = 7000, 50000 × 0.05 = 2500: 13791.
	if got := aws.Cost(0, 200*TB); got.Cmp(usd(t, "13791")) != 0 {
		t.Errorf("AWS 200 TB: %s", got.Rat().FloatString(10))
	}
	// The same in pieces sums to the same.
	sum, used := USD{}, int64(0)
	for _, n := range []int64{7 * GB, 93 * GB, 1, 10*TB - 1, 77 * TB, 113*TB - 100*GB} {
		sum = sum.Add(aws.Cost(used, n))
		used += n
	}
	if used != 200*TB || sum.Cmp(usd(t, "13791")) != 0 {
		t.Errorf("AWS in pieces: %d bytes %s", used, sum.Rat().FloatString(10))
	}
	az := tab.Schedule(loc(t, "azure:westeurope"), loc(t, "aws:eu-west-1"))
	if got := az.Cost(0, 100*GB); !got.IsZero() {
		t.Errorf("Azure free 100 GB: %s", got)
	}
	if want := "0 USD/GB up to 100 GB, 0.09 USD/GB up to 10 TB, 0.085 USD/GB up to 50 TB, 0.07 USD/GB up to 150 TB, 0.05 USD/GB"; aws.String() != want {
		t.Errorf("String = %q", aws.String())
	}
	if want := "0.12 USD/GiB up to 1 TiB, 0.11 USD/GiB up to 10 TiB, 0.08 USD/GiB"; gcp.String() != want {
		t.Errorf("String = %q", gcp.String())
	}
}

func TestOverrides(t *testing.T) {
	m := func(s string) policies.Money { return policies.Money{Micros: usd(t, s).Micros(), Currency: "USD"} }
	tab, err := NewTable([]policies.Price{
		{From: loc(t, "aws"), To: loc(t, "gcp"), PerGB: m("0.05")},
		{From: loc(t, "aws"), To: loc(t, "gcp:europe-west4"), PerGB: m("0.06")},
		{From: loc(t, "aws:us-east-1"), To: loc(t, "gcp"), PerGB: m("0.07")},
		{From: loc(t, "aws:us-east-1"), To: loc(t, "gcp:europe-west4"), PerGB: m("0.08")},
		{From: loc(t, "aws"), To: loc(t, "aws"), PerGB: m("0")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst string
		micros   int64
	}{
		{"aws:us-west-2", "gcp:us-central1", 50_000},
		{"aws:us-west-2", "gcp:europe-west4", 60_000},
		{"aws:us-east-1", "gcp:us-central1", 70_000},
		{"aws:us-east-1", "gcp:europe-west4", 80_000},
		{"aws:us-east-1", "aws:eu-west-1", 0},
		{"aws:us-east-1", "azure:eastus", 90_000}, // built-in
	} {
		s := tab.Schedule(loc(t, c.src), loc(t, c.dst))
		if got := s.RateAt(100 * GB); got != c.micros || s.Unit != GB {
			t.Errorf("%s -> %s: %q %d, want %d", c.src, c.dst, s.Name, got, c.micros)
		}
	}
	// An override is flat: no free tier.
	s := tab.Schedule(loc(t, "aws:us-west-2"), loc(t, "gcp:us-central1"))
	if got := s.Cost(0, 10*GB); got.Cmp(usd(t, "0.5")) != 0 || !s.Flat() || !s.Override {
		t.Errorf("override cost %s flat %v", got, s.Flat())
	}
	if _, err := NewTable([]policies.Price{{From: loc(t, "aws"), To: loc(t, "gcp"), PerGB: policies.Money{Micros: 1, Currency: "EUR"}}}); err == nil {
		t.Error("EUR accepted")
	}
}
