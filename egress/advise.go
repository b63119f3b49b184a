package egress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/fedgate/fedgate/policies"
)

// HoursPerMonth is the length of the average month the advice scales to
// (365 × 24 / 12).
const HoursPerMonth = 730

// AdviseOptions adjust Advise.
type AdviseOptions struct {
	// Since and Until bound the observed window [Since, Until); a zero
	// bound is the first (last) hour of the rows. Monthly figures are the
	// window's scaled to HoursPerMonth.
	Since, Until time.Time
	// Storage prices the copy; nil: the built-in prices.
	Storage *StorageTable
	// Size returns the bytes a copy of the bucket's data under prefix in
	// store would hold (from a listing), when the caller knows it; prefix
	// "" is the rest of the bucket (see Key.Prefix). Otherwise the copy is
	// taken to be as large as the bytes read per month: the most distinct
	// data that a month's reads can have touched.
	Size func(bucket, prefix, store string) (int64, bool)
	// HorizonMonths: recommend a copy only when it pays for itself within
	// this many months; 0 means 12.
	HorizonMonths int
}

// Advice is the case for or against keeping a copy of the data under one
// prefix of a bucket (read from one store) in the region that reads it,
// with the numbers.
type Advice struct {
	Bucket, Store string
	// Prefix is the part of the bucket (Key.Prefix): "" is the objects
	// outside the prefixes the ledger tracked; Rest says that the bucket
	// has advice on prefixes too, so "" is not all of it.
	Prefix string
	Rest   bool
	// From is the store's location and To the reading region's: the copy
	// would live in To. A bucket read from several member stores (replicate
	// or erasure placements) lists them all in Store and From, ", "
	// separated: one copy in To replaces the reads from every one.
	From, To      string
	Schedule      *Schedule
	WindowHours   int64
	BytesRead     int64 // in the window (cache misses that crossed)
	Paid          USD   // egress paid for them in the window
	BytesPerMonth int64
	// EgressPerMonth is what a copy in To would save each month: Paid
	// scaled to a month.
	EgressPerMonth USD
	CopyBytes      int64
	CopyEstimated  bool // CopyBytes is BytesPerMonth, not a known size
	Storage        StoragePrice
	// StoragePerMonth is the price of keeping CopyBytes in To.
	StoragePerMonth USD
	// CopyCost is the one-time transfer of CopyBytes, at the average rate
	// Paid / BytesRead.
	CopyCost USD
	// SavingPerMonth = EgressPerMonth - StoragePerMonth.
	SavingPerMonth USD
	// BreakEvenMonths = CopyCost / SavingPerMonth: when the copy has paid
	// for itself; +Inf when it never does.
	BreakEvenMonths float64
	// Keep is set when the ledger's rows carry reuse distances
	// (Counts.Reuse): how long a copy of each object read under the
	// prefix should stay in To after a read, learned from them (see
	// LearnKeep). Recommend is then Keep.Hours > 0. Demand is the bytes
	// read, whether they crossed or a copy in To served them.
	Keep   *Keep
	Demand int64
	// BucketKeep is the same choice from the reads of every prefix of the
	// bucket into To: what a prefix without history of its own gets.
	BucketKeep *Keep
	Recommend  bool
	Reason     string
}

// Advise looks at the reads that paid egress (cache misses from a store in
// another region or cloud) per (bucket, key prefix, reading region), over
// whichever stores they were read from, and weighs
// a copy in the reading region, the ski-rental way: renting is paying
// egress every month; buying is a one-time transfer of the data plus its
// storage every month. It recommends buying when the egress saved each
// month exceeds the copy's storage and the copy pays for itself within
// the horizon. Advice comes recommended first, then by saving.
//
// Rows that carry reuse distances (Counts.Reuse: a gateway's ledger and the
// simulator's) are weighed per object instead: every crossing read counts, whether a
// copy served it or not, and the advice is how long to keep a copy of an
// object after each read (Advice.Keep, LearnKeep): a copy pays only when
// the object is read again before holding it costs more than fetching it
// again.
func Advise(priced []Priced, opts AdviseOptions) []Advice {
	acc := newAdviceAcc(opts)
	for _, p := range priced {
		acc.add(p)
	}
	if len(acc.order) == 0 {
		return nil
	}
	first, last := acc.first, acc.last
	if !opts.Since.IsZero() {
		first = HourOf(opts.Since)
	}
	if !opts.Until.IsZero() {
		last = HourOf(opts.Until.Add(-time.Nanosecond))
	}
	hours := max(last-first+1, 1)
	perMonth := big.NewRat(HoursPerMonth, hours)

	prefixed := map[string]bool{}
	for _, k := range acc.order {
		prefixed[k.bucket] = prefixed[k.bucket] || k.prefix != ""
	}
	out := make([]Advice, 0, len(acc.order))
	for _, k := range acc.order {
		a := acc.groups[k]
		a.Paid = USD{acc.paid[k]}
		a.Rest = a.Prefix == "" && prefixed[a.Bucket]
		a.WindowHours = hours
		a.price(opts, perMonth)
		if acc.series[k] != nil {
			acc.adviseKeep(a, k, last+1)
		} else {
			a.adviseCopy(opts.horizon())
		}
		out = append(out, *a)
	}
	slices.SortStableFunc(out, func(x, y Advice) int {
		if x.Recommend != y.Recommend {
			if x.Recommend {
				return -1
			}
			return 1
		}
		return cmp.Or(y.SavingPerMonth.Cmp(x.SavingPerMonth),
			cmp.Compare(x.Bucket, y.Bucket), cmp.Compare(x.Prefix, y.Prefix), cmp.Compare(x.Store, y.Store), cmp.Compare(x.To, y.To))
	})
	return out
}

// horizon is HorizonMonths, 12 when unset.
func (o AdviseOptions) horizon() int {
	if o.HorizonMonths <= 0 {
		return 12
	}
	return o.HorizonMonths
}

type adviceKey struct{ bucket, prefix, dst string }
type adviceBucketKey struct{ bucket, dst string }

// adviceAcc gathers the rows Advise weighs, by bucket, prefix and reading
// location, in the order they first appear.
type adviceAcc struct {
	opts         AdviseOptions
	groups       map[adviceKey]*Advice
	order        []adviceKey
	series       map[adviceKey]reuseSeries
	bucketSeries map[adviceBucketKey]reuseSeries
	rates        map[adviceKey]*big.Rat // Σ demand × rate, of rows with reuse distances
	bucketKeeps  map[adviceBucketKey]Keep
	paid         map[adviceKey]*big.Rat // Σ cost, summed in place
	paidRates    map[*Schedule]*big.Rat
	first, last  int64
}

func newAdviceAcc(opts AdviseOptions) *adviceAcc {
	return &adviceAcc{opts: opts, groups: map[adviceKey]*Advice{}, series: map[adviceKey]reuseSeries{},
		bucketSeries: map[adviceBucketKey]reuseSeries{}, rates: map[adviceKey]*big.Rat{}, bucketKeeps: map[adviceBucketKey]Keep{},
		paid: map[adviceKey]*big.Rat{}, paidRates: map[*Schedule]*big.Rat{}, first: math.MaxInt64, last: math.MinInt64}
}

// add weighs one row: every row of the window extends it; crossing reads
// are grouped.
func (c *adviceAcc) add(p Priced) {
	t := p.HourStart()
	if (!c.opts.Since.IsZero() && t.Before(c.opts.Since)) || (!c.opts.Until.IsZero() && !t.Before(c.opts.Until)) {
		return
	}
	c.first, c.last = min(c.first, p.Hour), max(c.last, p.Hour)
	if p.Direction != Read {
		return
	}
	reuse := len(p.Reuse) > 0 && p.Schedule != nil && p.Schedule.Class != SameRegion
	if !reuse && p.Cost.Sign() <= 0 {
		return
	}
	k := adviceKey{p.Bucket, p.Prefix, p.Dst}
	a, ok := c.groups[k]
	if !ok {
		a = &Advice{Bucket: p.Bucket, Prefix: p.Prefix, Store: p.Store, From: p.Src, To: p.Dst, Schedule: p.Schedule}
		c.groups[k] = a
		c.order = append(c.order, k)
	}
	// A replicated or erasure-coded bucket reads several member
	// stores: one copy in the reading region replaces them all.
	a.Store = addName(a.Store, p.Store)
	a.From = addName(a.From, p.Src)
	if a.Schedule != nil && (p.Schedule == nil || p.Schedule.Name != a.Schedule.Name) {
		a.Schedule = nil // several rates
	}
	a.BytesRead += p.Bytes
	if c.paid[k] == nil {
		c.paid[k] = new(big.Rat)
	}
	c.paid[k].Add(c.paid[k], p.Cost.rat())
	if reuse {
		c.addReuse(a, k, p)
	}
}

// addReuse adds a row's reuse distances to its group's and its bucket's.
func (c *adviceAcc) addReuse(a *Advice, k adviceKey, p Priced) {
	var demand int64
	for _, n := range p.Reuse {
		demand += n
	}
	a.Demand += demand
	if c.series[k] == nil {
		c.series[k] = reuseSeries{}
		c.rates[k] = new(big.Rat)
	}
	c.series[k].add(p.Hour, p.Reuse)
	pr, ok := c.paidRates[p.Schedule]
	if !ok {
		pr = p.Schedule.PaidRate()
		c.paidRates[p.Schedule] = pr
	}
	c.rates[k].Add(c.rates[k], new(big.Rat).Mul(new(big.Rat).SetInt64(demand), pr))
	bk := adviceBucketKey{p.Bucket, p.Dst}
	if c.bucketSeries[bk] == nil {
		c.bucketSeries[bk] = reuseSeries{}
	}
	c.bucketSeries[bk].add(p.Hour, p.Reuse)
}

// price fills what a copy of a's data in its reading location would cost
// and save per month.
func (a *Advice) price(opts AdviseOptions, perMonth *big.Rat) {
	bpm := new(big.Rat).Mul(new(big.Rat).SetInt64(a.BytesRead), perMonth)
	a.BytesPerMonth = new(big.Int).Quo(bpm.Num(), bpm.Denom()).Int64()
	a.EgressPerMonth = a.Paid.MulRat(perMonth)
	a.CopyBytes, a.CopyEstimated = a.BytesPerMonth, true
	if opts.Size != nil {
		if n, ok := opts.Size(a.Bucket, a.Prefix, a.Store); ok {
			a.CopyBytes, a.CopyEstimated = n, false
		}
	}
	to, _ := policies.ParseLocationOrCloud(a.To)
	a.Storage, _ = opts.Storage.Lookup(to)
	a.StoragePerMonth = a.Storage.MonthlyCost(a.CopyBytes)
	if a.BytesRead > 0 {
		a.CopyCost = a.Paid.MulRat(big.NewRat(a.CopyBytes, a.BytesRead))
	}
	a.SavingPerMonth = a.EgressPerMonth.Sub(a.StoragePerMonth)
	a.BreakEvenMonths = math.Inf(1)
	if a.SavingPerMonth.Sign() > 0 {
		be := new(big.Rat).Quo(a.CopyCost.Rat(), a.SavingPerMonth.Rat())
		a.BreakEvenMonths, _ = be.Float64()
	}
}

// adviseKeep advises how long to keep a copy after each read, from the
// reuse distances of the group (else of its bucket, else the break-even
// time), as of hour now.
func (c *adviceAcc) adviseKeep(a *Advice, k adviceKey, now int64) {
	rate, _ := new(big.Rat).Quo(c.rates[k], new(big.Rat).SetInt64(max(a.Demand, 1))).Float64()
	store, _ := a.Storage.PerByteHour().Float64()
	keep, ok := LearnKeep(c.series[k], now, rate, store)
	keep.Scope = "prefix"
	bk := adviceBucketKey{a.Bucket, a.To}
	bucket, seen := c.bucketKeeps[bk]
	if !seen {
		var bok bool
		bucket, bok = LearnKeep(c.bucketSeries[bk], now, rate, store)
		bucket.Scope = "bucket"
		if !bok {
			bucket.Hours, bucket.Scope = bucket.BreakEvenHours, "default"
			bucket.Basis = fmt.Sprintf("less than %.0f h of history: keep copies for the break-even time", keepEvidence(bucket.BreakEvenHours)+1)
		}
		c.bucketKeeps[bk] = bucket
	}
	if !ok {
		keep = bucket
	}
	a.Keep, a.BucketKeep = &keep, &bucket
	a.Recommend = keep.Hours > 0
	if a.Recommend {
		a.Reason = fmt.Sprintf("keep copies in %s %s after each read (%s: %s)", a.To, keepText(keep.Hours), keep.Scope, keep.Basis)
	} else {
		a.Reason = fmt.Sprintf("do not keep copies in %s (%s: %s)", a.To, keep.Scope, keep.Basis)
	}
}

// adviseCopy advises whether to keep a standing copy, from what it saves
// a month and how soon it pays back its transfer (within horizon months).
func (a *Advice) adviseCopy(horizon int) {
	switch {
	case a.SavingPerMonth.Sign() <= 0:
		a.Reason = fmt.Sprintf("keep reading across: a copy's storage (%s USD/month) costs at least the egress it saves (%s USD/month)",
			a.StoragePerMonth, a.EgressPerMonth)
	case a.BreakEvenMonths > float64(horizon):
		a.Reason = fmt.Sprintf("not yet: a copy saves %s USD/month but pays back its %s USD transfer only after %.1f months (horizon %d)",
			a.SavingPerMonth, a.CopyCost, a.BreakEvenMonths, horizon)
	default:
		a.Recommend = true
		a.Reason = fmt.Sprintf("replicate into %s: saves %s USD/month after %s USD/month of storage; the %s USD transfer pays back in %.1f months",
			a.To, a.SavingPerMonth, a.StoragePerMonth, a.CopyCost, a.BreakEvenMonths)
		if a.Paid.Cmp(a.CopyCost) >= 0 {
			a.Reason += "; egress already paid in the window exceeds the copy's transfer"
		}
	}
}

// keepJSON is Keep in WriteAdviceJSON: hours null means for ever.
type keepJSON struct {
	Hours          *float64 `json:"hours"`
	Learned        bool     `json:"learned"`
	Scope          string   `json:"scope"`
	BreakEvenHours *float64 `json:"break_even_hours"`
	Basis          string   `json:"basis"`
}

// finite returns h rounded to 0.01, or nil when it is infinite.
func finite(h float64) *float64 {
	if math.IsInf(h, 0) || math.IsNaN(h) {
		return nil
	}
	v := math.Round(h*100) / 100
	return &v
}

func hoursText(h float64) string {
	if math.IsInf(h, 1) {
		return "for ever (storage is free)"
	}
	return fmt.Sprintf("%.0f h", h)
}

// keepText writes a keep time: "for 16 h", "for ever".
func keepText(h float64) string {
	if math.IsInf(h, 1) {
		return "for ever"
	}
	return fmt.Sprintf("for %.0f h", h)
}

// addName adds name to a ", "-separated list of names, once.
func addName(list, name string) string {
	if list == "" {
		return name
	}
	if slices.Contains(strings.Split(list, ", "), name) {
		return list
	}
	return list + ", " + name
}

// rate names the price schedule the reads paid, or says there were
// several (the member stores of a composite placement in several clouds).
func (a Advice) rate() string {
	if a.Schedule == nil {
		return "several rates"
	}
	return a.Schedule.Name
}

// What names the data the advice is about: `bucket "b" prefix "p/"`, or
// `bucket "b"` (objects outside tracked prefixes: "rest of the bucket").
func (a Advice) What() string {
	switch {
	case a.Prefix == "" && a.Rest:
		return fmt.Sprintf("bucket %q (objects outside the prefixes listed)", a.Bucket)
	case a.Prefix == "":
		return fmt.Sprintf("bucket %q", a.Bucket)
	}
	return fmt.Sprintf("bucket %q prefix %q", a.Bucket, a.Prefix)
}

// WriteAdvice writes advice for a terminal: one paragraph per (bucket,
// prefix, store, reading region) with the numbers behind it.
func WriteAdvice(w io.Writer, advice []Advice) error {
	ew := &errWriter{w: w}
	if len(advice) == 0 {
		fmt.Fprintln(ew, "No reads paid egress in this window: nothing to advise.")
		return ew.err
	}
	for i, a := range advice {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		verdict := "keep"
		if a.Recommend {
			verdict = "REPLICATE"
		}
		fmt.Fprintf(ew, "%s  %s (store %s, %s) read from %s\n", verdict, a.What(), a.Store, a.From, a.To)
		est := ""
		if a.CopyEstimated {
			est = " (estimated: bytes read per month; the size is not known)"
		}
		fmt.Fprintf(ew, "  read %s in %d h: %s/month; egress %s USD/month at %s\n",
			HumanBytes(a.BytesRead), a.WindowHours, HumanBytes(a.BytesPerMonth), a.EgressPerMonth, a.rate())
		fmt.Fprintf(ew, "  copy %s%s: storage %s USD/month (%s), one-time transfer %s USD\n",
			HumanBytes(a.CopyBytes), est, a.StoragePerMonth, a.Storage.Name, a.CopyCost)
		be := "never"
		if !math.IsInf(a.BreakEvenMonths, 1) {
			be = fmt.Sprintf("%.1f months", a.BreakEvenMonths)
		}
		fmt.Fprintf(ew, "  saving %s USD/month; break-even %s\n", a.SavingPerMonth, be)
		if a.Keep != nil {
			fmt.Fprintf(ew, "  read %s in all (crossing or served by a copy in %s); a copy pays back its fetch after %s of storage (T_even)\n",
				HumanBytes(a.Demand), a.To, hoursText(a.Keep.BreakEvenHours))
		}
		fmt.Fprintf(ew, "  %s\n", a.Reason)
	}
	return ew.err
}

// WriteAdviceJSON writes advice as {"advice": [{"bucket", "prefix", "store", "from",
// "to", "rate", "window_hours", "bytes_read", "paid_usd", "bytes_per_month",
// "egress_usd_per_month", "copy_bytes", "copy_bytes_estimated",
// "storage_price", "storage_usd_per_month", "copy_usd", "saving_usd_per_month",
// "break_even_months" (null: never), "recommend", "reason"}]}; advice from
// rows with reuse distances also has "demand_bytes" and "keep": {"hours"
// (null: for ever), "learned", "scope", "break_even_hours" (null:
// infinite), "basis"}.
func WriteAdviceJSON(w io.Writer, advice []Advice) error {
	type item struct {
		Bucket          string    `json:"bucket"`
		Prefix          string    `json:"prefix"`
		Store           string    `json:"store"`
		From            string    `json:"from"`
		To              string    `json:"to"`
		Rate            string    `json:"rate"`
		WindowHours     int64     `json:"window_hours"`
		BytesRead       int64     `json:"bytes_read"`
		Paid            USD       `json:"paid_usd"`
		BytesPerMonth   int64     `json:"bytes_per_month"`
		EgressPerMonth  USD       `json:"egress_usd_per_month"`
		CopyBytes       int64     `json:"copy_bytes"`
		CopyEstimated   bool      `json:"copy_bytes_estimated"`
		StoragePrice    string    `json:"storage_price"`
		StoragePerMonth USD       `json:"storage_usd_per_month"`
		CopyCost        USD       `json:"copy_usd"`
		SavingPerMonth  USD       `json:"saving_usd_per_month"`
		BreakEven       *float64  `json:"break_even_months"`
		Keep            *keepJSON `json:"keep,omitempty"`
		Demand          *int64    `json:"demand_bytes,omitempty"`
		Recommend       bool      `json:"recommend"`
		Reason          string    `json:"reason"`
	}
	items := make([]item, 0, len(advice))
	for _, a := range advice {
		var be *float64
		if !math.IsInf(a.BreakEvenMonths, 0) && !math.IsNaN(a.BreakEvenMonths) {
			v := math.Round(a.BreakEvenMonths*100) / 100
			be = &v
		}
		rate := ""
		if a.Schedule != nil || a.BytesRead > 0 {
			rate = a.rate()
		}
		var keep *keepJSON
		var demand *int64
		if a.Keep != nil {
			keep = &keepJSON{Hours: finite(a.Keep.Hours), Learned: a.Keep.Learned, Scope: a.Keep.Scope,
				BreakEvenHours: finite(a.Keep.BreakEvenHours), Basis: a.Keep.Basis}
			demand = &a.Demand
		}
		items = append(items, item{a.Bucket, a.Prefix, a.Store, a.From, a.To, rate, a.WindowHours, a.BytesRead, a.Paid, a.BytesPerMonth,
			a.EgressPerMonth, a.CopyBytes, a.CopyEstimated, a.Storage.Name, a.StoragePerMonth, a.CopyCost, a.SavingPerMonth,
			be, keep, demand, a.Recommend, a.Reason})
	}
	b, err := json.MarshalIndent(struct {
		Advice []item `json:"advice"`
	}{items}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
