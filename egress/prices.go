package egress

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/fedgate/fedgate/policies"
)

// Byte units. AWS and Azure price transfer per GB (10^9 bytes), GCP per GiB
// (2^30 bytes); volume tiers are in the same units as their prices.
const (
	GB  int64 = 1_000_000_000
	TB  int64 = 1000 * GB
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

// Class is the kind of path bytes take, which decides the price.
type Class string

// The classes. Bytes are priced at their source (egress); arriving bytes
// (ingress) are free in every cloud.
const (
	// SameRegion: source and destination in the same cloud and region.
	SameRegion Class = "same-region"
	// InterRegion: the same cloud, another region.
	InterRegion Class = "inter-region"
	// Internet: from a cloud to another cloud, to on-prem or to the
	// internet: the source cloud's internet egress.
	Internet Class = "internet"
	// FromOnPrem: the source is on-prem; priced by the user (egress.prices),
	// $0 by default.
	FromOnPrem Class = "on-prem"
)

// Classify says which path bytes from src to dst take.
func Classify(src, dst policies.Location) Class {
	switch {
	case src.Cloud == OnPrem:
		return FromOnPrem
	case src.Cloud != dst.Cloud:
		return Internet
	case src.Region == dst.Region:
		return SameRegion
	}
	return InterRegion
}

// Tier is one step of a rate schedule: the price of the bytes that fall
// below UpTo in the month's running total of the schedule's pool.
type Tier struct {
	// UpTo is the running monthly total, in bytes, at which the tier ends;
	// 0 in the last tier (no end).
	UpTo int64
	// MicrosPerUnit is the price in millionths of a dollar per Unit bytes.
	MicrosPerUnit int64
}

// Schedule is the price of one path: per-unit rates, with volume tiers when
// Pool is set. Schedules returned by a Table are shared: treat them as
// read-only.
type Schedule struct {
	Name  string // what the rate is, like "AWS internet egress from us-east-1"
	Class Class
	// Unit is the number of bytes a rate is per: GB (AWS, Azure, policy
	// overrides) or GiB (GCP).
	Unit  int64
	Tiers []Tier // at least one; the last has UpTo 0
	// Pool names the monthly volume counter the tiers step along, shared by
	// every schedule of an account with the same pool (AWS's free 100 GB and
	// tiers count internet egress from every region together). "" for a
	// flat rate.
	Pool   string
	Source string // where the rate was published
	AsOf   string // when
	// Approx marks a rate that is uncertain or assumed (a (?) in PRICES.md,
	// or a region that the published table does not list); Note says what.
	Approx bool
	Note   string
	// Override marks a rate from the policy file's egress.prices.
	Override bool
}

// Flat says the schedule has one rate and no tiers.
func (s *Schedule) Flat() bool { return s.Pool == "" || len(s.Tiers) == 1 }

// RateAt returns the rate, in micros per Unit, of the byte that comes after
// used bytes of the pool this month.
func (s *Schedule) RateAt(used int64) int64 {
	for _, t := range s.Tiers {
		if t.UpTo == 0 || used < t.UpTo {
			return t.MicrosPerUnit
		}
	}
	return s.Tiers[len(s.Tiers)-1].MicrosPerUnit
}

// PaidRate returns the price of one byte at the first tier that is not
// free (the AWS and Azure free 100 GB a month aside), in USD: what
// fetching a byte costs once a month's free tier is spent. 0 for a free
// path.
func (s *Schedule) PaidRate() *big.Rat {
	for _, t := range s.Tiers {
		if t.MicrosPerUnit > 0 {
			return new(big.Rat).SetFrac(big.NewInt(t.MicrosPerUnit), new(big.Int).Mul(big.NewInt(s.Unit), big.NewInt(1e6)))
		}
	}
	return new(big.Rat)
}

// Cost returns the exact price of n bytes that follow used bytes of the
// pool this month: each byte is priced at the tier its position falls in.
// For a flat schedule used does not matter.
func (s *Schedule) Cost(used, n int64) USD {
	if n <= 0 {
		return USD{}
	}
	if s.Flat() {
		used = 0
	}
	sum := new(big.Int) // Σ bytes × micros per unit
	lo := int64(0)
	for _, t := range s.Tiers {
		hi := t.UpTo
		a, b := max(lo, used), used+n
		if hi != 0 {
			b = min(b, hi)
		}
		if b > a {
			sum.Add(sum, new(big.Int).Mul(big.NewInt(b-a), big.NewInt(t.MicrosPerUnit)))
		}
		if hi == 0 || hi >= used+n {
			break
		}
		lo = hi
	}
	den := new(big.Int).Mul(big.NewInt(s.Unit), big.NewInt(1e6))
	return USD{new(big.Rat).SetFrac(sum, den)}
}

// String writes the rates, like "0 USD/GB up to 100 GB, 0.09 USD/GB up to
// 10 TB, ...".
func (s *Schedule) String() string {
	unit := "GB"
	if s.Unit == GiB {
		unit = "GiB"
	}
	var parts []string
	for _, t := range s.Tiers {
		p := MicroUSD(t.MicrosPerUnit).Rat().FloatString(6)
		p = strings.TrimRight(strings.TrimRight(p, "0"), ".")
		if t.UpTo != 0 && len(s.Tiers) > 1 {
			parts = append(parts, fmt.Sprintf("%s USD/%s up to %s", p, unit, tierSize(t.UpTo, s.Unit)))
		} else {
			parts = append(parts, fmt.Sprintf("%s USD/%s", p, unit))
		}
	}
	return strings.Join(parts, ", ")
}

func tierSize(b, unit int64) string {
	if unit == GiB {
		if b%TiB == 0 {
			return fmt.Sprintf("%d TiB", b/TiB)
		}
		return fmt.Sprintf("%d GiB", b/GiB)
	}
	if b%TB == 0 {
		return fmt.Sprintf("%d TB", b/TB)
	}
	return fmt.Sprintf("%d GB", b/GB)
}

// Table prices paths between locations: the built-in rates below, with the
// policy file's overrides in front. The zero Table (or DefaultTable) has
// no overrides. A Table is safe for concurrent use.
type Table struct {
	overrides []override
}

type override struct {
	from, to policies.Location
	sched    *Schedule
}

// DefaultTable returns the built-in rates with no overrides.
func DefaultTable() *Table { return &Table{} }

// NewTable returns the built-in rates with the policy's egress.prices in
// front. An override is a flat price per GB (10^9 bytes) for bytes moving
// From -> To: no volume tiers, no free tier. A From or To with an empty
// Region matches every region of its cloud; when several overrides match a
// pair, the one with the more specific From wins, then the more specific
// To. Amounts must be in USD and not negative.
func NewTable(prices []policies.Price) (*Table, error) {
	t := &Table{}
	for _, p := range prices {
		for _, l := range []policies.Location{p.From, p.To} {
			if _, err := policies.ParseLocationOrCloud(l.String()); err != nil {
				return nil, fmt.Errorf("egress: price %s -> %s: %w", p.From, p.To, err)
			}
		}
		if p.PerGB.Currency != "" && p.PerGB.Currency != "USD" {
			return nil, fmt.Errorf("egress: price %s -> %s is %s, not USD", p.From, p.To, p.PerGB)
		}
		if p.PerGB.Micros < 0 {
			return nil, fmt.Errorf("egress: price %s -> %s is negative", p.From, p.To)
		}
		t.overrides = append(t.overrides, override{from: p.From, to: p.To, sched: &Schedule{
			Name:     fmt.Sprintf("policy price %s -> %s", p.From, p.To),
			Unit:     GB,
			Tiers:    []Tier{{MicrosPerUnit: p.PerGB.Micros}},
			Source:   "policy file egress.prices",
			Override: true,
		}})
	}
	return t, nil
}

// matches says whether pattern (a location, or a bare cloud) covers l.
func matches(pattern, l policies.Location) bool {
	return pattern.Cloud == l.Cloud && (pattern.Region == "" || pattern.Region == l.Region)
}

// Schedule returns the rate schedule for bytes moving from src to dst: a
// matching policy override if there is one, else the built-in rate of the
// pair's class. The returned Schedule's Class is always Classify(src, dst).
func (t *Table) Schedule(src, dst policies.Location) *Schedule {
	class := Classify(src, dst)
	if t != nil {
		var best *override
		bestScore := -1
		for i := range t.overrides {
			o := &t.overrides[i]
			if !matches(o.from, src) || !matches(o.to, dst) {
				continue
			}
			score := 0
			if o.from.Region != "" {
				score += 2
			}
			if o.to.Region != "" {
				score++
			}
			if score > bestScore {
				best, bestScore = o, score
			}
		}
		if best != nil {
			s := *best.sched
			s.Class = class
			return &s
		}
	}
	var s *Schedule
	switch class {
	case FromOnPrem:
		s = &Schedule{Name: "on-prem egress (set it in egress.prices)", Unit: GB, Tiers: flat(0),
			Source: "priced by the user; default 0"}
	case SameRegion:
		s = sameRegion(src)
	case InterRegion:
		switch src.Cloud {
		case AWS:
			s = awsInterRegion(src, dst)
		case GCP:
			s = gcpInterRegion(src, dst)
		default:
			s = azureInterRegion(src, dst)
		}
	default:
		switch src.Cloud {
		case AWS:
			s = awsInternet(src)
		case GCP:
			s = gcpInternet(dst)
		default:
			s = azureInternet(src)
		}
	}
	s.Class = class
	return s
}

func flat(micros int64) []Tier { return []Tier{{MicrosPerUnit: micros}} }

// Sources of the built-in rates (the price survey PRICES.md; docs/egress.md).
const (
	srcAWS   = "AWS EC2 pricing, data transfer (Price List API AWSDataTransfer)"
	srcGCP   = "GCP network pricing (Cloud Billing Catalog)"
	srcAzure = "Azure bandwidth pricing (Retail Prices API, serviceName 'Bandwidth')"
)

func sameRegion(src policies.Location) *Schedule {
	switch src.Cloud {
	case AWS:
		return &Schedule{Name: "AWS same region (S3 -> EC2)", Unit: GB, Tiers: flat(0), Source: srcAWS, AsOf: "after 2025-09",
			Note: "cross-AZ transfer (0.01 USD/GB each way) is not metered: a gateway reads S3, a regional service"}
	case GCP:
		return &Schedule{Name: "GCP same region", Unit: GiB, Tiers: flat(0), Source: srcGCP, AsOf: "2026-09-20",
			Note: "between zones of a region is 0.01 USD/GiB; a gateway reads GCS, a regional service"}
	}
	return &Schedule{Name: "Azure same region", Unit: GB, Tiers: flat(0), Source: srcAzure, AsOf: "2024-05"}
}

// awsInternetTiers: first 100 GB a month free (after 2025-09), then
// 0.09 / 0.085 / 0.07 / 0.05 up to 10 / 50 / 150 TB / beyond (2024-09-25).
var awsInternetTiers = []Tier{
	{UpTo: 100 * GB, MicrosPerUnit: 0},
	{UpTo: 10 * TB, MicrosPerUnit: 90_000},
	{UpTo: 50 * TB, MicrosPerUnit: 85_000},
	{UpTo: 150 * TB, MicrosPerUnit: 70_000},
	{MicrosPerUnit: 50_000},
}

func awsInternet(src policies.Location) *Schedule {
	s := &Schedule{Name: "AWS internet egress from " + src.Region, Unit: GB, Tiers: awsInternetTiers, Pool: "aws-internet",
		Source: srcAWS, AsOf: "2024-09-25; free 100 GB after 2025-09"}
	switch src.Region {
	case "us-east-1":
	case "me-central-1":
		s.Tiers = []Tier{{UpTo: 100 * GB}, {MicrosPerUnit: 110_000}}
		s.AsOf = "2024-09; free 100 GB after 2025-09"
		s.Approx, s.Note = true, "only the first paid tier (0.11 USD/GB) is published here; applied to all volumes"
	default:
		s.Approx, s.Note = true, "rates of us-east-1 assumed; regions outside North America and Europe are often dearer"
	}
	return s
}

func awsInterRegion(src, dst policies.Location) *Schedule {
	s := &Schedule{Name: "AWS inter-region from " + src.Region, Unit: GB, Tiers: flat(20_000), Source: srcAWS, AsOf: "2024-09-25"}
	switch {
	case src.Region == "us-east-1" && dst.Region == "us-east-2":
		s.Name, s.Tiers = "AWS inter-region us-east-1 -> us-east-2", flat(10_000)
	case src.Region == "us-east-2" && dst.Region == "us-east-1":
		s.Name, s.Tiers = "AWS inter-region us-east-2 -> us-east-1", flat(10_000)
		s.Approx, s.Note = true, "assumed equal to us-east-1 -> us-east-2"
	case src.Region == "us-east-1":
	case src.Region == "ap-southeast-2":
		s.Tiers, s.AsOf = flat(98_000), "2024-09"
	case src.Region == "sa-east-1":
		s.Tiers, s.AsOf = flat(138_000), "2024-09"
	default:
		s.Approx, s.Note = true, "rate of us-east-1 (0.02 USD/GB) assumed"
	}
	return s
}

// gcpInternet: Premium tier (the default), by destination.
func gcpInternet(dst policies.Location) *Schedule {
	s := &Schedule{Name: "GCP internet egress (Premium tier)", Unit: GiB, Pool: "gcp-internet", Source: srcGCP, AsOf: "2026-07-30",
		Tiers: []Tier{{UpTo: 1 * TiB, MicrosPerUnit: 120_000}, {UpTo: 10 * TiB, MicrosPerUnit: 110_000}, {MicrosPerUnit: 80_000}}}
	switch g := geoOf(dst); {
	case g.china:
		s.Name, s.Pool = "GCP internet egress to China (Premium tier)", "gcp-internet-china"
		s.Tiers = []Tier{{UpTo: 1 * TiB, MicrosPerUnit: 230_000}, {UpTo: 10 * TiB, MicrosPerUnit: 220_000}, {MicrosPerUnit: 200_000}}
	case g.australia:
		s.Name, s.Pool = "GCP internet egress to Australia (Premium tier)", "gcp-internet-australia"
		s.Tiers = []Tier{{UpTo: 1 * TiB, MicrosPerUnit: 190_000}, {UpTo: 10 * TiB, MicrosPerUnit: 180_000}, {MicrosPerUnit: 150_000}}
	}
	return s
}

func gcpInterRegion(src, dst policies.Location) *Schedule {
	s := &Schedule{Name: "GCP inter-region", Unit: GiB, Source: srcGCP, AsOf: "2024-07-01"}
	a, b := ContinentOf(src), ContinentOf(dst)
	switch {
	case a == Oceania || b == Oceania:
		s.Name, s.Tiers = "GCP inter-region involving Oceania", flat(100_000)
	case a == b && a == NorthAmerica:
		s.Name, s.Tiers = "GCP inter-region within North America", flat(20_000)
	case a == b && a == Europe:
		s.Name, s.Tiers = "GCP inter-region within Europe", flat(20_000)
	case a == b && a == Asia:
		s.Name, s.Tiers = "GCP inter-region within Asia", flat(80_000)
	case a == b && a == SouthAmerica:
		s.Name, s.Tiers = "GCP inter-region within South America", flat(140_000)
	default:
		s.Name, s.Tiers = "GCP inter-region between continents", flat(80_000)
		s.Approx, s.Note = true, "marked uncertain in the source table; also used for the Middle East, Africa and unknown regions"
	}
	return s
}

// azureInternet: Microsoft network routing (the default).
func azureInternet(src policies.Location) *Schedule {
	s := &Schedule{Name: "Azure internet egress from " + src.Region, Unit: GB, Pool: "azure-internet", Source: srcAzure,
		AsOf: "2025-09-05 (up to 10 TB); higher tiers undated",
		Tiers: []Tier{
			{UpTo: 100 * GB, MicrosPerUnit: 0},
			{UpTo: 10 * TB, MicrosPerUnit: 87_000},
			{UpTo: 50 * TB, MicrosPerUnit: 83_000},
			{UpTo: 150 * TB, MicrosPerUnit: 70_000},
			{MicrosPerUnit: 50_000},
		},
		Approx: true, Note: "tiers above 10 TB are marked uncertain in the source table"}
	if c := ContinentOf(src); c != NorthAmerica && c != Europe {
		s.Note = "rates of North America and Europe assumed; " + s.Note
	}
	return s
}

func azureInterRegion(src, dst policies.Location) *Schedule {
	s := &Schedule{Name: "Azure inter-region", Unit: GB, Source: srcAzure, AsOf: "2025-12-03"}
	a, b := ContinentOf(src), ContinentOf(dst)
	switch {
	case a == b && (a == NorthAmerica || a == Europe):
		s.Name, s.Tiers = "Azure inter-region within "+continentName(a), flat(20_000)
	case a == b && a == Asia:
		s.Name, s.Tiers = "Azure inter-region within Asia", flat(80_000)
	case a == b && a == SouthAmerica:
		s.Name, s.Tiers = "Azure inter-region within South America", flat(160_000)
	case a == NorthAmerica || a == Europe:
		s.Name, s.Tiers = "Azure inter-continent from "+continentName(a), flat(50_000)
	case a == SouthAmerica:
		s.Name, s.Tiers = "Azure inter-continent from South America", flat(160_000)
		s.Approx, s.Note = true, "assumed equal to within South America"
	default:
		s.Name, s.Tiers = "Azure inter-region from "+continentName(a), flat(80_000)
		s.Approx, s.Note = true, "assumed equal to within Asia (not published here)"
	}
	return s
}

func continentName(c Continent) string {
	switch c {
	case NorthAmerica:
		return "North America"
	case SouthAmerica:
		return "South America"
	case Europe:
		return "Europe"
	case Asia:
		return "Asia"
	case Oceania:
		return "Oceania"
	case MiddleEast:
		return "the Middle East"
	case Africa:
		return "Africa"
	}
	return "an unknown continent"
}
