package egress

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/fedgate/fedgate/policies"
)

// Storage and request prices: what keeping bytes in a store costs per
// month, and what its requests cost. Transfer prices are in prices.go.
// Neither is in the project's price survey (PRICES.md, transfer only): the
// built-in ones below are the providers' public list prices for the
// standard class in one US region, as remembered for 2025, and are marked
// approximate everywhere they are shown (docs/egress.md, "Storage and
// request prices"). Users override them: --storage-price, --request-price.

// StoragePrice is the monthly price of keeping bytes in a location's
// standard storage class.
type StoragePrice struct {
	// Location is where the price applies; an empty Region means every
	// region of the cloud.
	Location           policies.Location
	Name               string // like "S3 Standard (us-east-1, first 50 TB)"
	Unit               int64  // GB or GiB
	MicrosPerUnitMonth int64
	Source, AsOf       string
	// Approx marks a price that is not from the price survey (PRICES.md,
	// which has no storage prices: every built-in one is approximate) or
	// that is assumed for other regions.
	Approx bool
}

// MonthlyCost returns the exact price of keeping n bytes for a month.
func (p StoragePrice) MonthlyCost(n int64) USD {
	num := new(big.Int).Mul(big.NewInt(n), big.NewInt(p.MicrosPerUnitMonth))
	return USD{new(big.Rat).SetFrac(num, new(big.Int).Mul(big.NewInt(p.Unit), big.NewInt(1e6)))}
}

// PerByteHour returns the exact price of keeping one byte for an hour
// (a month is HoursPerMonth hours).
func (p StoragePrice) PerByteHour() *big.Rat {
	if p.Unit == 0 {
		return new(big.Rat)
	}
	return new(big.Rat).SetFrac(big.NewInt(p.MicrosPerUnitMonth), new(big.Int).Mul(big.NewInt(p.Unit), big.NewInt(1e6*HoursPerMonth)))
}

// BreakEvenHours returns T_even: the hours a copy can be kept for what
// fetching it again costs; rate is USD per byte fetched, storage USD per
// byte-hour kept. +Inf when storage is free, 0 when fetching is.
func BreakEvenHours(rate, storage *big.Rat) float64 {
	switch {
	case rate.Sign() <= 0:
		return 0
	case storage.Sign() <= 0:
		return math.Inf(1)
	}
	f, _ := new(big.Rat).Quo(rate, storage).Float64()
	return f
}

// BuiltinStoragePrices returns the built-in storage prices: one standard
// class per cloud, at its list price in one US region, used for every
// region of the cloud. They are approximate: the price survey (PRICES.md)
// has no storage prices; these are the providers' public list prices as
// of 2025 (docs/egress.md). On-prem storage is 0 unless set.
func BuiltinStoragePrices() []StoragePrice {
	return []StoragePrice{
		{Location: policies.Location{Cloud: AWS}, Name: "S3 Standard (us-east-1 list price, first 50 TB)", Unit: GB, MicrosPerUnitMonth: 23_000,
			Source: "AWS S3 pricing (Price List API AmazonS3)", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: GCP}, Name: "GCS Standard regional (us-central1 list price)", Unit: GiB, MicrosPerUnitMonth: 20_000,
			Source: "GCP Cloud Storage pricing (Cloud Billing Catalog)", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: Azure}, Name: "Azure Blob Hot LRS (eastus list price, first 50 TB)", Unit: GB, MicrosPerUnitMonth: 18_000,
			Source: "Azure Retail Prices API (serviceName 'Storage')", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: OnPrem}, Name: "on-prem storage (0 unless priced: fedgate egress advise --storage-price onprem=USD_PER_GB_MONTH)", Unit: GB, MicrosPerUnitMonth: 0,
			Source: "priced by the user; default 0"},
	}
}

// ParseStoragePrice parses "CLOUD[:REGION]=USD" (USD per GB per month,
// like onprem=0.004 or aws:eu-west-1=0.024), a price a user sets.
func ParseStoragePrice(v string) (StoragePrice, error) {
	where, usd, ok := strings.Cut(v, "=")
	if !ok {
		return StoragePrice{}, fmt.Errorf("storage price %q: want CLOUD[:REGION]=USD_PER_GB_MONTH, like onprem=0.004", v)
	}
	loc := policies.Location{Cloud: where}
	if strings.Contains(where, ":") {
		l, err := policies.ParseLocation(where)
		if err != nil {
			return StoragePrice{}, fmt.Errorf("storage price %q: %v", v, err)
		}
		loc = l
	} else if !slices.Contains([]string{AWS, GCP, Azure, OnPrem}, where) {
		return StoragePrice{}, fmt.Errorf("storage price %q: cloud %q: want aws, gcp, azure or onprem", v, where)
	}
	r, ok := new(big.Rat).SetString(usd)
	if !ok || r.Sign() < 0 {
		return StoragePrice{}, fmt.Errorf("storage price %q: %q is not a price in USD per GB-month, like 0.004", v, usd)
	}
	micros := new(big.Rat).Mul(r, big.NewRat(1e6, 1))
	if !micros.IsInt() {
		return StoragePrice{}, fmt.Errorf("storage price %q: at most 6 decimal places", v)
	}
	return StoragePrice{Location: loc, Name: "priced by the user (" + v + ")", Unit: GB, MicrosPerUnitMonth: micros.Num().Int64(), Source: "--storage-price"}, nil
}

// StorageTable looks up storage prices: the given prices in front of the
// built-in ones; the most specific location wins (a region before its
// cloud), then the earlier entry.
type StorageTable struct{ prices []StoragePrice }

// NewStorageTable returns the built-in storage prices with prices in front.
func NewStorageTable(prices ...StoragePrice) *StorageTable {
	return &StorageTable{prices: append(slices.Clone(prices), BuiltinStoragePrices()...)}
}

// Lookup returns the storage price of l; false when nothing covers l.
func (t *StorageTable) Lookup(l policies.Location) (StoragePrice, bool) {
	if t == nil {
		t = NewStorageTable()
	}
	i := mostSpecific(len(t.prices), func(i int) policies.Location { return t.prices[i].Location }, l)
	if i < 0 {
		return StoragePrice{}, false
	}
	return t.prices[i], true
}

// RequestPrice is the price of a store's requests in one location: reads
// (GET; S3 "GET, SELECT and all other requests", GCS Class B, Azure read
// operations) and writes (PUT; S3 "PUT, COPY, POST, LIST", GCS Class A,
// Azure write operations).
type RequestPrice struct {
	// Location is where the price applies; an empty Region means every
	// region of the cloud.
	Location policies.Location
	Name     string
	// GetMicrosPer1000 and PutMicrosPer1000 are the prices of 1,000
	// requests in millionths of a dollar.
	GetMicrosPer1000, PutMicrosPer1000 int64
	Source, AsOf                       string
	// Approx marks a price that is not from the price survey (every
	// built-in one: PRICES.md has no request prices).
	Approx bool
}

// Cost returns the exact price of gets reads and puts writes.
func (p RequestPrice) Cost(gets, puts int64) USD {
	num := new(big.Int).Mul(big.NewInt(gets), big.NewInt(p.GetMicrosPer1000))
	num.Add(num, new(big.Int).Mul(big.NewInt(puts), big.NewInt(p.PutMicrosPer1000)))
	return USD{new(big.Rat).SetFrac(num, big.NewInt(1000*1e6))}
}

// BuiltinRequestPrices returns the built-in request prices: the standard
// class of each cloud at its list price in one US region, used for every
// region of the cloud; approximate (docs/egress.md). On-prem requests are
// free unless priced.
func BuiltinRequestPrices() []RequestPrice {
	return []RequestPrice{
		{Location: policies.Location{Cloud: AWS}, Name: "S3 Standard requests (us-east-1 list price: GET 0.0004, PUT 0.005 USD per 1,000)",
			GetMicrosPer1000: 400, PutMicrosPer1000: 5_000,
			Source: "AWS S3 pricing (Price List API AmazonS3)", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: GCP}, Name: "GCS Standard operations (Class B 0.0004, Class A 0.005 USD per 1,000)",
			GetMicrosPer1000: 400, PutMicrosPer1000: 5_000,
			Source: "GCP Cloud Storage pricing (Cloud Billing Catalog)", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: Azure}, Name: "Azure Blob Hot LRS operations (eastus list price: read 0.005, write 0.065 USD per 10,000)",
			GetMicrosPer1000: 500, PutMicrosPer1000: 6_500,
			Source: "Azure Retail Prices API (serviceName 'Storage')", AsOf: "2025 (approximate)", Approx: true},
		{Location: policies.Location{Cloud: OnPrem}, Name: "on-prem requests (0 unless priced: --request-price onprem=GET/PUT)",
			Source: "priced by the user; default 0"},
	}
}

// ParseRequestPrice parses "CLOUD[:REGION]=GET/PUT", the USD prices of
// 1,000 reads and 1,000 writes (like aws=0.0004/0.005 or onprem=0/0), a
// price a user sets.
func ParseRequestPrice(v string) (RequestPrice, error) {
	const want = "want CLOUD[:REGION]=GET/PUT in USD per 1,000 requests, like aws=0.0004/0.005"
	where, usd, ok := strings.Cut(v, "=")
	if !ok {
		return RequestPrice{}, fmt.Errorf("request price %q: %s", v, want)
	}
	loc, err := parsePriceLocation(where)
	if err != nil {
		return RequestPrice{}, fmt.Errorf("request price %q: %v", v, err)
	}
	get, put, ok := strings.Cut(usd, "/")
	if !ok {
		return RequestPrice{}, fmt.Errorf("request price %q: %s", v, want)
	}
	p := RequestPrice{Location: loc, Name: "priced by the user (" + v + ")", Source: "--request-price"}
	for _, f := range []struct {
		what string
		s    string
		dst  *int64
	}{{"GET", get, &p.GetMicrosPer1000}, {"PUT", put, &p.PutMicrosPer1000}} {
		if *f.dst, err = parseMicros(f.s); err != nil {
			return RequestPrice{}, fmt.Errorf("request price %q: %s price %q: %v", v, f.what, f.s, err)
		}
	}
	return p, nil
}

// RequestTable looks up request prices: the given prices in front of the
// built-in ones; the most specific location wins (a region before its
// cloud), then the earlier entry.
type RequestTable struct{ prices []RequestPrice }

// NewRequestTable returns the built-in request prices with prices in front.
func NewRequestTable(prices ...RequestPrice) *RequestTable {
	return &RequestTable{prices: append(slices.Clone(prices), BuiltinRequestPrices()...)}
}

// Lookup returns the request price of l; false when nothing covers l.
func (t *RequestTable) Lookup(l policies.Location) (RequestPrice, bool) {
	if t == nil {
		t = NewRequestTable()
	}
	i := mostSpecific(len(t.prices), func(i int) policies.Location { return t.prices[i].Location }, l)
	if i < 0 {
		return RequestPrice{}, false
	}
	return t.prices[i], true
}

// mostSpecific returns the index of the first of n locations that covers
// l, preferring one that names l's region over one that names only its
// cloud; -1 when none covers l.
func mostSpecific(n int, at func(int) policies.Location, l policies.Location) int {
	best := -1
	for i := range n {
		p := at(i)
		if !matches(p, l) {
			continue
		}
		if best < 0 || (p.Region != "" && at(best).Region == "") {
			best = i
		}
	}
	return best
}

// parsePriceLocation reads the CLOUD[:REGION] of a price a user sets.
func parsePriceLocation(where string) (policies.Location, error) {
	if strings.Contains(where, ":") {
		return policies.ParseLocation(where)
	}
	if !slices.Contains([]string{AWS, GCP, Azure, OnPrem}, where) {
		return policies.Location{}, fmt.Errorf("cloud %q: want aws, gcp, azure or onprem", where)
	}
	return policies.Location{Cloud: where}, nil
}

// parseMicros reads a non-negative decimal amount of USD with at most 6
// decimal places as millionths.
func parseMicros(usd string) (int64, error) {
	r, ok := new(big.Rat).SetString(usd)
	if !ok || r.Sign() < 0 || strings.ContainsAny(usd, "/eE") {
		return 0, fmt.Errorf("not a price in USD, like 0.004")
	}
	micros := new(big.Rat).Mul(r, big.NewRat(1e6, 1))
	if !micros.IsInt() {
		return 0, fmt.Errorf("at most 6 decimal places")
	}
	if !micros.Num().IsInt64() {
		return 0, fmt.Errorf("too large")
	}
	return micros.Num().Int64(), nil
}
